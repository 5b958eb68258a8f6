// MainWindow: lays out the widgets, makes the features and wires them; the
// behaviour lives in the features' own files.
#include "main_window.h"

#include <QAction>
#include <QCloseEvent>
#include <QShowEvent>
#include <QWindow>
#include <QDockWidget>
#include <QGuiApplication>
#include <QGroupBox>
#include <QMenuBar>
#include <QScreen>
#include <QScrollArea>
#include <QScrollBar>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTimer>
#include <QToolBar>
#include <QVBoxLayout>

#include <algorithm>

#include "charts/chart_area.h"
#include "charts/chart_style.h"
#include "charts/gradient_panel.h"
#include "charts/live_chart_view.h"
#include "compare/compare_view.h"
#include "samples/samples_view.h"
#include "solver/solver_view.h"
#include "export/export_controller.h"
#include "export/pytorch_export_action.h"
#include "inspect/fault_injector.h"
#include "inspect/step_inspector.h"
#include "lecture/format_explorer.h"
#include "lecture/lecture_panel.h"
#include "lecture/lesson_controller.h"
#include "lecture/presentation_view.h"
#include "lecture/speed_control.h"
#include "panels/history_controller.h"
#include "panels/history_panel.h"
#include "panels/precision_table.h"
#include "panels/precision_table_controller.h"
#include "panels/runs_list.h"
#include "panels/setup_panel.h"
#include "panels/status_readouts.h"
#include "session/change_markers.h"
#include "session/dataset_cache.h"
#include "session/event_notices.h"
#include "session/run_launcher.h"
#include "session/run_store.h"
#include "session/training_controller.h"
#include "session/user_messages.h"
#include "window_actions.h"

// Q_INIT_RESOURCE must run outside any namespace; the qrc is compiled into
// the static `ui` library, whose initialiser the linker would otherwise drop.
static void initUiResources() { Q_INIT_RESOURCE(precision_lab); }

namespace {

// A panel whose own minimum size must not set the window's: it scrolls
// instead (a 10-run comparison, the step inspector's tables on a 720-pixel
// screen). The panel keeps its object and findChild reaches it.
QScrollArea* scrollable(QWidget* panel) {
  auto* scroll = new QScrollArea;
  scroll->setObjectName(panel->objectName() + QStringLiteral("Scroll"));
  scroll->setWidget(panel);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  return scroll;
}

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  initUiResources();
  setObjectName(QStringLiteral("mainWindow"));
  setWindowTitle(tr("Precision Lab"));
  setWindowIcon(QIcon(QStringLiteral(":/icons/precision-lab.svg")));
  m_store = new RunStore(this);
  m_controller = new TrainingController(m_store, this);
  m_datasets = new DatasetCache(this);
  buildLayout();
  m_actions = new WindowActions(this);
  m_readouts = new StatusReadouts(statusBar());
  m_messages = new UserMessages(this, statusBar());
  m_messages->status(tr("Ready"));
  m_presentationView->setHiddenWidgets({m_setupDock, m_bottom, m_inspectorDock, menuBar(), statusBar(),
                                        m_tabs->tabBar()});
  createFeatures();
  wire();
  m_table->showNextRun();
  updateActions();
}

MainWindow::~MainWindow() {
  // Join the engine thread while the store still exists.
  m_controller->shutdown();
}

