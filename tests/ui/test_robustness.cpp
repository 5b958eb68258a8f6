// Robustness of the app with runs on disk: a kill -9 mid-run leaves a folder
// the next start lists as interrupted and reopens with its data up to the
// last second; closing the window mid-run leaves it stopped; random clicks
// for ten seconds lose nothing and never deadlock; an injected NaN is an
// attributed event, and a diverged run shows as failed with its reason.
#include <gtest/gtest.h>

#include <QAction>
#include <QApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QMenu>
#include <QMenuBar>
#include <QProcess>
#include <QSignalSpy>
#include <QStatusBar>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>
#include <QTreeWidget>
#include <QComboBox>

#include <map>
#include <memory>
#include <cstdio>
#include <random>

#include "inspect/fault_dialog.h"
#include "main_window.h"
#include "panels/history_panel.h"
#include "panels/layer_rows.h"
#include "panels/runs_list.h"
#include "session/run_folders.h"
#include "session/run_store.h"
#include "session/training_controller.h"
#include "journal/journal.h"
#include "ui/ui_test_support.h"
#include "ui/window_parts.h"

namespace {

engine::RunConfig spirals(std::int64_t steps, const std::string& recipe = "fp32") {
  engine::RunConfig c;
  c.dataset = "spirals";
  c.model = "mlp";
  c.recipe = recipe;
  c.steps = steps;
  c.batch = 64;
  c.lr = 0.05;
  c.seed = 7;
  c.threads = 1;
  c.stats_every = 50;
  return c;
}

// Complete data rows in a CSV file (lines ending in a line break, header off).
int csvRows(const QString& file) {
  QFile f(file);
  if (!f.open(QIODevice::ReadOnly)) return 0;
  return std::max<int>(0, static_cast<int>(f.readAll().count('\n')) - 1);
}

void expectContiguous(const RunData& r) {
  for (std::size_t i = 0; i < r.steps.size(); ++i) ASSERT_EQ(r.steps[i].step, static_cast<std::int64_t>(i) + 1) << r.name.toStdString();
}

class RobustnessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ui_test::ensureApplication(); }

  void SetUp() override {
    ASSERT_TRUE(m_home.isValid());
    qputenv("XDG_DATA_HOME", m_home.path().toLocal8Bit());
  }
  void TearDown() override {
    m_window.reset();
    qputenv("XDG_DATA_HOME", ui_test::useTemporaryDataHome().toLocal8Bit());
  }
  void makeWindow() {
    m_window = std::make_unique<MainWindow>();
    m_window->part<UserMessages>()->setQuiet(true);
    m_window->resize(1400, 900);
    m_window->show();
  }
  QString root() const { return QDir(m_home.path()).filePath(QStringLiteral("precision-lab/runs")); }
  bool waitFinished(int ms = 30000) {
    return ui_test::waitFor([this] { return !m_window->part<TrainingController>()->active(); }, ms);
  }
  const RunData& run(int id) const { return m_window->part<RunStore>()->run(id); }

  QTemporaryDir m_home;
  std::unique_ptr<MainWindow> m_window;
};

