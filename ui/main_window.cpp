// MainWindow: assembles the widgets (each area lives in its own file) and
// routes the toolbar, the precision table and the engine's records.
#include "main_window.h"

#include <QAction>
#include <QApplication>
#include <QChartView>
#include <QCloseEvent>
#include <QDir>
#include <QDockWidget>
#include <QGroupBox>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLocale>
#include <QMenuBar>
#include <QMessageBox>
#include <QScrollArea>
#include <QScreen>
#include <QScrollBar>
#include <QSplitter>
#include <QStandardPaths>
#include <QStandardItemModel>
#include <QStatusBar>
#include <QStyle>
#include <QTabWidget>
#include <QTimer>
#include <QToolBar>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <exception>

#include "amp/recipe.h"
#include "train/comparison.h"
#include "numeric/format.h"

#include "charts/chart_area.h"
#include "charts/chart_style.h"
#include "compare/compare_dialog.h"
#include "compare/compare_view.h"
#include "session/dataset_cache.h"
#include "export/export_dialog.h"
#include "export/exporter.h"
#include "charts/gradient_panel.h"
#include "panels/layer_rows.h"
#include "charts/live_chart_view.h"
#include "panels/precision_table.h"
#include "panels/precision_table_model.h"
#include "session/run_store.h"
#include "panels/runs_list.h"
#include "panels/history_panel.h"
#include "session/run_folders.h"
#include "inspect/fault_dialog.h"
#include "panels/setup_panel.h"
#include "session/command_line.h"
#include "session/training_controller.h"
#include "lecture/claims.h"
#include "lecture/format_explorer.h"
#include "lecture/lecture_menu.h"
#include "lecture/lecture_panel.h"
#include "lecture/presentation_view.h"
#include "lecture/preset.h"
#include "lecture/speed_control.h"
#include "inspect/step_inspector.h"

// Q_INIT_RESOURCE must run outside any namespace; the qrc is compiled into
// the static `ui` library, whose initialiser the linker would otherwise drop.
static void initUiResources() { Q_INIT_RESOURCE(precision_lab); }

namespace {

QGroupBox* framed(const QString& title, QWidget* content) {
  auto* box = new QGroupBox(title);
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(6, 6, 6, 6);
  layout->addWidget(content);
  return box;
}

QString stateText(const RunData& r) {
  if (r.interrupted) return QObject::tr("interrupted");
  // The reason beside the word (diverged at step N: ...); the tooltip has it whole.
  if (r.state == engine::RunState::Failed && !r.message.isEmpty())
    return QObject::tr("failed: %1").arg(r.message);
  if (r.state == engine::RunState::Running && r.totalSteps > 0 && !r.steps.empty())
    return QObject::tr("running %1%").arg(static_cast<int>(100.0 * static_cast<double>(r.steps.back().step) /
                                                           static_cast<double>(r.totalSteps)));
  return QString::fromLatin1(engine::run_state_name(r.state));
}

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  initUiResources();
  setObjectName(QStringLiteral("mainWindow"));
  setWindowTitle(tr("Precision Lab"));
  setWindowIcon(QIcon(QStringLiteral(":/icons/precision-lab.svg")));
  m_compareRecipes = CompareDialog::defaultRecipes();
  m_exportDir = QDir(QStandardPaths::writableLocation(QStandardPaths::DocumentsLocation))
                    .filePath(QStringLiteral("precision-lab-export"));

  m_store = new RunStore(this);
  m_controller = new TrainingController(m_store, this);
  m_datasets = new DatasetCache(this);

