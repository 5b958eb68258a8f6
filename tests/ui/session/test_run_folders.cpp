// Runs on disk through the app: every run it starts (single, comparison,
// lesson) is journaled into $XDG_DATA_HOME/precision-lab/runs; the History
// tab lists past runs, opens them into the run store with every chart and
// Export, deletes them after asking, and survives folders it cannot read.
#include <gtest/gtest.h>

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QRegularExpression>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QTreeWidget>

#include <memory>

#include "export/exporter.h"
#include "main_window.h"
#include "panels/history_panel.h"
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

class RunFoldersTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ui_test::ensureApplication(); }

  void SetUp() override {
    // Each test its own data folder (XDG_DATA_HOME is read at every call).
    ASSERT_TRUE(m_home.isValid());
    qputenv("XDG_DATA_HOME", m_home.path().toLocal8Bit());
    m_window = makeWindow();
  }
  void TearDown() override {
    m_window.reset();
    qputenv("XDG_DATA_HOME", ui_test::useTemporaryDataHome().toLocal8Bit());
  }

  static std::unique_ptr<MainWindow> makeWindow() {
    auto w = std::make_unique<MainWindow>();
    w->part<UserMessages>()->setQuiet(true);
    w->resize(1400, 900);
    w->show();
    return w;
  }
  QString root() const { return QDir(m_home.path()).filePath(QStringLiteral("precision-lab/runs")); }
  QStringList folders() const { return QDir(root()).entryList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name); }
  bool waitFinished(int ms = 30000) {
    return ui_test::waitFor([this] { return !m_window->part<TrainingController>()->active(); }, ms);
  }
  // One finished single run of `steps` steps; its folder.
  QString trainOne(std::int64_t steps, const std::string& recipe = "fp32") {
    m_window->part<PrecisionTableController>()->setBaseConfig(spirals(steps, recipe));
    EXPECT_TRUE(m_window->part<RunLauncher>()->startRun()) << m_window->part<UserMessages>()->lastError().toStdString();
    EXPECT_TRUE(waitFinished());
    return m_window->part<TrainingController>()->currentFolder();
  }

  QTemporaryDir m_home;
  std::unique_ptr<MainWindow> m_window;
};

TEST_F(RunFoldersTest, SingleRunIsJournaledIntoTheDataFolder) {
  EXPECT_EQ(run_folders::root(), root());
  const QString folder = trainOne(120);
  ASSERT_FALSE(folder.isEmpty());
  EXPECT_EQ(QFileInfo(folder).absolutePath(), QFileInfo(root()).absoluteFilePath());
  EXPECT_TRUE(QRegularExpression(QStringLiteral("^\\d{8}-\\d{6}-run-1$")).match(QFileInfo(folder).fileName()).hasMatch())
      << folder.toStdString();
  const RunData& r = m_window->part<RunStore>()->run(0);
  EXPECT_EQ(r.folder, folder);
  EXPECT_EQ(r.folderRun, 0);
  const engine::JournalContents j = engine::read_journal(folder.toStdString());
  EXPECT_EQ(j.status, "finished");
  ASSERT_EQ(j.runs.size(), 1u);
  EXPECT_EQ(j.runs[0].name, "run 1");
  EXPECT_EQ(j.runs[0].steps, 120);
  ASSERT_EQ(j.exports[0].history.steps.size(), r.steps.size());
  for (std::size_t i = 0; i < r.steps.size(); ++i) {
    EXPECT_EQ(j.exports[0].history.steps[i].step, r.steps[i].step);
    EXPECT_EQ(j.exports[0].history.steps[i].loss, r.steps[i].loss);  // round-trip digits
  }
  // The History tab lists it (refreshed when it started and when it ended).
  ASSERT_EQ(m_window->part<HistoryPanel>()->pastRuns().size(), 1);
  EXPECT_EQ(m_window->part<HistoryPanel>()->pastRuns()[0].status, QStringLiteral("finished"));
}