// (a) The built app, killed with SIGKILL mid-run; the next start lists the
// folder as interrupted and opens it with every step it wrote.
TEST_F(RobustnessTest, AppKilledMidRunReopensInterruptedWithItsData) {
  QProcess app;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
  env.insert(QStringLiteral("XDG_DATA_HOME"), m_home.path());
  app.setProcessEnvironment(env);
  app.setProcessChannelMode(QProcess::ForwardedErrorChannel);
  app.start(QStringLiteral(PL_GUI_BINARY), {QStringLiteral("--dataset"), QStringLiteral("spirals"), QStringLiteral("--steps"),
                                            QStringLiteral("1000000"), QStringLiteral("--start")});
  ASSERT_TRUE(app.waitForStarted(10000));
  // Until its folder has steps on disk, and a little more than a second
  // (status.json's step count moves once a second).
  QString folder;
  int rowsSeen = 0;
  QElapsedTimer sinceData;
  ASSERT_TRUE(ui_test::waitFor(
      [&] {
        const QStringList dirs = QDir(root()).entryList(QDir::Dirs | QDir::NoDotAndDotDot);
        if (dirs.size() != 1) return false;
        folder = QDir(root()).filePath(dirs.front());
        rowsSeen = csvRows(QDir(folder).filePath(QStringLiteral("steps.csv")));
        if (rowsSeen < 20) return false;
        if (!sinceData.isValid()) sinceData.start();
        return sinceData.elapsed() > 1500;
      },
      60000))
      << "no steps on disk; app state " << app.state();
  rowsSeen = csvRows(QDir(folder).filePath(QStringLiteral("steps.csv")));
  app.kill();  // SIGKILL: no handler, no flush, no status update
  ASSERT_TRUE(app.waitForFinished(10000));
  EXPECT_EQ(app.exitStatus(), QProcess::CrashExit);

  makeWindow();  // the next start, same data folder
  HistoryPanel* history = m_window->part<HistoryPanel>();
  ASSERT_EQ(history->pastRuns().size(), 1);
  const PastRun& p = history->pastRuns()[0];
  EXPECT_TRUE(p.interrupted);
  EXPECT_EQ(p.status, QStringLiteral("interrupted"));
  EXPECT_GT(p.steps, 0);  // status.json's count, at most a second old
  EXPECT_EQ(history->tree()->topLevelItem(0)->text(HistoryPanel::Status), QStringLiteral("interrupted"));
  EXPECT_TRUE(history->tree()->topLevelItem(0)->font(HistoryPanel::Status).bold());
  EXPECT_TRUE(m_window->findChild<QTabWidget*>(QStringLiteral("runsTabs"))->tabText(m_window->findChild<QTabWidget*>(QStringLiteral("runsTabs"))->indexOf(history)).contains(QStringLiteral("1 interrupted")));
  EXPECT_TRUE(m_window->statusBar()->currentMessage().contains(QStringLiteral("interrupted")))
      << m_window->statusBar()->currentMessage().toStdString();

  history->openRow(0);
  ASSERT_EQ(m_window->part<RunStore>()->count(), 1) << m_window->part<UserMessages>()->lastError().toStdString();
  const RunData& r = run(0);
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(r.state, engine::RunState::Stopped);
  EXPECT_FALSE(r.live());
  EXPECT_EQ(m_window->part<RunsList>()->runStatus(0), QStringLiteral("interrupted"));
  // Everything on disk, which is everything up to its last second.
  ASSERT_GE(static_cast<int>(r.steps.size()), rowsSeen);
  EXPECT_GE(static_cast<std::int64_t>(r.steps.size()), p.steps);
  expectContiguous(r);
  EXPECT_EQ(r.currentSummary().steps, r.steps.back().step);
  // The folder stays interrupted (opening does not rewrite it), and it can go.
  EXPECT_EQ(engine::read_journal_status(folder.toStdString()).status, "interrupted");
}

// SIGTERM (a logout, Ctrl+C) closes the app like its window: the folder is
// stopped, not interrupted.
TEST_F(RobustnessTest, AppTerminatedMidRunLeavesTheFolderStopped) {
  QProcess app;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
  env.insert(QStringLiteral("XDG_DATA_HOME"), m_home.path());
  app.setProcessEnvironment(env);
  app.setProcessChannelMode(QProcess::ForwardedErrorChannel);
  app.start(QStringLiteral(PL_GUI_BINARY), {QStringLiteral("--dataset"), QStringLiteral("spirals"), QStringLiteral("--steps"),
                                            QStringLiteral("1000000"), QStringLiteral("--start")});
  ASSERT_TRUE(app.waitForStarted(10000));
  QString folder;
  ASSERT_TRUE(ui_test::waitFor(
      [&] {
        const QStringList dirs = QDir(root()).entryList(QDir::Dirs | QDir::NoDotAndDotDot);
        if (dirs.size() != 1) return false;
        folder = QDir(root()).filePath(dirs.front());
        return csvRows(QDir(folder).filePath(QStringLiteral("steps.csv"))) > 20;
      },
      60000));
  app.terminate();  // SIGTERM
  ASSERT_TRUE(app.waitForFinished(10000));
  EXPECT_EQ(app.exitStatus(), QProcess::NormalExit);
  EXPECT_EQ(app.exitCode(), 0);
  const engine::JournalContents j = engine::read_journal(folder.toStdString());
  EXPECT_EQ(j.status, "stopped");
  EXPECT_FALSE(j.interrupted);
  ASSERT_EQ(j.runs.size(), 1u);
  EXPECT_EQ(j.runs[0].steps, static_cast<std::int64_t>(j.exports[0].history.steps.size()));
}