  // Left dock: the experiment's settings, scrollable on short screens.
  m_setup = new SetupPanel;
  auto* scroll = new QScrollArea;
  scroll->setWidget(m_setup);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  scroll->setMinimumWidth(m_setup->sizeHint().width() + scroll->verticalScrollBar()->sizeHint().width());
  auto* dock = new QDockWidget(tr("Experiment"), this);
  dock->setObjectName(QStringLiteral("setupDock"));
  dock->setWidget(scroll);
  dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable);
  dock->setAllowedAreas(Qt::LeftDockWidgetArea | Qt::RightDockWidgetArea);
  addDockWidget(Qt::LeftDockWidgetArea, dock);
  m_setupDock = dock;

  // Centre: Live / Compare tabs above; the precision table and runs below.
  m_charts = new ChartArea(m_store);
  m_compare = new CompareView(m_store);
  m_tabs = new QTabWidget;
  m_tabs->setObjectName(QStringLiteral("centreTabs"));
  m_tabs->setDocumentMode(true);
  // The Live tab: the charts, and beside them the lesson (when one is chosen).
  m_lecturePanel = new LecturePanel;
  m_lecturePanel->hide();
  m_liveSplitter = new QSplitter(Qt::Horizontal);
  m_liveSplitter->setObjectName(QStringLiteral("liveSplitter"));
  m_liveSplitter->addWidget(m_charts);
  m_liveSplitter->addWidget(m_lecturePanel);
  m_liveSplitter->setStretchFactor(0, 4);
  m_liveSplitter->setStretchFactor(1, 1);
  m_liveSplitter->setChildrenCollapsible(false);
  m_tabs->addTab(m_liveSplitter, tr("Live"));
  m_tabs->addTab(m_compare, tr("Compare"));
  m_precision = new PrecisionTable;
  m_runs = new RunsList;
  auto* bottom = new QSplitter(Qt::Horizontal);
  m_bottom = bottom;
  m_precisionBox = framed(QString(), m_precision);
  m_precisionBox->setObjectName(QStringLiteral("precisionBox"));
  bottom->addWidget(m_precisionBox);
  // This session's runs, and the past ones on disk.
  m_history = new HistoryPanel;
  m_runsTabs = new QTabWidget;
  m_runsTabs->setObjectName(QStringLiteral("runsTabs"));
  m_runsTabs->addTab(m_runs, tr("Runs (tick to overlay)"));
  m_runsTabs->addTab(m_history, tr("History"));
  bottom->addWidget(m_runsTabs);
  // History has more columns than the session's runs: it takes the width
  // it needs while it is shown.
  connect(m_runsTabs, &QTabWidget::currentChanged, this, [this, bottom] {
    // After the layout has run (the tab may change before the window shows).
    QTimer::singleShot(0, bottom, [this, bottom] {
      if (m_runsTabs->currentWidget() != m_history) return;
      const QList<int> sizes = bottom->sizes();
      const int want = m_history->sizeHint().width();
      const int total = sizes.value(0) + sizes.value(1);
      if (sizes.size() == 2 && sizes[1] < want && total > want + 300) bottom->setSizes({total - want, want});
    });
  });
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
  m_inspector = new StepInspector(m_store);
  m_inspectorDock = new QDockWidget(tr("Step inspector"), this);
  m_inspectorDock->setObjectName(QStringLiteral("stepInspectorDock"));
  m_inspectorDock->setWidget(m_inspector);
  m_inspectorDock->setAllowedAreas(Qt::AllDockWidgetAreas);
  addDockWidget(Qt::RightDockWidgetArea, m_inspectorDock);
  m_inspectorDock->hide();
  m_presentationView = new PresentationView(this);

  createActions();
  createMenus();
  createStatusBar();
  m_presentationView->setHiddenWidgets({m_setupDock, m_bottom, m_inspectorDock, menuBar(), statusBar(),
                                        m_tabs->tabBar()});
  connect(m_lecturePanel, &LecturePanel::closeRequested, this, &MainWindow::leaveLecture);
  connect(m_speed, &SpeedControl::rateChanged, m_controller, &TrainingController::setStepRate);

  // Engine -> store; the views subscribe to the store themselves (once per
  // frame, coalesced). The window keeps only its own read-outs: the runs'
  // status, the status bar and the events worth a message.
  connect(m_store, &RunStore::appended, this, &MainWindow::onFrame);
  connect(m_controller, &TrainingController::finished, this, &MainWindow::onTrainingFinished);
  connect(m_controller, &TrainingController::pausedChanged, this, [this] { updateActions(); });
  connect(m_store, &RunStore::runAdded, this, [this](int id) {
    const RunData& r = m_store->run(id);
    m_runs->addRun(r.name, r.recipe, r.colour, QString::fromLatin1(engine::run_state_name(r.state)));
    m_eventsSeen.resize(m_store->count());
    updateActions();
  });
  connect(m_store, &RunStore::runChanged, this, &MainWindow::onRunChanged);
  connect(m_runs, &RunsList::runCheckedChanged, this, [this](int row, bool checked) {
    m_store->setVisible(row, checked);  // runChanged: the views redraw
  });
  connect(m_runs, &RunsList::currentRunChanged, this, [this](int row) {
    m_charts->setFocusRun(row);
    updateStatusMetrics();
    // During training the table shows (and edits) the selected live run.
    if (row >= 0 && m_controller->active() && m_controller->isCurrent(row)) showRunInTable(row);
  });
  connect(m_charts, &ChartArea::pointsAppeared, this, [this] {
    if (m_firstPointMs >= 0 || !m_startClock.isValid()) return;
    m_firstPointMs = m_startClock.elapsed();
    emit firstPointShown(m_firstPointMs);
  });
  connect(m_tabs, &QTabWidget::currentChanged, this, [this] {
    if (m_tabs->currentWidget() == m_compare) m_compare->refresh();
  });

  // Setup -> precision table (for the next run); table edits -> engine.
  connect(m_setup, &SetupPanel::settingsChanged, this, [this] {
    m_datasets->request(m_setup->settings().dataset);
    if (!m_controller->active()) rebuildPrecisionTable();
  });
  m_datasets->request(m_setup->settings().dataset);
  connect(m_precision->precisionModel(), &PrecisionTableModel::precisionEdited, this,
          [this](int row, const engine::LayerPrecision&) { onPrecisionEdited(row); });
  connect(m_precision->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            if (!current.isValid()) return;
            const PrecisionTableRow& row = m_precision->precisionModel()->rows()[current.row()];
            if (row.parameters > 0) m_charts->gradientPanel()->setLayer(row.layer);
          });
  // Past runs: listed now (status files only), opened on request.
  connect(m_history, &HistoryPanel::openRequested, this, [this](const QString& dir) { openPastRun(dir); });
  connect(m_history, &HistoryPanel::message, this, [this](const QString& text, bool error) {
    if (error)
      showError(tr("Past runs"), text);
    else
      statusBar()->showMessage(text, 6000);
  });
  connect(m_history, &HistoryPanel::listed, this, [this](int count, int interrupted) {
    m_runsTabs->setTabText(m_runsTabs->indexOf(m_history),
                           interrupted > 0 ? tr("History (%1, %2 interrupted)").arg(count).arg(interrupted)
                                           : tr("History (%1)").arg(count));
  });
  connect(m_controller, &TrainingController::folderStarted, m_history, &HistoryPanel::refresh);
  m_history->setRoot(m_controller->journalRoot());
  int interrupted = 0;
  for (const PastRun& p : m_history->pastRuns()) interrupted += p.interrupted ? 1 : 0;
  if (interrupted > 0)
    statusBar()->showMessage(tr("%n past run(s) were interrupted (the app ended mid-run): see the History tab", "",
                                interrupted),
                             15000);

  rebuildPrecisionTable();
  updateActions();
}

MainWindow::~MainWindow() {
  // Join the engine thread while the store still exists.
  m_controller->shutdown();
}