TEST_F(RunFoldersTest, ComparisonAndLessonAreJournaledAsOneFolderEach) {
  m_window->part<PrecisionTableController>()->setBaseConfig(spirals(60));
  ASSERT_TRUE(m_window->part<RunLauncher>()->startComparison({QStringLiteral("fp32"), QStringLiteral("fp16"), QStringLiteral("mixed-fp16")}));
  ASSERT_TRUE(waitFinished());
  const QString compare = m_window->part<TrainingController>()->currentFolder();
  EXPECT_TRUE(QFileInfo(compare).fileName().endsWith(QStringLiteral("-compare-fp32-fp16-mixed-fp16")))
      << compare.toStdString();
  engine::JournalContents j = engine::read_journal_status(compare.toStdString());
  ASSERT_EQ(j.runs.size(), 3u);
  EXPECT_EQ(j.status, "finished");
  EXPECT_EQ(j.runs[1].config.recipe, "fp16");

  // A lesson: its runs under the preset's name (stopped early: it is long).
  ASSERT_TRUE(m_window->part<LessonController>()->open(QStringLiteral("range-not-precision"))) << m_window->part<UserMessages>()->lastError().toStdString();
  ASSERT_TRUE(m_window->part<RunLauncher>()->startRun()) << m_window->part<UserMessages>()->lastError().toStdString();
  const QString lesson = m_window->part<TrainingController>()->currentFolder();
  ASSERT_NE(lesson, compare);
  EXPECT_TRUE(QFileInfo(lesson).fileName().endsWith(QStringLiteral("-range-not-precision"))) << lesson.toStdString();
  const int first = m_window->part<LessonController>()->runs().front();
  ASSERT_TRUE(ui_test::waitFor([&] { return m_window->part<RunStore>()->run(first).steps.size() > 5; }));
  m_window->part<RunLauncher>()->stopRun();
  ASSERT_TRUE(waitFinished());
  j = engine::read_journal(lesson.toStdString());
  EXPECT_EQ(j.status, "stopped");
  ASSERT_EQ(j.runs.size(), static_cast<std::size_t>(m_window->part<LessonController>()->runs().size()));
  for (int k = 0; k < m_window->part<LessonController>()->runs().size(); ++k)
    EXPECT_EQ(j.exports[k].history.steps.size(), m_window->part<RunStore>()->run(m_window->part<LessonController>()->runs()[k]).steps.size());
  EXPECT_EQ(folders().size(), 2);
}

TEST_F(RunFoldersTest, UnwritableFolderRefusesTheStart) {
  // A file where the data folder should be: nothing can be created there.
  QFile blocker(QDir(m_home.path()).filePath(QStringLiteral("blocker")));
  ASSERT_TRUE(blocker.open(QIODevice::WriteOnly));
  blocker.close();
  m_window->part<TrainingController>()->setJournalRoot(QDir(blocker.fileName()).filePath(QStringLiteral("runs")));
  m_window->part<PrecisionTableController>()->setBaseConfig(spirals(50));
  EXPECT_FALSE(m_window->part<RunLauncher>()->startRun());
  EXPECT_TRUE(m_window->part<UserMessages>()->lastError().contains(QStringLiteral("blocker"))) << m_window->part<UserMessages>()->lastError().toStdString();
  EXPECT_FALSE(m_window->part<UserMessages>()->lastError().contains(QLatin1Char('\n')));
  EXPECT_EQ(m_window->part<RunStore>()->count(), 0);  // nothing started
  EXPECT_FALSE(m_window->part<TrainingController>()->active());
  EXPECT_FALSE(m_window->part<RunLauncher>()->startComparison({QStringLiteral("fp32"), QStringLiteral("fp16")}));
  EXPECT_EQ(m_window->part<RunStore>()->count(), 0);
}

