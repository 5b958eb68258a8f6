// HistoryPanel: past runs from the data folder (run_folders) — name,
// recipes, date, status (interrupted visibly so), steps — with Open,
// Delete… and Clear all…, and the folder's total size.
#pragma once

#include <QString>
#include <QVector>
#include <QWidget>

#include <functional>

#include "session/run_folders.h"

class QLabel;
class QPushButton;
class QTreeWidget;

// GUI thread only.
class HistoryPanel : public QWidget {
  Q_OBJECT

 public:
  enum Column { Name = 0, Recipes, Date, Status, Steps, ColumnCount };

  explicit HistoryPanel(QWidget* parent = nullptr);

  // The folder listed (run_folders::root() by default); refresh() reads it.
  void setRoot(const QString& dir);
  const QString& root() const { return m_root; }
  // Lists the folders again (read_journal_status each: cheap).
  void refresh();
  const QVector<PastRun>& pastRuns() const { return m_runs; }
  int rowOf(const QString& dir) const;
  QTreeWidget* tree() const { return m_tree; }
  QString sizeText() const;
  QSize sizeHint() const override;
  qint64 totalBytes() const { return m_bytes; }

  // Asks "open it" for a row (the Open button, a double click).
  void openRow(int row);
  // Deletes a row's folder after asking; false when declined or it failed
  // (the reason in lastError()).
  bool deleteRow(int row);
  // Deletes every folder not being written, after asking.
  bool clearAll();
  QString lastError() const { return m_lastError; }

  // The question before deleting: a QMessageBox by default; tests answer it.
  using Confirm = std::function<bool(const QString& title, const QString& text)>;
  void setConfirm(Confirm confirm) { m_confirm = std::move(confirm); }

 signals:
  void openRequested(const QString& dir);
  // A folder could not be deleted, or one was deleted (message for the status bar).
  void message(const QString& text, bool error);
  void listed(int count, int interrupted);

 private:
  bool ask(const QString& title, const QString& text);
  int currentRow() const;
  void updateButtons();

  QString m_root;
  QVector<PastRun> m_runs;
  qint64 m_bytes = 0;
  QTreeWidget* m_tree = nullptr;
  QLabel* m_size = nullptr;
  QPushButton* m_open = nullptr;
  QPushButton* m_delete = nullptr;
  QPushButton* m_clear = nullptr;
  QPushButton* m_refresh = nullptr;
  Confirm m_confirm;
  QString m_lastError;
};