void MainWindow::createActions() {
  QStyle* s = style();
  auto make = [this](const QString& objectName, const QIcon& icon, const QString& text,
                     const QKeySequence& key, const QString& tip) {
    auto* a = new QAction(icon, text, this);
    a->setObjectName(objectName);
    a->setShortcut(key);
    a->setStatusTip(tip);
    a->setToolTip(QStringLiteral("%1 (%2)").arg(tip, key.toString(QKeySequence::NativeText)));
    return a;
  };
  m_start = make(QStringLiteral("actionStart"), s->standardIcon(QStyle::SP_MediaPlay), tr("Start"),
                 QKeySequence(Qt::Key_F5), tr("Start a run with the current settings"));
  m_pause = make(QStringLiteral("actionPause"), s->standardIcon(QStyle::SP_MediaPause), tr("Pause"),
                 QKeySequence(Qt::Key_F6), tr("Pause or resume at the next step boundary"));
  m_step = make(QStringLiteral("actionStep"), s->standardIcon(QStyle::SP_MediaSkipForward), tr("Step"),
                QKeySequence(Qt::Key_F10), tr("Run one training step (pauses a running run)"));
  m_stop = make(QStringLiteral("actionStop"), s->standardIcon(QStyle::SP_MediaStop), tr("Stop"),
                QKeySequence(Qt::SHIFT | Qt::Key_F5), tr("Stop the run at the next step boundary"));
  m_compareAction = make(QStringLiteral("actionCompare"), s->standardIcon(QStyle::SP_FileDialogDetailedView),
                         tr("Compare"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_C),
                         tr("Run fp32, fp16 and mixed side by side on the same data and weights"));
  m_export = make(QStringLiteral("actionExport"), s->standardIcon(QStyle::SP_DialogSaveButton), tr("Export"),
                  QKeySequence(Qt::CTRL | Qt::Key_E), tr("Export runs as CSV and charts as PNG/SVG"));
  connect(m_start, &QAction::triggered, this, [this] { startRun(); });
  connect(m_pause, &QAction::triggered, this, &MainWindow::togglePause);
  connect(m_step, &QAction::triggered, this, &MainWindow::stepOnce);
  connect(m_stop, &QAction::triggered, this, &MainWindow::stopRun);
  connect(m_compareAction, &QAction::triggered, this, &MainWindow::openCompareDialog);
  connect(m_export, &QAction::triggered, this, &MainWindow::openExportDialog);
  m_quit = new QAction(tr("Quit"), this);
  m_quit->setShortcut(QKeySequence::Quit);
  connect(m_quit, &QAction::triggered, this, &QWidget::close);
  m_about = new QAction(tr("About Precision Lab"), this);
  connect(m_about, &QAction::triggered, this, [this] {
    QMessageBox::about(this, tr("About Precision Lab"),
                       tr("Precision Lab %1\nInteractive mixed-precision training experiments.")
                           .arg(QApplication::applicationVersion()));
  });

  auto* toolbar = addToolBar(tr("Run"));
  toolbar->setObjectName(QStringLiteral("runToolBar"));
  toolbar->setMovable(false);
  toolbar->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  toolbar->addActions({m_start, m_pause, m_step, m_stop});
  toolbar->addSeparator();
  toolbar->addActions({m_compareAction, m_export});
  toolbar->addSeparator();
  m_speed = new SpeedControl(toolbar);
  toolbar->addWidget(m_speed);
  m_toolbar = toolbar;

  m_presentationAction = make(QStringLiteral("actionPresentation"), QIcon(), tr("Presentation view"),
                              QKeySequence(Qt::Key_F11),
                              tr("Slides for a room: large type, thick lines, the lesson and its charts only"));
  m_presentationAction->setCheckable(true);
  connect(m_presentationAction, &QAction::toggled, this, &MainWindow::setPresentation);
  m_explorerAction = make(QStringLiteral("actionFormatExplorer"), QIcon(), tr("Format explorer…"),
                          QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_F),
                          tr("One value in every format: bits, exact value, error, neighbours, range"));
  connect(m_explorerAction, &QAction::triggered, this, &MainWindow::showFormatExplorer);
  m_blockViewAction = make(QStringLiteral("actionBlockView"), QIcon(), tr("Block formats (MXFP, NVFP4)…"),
                           QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_B),
                           tr("Two blocks of values in MXFP8/6/4 or NVFP4 beside one per-tensor scale, with an "
                              "outlier slider: why block scaling"));
  connect(m_blockViewAction, &QAction::triggered, this, &MainWindow::showBlockView);
  m_injectFault = make(QStringLiteral("actionInjectFault"), QIcon(), tr("Inject NaN…"),
                       QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_N),
                       tr("Put a NaN or inf into a live run's weights, activations, gradients or loss at its next step"));
  connect(m_injectFault, &QAction::triggered, this, &MainWindow::openFaultDialog);
  // The window keeps the shortcuts while the menu bar is hidden (presentation).
  addActions({m_presentationAction, m_explorerAction, m_blockViewAction, m_start, m_pause, m_step, m_stop});
}

void MainWindow::createMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(m_export);
  file->addSeparator();
  file->addAction(m_quit);
  QMenu* run = menuBar()->addMenu(tr("&Run"));
  run->addActions({m_start, m_pause, m_step, m_stop});
  run->addSeparator();
  run->addAction(m_compareAction);
  run->addSeparator();
  run->addAction(m_injectFault);
  m_lectureMenu = new LectureMenu(this);
  menuBar()->addMenu(m_lectureMenu);
  m_lectureMenu->addAction(m_explorerAction);
  m_lectureMenu->addAction(m_blockViewAction);
  m_lectureMenu->addAction(m_presentationAction);
  connect(m_lectureMenu, &LectureMenu::presetChosen, this, [this](const QString& nameOrFile) { openLecture(nameOrFile); });
  QMenu* view = menuBar()->addMenu(tr("&View"));
  for (QDockWidget* dock : findChildren<QDockWidget*>()) view->addAction(dock->toggleViewAction());
  view->addSeparator();
  view->addAction(m_presentationAction);
  view->addAction(m_explorerAction);
  view->addAction(m_blockViewAction);
  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(m_about);
}