void MainWindow::buildLayout() {
  // Left dock: the experiment's settings, scrollable on short screens.
  m_setup = new SetupPanel;
  auto* scroll = new QScrollArea;
  scroll->setWidget(m_setup);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  scroll->setMinimumWidth(m_setup->sizeHint().width() + scroll->verticalScrollBar()->sizeHint().width());
  m_setupDock = new QDockWidget(tr("Experiment"), this);
  m_setupDock->setObjectName(QStringLiteral("setupDock"));
  m_setupDock->setWidget(scroll);
  m_setupDock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable);
  m_setupDock->setAllowedAreas(Qt::LeftDockWidgetArea | Qt::RightDockWidgetArea);
  addDockWidget(Qt::LeftDockWidgetArea, m_setupDock);

  // Centre: Live / Compare tabs above; the precision table and runs below.
  // The Live tab: the charts, and beside them the lesson (when one is chosen).
  m_charts = new ChartArea(m_store);
  m_compare = new CompareView(m_store);
  auto* lesson = new LecturePanel;
  lesson->hide();
  m_liveSplitter = new QSplitter(Qt::Horizontal);
  m_liveSplitter->setObjectName(QStringLiteral("liveSplitter"));
  m_liveSplitter->addWidget(m_charts);
  m_liveSplitter->addWidget(lesson);
  m_liveSplitter->setStretchFactor(0, 4);
  m_liveSplitter->setStretchFactor(1, 1);
  m_liveSplitter->setChildrenCollapsible(false);
  m_tabs = new QTabWidget;
  m_tabs->setObjectName(QStringLiteral("centreTabs"));
  m_tabs->setDocumentMode(true);
  m_tabs->addTab(m_liveSplitter, tr("Live"));
  m_compareScroll = scrollable(m_compare);
  m_tabs->addTab(m_compareScroll, tr("Compare"));
  m_samples = new SamplesView(m_store);
  m_samplesScroll = scrollable(m_samples);
  m_tabs->addTab(m_samplesScroll, tr("Samples"));
  m_solver = new SolverView;
  m_solverScroll = scrollable(m_solver);
  // The Solver tab: the view, and beside it a solver lesson's panel (the
  // lesson panel moves here from the Live tab while one is open).
  m_solverSplitter = new QSplitter(Qt::Horizontal);
  m_solverSplitter->setObjectName(QStringLiteral("solverTabSplitter"));
  m_solverSplitter->addWidget(m_solverScroll);
  m_solverSplitter->setStretchFactor(0, 4);
  m_solverSplitter->setChildrenCollapsible(false);
  m_tabs->addTab(m_solverSplitter, tr("Solver"));

  auto* bottom = new QSplitter(Qt::Horizontal);
  m_bottom = bottom;
  auto* precisionBox = new QGroupBox;
  precisionBox->setObjectName(QStringLiteral("precisionBox"));
  auto* boxLayout = new QVBoxLayout(precisionBox);
  boxLayout->setContentsMargins(6, 6, 6, 6);
  boxLayout->addWidget(new PrecisionTable);
  bottom->addWidget(precisionBox);
  // This session's runs, and the past ones on disk.
  m_runs = new RunsList;
  auto* history = new HistoryPanel;
  m_runsTabs = new QTabWidget;
  m_runsTabs->setObjectName(QStringLiteral("runsTabs"));
  m_runsTabs->addTab(m_runs, tr("Runs (tick to overlay)"));
  m_runsTabs->addTab(history, tr("History"));
  bottom->addWidget(m_runsTabs);
  bottom->setStretchFactor(0, 3);
  bottom->setStretchFactor(1, 2);
  bottom->setSizes({3000, 2300});  // the runs list shows whole names at 1280x720
  bottom->setChildrenCollapsible(false);
  auto* centre = new QSplitter(Qt::Vertical);
  centre->setObjectName(QStringLiteral("centreSplitter"));
  centre->addWidget(m_tabs);
  centre->addWidget(bottom);
  // The charts get the height; the table and runs list keep a few rows
  // (1280x720: nothing below 170 px a chart).
  centre->setStretchFactor(0, 4);
  centre->setStretchFactor(1, 1);
  centre->setSizes({4000, 1000});  // scaled to the height it gets
  centre->setChildrenCollapsible(false);
  setCentralWidget(centre);

  // Right dock, shown by Step: what the last step did, layer by layer.
  m_inspectorDock = new QDockWidget(tr("Step inspector"), this);
  m_inspectorDock->setObjectName(QStringLiteral("stepInspectorDock"));
  m_inspectorDock->setWidget(scrollable(new StepInspector(m_store)));
  m_inspectorDock->setAllowedAreas(Qt::AllDockWidgetAreas);
  addDockWidget(Qt::RightDockWidgetArea, m_inspectorDock);
  m_inspectorDock->hide();
  m_presentationView = new PresentationView(this);
}

