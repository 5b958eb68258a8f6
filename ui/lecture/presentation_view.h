// PresentationView: the window as slides (one shortcut, F11, and back):
// the controls a lesson does not need hidden (setup panel, tables, menu and
// status bar, the tab bar), the window full screen, and what stays made
// large by its owner (ChartArea::setPresentation, LecturePanel). It
// remembers what was visible, so leaving restores the window as it was.
#pragma once

#include <QList>
#include <QObject>
#include <QPointer>
#include <QRect>
#include <QWidget>

#include <utility>

class QMainWindow;

// GUI thread only.
class PresentationView : public QObject {
  Q_OBJECT

 public:
  explicit PresentationView(QMainWindow* window);

  // The widgets hidden while presenting.
  void setHiddenWidgets(const QList<QWidget*>& widgets);
  // Hides them (remembering which were visible) and goes full screen; off
  // restores both. No-op when already in that state.
  void setOn(bool on);
  bool isOn() const { return m_on; }

 private:
  QMainWindow* m_window;
  QList<QPointer<QWidget>> m_hide;
  QList<std::pair<QPointer<QWidget>, bool>> m_wasVisible;
  Qt::WindowStates m_stateBefore = Qt::WindowNoState;
  QRect m_geometryBefore;
  bool m_on = false;
};