TEST_F(RunFoldersTest, PastRunsAreListedOnStartAndOpenWithEveryChartAndExport) {
  const QString folder = trainOne(150, "mixed-fp16");
  const RunData trained = m_window->part<RunStore>()->run(0);
  m_window.reset();

  // The next start of the app.
  m_window = makeWindow();
  HistoryPanel* history = m_window->part<HistoryPanel>();
  ASSERT_EQ(history->pastRuns().size(), 1);
  const PastRun& p = history->pastRuns()[0];
  EXPECT_EQ(p.dir, QFileInfo(folder).absoluteFilePath());
  EXPECT_EQ(p.label, QStringLiteral("run 1"));
  EXPECT_EQ(p.recipes, QStringList{QStringLiteral("mixed-fp16")});
  EXPECT_EQ(p.status, QStringLiteral("finished"));
  EXPECT_EQ(p.steps, 150);
  EXPECT_TRUE(p.date.isValid());
  QTreeWidgetItem* row = history->tree()->topLevelItem(0);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->text(HistoryPanel::Status), QStringLiteral("finished"));
  EXPECT_EQ(row->text(HistoryPanel::Recipes), QStringLiteral("mixed-fp16"));
  EXPECT_TRUE(row->text(HistoryPanel::Steps).startsWith(QStringLiteral("150")));
  EXPECT_TRUE(history->sizeText().contains(QStringLiteral("1 run folder"))) << history->sizeText().toStdString();
  EXPECT_GT(history->totalBytes(), 0);
  EXPECT_TRUE(m_window->findChild<QTabWidget*>(QStringLiteral("runsTabs"))->tabText(1).startsWith(QStringLiteral("History (1")));

  // Open: the whole history in the store, as trained.
  history->tree()->setCurrentItem(row);
  history->openRow(0);
  ASSERT_EQ(m_window->part<RunStore>()->count(), 1);
  const RunData& r = m_window->part<RunStore>()->run(0);
  EXPECT_TRUE(r.reopened);
  EXPECT_FALSE(r.interrupted);
  EXPECT_EQ(r.state, engine::RunState::Finished);
  EXPECT_EQ(r.recipe, QStringLiteral("mixed-fp16"));
  EXPECT_TRUE(r.name.startsWith(QStringLiteral("run 1 (")));
  ASSERT_EQ(r.steps.size(), trained.steps.size());
  for (std::size_t i = 0; i < r.steps.size(); ++i) ASSERT_EQ(r.steps[i].loss, trained.steps[i].loss);
  EXPECT_EQ(r.evals.size(), trained.evals.size());
  EXPECT_EQ(r.grads.size(), trained.grads.size());
  EXPECT_EQ(m_window->part<RunsList>()->runStatus(0), QStringLiteral("finished"));
  EXPECT_TRUE(r.summary.has_value());
  // The charts draw it; Export writes it.
  m_window->part<ChartArea>();
  QTemporaryDir out;
  ExportRequest request;
  request.dir = out.path();
  request.runs = {0};
  request.csv = true;
  ASSERT_TRUE(m_window->part<ExportController>()->exportTo(request)) << m_window->part<UserMessages>()->lastError().toStdString();
  QFile steps(QDir(out.path()).filePath(QStringLiteral("steps.csv")));
  ASSERT_TRUE(steps.open(QIODevice::ReadOnly));
  EXPECT_EQ(steps.readAll().count('\n'), 151);  // header + 150 rows
}

TEST_F(RunFoldersTest, DeletingAsksFirstAndClearAllEmptiesTheFolder) {
  trainOne(40);
  trainOne(40);
  HistoryPanel* history = m_window->part<HistoryPanel>();
  history->refresh();
  ASSERT_EQ(history->pastRuns().size(), 2);
  int asked = 0;
  bool answer = false;
  history->setConfirm([&](const QString&, const QString& text) {
    ++asked;
    EXPECT_TRUE(text.contains(QStringLiteral("cannot be undone")));
    return answer;
  });
  const QString newest = history->pastRuns()[0].dir;
  EXPECT_FALSE(history->deleteRow(0));  // declined: kept
  EXPECT_EQ(asked, 1);
  EXPECT_TRUE(QFileInfo::exists(newest));
  answer = true;
  EXPECT_TRUE(history->deleteRow(0));
  EXPECT_EQ(asked, 2);
  EXPECT_FALSE(QFileInfo::exists(newest));
  ASSERT_EQ(history->pastRuns().size(), 1);

  const qint64 before = history->totalBytes();
  EXPECT_GT(before, 0);
  answer = false;
  EXPECT_FALSE(history->clearAll());
  EXPECT_EQ(folders().size(), 1);
  answer = true;
  EXPECT_TRUE(history->clearAll());
  EXPECT_EQ(asked, 4);
  EXPECT_TRUE(folders().isEmpty());
  EXPECT_EQ(history->totalBytes(), 0);
  EXPECT_TRUE(history->pastRuns().isEmpty());
}

TEST_F(RunFoldersTest, ARunBeingWrittenIsNotDeleted) {
  m_window->part<PrecisionTableController>()->setBaseConfig(spirals(1000000));
  ASSERT_TRUE(m_window->part<RunLauncher>()->startRun());
  HistoryPanel* history = m_window->part<HistoryPanel>();
  history->refresh();
  ASSERT_EQ(history->pastRuns().size(), 1);
  EXPECT_TRUE(history->pastRuns()[0].beingWritten);
  EXPECT_EQ(history->pastRuns()[0].status, QStringLiteral("running"));
  history->setConfirm([](const QString&, const QString&) { return true; });
  EXPECT_FALSE(history->deleteRow(0));
  EXPECT_TRUE(history->lastError().contains(QStringLiteral("still writing")));
  EXPECT_TRUE(history->clearAll());  // nothing else to clear; the live one is kept
  EXPECT_EQ(folders().size(), 1);
  m_window->part<RunLauncher>()->stopRun();
  ASSERT_TRUE(waitFinished());
  EXPECT_EQ(history->pastRuns()[0].status, QStringLiteral("stopped"));
}