void MainWindow::createFeatures() {
  auto liveFocus = [this] { return m_launcher->liveFocusRun(); };
  m_notices = new EventNotices(m_store, m_controller, m_runs, m_messages, this);
  new ChangeMarkers(m_store, m_charts, this);  // live changes marked on the charts at their step
  auto* box = findChild<QGroupBox*>(QStringLiteral("precisionBox"));
  m_table = new PrecisionTableController(m_setup, part<PrecisionTable>(), box, m_store, m_controller, m_messages,
                                         liveFocus, this);
  m_launcher = new RunLauncher({m_store, m_controller, m_datasets, m_charts, m_runs, m_compare, m_setup, m_table,
                                m_messages, this},
                               this);
  m_lesson = new LessonController({m_store, m_controller, m_launcher, m_table, m_charts, m_compare, m_runs,
                                   part<LecturePanel>(), m_actions->lectureMenu, m_liveSplitter, m_solver,
                                   m_solverSplitter, m_tabs, m_messages,
                                   [this] { return presentation(); }},
                                  this);
  m_launcher->setLesson(m_lesson);
  connect(m_solver, &SolverView::solveFinished, m_lesson, &LessonController::checkSolveClaims);
  m_export = new ExportController(m_store, m_controller, m_charts, m_compare, m_messages, this);
  m_faults = new FaultInjector(m_store, m_controller, m_notices, m_messages, liveFocus, this);
  m_history = new HistoryController({m_store, m_controller, part<HistoryPanel>(), m_runs, m_runsTabs,
                                     m_bottom, m_charts, m_compare, m_notices, m_messages},
                                    this);
}

void MainWindow::wire() {
  WindowActions* a = m_actions;
  connect(a->start, &QAction::triggered, m_launcher, [this] { m_launcher->startRun(); });
  connect(a->pause, &QAction::triggered, m_launcher, &RunLauncher::togglePause);
  connect(a->step, &QAction::triggered, m_launcher, &RunLauncher::stepOnce);
  connect(a->stop, &QAction::triggered, m_launcher, &RunLauncher::stopRun);
  connect(a->compare, &QAction::triggered, m_launcher, &RunLauncher::openCompareDialog);
  connect(a->exportRuns, &QAction::triggered, m_export, &ExportController::openDialog);
  new PytorchExportAction(a->exportPytorch, m_store, m_runs, this);
  connect(a->injectFault, &QAction::triggered, m_faults, &FaultInjector::openDialog);
  connect(a->presentation, &QAction::toggled, this, &MainWindow::setPresentation);
  connect(a->explorer, &QAction::triggered, this, &MainWindow::showFormatExplorer);
  connect(a->blockView, &QAction::triggered, this, &MainWindow::showBlockView);
  connect(a->speed, &SpeedControl::rateChanged, m_controller, &TrainingController::setStepRate);

  // Engine -> store; the views subscribe to the store themselves (once per
  // frame, coalesced). The window keeps only its own read-outs.
  auto readouts = [this] {
    const int focus = m_charts->focusRun();
    m_readouts->showRun(focus >= 0 && focus < m_store->count() ? &m_store->run(focus) : nullptr);
  };
  connect(m_store, &RunStore::appended, this, [this, readouts] {
    m_notices->onFrame();
    readouts();
  });
  connect(m_store, &RunStore::runAdded, this, [this](int id) {
    const RunData& r = m_store->run(id);
    m_runs->addRun(r.name, r.recipe, r.colour, QString::fromLatin1(engine::run_state_name(r.state)));
    updateActions();
  });
  connect(m_store, &RunStore::runChanged, this, [this](int id) {
    // The toolbar first: a failed run must not leave Pause/Stop enabled
    // behind the (modal) message.
    updateActions();
    m_notices->onRunChanged(id);
  });
  connect(m_controller, &TrainingController::finished, this, &MainWindow::onTrainingFinished);
  connect(m_controller, &TrainingController::pausedChanged, this, [this] { updateActions(); });
  connect(m_runs, &RunsList::runCheckedChanged, this, [this](int row, bool checked) {
    m_store->setVisible(row, checked);  // runChanged: the views redraw
  });
  connect(m_runs, &RunsList::currentRunChanged, this, [this, readouts](int row) {
    m_charts->setFocusRun(row);
    readouts();
    // During training the table shows (and edits) the selected live run.
    if (row >= 0 && m_controller->active() && m_controller->isCurrent(row)) m_table->showRun(row);
  });
  connect(m_tabs, &QTabWidget::currentChanged, this, [this] {
    if (m_tabs->currentWidget() == m_compareScroll) m_compare->refresh();
  });
  // Runs are compared on the Live tab too: its loss and accuracy charts
  // offer the Compare tab's difference to FP32.
  for (int m : {ChartArea::Loss, ChartArea::Accuracy})
    if (auto* v = qobject_cast<LiveChartView*>(m_charts->view(m))) v->addContextAction(m_compare->differenceAction());
  connect(m_compare, &CompareView::showRequested, this, [this] { showCompare(); });
  connect(m_table, &PrecisionTableController::layerSelected, m_charts->gradientPanel(), &GradientPanel::setLayer);
  // The data set of the chosen settings loads in the background.
  connect(m_setup, &SetupPanel::settingsChanged, this, [this] { m_datasets->request(m_setup->settings().dataset); });
  m_datasets->request(m_setup->settings().dataset);

  connect(m_launcher, &RunLauncher::controlsChanged, this, &MainWindow::updateActions);
  connect(m_launcher, &RunLauncher::launched, this, [this] {
    part<StepInspector>()->setRuns(m_controller->currentRuns());
    const int focus = m_launcher->liveFocusRun();
    if (focus >= 0) m_table->showRun(focus);
  });
  connect(m_launcher, &RunLauncher::inspectorWanted, this, [this](bool always) {
    if (always || !presentation()) m_inspectorDock->show();
  });
  connect(m_history, &HistoryController::opened, this, &MainWindow::updateActions);
}

