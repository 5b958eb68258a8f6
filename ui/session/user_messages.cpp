// UserMessages: errors as a warning box or a status line, and status lines.
#include "session/user_messages.h"

#include <QMessageBox>
#include <QStatusBar>

UserMessages::UserMessages(QWidget* window, QStatusBar* statusBar)
    : QObject(window), m_window(window), m_statusBar(statusBar) {}

void UserMessages::error(const QString& title, const QString& message) {
  m_lastError = message;
  m_statusBar->showMessage(QStringLiteral("%1: %2").arg(title, message));
  if (!m_quiet) QMessageBox::warning(m_window, title, message);
}

void UserMessages::status(const QString& text, int ms) { m_statusBar->showMessage(text, ms); }