// (b) Closing the window mid-run stops and joins the engine: stopped, not
// interrupted, every step in the store also in the folder.
TEST_F(RobustnessTest, ClosingTheWindowMidRunLeavesTheFolderStopped) {
  makeWindow();
  m_window->part<PrecisionTableController>()->setBaseConfig(spirals(1000000));
  ASSERT_TRUE(m_window->part<RunLauncher>()->startRun()) << m_window->part<UserMessages>()->lastError().toStdString();
  const QString folder = m_window->part<TrainingController>()->currentFolder();
  ASSERT_TRUE(ui_test::waitFor([&] { return run(0).steps.size() > 30; }));
  EXPECT_TRUE(m_window->close());
  EXPECT_FALSE(m_window->part<TrainingController>()->active());
  const engine::JournalContents j = engine::read_journal(folder.toStdString());
  EXPECT_EQ(j.status, "stopped");
  EXPECT_FALSE(j.interrupted);
  ASSERT_EQ(j.runs.size(), 1u);
  EXPECT_EQ(j.runs[0].status, "stopped");
  EXPECT_EQ(run(0).state, engine::RunState::Stopped);
  ASSERT_EQ(j.exports[0].history.steps.size(), run(0).steps.size());
  EXPECT_EQ(j.runs[0].steps, run(0).steps.back().step);
  expectContiguous(run(0));
}

// (c) Start, stop, pause, step and compare at random moments for about ten
// seconds: no action blocks, and every run's steps are consecutive in the
// store and equal to its folder's.
TEST_F(RobustnessTest, RandomClicksLoseNothingAndNeverDeadlock) {
  makeWindow();
  m_window->part<PrecisionTableController>()->setBaseConfig(spirals(1500));
  std::mt19937 rng(20240305u);
  QElapsedTimer total;
  total.start();
  int actions = 0;
  qint64 slowest = 0;
  while (total.elapsed() < 10000) {
    QElapsedTimer t;
    t.start();
    switch (rng() % 7) {
      case 0: m_window->part<RunLauncher>()->startRun(); break;
      case 1: m_window->part<RunLauncher>()->stopRun(); break;
      case 2: m_window->part<RunLauncher>()->togglePause(); break;
      case 3: m_window->part<RunLauncher>()->startComparison({QStringLiteral("fp32"), QStringLiteral("mixed-fp16")}); break;
      case 4: m_window->part<RunLauncher>()->stepOnce(); break;
      case 5: m_window->part<RunLauncher>()->togglePause(); m_window->part<RunLauncher>()->togglePause(); break;
      default: break;
    }
    slowest = std::max(slowest, t.elapsed());
    ++actions;
    const int pauseMs = static_cast<int>(rng() % 120);
    ui_test::waitFor([] { return false; }, pauseMs);
  }
  // Every action returns within a step's time (a stop joins at most one step).
  EXPECT_LT(slowest, 3000) << "an action blocked";
  if (m_window->part<TrainingController>()->paused()) m_window->part<RunLauncher>()->togglePause();
  m_window->part<RunLauncher>()->stopRun();
  ASSERT_TRUE(waitFinished(20000)) << "the engine did not stop";
  m_window->part<TrainingController>()->shutdown();

  ASSERT_GT(m_window->part<RunStore>()->count(), 3) << actions << " actions started almost nothing";
  std::map<QString, engine::JournalContents> journals;
  for (int id = 0; id < m_window->part<RunStore>()->count(); ++id) {
    const RunData& r = run(id);
    SCOPED_TRACE(r.name.toStdString());
    EXPECT_FALSE(r.live());
    expectContiguous(r);
    ASSERT_FALSE(r.folder.isEmpty());
    if (!journals.count(r.folder)) journals[r.folder] = engine::read_journal(r.folder.toStdString());
    const engine::JournalContents& j = journals[r.folder];
    EXPECT_NE(j.status, "running");
    EXPECT_FALSE(j.interrupted);
    ASSERT_LT(r.folderRun, static_cast<int>(j.exports.size()));
    const engine::RunHistory& h = j.exports[static_cast<std::size_t>(r.folderRun)].history;
    ASSERT_EQ(h.steps.size(), r.steps.size());
    for (std::size_t i = 0; i < r.steps.size(); ++i) {
      ASSERT_EQ(h.steps[i].step, r.steps[i].step);
      ASSERT_EQ(h.steps[i].loss, r.steps[i].loss);
    }
    EXPECT_EQ(h.evals.size(), r.evals.size());
  }
  EXPECT_EQ(m_window->part<HistoryPanel>()->pastRuns().size(), static_cast<int>(journals.size()));
  std::printf("stress: %d actions in %.1f s, %d runs in %d folders, slowest action %lld ms\n", actions,
              total.elapsed() / 1000.0, m_window->part<RunStore>()->count(), static_cast<int>(journals.size()),
              static_cast<long long>(slowest));
}