void MainWindow::updateActions() {
  m_actions->update(m_launcher->runActive(), m_controller->paused(), m_runs->runCount() > 0);
}

void MainWindow::fitToScreen() {
  // The platform window first: its frame margins are known from then on
  // (offscreen, most window managers; the rest after showing: showEvent).
  create();
  const QScreen* s = screen() ? screen() : QGuiApplication::primaryScreen();
  const QRect avail = s ? s->availableGeometry() : QRect(0, 0, 1400, 900);
  const QMargins frame = windowHandle() ? windowHandle()->frameMargins() : QMargins();
  const QSize room(avail.width() - frame.left() - frame.right(), avail.height() - frame.top() - frame.bottom());
  // Whole of a small screen; a comfortable size on a large one. Never
  // grown to a minimum size: the layout's fits any screen from 1280x720
  // (tests/ui/test_layout.cpp).
  m_fitted = true;
  resize(room.boundedTo(QSize(1600, 1000)));
  move(avail.x() + (avail.width() - frameGeometry().width()) / 2,
       avail.y() + (avail.height() - frameGeometry().height()) / 2);
  keepOnScreen();
}

void MainWindow::keepOnScreen() {
  // A size chosen by hand (resize(): the tests' 1400x900) is left alone.
  if (!m_fitted || isFullScreen() || isMaximized()) return;
  const QScreen* s = screen() ? screen() : QGuiApplication::primaryScreen();
  if (!s) return;
  const QRect avail = s->availableGeometry();
  QRect f = frameGeometry();
  if (avail.contains(f)) return;
  const QSize extra = f.size() - size();
  const QSize inner = size().boundedTo(avail.size() - extra);
  if (inner != size()) resize(inner);
  f = frameGeometry();
  move(std::clamp(f.x(), avail.left(), std::max(avail.left(), avail.right() + 1 - f.width())),
       std::clamp(f.y(), avail.top(), std::max(avail.top(), avail.bottom() + 1 - f.height())));
}

void MainWindow::showEvent(QShowEvent* event) {
  QMainWindow::showEvent(event);
  // A window manager adds its frame once the window shows: the whole of
  // it must still be on the screen.
  QTimer::singleShot(0, this, &MainWindow::keepOnScreen);
}

void MainWindow::showCompare() { m_tabs->setCurrentWidget(m_compareScroll); }

void MainWindow::showSamples() { m_tabs->setCurrentWidget(m_samplesScroll); }

void MainWindow::showSolver() { m_tabs->setCurrentWidget(m_solverSplitter); }

void MainWindow::closeEvent(QCloseEvent* event) {
  if (m_controller->active()) {
    // Stop at the next step boundary, join, and drain what is left: the
    // history is complete (and exportable) up to the last step taken.
    m_messages->status(tr("Stopping…"));
    m_controller->shutdown();
  }
  event->accept();
}