void MainWindow::createStatusBar() {
  auto label = [this](const QString& objectName, const QString& widest) {
    auto* l = new QLabel(this);
    l->setObjectName(objectName);
    // Fixed width from the widest expected text: numbers updating at 30 Hz
    // must not make the status bar jitter.
    l->setMinimumWidth(l->fontMetrics().horizontalAdvance(widest) + 12);
    l->setAlignment(Qt::AlignRight | Qt::AlignVCenter);
    statusBar()->addPermanentWidget(l);
    return l;
  };
  m_statusStep = label(QStringLiteral("statusStep"), tr("step 9,999,999 / 9,999,999"));
  m_statusRate = label(QStringLiteral("statusRate"), tr("999,999 samples/s"));
  m_statusScale = label(QStringLiteral("statusScale"), tr("loss scale 2^-24"));
  m_statusMemory = label(QStringLiteral("statusMemory"), tr("memory 1023.9 MiB"));
  setStatusMetrics(-1, -1.0, -1.0, -1);
  statusBar()->showMessage(tr("Ready"));
}

void MainWindow::setStatusMetrics(qint64 step, double samplesPerSecond, double lossScale, qint64 memoryBytes) {
  const QLocale locale;
  const QString none = QStringLiteral("—");
  m_statusStep->setText(tr("step %1").arg(step < 0 ? none : locale.toString(step)));
  m_statusRate->setText(tr("%1 samples/s").arg(samplesPerSecond < 0 ? none : locale.toString(samplesPerSecond, 'f', 0)));
  // Loss scales are powers of two under GradScaler: show the exponent.
  QString scale = none;
  if (lossScale > 0) {
    const double e = std::log2(lossScale);
    scale = e == std::round(e) ? QStringLiteral("2^%1").arg(static_cast<int>(e)) : locale.toString(lossScale, 'g', 6);
  }
  m_statusScale->setText(tr("loss scale %1").arg(scale));
  m_statusMemory->setText(tr("memory %1").arg(memoryBytes < 0 ? none : locale.formattedDataSize(memoryBytes)));
}

void MainWindow::updateActions() {
  // Active while a run of the trainer can still step: a run that failed
  // (or ended) while the thread winds down leaves Start enabled.
  bool anyLive = false;
  for (int id : m_controller->currentRuns()) anyLive = anyLive || m_store->run(id).live();
  const bool active = m_controller->active() && anyLive;
  const bool paused = m_controller->paused();
  m_start->setEnabled(!active);
  m_pause->setEnabled(active);
  m_pause->setText(paused ? tr("Resume") : tr("Pause"));
  m_pause->setIcon(style()->standardIcon(paused ? QStyle::SP_MediaPlay : QStyle::SP_MediaPause));
  m_step->setEnabled(true);
  m_stop->setEnabled(active);
  m_compareAction->setEnabled(!active);
  m_export->setEnabled(m_runs->runCount() > 0);
  m_injectFault->setEnabled(active);
}

void MainWindow::showError(const QString& title, const QString& message) {
  m_lastError = message;
  statusBar()->showMessage(QStringLiteral("%1: %2").arg(title, message));
  if (!m_quietErrors) QMessageBox::warning(this, title, message);
}

void MainWindow::setBaseConfig(const engine::RunConfig& config) {
  m_baseConfig = config;
  m_setup->applyConfig(config);
  rebuildPrecisionTable();
}

bool MainWindow::applyLaunchOptions(const LaunchOptions& options) {
  if (!options.configError.isEmpty()) {
    showError(tr("Cannot use the config file"), options.configError);
    // The run options still apply (on the panel's settings).
  }
  try {
    // The panel's settings with only what the options name changed (or
    // the config file's, when it loaded).
    setBaseConfig(applyLaunchSettings(m_setup->toConfig(m_baseConfig), options));
  } catch (const std::exception& e) {
    showError(tr("Bad command-line setting"), QString::fromStdString(e.what()));
    return false;
  }
  return options.configError.isEmpty();
}

void MainWindow::fitToScreen() {
  const QScreen* s = screen() ? screen() : QGuiApplication::primaryScreen();
  const QRect avail = s ? s->availableGeometry() : QRect(0, 0, 1400, 900);
  // Whole of a small screen; a comfortable size on a large one. The frame
  // (title bar, borders) comes off the available height.
  const int frame = frameGeometry().height() - geometry().height();
  const QSize size(std::min(avail.width(), 1600), std::min(avail.height() - std::max(frame, 0), 1000));
  resize(size.expandedTo(minimumSizeHint()).boundedTo(avail.size()));
  move(avail.center() - QPoint(width() / 2, height() / 2 + std::max(frame, 0) / 2));
}

engine::RunConfig MainWindow::nextRunConfig() const {
  engine::RunConfig c = m_setup->toConfig(m_baseConfig);
  if (c.recipe == "custom") {
    // The table is the recipe: every layer's precision, edited or not.
    c.layers.clear();
    for (const PrecisionTableRow& row : m_precision->precisionModel()->rows())
      c.layers[row.layer.toStdString()] = row.precision;
  }
  return c;
}

bool MainWindow::launch(const std::vector<engine::RunConfig>& configs, const QStringList& names, int compareGroup,
                        bool paused, const QString& folderName) {
  // Start to first point counts from here: the click.
  m_startClock.start();
  m_firstPointMs = -1;
  std::vector<TrainingController::RunRequest> requests;
  for (std::size_t i = 0; i < configs.size(); ++i)
    requests.push_back({configs[i], names[static_cast<int>(i)],
                        RunsList::paletteColour(m_store->count() + static_cast<int>(i))});
  try {
    // Validate before anything is added: a bad setting never leaves a
    // half-started comparison behind.
    for (std::size_t i = 0; i < configs.size(); ++i) {
      const engine::RunConfig& c = configs[i];
      engine::validate(c, "settings");
      // Builds the model ("cnn: needs image samples ...") before any thread
      // starts; runs of a comparison share model and data: once.
      if (i == 0 || c.model != configs[0].model || c.dataset != configs[0].dataset || c.widths != configs[0].widths)
        (void)layerRowsFor(c);
    }
    // The data set loaded in the background, if it is ready.
    if (auto data = m_datasets->get(configs[0].dataset)) m_controller->provideData(configs[0].dataset, data);
    m_charts->resetFirstPoint();
    m_controller->start(requests, compareGroup, paused, folderName);
  } catch (const std::exception& e) {
    showError(compareGroup >= 0 ? tr("Cannot start the comparison") : tr("Cannot start the run"),
              QString::fromStdString(e.what()));
    return false;
  }
  updateActions();
  m_inspector->setRuns(m_controller->currentRuns());
  if (m_lecture) m_lecturePanel->resetClaims();
  m_lectureRuns.clear();
  const int focus = liveFocusRun();
  if (focus >= 0) showRunInTable(focus);
  return true;
}