TEST_F(RunFoldersTest, UnreadableFoldersShowTheirLineAndAreSkipped) {
  trainOne(30);
  // A folder with broken JSON, one with a torn CSV row, one without runs.json.
  const QString bad = QDir(root()).filePath(QStringLiteral("20200101-000000-broken"));
  ASSERT_TRUE(QDir().mkpath(bad));
  {
    QFile f(QDir(bad).filePath(QStringLiteral("status.json")));
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write("{\"status\": ");
  }
  const QString noRuns = QDir(root()).filePath(QStringLiteral("20200102-000000-noruns"));
  ASSERT_TRUE(QDir().mkpath(noRuns));
  {
    QFile f(QDir(noRuns).filePath(QStringLiteral("status.json")));
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write("{\"status\": \"finished\"}");
  }
  // A good status but a corrupt steps.csv: lists fine, fails to open.
  const QString good = m_window->part<TrainingController>()->currentFolder();
  const QString corrupt = QDir(root()).filePath(QStringLiteral("20200103-000000-corrupt"));
  ASSERT_TRUE(QDir().mkpath(corrupt));
  for (const QString& name : QDir(good).entryList(QDir::Files))
    ASSERT_TRUE(QFile::copy(QDir(good).filePath(name), QDir(corrupt).filePath(name)));
  {
    QFile f(QDir(corrupt).filePath(QStringLiteral("steps.csv")));
    ASSERT_TRUE(f.open(QIODevice::Append));
    f.write("0,fp32,run 1,not-a-number,x,y\n");
  }
  // Not a run folder at all: not listed.
  ASSERT_TRUE(QDir().mkpath(QDir(root()).filePath(QStringLiteral("somewhere-else"))));

  HistoryPanel* history = m_window->part<HistoryPanel>();
  history->refresh();
  ASSERT_EQ(history->pastRuns().size(), 4);
  int unreadable = 0;
  for (int i = 0; i < history->pastRuns().size(); ++i) {
    const PastRun& p = history->pastRuns()[i];
    if (p.error.isEmpty()) continue;
    ++unreadable;
    EXPECT_FALSE(p.error.contains(QLatin1Char('\n')));
    EXPECT_TRUE(p.error.contains(QStringLiteral(".json"))) << p.error.toStdString();  // names the file
    EXPECT_TRUE(history->tree()->topLevelItem(i)->text(HistoryPanel::Name).contains(p.error));
    history->openRow(i);  // says so; opens nothing
    EXPECT_EQ(history->lastError(), p.error);
  }
  EXPECT_EQ(unreadable, 2);
  EXPECT_EQ(m_window->part<RunStore>()->count(), 1);

  const int before = m_window->part<RunStore>()->count();
  EXPECT_FALSE(m_window->part<HistoryController>()->open(corrupt));
  EXPECT_TRUE(m_window->part<UserMessages>()->lastError().contains(QStringLiteral("steps.csv"))) << m_window->part<UserMessages>()->lastError().toStdString();
  EXPECT_FALSE(m_window->part<UserMessages>()->lastError().contains(QLatin1Char('\n')));
  EXPECT_EQ(m_window->part<RunStore>()->count(), before);  // nothing half-added
  EXPECT_FALSE(m_window->part<HistoryController>()->open(QDir(root()).filePath(QStringLiteral("does-not-exist"))));
  // The good one still opens.
  EXPECT_TRUE(m_window->part<HistoryController>()->open(good)) << m_window->part<UserMessages>()->lastError().toStdString();
  EXPECT_EQ(m_window->part<RunStore>()->count(), before + 1);
}

TEST(RunFolders, NamesAreSafeAndUnique) {
  EXPECT_EQ(run_folders::safeName(QStringLiteral("run 1")), QStringLiteral("run-1"));
  EXPECT_EQ(run_folders::safeName(QStringLiteral("../../etc/passwd")), QStringLiteral("etc-passwd"));
  EXPECT_EQ(run_folders::safeName(QStringLiteral("  ")), QStringLiteral("run"));
  EXPECT_EQ(run_folders::safeName(QStringLiteral("compare-fp32+fp16")), QStringLiteral("compare-fp32-fp16"));
  QTemporaryDir dir;
  const QDateTime when = QDateTime::fromString(QStringLiteral("20240305-140211"), QStringLiteral("yyyyMMdd-HHmmss"));
  const QString a = run_folders::newFolder(dir.path(), QStringLiteral("run 1"), when);
  EXPECT_EQ(QFileInfo(a).fileName(), QStringLiteral("20240305-140211-run-1"));
  ASSERT_TRUE(QDir().mkpath(a));
  EXPECT_EQ(QFileInfo(run_folders::newFolder(dir.path(), QStringLiteral("run 1"), when)).fileName(),
            QStringLiteral("20240305-140211-run-1-2"));
}

}  // namespace