void MainWindow::onTrainingFinished() {
  m_notices->onFrame();
  // The last records are drawn before anyone hears that training ended.
  m_charts->refresh();
  m_compare->refresh();
  updateActions();
  // The table describes the next run again (it followed the live one).
  m_table->showNextRun();
  bool failed = false;
  for (int id : m_controller->currentRuns()) failed = failed || m_store->run(id).state == engine::RunState::Failed;
  if (!failed) m_messages->status(tr("Training ended"), 5000);
  m_history->relist();  // its folder's status is final now
  emit trainingFinished();
  m_lesson->checkClaims();
}

FormatExplorer* MainWindow::formatExplorer() {
  if (!m_explorer) {
    m_explorer = new FormatExplorer(this);
    m_explorer->setRunStore(m_store);  // the block view's live blocks
  }
  return m_explorer;
}

void MainWindow::showFormatExplorer() { showExplorer(false); }
void MainWindow::showBlockView() { showExplorer(true); }

void MainWindow::showExplorer(bool blocks) {
  FormatExplorer* e = formatExplorer();
  if (blocks)
    e->showBlocks();
  else
    e->showValues();
  e->show();
  e->raise();
  e->activateWindow();
}

bool MainWindow::presentation() const { return m_presentationView->isOn(); }

// A toggle restyles the docks, the chart grid, the lesson's splitter and the
// lesson's large type, and each part makes Qt lay out and repaint what it
// touched. Done in one turn of the event loop that held the loop for up to
// 200 ms of the UI thread's time on a 2-core machine; each part now has a
// turn of its own, so timers, input and the engine's records get in between.
// The next part is queued on a timer, not as a posted event: Qt's GLib
// event loop runs timers only once no posted event is pending, so a chain
// of posted parts, each posting its layouts and repaints, kept every timer
// (the engine's 33 ms drain among them) waiting for the whole toggle.
// presentation() answers at once; the parts follow within a few turns, and a
// toggle made before they end supersedes them (each part sets its state from
// `on`, so whatever ran of the older toggle is undone by the newer one).
void MainWindow::setPresentation(bool on) {
  if (on == presentation()) return;
  presentationPart(on, 0, ++m_presentationToggle);
}

void MainWindow::presentationPart(bool on, int stage, unsigned toggle) {
  if (toggle != m_presentationToggle) return;
  m_presentationPart = stage + 1;
  switch (stage) {
    case 0:
      // Nothing is painted until the last part: each part resizes what the
      // one before laid out, and painting every intermediate state (the
      // charts repainted four times, fonts and sizes half changed) cost more
      // than the parts themselves.
      setUpdatesEnabled(false);
      // Leaving: the lesson's normal type before the docks and bars come
      // back, so their resizes do not fit the presentation type again.
      if (!on) part<LecturePanel>()->setPresentation(false);
      m_presentationView->setOn(on);
      if (m_actions->presentation->isChecked() != on) {
        const QSignalBlocker block(m_actions->presentation);
        m_actions->presentation->setChecked(on);
      }
      // The Samples and Solver tabs stay when shown: a class reads the runs'
      // text large, or watches a solve.
      if (on && m_tabs->currentWidget() != m_samplesScroll && m_tabs->currentWidget() != m_solverSplitter)
        m_tabs->setCurrentWidget(m_liveSplitter);
      break;
    case 1:
      m_charts->setPresentation(on);
      m_samples->setPresentation(on);
      m_solver->setPresentation(on);
      chart_style::setPresentationFont(m_actions->toolbar, on, chart_style::presentation::kLegendPt - 2);
      break;
    case 2:
      m_lesson->setPresentation(on);
      break;
    case 3:
      // Entering: the lesson's type is fitted once, to the width the
      // lesson's splitter has just given it, not first to the old one.
      if (on) part<LecturePanel>()->setPresentation(true);
      // Back from full screen: the window as it was, on the screen.
      if (!on) keepOnScreen();
      setUpdatesEnabled(true);
      break;
  }
  if (m_presentationPart < kPresentationParts)
    QTimer::singleShot(1, this, [this, on, next = stage + 1, toggle] { presentationPart(on, next, toggle); });
}