// False while a run can still step; a trainer whose runs all ended (one
// failed while its thread winds down) is joined first.
bool MainWindow::readyToStart() {
  if (!m_controller->active()) return true;
  for (int id : m_controller->currentRuns())
    if (m_store->run(id).live()) return false;
  m_controller->shutdown();
  return true;
}

bool MainWindow::startRun() {
  if (!readyToStart()) return false;
  if (m_lecture) return startLecture();
  const engine::RunConfig c = nextRunConfig();
  const QString name = tr("run %1").arg(++m_runCounter);
  if (!launch({c}, {name}, -1, false)) {
    --m_runCounter;
    return false;
  }
  statusBar()->showMessage(tr("Started %1 (%2)").arg(name, QString::fromStdString(c.recipe)), 4000);
  return true;
}

bool MainWindow::startComparison(const QStringList& recipes) {
  if (recipes.isEmpty() || !readyToStart()) return false;
  // The presets as they are, without the table's overrides: the comparison
  // is of recipes (same seed, same data, same weights). The engine's one
  // rule (shared with precision-lab-cli compare) says which recipes take
  // the panel's loss-scaler settings.
  engine::RunConfig base = nextRunConfig();
  base.layers.clear();
  std::vector<std::string> names8;
  for (const QString& r : recipes) names8.push_back(r.toStdString());
  std::vector<engine::RunConfig> configs;
  QStringList names;
  for (engine::ComparisonRun& run : engine::comparison_runs(base, names8)) {
    configs.push_back(std::move(run.config));
    names << tr("run %1").arg(m_runCounter + static_cast<int>(names.size()) + 1);
  }
  try {
    for (const engine::RunConfig& c : configs) engine::validate(c, "settings");
  } catch (const std::exception& e) {
    showError(tr("Cannot start the comparison"), QString::fromStdString(e.what()));
    return false;
  }
  const int previous = m_store->count();
  const int realGroup = m_store->newCompareGroup();
  if (!launch(configs, names, realGroup, false, QStringLiteral("compare-") + recipes.join(QLatin1Char('+'))))
    return false;
  m_runCounter += static_cast<int>(names.size());
  // Older runs step back: the overlay shows the comparison (re-tick to add).
  for (int id = 0; id < previous; ++id) m_runs->setRunChecked(id, false);
  m_compare->setGroup(realGroup);
  statusBar()->showMessage(
      tr("Comparing %1 on seed %2; the summary is on the Compare tab")
          .arg(recipes.join(QStringLiteral(", ")))
          .arg(base.seed),
      8000);
  return true;
}

void MainWindow::togglePause() {
  if (!m_controller->active()) return;
  if (m_controller->paused())
    m_controller->resume();
  else
    m_controller->pause();
  updateActions();
}

void MainWindow::stepOnce() {
  if (!m_presentationView->isOn()) m_inspectorDock->show();
  if (!readyToStart()) {
    m_controller->stepOnce();
  } else {
    // No run yet: build one paused (the lesson's, when one is chosen) and
    // take its first step.
    if (m_lecture) {
      if (!startLecture(true)) return;
      m_controller->stepOnce();
      m_inspectorDock->show();
      updateActions();
      return;
    }
    const engine::RunConfig c = nextRunConfig();
    const QString name = tr("run %1").arg(++m_runCounter);
    if (!launch({c}, {name}, -1, true)) {
      --m_runCounter;
      return;
    }
    m_controller->stepOnce();
  }
  updateActions();
}

void MainWindow::stopRun() {
  if (!m_controller->active()) return;
  m_controller->stop();
  statusBar()->showMessage(tr("Stopping at the next step boundary…"));
}

void MainWindow::openCompareDialog() {
  if (!readyToStart()) return;
  CompareDialog dialog(m_compareRecipes, m_setup->settings().seed, this);
  if (dialog.exec() != QDialog::Accepted) return;
  m_compareRecipes = dialog.recipes();
  startComparison(m_compareRecipes);
}

QList<QChartView*> MainWindow::allCharts() const {
  QList<QChartView*> charts;
  for (int m = 0; m < ChartArea::MetricCount; ++m) charts << m_charts->view(static_cast<ChartArea::Metric>(m));
  for (LiveChartView* v : m_compare->smallCharts()) charts << v;
  return charts;
}

void MainWindow::openExportDialog() {
  ExportDialog dialog(*m_store, m_exportDir, this);
  if (dialog.exec() != QDialog::Accepted) return;
  m_exportDir = dialog.directory();
  ExportRequest request;
  request.dir = dialog.directory();
  request.runs = dialog.runs();
  request.csv = dialog.csv() && !request.runs.isEmpty();
  request.png = dialog.png();
  request.svg = dialog.svg();
  request.charts = allCharts();
  exportTo(request);
}

bool MainWindow::exportTo(const ExportRequest& request) {
  // Charts are drawn from the store as it is now.
  m_controller->drainNow();
  m_charts->refresh();
  m_compare->refresh();
  try {
    const QStringList files = exportRuns(*m_store, request);
    statusBar()->showMessage(
        tr("Exported %1 files to %2").arg(files.size()).arg(QDir::toNativeSeparators(request.dir)), 8000);
    return true;
  } catch (const std::exception& e) {
    showError(tr("Export failed"), QString::fromStdString(e.what()));
    return false;
  }
}

