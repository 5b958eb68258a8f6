// MainWindow: assembles the widgets; each area lives in its own file.
#include "main_window.h"

#include <QAction>
#include <QApplication>
#include <QDockWidget>
#include <QGroupBox>
#include <QLabel>
#include <QLocale>
#include <QMenuBar>
#include <QMessageBox>
#include <QScrollArea>
#include <QScrollBar>
#include <QSplitter>
#include <QStatusBar>
#include <QStyle>
#include <QToolBar>
#include <QVBoxLayout>

#include <cmath>

#include "chart_area.h"
#include "precision_table.h"
#include "runs_list.h"
#include "setup_panel.h"

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

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  initUiResources();
  setObjectName(QStringLiteral("mainWindow"));
  setWindowTitle(tr("Precision Lab"));
  setWindowIcon(QIcon(QStringLiteral(":/icons/precision-lab.svg")));

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

  // Centre: charts above; the precision table and the runs list below.
  m_charts = new ChartArea;
  m_precision = new PrecisionTable;
  m_runs = new RunsList;
  auto* bottom = new QSplitter(Qt::Horizontal);
  bottom->addWidget(framed(tr("Per-layer precision"), m_precision));
  bottom->addWidget(framed(tr("Runs"), m_runs));
  bottom->setStretchFactor(0, 3);
  bottom->setStretchFactor(1, 2);
  bottom->setChildrenCollapsible(false);
  auto* centre = new QSplitter(Qt::Vertical);
  centre->setObjectName(QStringLiteral("centreSplitter"));
  centre->addWidget(m_charts);
  centre->addWidget(bottom);
  centre->setStretchFactor(0, 3);
  centre->setStretchFactor(1, 1);
  centre->setChildrenCollapsible(false);
  setCentralWidget(centre);

  createActions();
  createMenus();
  createStatusBar();
  updateActions();
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
                QKeySequence(Qt::Key_F10), tr("Run one training step"));
  m_stop = make(QStringLiteral("actionStop"), s->standardIcon(QStyle::SP_MediaStop), tr("Stop"),
                QKeySequence(Qt::SHIFT | Qt::Key_F5), tr("Stop the run at the next step boundary"));
  m_compare = make(QStringLiteral("actionCompare"), s->standardIcon(QStyle::SP_FileDialogDetailedView),
                   tr("Compare"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_C),
                   tr("Run fp32, fp16 and mixed side by side on the same data and weights"));
  m_export = make(QStringLiteral("actionExport"), s->standardIcon(QStyle::SP_DialogSaveButton), tr("Export"),
                  QKeySequence(Qt::CTRL | Qt::Key_E), tr("Export the runs as CSV"));
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
  toolbar->addActions({m_compare, m_export});
}

void MainWindow::createMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(m_export);
  file->addSeparator();
  file->addAction(m_quit);
  QMenu* run = menuBar()->addMenu(tr("&Run"));
  run->addActions({m_start, m_pause, m_step, m_stop});
  run->addSeparator();
  run->addAction(m_compare);
  QMenu* view = menuBar()->addMenu(tr("&View"));
  for (QDockWidget* dock : findChildren<QDockWidget*>()) view->addAction(dock->toggleViewAction());
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
  m_statusStep = label(QStringLiteral("statusStep"), tr("step 9,999,999"));
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
  m_start->setEnabled(m_trainerConnected && !m_running);
  m_pause->setEnabled(m_running);
  m_step->setEnabled(m_trainerConnected);
  m_stop->setEnabled(m_running);
  m_compare->setEnabled(m_trainerConnected && !m_running);
  m_export->setEnabled(m_runs->runCount() > 0);
}
