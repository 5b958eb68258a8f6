// PresentationView: hide, remember, restore.
#include "lecture/presentation_view.h"

#include <QGuiApplication>
#include <QMainWindow>

PresentationView::PresentationView(QMainWindow* window) : QObject(window), m_window(window) {}

void PresentationView::setHiddenWidgets(const QList<QWidget*>& widgets) {
  m_hide.clear();
  for (QWidget* w : widgets) m_hide << QPointer<QWidget>(w);
}

void PresentationView::setOn(bool on) {
  if (on == m_on) return;
  m_on = on;
  if (on) {
    m_wasVisible.clear();
    for (const QPointer<QWidget>& w : m_hide) {
      if (!w) continue;
      m_wasVisible.append({w, !w->isHidden()});
      w->hide();
    }
    m_stateBefore = m_window->windowState();
    // Full screen on a real display; the offscreen platform (tests,
    // screenshots without X) keeps the window's size.
    if (QGuiApplication::platformName() != QLatin1String("offscreen"))
      m_window->setWindowState(m_stateBefore | Qt::WindowFullScreen);
  } else {
    for (const auto& [w, visible] : m_wasVisible)
      if (w) w->setVisible(visible);
    m_wasVisible.clear();
    if (QGuiApplication::platformName() != QLatin1String("offscreen")) m_window->setWindowState(m_stateBefore);
  }
}