bool MainWindow::openPastRun(const QString& dir) {
  QVector<int> ids;
  try {
    ids = run_folders::open(*m_store, dir);
  } catch (const std::exception& e) {
    showError(tr("Cannot open the run"), QString::fromStdString(e.what()));
    return false;
  }
  // The opened runs on the charts; the others step back (re-tick to add).
  for (int id = 0; id < m_store->count(); ++id) m_runs->setRunChecked(id, ids.contains(id));
  for (int id : ids) onRunChanged(id);
  m_runs->setCurrentIndex(m_runs->runsModel()->index(ids.back(), 0));
  m_charts->setFocusRun(ids.front());
  if (m_store->run(ids.front()).compareGroup >= 0) m_compare->setGroup(m_store->run(ids.front()).compareGroup);
  m_charts->refresh();
  m_compare->refresh();
  m_runsTabs->setCurrentWidget(m_runs);
  const RunData& first = m_store->run(ids.front());
  const std::int64_t steps = first.steps.empty() ? 0 : first.steps.back().step;
  statusBar()->showMessage(first.interrupted ? tr("Opened %1: interrupted at step %2 — everything up to its last "
                                                  "second is shown")
                                                   .arg(QDir::toNativeSeparators(dir))
                                                   .arg(steps)
                                             : tr("Opened %1 (%2 runs)").arg(QDir::toNativeSeparators(dir)).arg(ids.size()),
                           10000);
  updateActions();
  return true;
}

void MainWindow::showHistory() {
  m_history->refresh();
  m_runsTabs->setCurrentWidget(m_history);
}

void MainWindow::openFaultDialog() {
  QVector<int> live;
  for (int id : m_controller->currentRuns())
    if (m_store->run(id).live()) live << id;
  if (live.isEmpty()) {
    showError(tr("Inject NaN"), tr("No run is training: start one first"));
    return;
  }
  FaultDialog dialog(*m_store, live, this);
  const int focus = liveFocusRun();
  if (focus >= 0) dialog.setRun(focus);
  if (dialog.exec() != QDialog::Accepted) return;
  injectFault(dialog.runId(), dialog.target(), dialog.layer(), dialog.inf());
}

bool MainWindow::injectFault(int storeId, engine::FaultTarget target, const std::string& layer, bool inf) {
  if (!m_controller->injectFault(storeId, target, layer, inf)) {
    showError(tr("Inject NaN"), tr("That run is not training"));
    return false;
  }
  m_faultPending.insert(storeId);
  const QString where = target == engine::FaultTarget::Loss
                            ? tr("the loss")
                            : tr("%1's %2").arg(QString::fromStdString(layer),
                                                QString::fromLatin1(engine::fault_target_name(target)));
  statusBar()->showMessage(tr("%1: %2 into %3 at the next step")
                               .arg(m_store->run(storeId).name, inf ? tr("+inf") : tr("NaN"), where),
                           8000);
  return true;
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (m_controller->active()) {
    // Stop at the next step boundary, join, and drain what is left: the
    // history is complete (and exportable) up to the last step taken.
    statusBar()->showMessage(tr("Stopping…"));
    m_controller->shutdown();
  }
  event->accept();
}

void MainWindow::onFrame() {
  for (int id : m_controller->currentRuns()) {
    const RunData& r = m_store->run(id);
    m_runs->setRunStatus(id, stateText(r), r.message, r.state == engine::RunState::Failed);
  }
  scanEvents();
  updateStatusMetrics();
}

void MainWindow::onRunChanged(int id) {
  const RunData& r = m_store->run(id);
  m_runs->setRunStatus(id, stateText(r), r.message, r.state == engine::RunState::Failed);
  if (m_runs->isRunChecked(id) != r.visible) m_runs->setRunChecked(id, r.visible);
  // The toolbar first: a failed run must not leave Pause/Stop enabled
  // behind the (modal) message.
  updateActions();
  if (r.state == engine::RunState::Failed) {
    const QString message = tr("%1 failed: %2").arg(r.name, r.message);
    if (m_quietErrors)
      showError(tr("Run failed"), message);
    else
      QTimer::singleShot(0, this, [this, message] { showError(tr("Run failed"), message); });
  }
}

void MainWindow::onTrainingFinished() {
  onFrame();
  // The last records are drawn before anyone hears that training ended.
  m_charts->refresh();
  m_compare->refresh();
  updateActions();
  // The table describes the next run again (it followed the live one).
  rebuildPrecisionTable();
  bool failed = false;
  for (int id : m_controller->currentRuns()) failed = failed || m_store->run(id).state == engine::RunState::Failed;
  if (!failed) statusBar()->showMessage(tr("Training ended"), 5000);
  m_history->refresh();  // its folder's status is final now
  emit trainingFinished();
  checkLectureClaims();
}

// Events worth a status message: divergence, precision changes applied by
// the engine, and errors of queued commands.
void MainWindow::scanEvents() {
  if (m_eventsSeen.size() < m_store->count()) m_eventsSeen.resize(m_store->count());
  for (int id : m_controller->currentRuns()) {
    const RunData& r = m_store->run(id);
    std::size_t& seen = m_eventsSeen[id];
    for (; seen < r.events.size(); ++seen) {
      const engine::Event& e = r.events[seen];
      if (e.kind == engine::EventKind::NanLoss && (seen == 0 || r.events[seen - 1].kind != engine::EventKind::NanLoss)) {
        bool first = true;
        for (std::size_t k = 0; k < seen; ++k) first = first && r.events[k].kind != engine::EventKind::NanLoss;
        if (first)
          statusBar()->showMessage(tr("%1 diverged at step %2: the loss is NaN (marked ★ on the loss chart)")
                                       .arg(r.name)
                                       .arg(e.step),
                                   10000);
      } else if (e.kind == engine::EventKind::Overflow && e.count > 0 &&
                 (m_faultPending.contains(id) || !r.scalesLoss())) {
        // Overflows are routine under dynamic loss scaling (the loss-scale
        // chart marks them); elsewhere, or after an injected NaN, one is news.
        m_faultPending.remove(id);
        statusBar()->showMessage(tr("%1: %2 non-finite values in %3's %4 at step %5 (marked ▲ on the loss-scale chart)")
                                     .arg(r.name)
                                     .arg(e.count)
                                     .arg(e.layer.empty() ? tr("the model") : QString::fromStdString(e.layer),
                                          QString::fromStdString(e.tensor))
                                     .arg(e.step),
                                 10000);
      } else if (e.kind == engine::EventKind::PrecisionChange) {
        const QString formats = QStringLiteral("%1/%2/%3/%4")
                                    .arg(QString::fromLatin1(engine::format_name(e.precision.compute)),
                                         QString::fromLatin1(engine::format_name(e.precision.storage)),
                                         QString::fromLatin1(engine::format_name(e.precision.accumulate)),
                                         QString::fromLatin1(engine::format_name(e.precision.grad)));
        statusBar()->showMessage(tr("%1: %2 now computes/stores/accumulates/grads in %3 (from step %4)")
                                     .arg(r.name, QString::fromStdString(e.layer), formats)
                                     .arg(e.step + 1),
                                 8000);
      } else if (e.kind == engine::EventKind::Error) {
        showError(tr("Engine"), tr("%1: %2").arg(r.name, QString::fromStdString(e.tensor)));
      }
    }
  }
}

