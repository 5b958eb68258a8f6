// PresentationView: hide, remember, restore.
#include "lecture/presentation_view.h"

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
    m_geometryBefore = m_window->geometry();
    // Full screen, the offscreen platform too (its screen is the one the
    // layout test and the screenshots give it).
    m_window->setWindowState(m_stateBefore | Qt::WindowFullScreen);
  } else {
    for (const auto& [w, visible] : m_wasVisible)
      if (w) w->setVisible(visible);
    m_wasVisible.clear();
    m_window->setWindowState(m_stateBefore);
    // The size it had: a platform that restores none (offscreen) would
    // leave the window screen-sized with its frame off the screen.
    if (!(m_stateBefore & (Qt::WindowFullScreen | Qt::WindowMaximized))) m_window->setGeometry(m_geometryBefore);
  }
}
