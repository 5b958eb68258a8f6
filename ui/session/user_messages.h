// UserMessages: where the window's features tell the user something — a
// warning box for errors (or, quiet, only the status bar) and status lines.
#pragma once

#include <QObject>
#include <QString>

class QStatusBar;
class QWidget;

// GUI thread only.
class UserMessages : public QObject {
  Q_OBJECT

 public:
  UserMessages(QWidget* window, QStatusBar* statusBar);

  // An error the user must see: a warning box (or, quiet, the status bar).
  void error(const QString& title, const QString& message);
  // A status-bar line for `ms` milliseconds (0: until the next one).
  void status(const QString& text, int ms = 0);

  // Message boxes block: tests and the command line turn them into status
  // messages (the last one is kept).
  void setQuiet(bool quiet) { m_quiet = quiet; }
  bool quiet() const { return m_quiet; }
  QString lastError() const { return m_lastError; }

 private:
  QWidget* m_window;
  QStatusBar* m_statusBar;
  bool m_quiet = false;
  QString m_lastError;
};