// A NaN in an fp32 run's gradients: an attributed overflow event, a status
// message, and the run fails with its reason in the runs list and journal.
TEST_F(RobustnessTest, InjectedNaNDivergesAnFp32RunWhichShowsAsFailed) {
  makeWindow();
  m_window->part<PrecisionTableController>()->setBaseConfig(spirals(1000000));
  ASSERT_TRUE(m_window->part<RunLauncher>()->startRun());
  ASSERT_TRUE(ui_test::waitFor([&] { return run(0).steps.size() > 5; }));
  QString layer;
  for (const PrecisionTableRow& row : layerRowsFor(run(0).config))
    if (row.parameters > 0) {
      layer = row.layer;
      break;
    }
  ASSERT_FALSE(layer.isEmpty());
  QStringList messages;
  QObject::connect(m_window->statusBar(), &QStatusBar::messageChanged,
                   [&messages](const QString& m) { messages << m; });
  EXPECT_TRUE(m_window->findChild<QAction*>(QStringLiteral("actionInjectFault"))->isEnabled());
  ASSERT_TRUE(m_window->part<FaultInjector>()->inject(0, engine::FaultTarget::Gradients, layer.toStdString(), false));
  ASSERT_TRUE(ui_test::waitFor([&] { return run(0).state == engine::RunState::Failed; }, 20000));
  ASSERT_TRUE(waitFinished());
  const RunData& r = run(0);
  EXPECT_TRUE(r.message.contains(QStringLiteral("diverged at step"))) << r.message.toStdString();
  bool attributed = false;
  for (const engine::Event& e : r.events)
    attributed = attributed || (e.kind == engine::EventKind::Overflow && e.layer == layer.toStdString() && e.count > 0);
  EXPECT_TRUE(attributed);
  EXPECT_TRUE(m_window->part<RunsList>()->runStatus(0).startsWith(QStringLiteral("failed: diverged at step")))
      << m_window->part<RunsList>()->runStatus(0).toStdString();
  EXPECT_TRUE(m_window->part<UserMessages>()->lastError().contains(QStringLiteral("diverged"))) << m_window->part<UserMessages>()->lastError().toStdString();
  bool told = false;
  for (const QString& m : messages) told = told || (m.contains(QStringLiteral("non-finite")) && m.contains(layer));
  EXPECT_TRUE(told) << messages.join(QStringLiteral(" | ")).toStdString();
  // The history stays inspectable, and the journal says why.
  EXPECT_FALSE(r.steps.empty());
  const engine::JournalContents j = engine::read_journal_status(r.folder.toStdString());
  EXPECT_EQ(j.status, "failed");
  EXPECT_NE(j.runs[0].message.find("diverged"), std::string::npos);
  EXPECT_FALSE(m_window->findChild<QAction*>(QStringLiteral("actionInjectFault"))->isEnabled());
  // Reopened, it is failed with the same reason (copies: the store grows).
  const QString folder = r.folder, reason = r.message;
  ASSERT_TRUE(m_window->part<HistoryController>()->open(folder));
  const RunData& again = run(m_window->part<RunStore>()->count() - 1);
  EXPECT_EQ(again.state, engine::RunState::Failed);
  EXPECT_EQ(again.message, reason);
  EXPECT_TRUE(m_window->part<RunsList>()->runStatus(again.id).startsWith(QStringLiteral("failed: diverged")));
}