int MainWindow::liveFocusRun() const {
  const int current = m_runs->currentRun();
  if (current >= 0 && m_controller->isCurrent(current) && m_store->run(current).live()) return current;
  for (int id : m_controller->currentRuns())
    if (m_store->run(id).live()) return id;
  return -1;
}

void MainWindow::updateStatusMetrics() {
  int id = m_charts->focusRun();
  if (id < 0 || id >= m_store->count()) {
    setStatusMetrics(-1, -1, -1, -1);
    return;
  }
  const RunData& r = m_store->run(id);
  if (r.steps.empty()) {
    setStatusMetrics(-1, -1, -1, -1);
    return;
  }
  // Samples/s over the last 50 steps (one step's rate is noisy).
  double samples = 0, ms = 0;
  const std::size_t n = r.steps.size();
  for (std::size_t i = n > 50 ? n - 50 : 0; i < n; ++i) {
    samples += r.steps[i].samples_per_second * r.steps[i].wall_ms / 1000.0;
    ms += r.steps[i].wall_ms;
  }
  const engine::StepMetrics& last = r.steps.back();
  setStatusMetrics(last.step, ms > 0 ? samples / (ms / 1000.0) : -1, last.loss_scale, last.mem.total());
  if (r.totalSteps > 0)
    m_statusStep->setText(tr("step %1 / %2").arg(QLocale().toString(static_cast<qint64>(last.step)),
                                                 QLocale().toString(static_cast<qint64>(r.totalSteps))));
}

void MainWindow::rebuildPrecisionTable() {
  if (m_rebuildingTable) return;
  m_rebuildingTable = true;
  engine::RunConfig c = m_setup->toConfig(m_baseConfig);
  if (c.recipe == "custom") {
    // Keep the table's precisions for the layers the new model still has.
    for (const PrecisionTableRow& row : m_precision->precisionModel()->rows())
      c.layers[row.layer.toStdString()] = row.precision;
  }
  m_precisionBox->setTitle(tr("Per-layer precision of the next run: %1 (double-click a format to change it)")
                               .arg(QString::fromStdString(c.recipe)));
  try {
    m_precision->precisionModel()->setRows(layerRowsFor(c));
    m_precision->setToolTip(QString());
  } catch (const std::exception& e) {
    // A model that cannot take this data set (cnn on spirals): say so; the
    // Start button reports it again with the same words.
    m_precision->precisionModel()->setRows({});
    m_precision->setToolTip(QString::fromStdString(e.what()));
    statusBar()->showMessage(QString::fromStdString(e.what()), 8000);
  }
  m_rebuildingTable = false;
}

// The table of a live run: its config's layers, with the precision changes
// the engine has applied since (precision_change events) on top.
void MainWindow::showRunInTable(int id) {
  const RunData& run = m_store->run(id);
  engine::RunConfig c = run.config;
  for (const engine::Event& e : run.events)
    if (e.kind == engine::EventKind::PrecisionChange) c.layers[e.layer] = e.precision;
  m_precisionBox->setTitle(tr("Per-layer precision of %1: %2, live (double-click a format to change it at the next step)")
                               .arg(run.name, QString::fromStdString(run.config.recipe)));
  try {
    m_precision->precisionModel()->setRows(layerRowsFor(c));
  } catch (const std::exception&) {
    // The run was built from this config: it fits.
  }
}

void MainWindow::onPrecisionEdited(int row) {
  const PrecisionTableRow& r = m_precision->precisionModel()->rows()[row];
  // Mid-run: the engine applies it at its next step boundary.
  const int live = liveFocusRun();
  if (live >= 0 && m_controller->setLayerPrecision(live, r.layer.toStdString(), r.precision))
    statusBar()->showMessage(tr("%1: %2 → %3/%4/%5 at the next step")
                                 .arg(m_store->run(live).name, r.layer,
                                      QString::fromLatin1(engine::format_name(r.precision.compute)),
                                      QString::fromLatin1(engine::format_name(r.precision.storage)),
                                      QString::fromLatin1(engine::format_name(r.precision.accumulate))),
                             6000);
  // The next run is 'custom': the table, as edited, is its recipe.
  if (m_setup->settings().recipe != QLatin1String("custom")) {
    m_rebuildingTable = true;  // the table already shows what custom will be
    m_setup->setRecipe(QStringLiteral("custom"));
    m_rebuildingTable = false;
  }
}

// --- Lecture mode ---

bool MainWindow::openLecture(const QString& nameOrFile) {
  try {
    setLecture(engine::find_preset(nameOrFile.toStdString()));
    return true;
  } catch (const std::exception& e) {
    showError(tr("Cannot open the lesson"), QString::fromStdString(e.what()));
    return false;
  }
}

