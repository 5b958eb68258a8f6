// WindowActions: makes the actions, the Run toolbar and the menus.
#include "window_actions.h"

#include <QAction>
#include <QApplication>
#include <QDockWidget>
#include <QMainWindow>
#include <QMenuBar>
#include <QMessageBox>
#include <QStyle>
#include <QToolBar>

#include "lecture/lecture_menu.h"
#include "lecture/speed_control.h"

WindowActions::WindowActions(QMainWindow* window) : QObject(window), m_window(window) {
  QStyle* s = window->style();
  auto make = [window](const QString& objectName, const QIcon& icon, const QString& text, const QKeySequence& key,
                       const QString& tip) {
    auto* a = new QAction(icon, text, window);
    a->setObjectName(objectName);
    a->setShortcut(key);
    a->setStatusTip(tip);
    a->setToolTip(QStringLiteral("%1 (%2)").arg(tip, key.toString(QKeySequence::NativeText)));
    return a;
  };
  start = make(QStringLiteral("actionStart"), s->standardIcon(QStyle::SP_MediaPlay), tr("Start"),
               QKeySequence(Qt::Key_F5), tr("Start a run with the current settings"));
  pause = make(QStringLiteral("actionPause"), s->standardIcon(QStyle::SP_MediaPause), tr("Pause"),
               QKeySequence(Qt::Key_F6), tr("Pause or resume at the next step boundary"));
  step = make(QStringLiteral("actionStep"), s->standardIcon(QStyle::SP_MediaSkipForward), tr("Step"),
              QKeySequence(Qt::Key_F10), tr("Run one training step (pauses a running run)"));
  stop = make(QStringLiteral("actionStop"), s->standardIcon(QStyle::SP_MediaStop), tr("Stop"),
              QKeySequence(Qt::SHIFT | Qt::Key_F5), tr("Stop the run at the next step boundary"));
  compare = make(QStringLiteral("actionCompare"), s->standardIcon(QStyle::SP_FileDialogDetailedView), tr("Compare"),
                 QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_C),
                 tr("Run fp32, fp16 and mixed side by side on the same data and weights"));
  exportRuns = make(QStringLiteral("actionExport"), s->standardIcon(QStyle::SP_DialogSaveButton), tr("Export"),
                    QKeySequence(Qt::CTRL | Qt::Key_E), tr("Export runs as CSV and charts as PNG/SVG"));
  exportPytorch = make(QStringLiteral("actionExportPytorch"), QIcon(), tr("Export to PyTorch…"), QKeySequence(),
                       tr("The selected run as a PyTorch script, with what does not translate"));
  exportPytorch->setToolTip(exportPytorch->statusTip());  // no shortcut to name

  toolbar = window->addToolBar(tr("Run"));
  toolbar->setObjectName(QStringLiteral("runToolBar"));
  toolbar->setMovable(false);
  toolbar->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  toolbar->addActions({start, pause, step, stop});
  toolbar->addSeparator();
  toolbar->addActions({compare, exportRuns});
  toolbar->addSeparator();
  speed = new SpeedControl(toolbar);
  toolbar->addWidget(speed);

  presentation = make(QStringLiteral("actionPresentation"), QIcon(), tr("Presentation view"), QKeySequence(Qt::Key_F11),
                      tr("Slides for a room: large type, thick lines, the lesson and its charts only"));
  presentation->setCheckable(true);
  explorer = make(QStringLiteral("actionFormatExplorer"), QIcon(), tr("Format explorer…"),
                  QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_F),
                  tr("One value in every format: bits, exact value, error, neighbours, range"));
  blockView = make(QStringLiteral("actionBlockView"), QIcon(), tr("Block formats (MXFP, NVFP4)…"),
                   QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_B),
                   tr("Two blocks of values in MXFP8/6/4 or NVFP4 beside one per-tensor scale, with an "
                      "outlier slider: why block scaling"));
  injectFault = make(QStringLiteral("actionInjectFault"), QIcon(), tr("Inject NaN…"),
                     QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_N),
                     tr("Put a NaN or inf into a live run's weights, activations, gradients or loss at its next step"));
  // The window keeps the shortcuts while the menu bar is hidden (presentation).
  window->addActions({presentation, explorer, blockView, start, pause, step, stop});
  createMenus(window);
}

void WindowActions::createMenus(QMainWindow* window) {
  auto* quit = new QAction(tr("Quit"), window);
  quit->setObjectName(QStringLiteral("actionQuit"));
  // The platform's Quit and Ctrl+Q wherever the platform has none for it
  // (Windows' key scheme, the offscreen platform).
  QList<QKeySequence> quitKeys = QKeySequence::keyBindings(QKeySequence::Quit);
  if (!quitKeys.contains(QKeySequence(Qt::CTRL | Qt::Key_Q))) quitKeys << QKeySequence(Qt::CTRL | Qt::Key_Q);
  quit->setShortcuts(quitKeys);
  connect(quit, &QAction::triggered, window, &QWidget::close);
  // On the window too: presentation view hides the menu bar, and with it
  // the File menu's shortcut.
  window->addAction(quit);
  auto* about = new QAction(tr("About Precision Lab"), window);
  connect(about, &QAction::triggered, window, [window] {
    QMessageBox::about(window, tr("About Precision Lab"),
                       tr("Precision Lab %1\nInteractive mixed-precision training experiments.")
                           .arg(QApplication::applicationVersion()));
  });
  QMenu* file = window->menuBar()->addMenu(tr("&File"));
  file->addAction(exportRuns);
  file->addAction(exportPytorch);
  file->addSeparator();
  file->addAction(quit);
  QMenu* run = window->menuBar()->addMenu(tr("&Run"));
  run->addActions({start, pause, step, stop});
  run->addSeparator();
  run->addAction(compare);
  run->addSeparator();
  run->addAction(injectFault);
  lectureMenu = new LectureMenu(window);
  window->menuBar()->addMenu(lectureMenu);
  lectureMenu->addAction(explorer);
  lectureMenu->addAction(blockView);
  lectureMenu->addAction(presentation);
  QMenu* view = window->menuBar()->addMenu(tr("&View"));
  for (QDockWidget* dock : window->findChildren<QDockWidget*>()) view->addAction(dock->toggleViewAction());
  view->addSeparator();
  view->addActions({presentation, explorer, blockView});
  QMenu* help = window->menuBar()->addMenu(tr("&Help"));
  help->addAction(about);
}

void WindowActions::update(bool active, bool paused, bool anyRuns) {
  start->setEnabled(!active);
  pause->setEnabled(active);
  pause->setText(paused ? tr("Resume") : tr("Pause"));
  pause->setIcon(m_window->style()->standardIcon(paused ? QStyle::SP_MediaPlay : QStyle::SP_MediaPause));
  step->setEnabled(true);
  stop->setEnabled(active);
  compare->setEnabled(!active);
  exportRuns->setEnabled(anyRuns);
  exportPytorch->setEnabled(anyRuns);
  injectFault->setEnabled(active);
}