// The Run menu's dialog, end to end, on a loss-scaled run: the overflow is
// caught (step skipped, scale halved) and the run trains on.
TEST_F(RobustnessTest, InjectNaNDialogFromTheRunMenu) {
  makeWindow();
  QAction* action = m_window->findChild<QAction*>(QStringLiteral("actionInjectFault"));
  bool inRunMenu = false;
  for (QAction* menu : m_window->menuBar()->actions())
    if (menu->menu() && menu->text().remove(QLatin1Char('&')) == QStringLiteral("Run"))
      inRunMenu = menu->menu()->actions().contains(action);
  EXPECT_TRUE(inRunMenu);
  EXPECT_EQ(action->text(), QStringLiteral("Inject NaN…"));
  EXPECT_FALSE(action->isEnabled());  // nothing is training

  m_window->part<PrecisionTableController>()->setBaseConfig(spirals(1000000, "mixed-fp16"));
  ASSERT_TRUE(m_window->part<RunLauncher>()->startRun());
  ASSERT_TRUE(ui_test::waitFor([&] { return run(0).steps.size() > 5; }));
  ASSERT_TRUE(action->isEnabled());
  const double scaleBefore = run(0).steps.back().loss_scale;

  // The dialog: the run's layers; the loss takes no layer; inject into a
  // layer's weight gradient.
  QString chosen;
  QTimer::singleShot(100, [&chosen] {
    auto* d = qobject_cast<FaultDialog*>(QApplication::activeModalWidget());
    if (!d) return;
    EXPECT_EQ(d->runId(), 0);
    EXPECT_GT(d->layerBox()->count(), 0);
    d->setTarget(engine::FaultTarget::Loss);
    EXPECT_FALSE(d->layerBox()->isEnabled());
    EXPECT_TRUE(d->layer().empty());
    d->setTarget(engine::FaultTarget::Gradients);
    chosen = d->layerBox()->itemText(d->layerBox()->count() - 1);
    EXPECT_TRUE(d->setLayer(chosen));
    d->setInf(true);
    d->accept();
  });
  action->trigger();
  ASSERT_FALSE(chosen.isEmpty()) << "the dialog did not open";
  std::size_t overflowAt = 0;
  ASSERT_TRUE(ui_test::waitFor(
      [&] {
        for (const engine::Event& e : run(0).events)
          if (e.kind == engine::EventKind::Overflow && e.layer == chosen.toStdString()) {
            overflowAt = static_cast<std::size_t>(e.step);
            return true;
          }
        return false;
      },
      20000));
  ASSERT_TRUE(ui_test::waitFor([&] { return run(0).steps.size() > overflowAt + 3; }));
  const engine::StepMetrics& hit = run(0).steps[overflowAt - 1];
  EXPECT_TRUE(hit.overflow);
  EXPECT_TRUE(hit.skipped);
  EXPECT_LT(run(0).steps[overflowAt].loss_scale, scaleBefore);  // backed off
  EXPECT_TRUE(run(0).live());  // caught, not diverged
  m_window->part<RunLauncher>()->stopRun();
  ASSERT_TRUE(waitFinished());
  // The journal has the injection and the event.
  const engine::JournalContents j = engine::read_journal(run(0).folder.toStdString());
  ASSERT_EQ(j.commands.size(), 1u);
  EXPECT_EQ(j.commands[0].change.kind, engine::LiveChange::Kind::InjectFault);
}

}  // namespace