void MainWindow::setLecture(const engine::Preset& preset) {
  if (preset.runs.empty()) {
    showError(tr("Cannot open the lesson"), tr("%1: the preset has no runs").arg(QString::fromStdString(preset.name)));
    return;
  }
  m_lecture = std::make_unique<engine::Preset>(preset);
  m_lectureRuns.clear();
  // The setup panel shows the first run's settings (the runs share data,
  // model, length and seed; they differ in precision).
  setBaseConfig(preset.runs.front().config);
  m_lecturePanel->setPreset(preset);
  m_lecturePanel->show();
  m_liveSplitter->setSizes({3 * m_liveSplitter->width() / 4, m_liveSplitter->width() / 4});
  m_tabs->setCurrentWidget(m_liveSplitter);
  applyWatch();
  for (QAction* a : m_lectureMenu->presetActions()) {
    a->setCheckable(true);
    a->setChecked(a->data().toString() == QString::fromStdString(preset.name));
  }
  statusBar()->showMessage(tr("Lesson: %1 — Start (F5) runs its %2 runs side by side")
                               .arg(QString::fromStdString(preset.title))
                               .arg(preset.runs.size()),
                           8000);
}

void MainWindow::leaveLecture() {
  m_lecture.reset();
  m_lectureRuns.clear();
  m_lecturePanel->hide();
  for (QAction* a : m_lectureMenu->presetActions()) a->setChecked(false);
  applyWatch();
}

// The charts the lesson names in `watch`, large; the gradient panel on the
// layer it names. In presentation view only those are shown.
void MainWindow::applyWatch() {
  QVector<ChartArea::Metric> watched;
  if (m_lecture) {
    for (const std::string& w : m_lecture->watch) {
      const QString name = QString::fromStdString(w);
      const QString chart = name.section(QLatin1Char(':'), 0, 0);
      if (chart == QLatin1String("loss")) watched << ChartArea::Loss;
      else if (chart == QLatin1String("loss_scale")) watched << ChartArea::LossScale;
      else if (chart == QLatin1String("memory")) watched << ChartArea::Memory;
      else if (chart == QLatin1String("accuracy")) watched << ChartArea::Accuracy;
      else if (chart == QLatin1String("gradients")) {
        watched << ChartArea::Gradients;
        const QString layer = name.section(QLatin1Char(':'), 1);
        if (!layer.isEmpty()) m_charts->gradientPanel()->setLayer(layer);
      }
    }
  }
  if (watched.isEmpty() && presentation()) watched = {ChartArea::Loss, ChartArea::LossScale};
  m_charts->setWatched(watched, presentation());
}

bool MainWindow::startLecture(bool paused) {
  if (!m_lecture || !readyToStart()) return false;
  std::vector<engine::RunConfig> configs;
  QStringList names;
  for (const engine::PresetRun& r : m_lecture->runs) {
    configs.push_back(r.config);
    names << QString::fromStdString(r.name);
  }
  const int previous = m_store->count();
  const int group = m_store->newCompareGroup();
  if (!launch(configs, names, group, paused, QString::fromStdString(m_lecture->name))) return false;
  m_lectureRuns = m_controller->currentRuns();
  // Older runs step back: the charts show the lesson.
  for (int id = 0; id < previous; ++id) m_runs->setRunChecked(id, false);
  m_compare->setGroup(group);
  statusBar()->showMessage(tr("Lesson: %1 — %2").arg(QString::fromStdString(m_lecture->title), names.join(QStringLiteral(", "))),
                           8000);
  return true;
}

// After the lesson's runs end: its claims, checked on their output (the
// same data the CSV export holds).
void MainWindow::checkLectureClaims() {
  if (!m_lecture || m_lectureRuns.isEmpty() || m_controller->currentRuns() != m_lectureRuns) return;
  std::vector<engine::RunExport> exports;
  QStringList shortRuns;
  for (int id : m_lectureRuns) {
    const RunData& r = m_store->run(id);
    exports.push_back(r.toExport());
    const std::int64_t done = r.steps.empty() ? 0 : r.steps.back().step;
    if (r.totalSteps > 0 && done < r.totalSteps)
      shortRuns << tr("%1 stopped at step %2 of %3").arg(r.name).arg(done).arg(r.totalSteps);
  }
  const std::vector<engine::ClaimResult> results = engine::check_claims(*m_lecture, exports);
  QString note;
  if (!shortRuns.isEmpty())
    note = tr("%1: the claims are made for whole runs.").arg(shortRuns.join(QStringLiteral("; ")));
  m_lecturePanel->setClaimResults(results, note);
  int passed = 0;
  for (const engine::ClaimResult& r : results) passed += r.pass ? 1 : 0;
  statusBar()->showMessage(tr("Lesson checked: %1 of %2 claims hold").arg(passed).arg(results.size()), 10000);
  emit lectureChecked();
}

FormatExplorer* MainWindow::formatExplorer() {
  if (!m_explorer) {
    m_explorer = new FormatExplorer(this);
    m_explorer->setRunStore(m_store);  // the block view's live blocks
  }
  return m_explorer;
}

void MainWindow::showFormatExplorer() {
  FormatExplorer* e = formatExplorer();
  e->showValues();
  e->show();
  e->raise();
  e->activateWindow();
}

void MainWindow::showBlockView() {
  FormatExplorer* e = formatExplorer();
  e->showBlocks();
  e->show();
  e->raise();
  e->activateWindow();
}

bool MainWindow::presentation() const { return m_presentationView->isOn(); }

void MainWindow::setPresentation(bool on) {
  if (on == presentation()) return;
  m_presentationView->setOn(on);
  if (m_presentationAction->isChecked() != on) {
    const QSignalBlocker block(m_presentationAction);
    m_presentationAction->setChecked(on);
  }
  if (on) m_tabs->setCurrentWidget(m_liveSplitter);
  m_charts->setPresentation(on);
  m_lecturePanel->setPresentation(on);
  QFont tf = m_toolbar->font();
  chart_style::setPresentationFont(m_toolbar, on, chart_style::presentation::kLegendPt - 2);
  (void)tf;
  applyWatch();
  // The lesson takes a third of the width: its explanation in large type.
  if (m_lecture) {
    const int w = std::max(m_liveSplitter->width(), 600);
    m_liveSplitter->setSizes(on ? QList<int>{w * 63 / 100, w * 37 / 100} : QList<int>{w * 3 / 4, w / 4});
  }
}
