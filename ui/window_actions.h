// WindowActions: the window's actions with their shortcuts and tips, the Run
// toolbar (with the speed control) and the menu bar that lists them.
#pragma once

#include <QObject>

class LectureMenu;
class QAction;
class QMainWindow;
class QToolBar;
class SpeedControl;

// GUI thread only. The actions are children of the window; whoever owns a
// feature connects its action's triggered().
class WindowActions : public QObject {
  Q_OBJECT

 public:
  // Makes the actions, the toolbar and the menus of `window`; made after the
  // docks, which the View menu lists.
  explicit WindowActions(QMainWindow* window);

  // Enables the run actions for what can be done now: `active` while a run
  // of the trainer can still step; `anyRuns` once a run is listed.
  void update(bool active, bool paused, bool anyRuns);

  QAction* start = nullptr;
  QAction* pause = nullptr;
  QAction* step = nullptr;
  QAction* stop = nullptr;
  QAction* compare = nullptr;
  QAction* exportRuns = nullptr;
  QAction* exportPytorch = nullptr;  // File > Export to PyTorch… (export/pytorch_export_action.h)
  QAction* injectFault = nullptr;
  QAction* presentation = nullptr;
  QAction* explorer = nullptr;
  QAction* blockView = nullptr;
  QToolBar* toolbar = nullptr;
  SpeedControl* speed = nullptr;
  LectureMenu* lectureMenu = nullptr;

 private:
  void createMenus(QMainWindow* window);
  QMainWindow* m_window;
};
