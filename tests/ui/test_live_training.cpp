// Live training through the window: the engine's thread trains, the UI
// drains it at 30 Hz into the run store and the charts. Short spirals runs
// (a few hundred steps, well under a second each) keep the suite fast.
#include <gtest/gtest.h>

#include <QAbstractItemModel>
#include <QAction>
#include <QApplication>
#include <QDoubleSpinBox>
#include <QAreaSeries>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QLabel>
#include <QLineSeries>
#include <QScatterSeries>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>
#include <QTimer>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>

#include "charts/chart_area.h"
#include "session/command_line.h"
#include "compare/compare_view.h"
#include "session/dataset_cache.h"
#include "data/dataset.h"
#include "charts/decimate.h"
#include "export/exporter.h"
#include "charts/gradient_panel.h"
#include "session/latency_probe.h"
#include "charts/live_chart_view.h"
#include "main_window.h"
#include "panels/precision_table.h"
#include "panels/precision_table_model.h"
#include "report/csv.h"
#include "session/run_store.h"
#include "panels/runs_list.h"
#include "panels/setup_panel.h"
#include "session/training_controller.h"
#include "ui/ui_test_support.h"
#include "ui/window_parts.h"
#include "charts/step_markers.h"
#include "session/change_markers.h"

namespace {

using ui_test::waitFor;

engine::RunConfig spirals(std::int64_t steps) {
  engine::RunConfig c;
  c.dataset = "spirals";
  c.model = "mlp";
  c.recipe = "fp32";
  c.steps = steps;
  c.batch = 64;
  c.lr = 0.05;
  c.seed = 7;
  c.threads = 1;
  c.stats_every = 50;
  return c;
}

// One QApplication for the whole program, runnable without a display.
void ensureApplication() {
  ui_test::useTemporaryDataHome();  // runs journal there, not in the real home
  if (QApplication::instance()) return;
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  static int argc = 1;
  static char arg0[] = "test_live_training";
  static char* argv[] = {arg0, nullptr};
  new QApplication(argc, argv);
}

class LiveTrainingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ensureApplication(); }

  void SetUp() override {
    m_window = std::make_unique<MainWindow>();
    m_window->part<UserMessages>()->setQuiet(true);
    m_window->resize(1400, 900);
    m_window->show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(m_window.get()));
  }

  void TearDown() override { m_window.reset(); }

  RunStore& store() { return *m_window->part<RunStore>(); }
  TrainingController& controller() { return *m_window->part<TrainingController>(); }
  bool waitFinished(int ms = 30000) {
    return waitFor([this] { return !controller().active(); }, ms);
  }
  std::int64_t stepsOf(int id) {
    const RunData& r = store().run(id);
    return r.steps.empty() ? 0 : r.steps.back().step;
  }

  std::unique_ptr<MainWindow> m_window;
};

// The history is complete and contiguous: steps 1..N, none dropped.
void expectContiguous(const RunData& r) {
  for (std::size_t i = 0; i < r.steps.size(); ++i) ASSERT_EQ(r.steps[i].step, static_cast<std::int64_t>(i) + 1);
}

TEST_F(LiveTrainingTest, ShortRunPutsPointsOnEveryChart) {
  m_window->part<PrecisionTableController>()->setBaseConfig(spirals(300));
  ASSERT_TRUE(m_window->part<RunLauncher>()->startRun()) << m_window->part<UserMessages>()->lastError().toStdString();
  ASSERT_TRUE(waitFinished());
  ASSERT_EQ(store().count(), 1);
  const RunData& r = store().run(0);
  EXPECT_EQ(r.state, engine::RunState::Finished);
  ASSERT_EQ(r.steps.size(), 300u);  // the full history is in the model
  expectContiguous(r);
  EXPECT_FALSE(r.evals.empty());
  EXPECT_TRUE(r.summary.has_value());

  ChartArea* charts = m_window->part<ChartArea>();
  auto* loss = charts->runSeries(ChartArea::Loss, 0);
  ASSERT_NE(loss, nullptr);
  EXPECT_GT(loss->count(), 50);
  // Every point is a real (step, loss) of the run.
  for (const QPointF& p : loss->points()) {
    const auto step = static_cast<std::size_t>(p.x());
    ASSERT_GE(step, 1u);
    ASSERT_LE(step, 300u);
    EXPECT_EQ(p.y(), r.steps[step - 1].loss);
  }
  EXPECT_EQ(charts->runSeries(ChartArea::Loss, 0, ChartArea::Secondary)->count(),
            static_cast<int>(r.evals.size()));
  EXPECT_GT(charts->runSeries(ChartArea::LossScale, 0)->count(), 0);
  EXPECT_GT(charts->runSeries(ChartArea::Accuracy, 0)->count(), 0);       // validation
  EXPECT_GT(charts->runSeries(ChartArea::Accuracy, 0, ChartArea::Secondary)->count(), 0);  // train batch
  // Memory: the six category bands of the run, stacked (each upper >= the one below).
  for (int c = 0; c < 6; ++c) ASSERT_GT(charts->memoryArea(c)->upperSeries()->count(), 0) << c;
  const QList<QPointF> weights = charts->memoryArea(0)->upperSeries()->points();
  const QList<QPointF> top = charts->memoryArea(5)->upperSeries()->points();
  ASSERT_EQ(weights.size(), top.size());
  EXPECT_NEAR(top.back().y(), r.steps[static_cast<std::size_t>(top.back().x()) - 1].mem.total() / 1048576.0, 1e-9);
  EXPECT_GE(top.back().y(), weights.back().y());
  // The x axis covers the run.
  EXPECT_GE(charts->xAxis(ChartArea::Loss)->max(), 300);
  // Gradient histogram of the first layer with its format's range.
  GradientPanel* grads = charts->gradientPanel();
  EXPECT_EQ(grads->layer(), QStringLiteral("fc1"));
  ASSERT_NE(grads->histogram(0), nullptr);
  EXPECT_GT(grads->histogram(0)->count(), 2);
  EXPECT_EQ(grads->range().format, QStringLiteral("FP32"));
  EXPECT_DOUBLE_EQ(grads->range().minSubnormal, -149.0);
  EXPECT_TRUE(grads->fractionsLabel()->text().contains(QStringLiteral("flush to zero")));
  // Start to first point was measured; the runs list says finished.
  EXPECT_GE(m_window->part<RunLauncher>()->firstPointMs(), 0);
  EXPECT_EQ(m_window->part<RunsList>()->runStatus(0), QStringLiteral("finished"));
  // Hovering the loss chart shows the run's value at that step.
  auto* view = static_cast<LiveChartView*>(charts->view(ChartArea::Loss));
  const QString tip = view->showValueAt(QPointF(100, 0.5));
  EXPECT_TRUE(tip.contains(QStringLiteral("step 100"))) << tip.toStdString();
  EXPECT_TRUE(tip.contains(QString::number(r.steps[99].loss, 'g', 5))) << tip.toStdString();
}

TEST_F(LiveTrainingTest, PauseResumeStepAndStop) {
  m_window->part<PrecisionTableController>()->setBaseConfig(spirals(1'000'000));
  ASSERT_TRUE(m_window->part<RunLauncher>()->startRun());
  ASSERT_TRUE(waitFor([this] { return stepsOf(0) > 5; }));

  m_window->part<RunLauncher>()->togglePause();
  ASSERT_TRUE(waitFor([this] { return store().run(0).state == engine::RunState::Paused; }));
  QTest::qWait(150);
  const std::int64_t pausedAt = stepsOf(0);
  QTest::qWait(250);
  EXPECT_EQ(stepsOf(0), pausedAt) << "a paused run took steps";

  m_window->part<RunLauncher>()->stepOnce();
  ASSERT_TRUE(waitFor([&] { return stepsOf(0) == pausedAt + 1; }, 5000));
  QTest::qWait(200);
  EXPECT_EQ(stepsOf(0), pausedAt + 1) << "Step took more than one step";

  m_window->part<RunLauncher>()->togglePause();  // resume
  ASSERT_TRUE(waitFor([&] { return stepsOf(0) > pausedAt + 20; }, 10000));

  QElapsedTimer t;
  t.start();
  m_window->part<RunLauncher>()->stopRun();
  ASSERT_TRUE(waitFinished(5000));
  EXPECT_LT(t.elapsed(), 2000) << "stop is not prompt";
  const RunData& r = store().run(0);
  EXPECT_EQ(r.state, engine::RunState::Stopped);
  expectContiguous(r);
  ASSERT_TRUE(r.summary.has_value());
  EXPECT_EQ(r.summary->steps, stepsOf(0));  // every step the engine took is in the model
}

TEST_F(LiveTrainingTest, StepWithoutARunStartsOnePausedAfterOneStep) {
  m_window->part<PrecisionTableController>()->setBaseConfig(spirals(1000));
  m_window->part<RunLauncher>()->stepOnce();
  ASSERT_EQ(store().count(), 1);
  ASSERT_TRUE(waitFor([this] { return stepsOf(0) == 1; }));
  QTest::qWait(200);
  EXPECT_EQ(stepsOf(0), 1);
  EXPECT_TRUE(controller().paused());
  m_window->part<RunLauncher>()->stopRun();
  ASSERT_TRUE(waitFinished());
}

TEST_F(LiveTrainingTest, PrecisionChangeMidRunReachesTheEngine) {
  m_window->part<PrecisionTableController>()->setBaseConfig(spirals(1'000'000));
  ASSERT_TRUE(m_window->part<RunLauncher>()->startRun());
  ASSERT_TRUE(waitFor([this] { return stepsOf(0) > 3; }));

  PrecisionTableModel* table = m_window->part<PrecisionTable>()->precisionModel();
  const int row = table->rowOf(QStringLiteral("fc2"));
  ASSERT_GE(row, 0);
  ASSERT_TRUE(table->setData(table->index(row, PrecisionTableModel::Compute), QStringLiteral("FP16")));
  // At the edit the status line says whose change it is (the engine's
  // notice of the step replaces it once the change is applied).
  const QString said = m_window->statusBar()->currentMessage();
  EXPECT_TRUE(said.contains(QStringLiteral("this run only"))) << said.toStdString();
  EXPECT_TRUE(said.contains(QStringLiteral("the next run keeps"))) << said.toStdString();
  auto changeEvent = [this]() -> const engine::Event* {
    for (const engine::Event& e : store().run(0).events)
      if (e.kind == engine::EventKind::PrecisionChange) return &e;
    return nullptr;
  };
  ASSERT_TRUE(waitFor([&] { return changeEvent() != nullptr; }, 5000));
  const engine::Event* e = changeEvent();
  EXPECT_EQ(e->layer, "fc2");
  EXPECT_EQ(e->precision.compute, engine::Format::FP16);  // typed: no string to split
  const std::int64_t changedAt = e->step;  // (the events vector grows: no pointer kept)
  // The edit is the live run's: the setup panel still describes the next
  // run as it was (it used to turn 'custom' without a word), and says so.
  EXPECT_EQ(m_window->part<SetupPanel>()->settings().recipe, QStringLiteral("fp32"));
  {
    const engine::RunConfig next = m_window->part<PrecisionTableController>()->nextRunConfig();
    EXPECT_EQ(next.recipe, "fp32");
    EXPECT_EQ(next.layers.count("fc2"), 0u);
  }
  // Every chart over steps marks the step from which the change applied
  // (the first step after the one the engine's event names).
  ChartArea* charts = m_window->part<ChartArea>();
  ChangeMarkers* markers = m_window->findChild<ChangeMarkers*>();
  ASSERT_NE(markers, nullptr);
  ASSERT_TRUE(waitFor([&] { return stepsOf(0) > changedAt + 3; }, 5000));
  ui_test::settle();
  int marked = 0;
  for (int m = 0; m < charts->chartCount(); ++m) {
    StepMarkers* s = markers->markersOf(m);
    if (!s) continue;
    ASSERT_EQ(s->markers().size(), 1) << charts->title(m).toStdString();
    EXPECT_EQ(s->markers()[0].step, static_cast<double>(changedAt + 1)) << charts->title(m).toStdString();
    EXPECT_TRUE(s->markers()[0].text.contains(QStringLiteral("fc2"))) << s->markers()[0].text.toStdString();
    EXPECT_TRUE(s->markers()[0].text.contains(QStringLiteral("FP16"))) << s->markers()[0].text.toStdString();
    ++marked;
  }
  EXPECT_GE(marked, 4) << "loss, loss scale, memory and accuracy are over steps";
  // The run keeps training after the change.
  const std::int64_t at = stepsOf(0);
  ASSERT_TRUE(waitFor([&] { return stepsOf(0) > at + 5; }, 5000));
  m_window->part<RunLauncher>()->stopRun();
  ASSERT_TRUE(waitFinished());
  // After the run the table describes the next run again: fp32 throughout.
  PrecisionTableModel* after = m_window->part<PrecisionTable>()->precisionModel();
  EXPECT_EQ(after->rows()[after->rowOf(QStringLiteral("fc2"))].precision.compute, engine::Format::FP32);
}

// With no run training, editing the table describes the next run: its
// recipe becomes 'custom' and its config carries the edited table.
TEST_F(LiveTrainingTest, PrecisionEditWithoutARunMakesTheNextRunCustom) {
  m_window->part<PrecisionTableController>()->setBaseConfig(spirals(100));
  PrecisionTableModel* table = m_window->part<PrecisionTable>()->precisionModel();
  const int row = table->rowOf(QStringLiteral("fc2"));
  ASSERT_GE(row, 0);
  ASSERT_TRUE(table->setData(table->index(row, PrecisionTableModel::Compute), QStringLiteral("FP16")));
  EXPECT_EQ(m_window->part<SetupPanel>()->settings().recipe, QStringLiteral("custom"));
  const engine::RunConfig next = m_window->part<PrecisionTableController>()->nextRunConfig();
  ASSERT_EQ(next.layers.count("fc2"), 1u);
  EXPECT_EQ(next.layers.at("fc2").compute, engine::Format::FP16);
}

// Loss scaling changed in the setup panel mid-run reaches the live run as a
// LiveChange::LossScaler, taking effect at its next step: dynamic 2^16 ->
// static 2^10 (a new mode resets the scale to the new initial one).
TEST_F(LiveTrainingTest, LossScalerChangeMidRunReachesTheEngine) {
  engine::RunConfig c = spirals(1'000'000);
  c.recipe = "mixed-fp16";
  m_window->part<PrecisionTableController>()->setBaseConfig(c);
  ASSERT_TRUE(m_window->part<RunLauncher>()->startRun());
  ASSERT_TRUE(waitFor([this] { return stepsOf(0) > 3; }));
  m_window->part<RunLauncher>()->togglePause();
  ASSERT_TRUE(waitFor([this] { return store().run(0).state == engine::RunState::Paused; }));
  controller().drainNow();
  const std::int64_t pausedAt = stepsOf(0);

  auto* init = m_window->findChild<QDoubleSpinBox*>(QStringLiteral("initialScaleSpin"));
  auto* mode = m_window->findChild<QComboBox*>(QStringLiteral("lossScaleModeCombo"));
  ASSERT_NE(init, nullptr);
  ASSERT_NE(mode, nullptr);
  init->setValue(1024.0);
  mode->setCurrentText(QStringLiteral("static"));
  EXPECT_TRUE(m_window->statusBar()->currentMessage().contains(QStringLiteral("loss scaling static from 2^10")))
      << m_window->statusBar()->currentMessage().toStdString();

  // Paused: nothing changed yet; the next step takes the new scaler.
  m_window->part<RunLauncher>()->stepOnce();
  ASSERT_TRUE(waitFor([&] { return stepsOf(0) == pausedAt + 1; }, 5000));
  EXPECT_EQ(store().run(0).steps.back().loss_scale, 1024.0);
  m_window->part<RunLauncher>()->togglePause();  // resume: static, so it stays
  ASSERT_TRUE(waitFor([&] { return stepsOf(0) > pausedAt + 20; }, 10000));
  for (std::size_t i = static_cast<std::size_t>(pausedAt); i < store().run(0).steps.size(); ++i)
    ASSERT_EQ(store().run(0).steps[i].loss_scale, 1024.0) << "step " << i + 1;
  m_window->part<RunLauncher>()->stopRun();
  ASSERT_TRUE(waitFinished());
  // Without a live run the panel only sets up the next run: nothing is sent.
  init->setValue(2048.0);
  EXPECT_TRUE(m_window->part<UserMessages>()->lastError().isEmpty())
      << m_window->part<UserMessages>()->lastError().toStdString();
  EXPECT_EQ(m_window->part<PrecisionTableController>()->nextRunConfig().loss_scale.init_scale, 2048.0);
}

TEST_F(LiveTrainingTest, CompareRunsEachRecipeOnTheSameSeed) {
  m_window->part<PrecisionTableController>()->setBaseConfig(spirals(40));
  // fp32 twice: identical recipes must give identical losses (same weights, same batches).
  ASSERT_TRUE(m_window->part<RunLauncher>()->startComparison({"fp32", "fp32", "mixed-fp16"}));
  // While it runs, the precision table shows the selected run (the last
  // added, mixed-fp16): edits go to that run.
  PrecisionTableModel* table = m_window->part<PrecisionTable>()->precisionModel();
  ASSERT_GE(table->rowOf(QStringLiteral("fc1")), 0);
  EXPECT_EQ(table->rows()[table->rowOf(QStringLiteral("fc1"))].precision.compute, engine::Format::FP16);
  ASSERT_TRUE(waitFinished());
  const QVector<int> group = store().group(store().lastCompareGroup());
  ASSERT_EQ(group.size(), 3);
  for (int id : group) {
    const RunData& r = store().run(id);
    EXPECT_EQ(r.config.seed, 7u);
    EXPECT_EQ(r.state, engine::RunState::Finished) << r.message.toStdString();
    ASSERT_EQ(r.steps.size(), 40u);
  }
  const RunData& a = store().run(group[0]);
  const RunData& b = store().run(group[1]);
  const RunData& mixed = store().run(group[2]);
  EXPECT_EQ(a.recipe, QStringLiteral("fp32"));
  EXPECT_EQ(mixed.recipe, QStringLiteral("mixed-fp16"));
  for (std::size_t i = 0; i < a.steps.size(); ++i) ASSERT_EQ(a.steps[i].loss, b.steps[i].loss) << "step " << i + 1;
  // Same initial weights and first batch: the first mixed loss differs from
  // FP32 by FP16 rounding only.
  EXPECT_NEAR(mixed.steps[0].loss, a.steps[0].loss, 5e-3);
  EXPECT_EQ(mixed.steps[0].loss_scale, 65536.0);

  // Overlaid on the Live charts, and on the Compare tab.
  for (int id : group) EXPECT_GT(m_window->part<ChartArea>()->runSeries(ChartArea::Loss, id)->count(), 0);
  CompareView* cv = m_window->part<CompareView>();
  cv->refresh();
  ASSERT_EQ(cv->smallCharts().size(), 3);
  for (int id : group) EXPECT_GT(cv->smallLoss(id)->count(), 0);
  QTableWidget* t = cv->summaryTable();
  ASSERT_EQ(t->rowCount(), 3);
  EXPECT_EQ(t->item(0, CompareView::AccuracyDiff)->text(), QStringLiteral("reference"));
  // fp16 on spirals equals fp32 to the last bit: the same training loss.
  EXPECT_EQ(t->item(1, CompareView::TrainLossMean)->text(), t->item(0, CompareView::TrainLossMean)->text());
  EXPECT_EQ(t->item(0, CompareView::Recipe)->text(), QStringLiteral("fp32"));
}

TEST_F(LiveTrainingTest, SummaryFlagsAccuracyGapsAboveHalfAPoint) {
  // Two finished runs put in the store directly: FP32 at 90.0%, FP16 at 89.2%.
  RunStore& s = store();
  const int group = s.newCompareGroup();
  const QVector<int> ids = {s.addRun("a", "fp32", Qt::blue, spirals(1), group),
                            s.addRun("b", "fp16", Qt::red, spirals(1), group),
                            s.addRun("c", "mixed-fp16", Qt::green, spirals(1), group)};
  const double acc[] = {0.900, 0.892, 0.897};
  for (int k = 0; k < 3; ++k) {
    std::vector<engine::Record> records;
    engine::StepMetrics m;
    m.run_id = k;
    m.step = 1;
    m.loss = 0.3;
    records.emplace_back(m);
    records.emplace_back(engine::EvalMetrics{k, 1, 0, 0.3, acc[k]});
    s.append(records, ids);
  }
  CompareView* cv = m_window->part<CompareView>();
  cv->setGroup(group);
  cv->refresh();
  QTableWidget* t = cv->summaryTable();
  ASSERT_EQ(t->rowCount(), 3);
  EXPECT_EQ(t->item(1, CompareView::AccuracyDiff)->text(), QStringLiteral("-0.80"));
  EXPECT_TRUE(t->item(1, CompareView::AccuracyDiff)->data(Qt::UserRole).toBool());
  EXPECT_EQ(t->item(2, CompareView::AccuracyDiff)->text(), QStringLiteral("-0.30"));
  EXPECT_FALSE(t->item(2, CompareView::AccuracyDiff)->data(Qt::UserRole).toBool());
  EXPECT_EQ(t->item(0, CompareView::ValAccuracy)->text(), QStringLiteral("90.00"));
}

TEST_F(LiveTrainingTest, ExportWritesCsvThatReadsBackEqual) {
  m_window->part<PrecisionTableController>()->setBaseConfig(spirals(60));
  ASSERT_TRUE(m_window->part<RunLauncher>()->startRun());
  ASSERT_TRUE(waitFinished());
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  ExportRequest request;
  request.dir = dir.filePath(QStringLiteral("out"));
  request.runs = {0};
  request.charts = m_window->part<ExportController>()->allCharts();
  ASSERT_TRUE(m_window->part<ExportController>()->exportTo(request)) << m_window->part<UserMessages>()->lastError().toStdString();

  const RunData& r = store().run(0);
  const engine::CsvTable steps = engine::read_csv(QDir(request.dir).filePath("steps.csv").toStdString());
  ASSERT_EQ(steps.rows.size(), r.steps.size());
  const int cStep = steps.column("step"), cLoss = steps.column("loss"), cScale = steps.column("loss_scale");
  const int cNorm = steps.column("grad_norm"), cMem = steps.column("mem_total"), cRecipe = steps.column("recipe");
  ASSERT_GE(cStep, 0);
  ASSERT_GE(cLoss, 0);
  for (std::size_t i = 0; i < r.steps.size(); ++i) {
    const auto& row = steps.rows[i];
    EXPECT_EQ(std::stoll(row[static_cast<std::size_t>(cStep)]), r.steps[i].step);
    EXPECT_EQ(std::stod(row[static_cast<std::size_t>(cLoss)]), r.steps[i].loss);  // round-trips exactly
    EXPECT_EQ(std::stod(row[static_cast<std::size_t>(cScale)]), r.steps[i].loss_scale);
    EXPECT_EQ(std::stod(row[static_cast<std::size_t>(cNorm)]), r.steps[i].grad_norm);
    EXPECT_EQ(std::stoll(row[static_cast<std::size_t>(cMem)]), r.steps[i].mem.total());
    EXPECT_EQ(row[static_cast<std::size_t>(cRecipe)], "fp32");
    // The window's "run 1" is run_id 1 in the files (it was 0).
    EXPECT_EQ(row[static_cast<std::size_t>(steps.column("run_id"))], "1");
    EXPECT_EQ(row[static_cast<std::size_t>(steps.column("run"))], "run 1");
  }
  const engine::CsvTable evals = engine::read_csv(QDir(request.dir).filePath("evals.csv").toStdString());
  ASSERT_EQ(evals.rows.size(), r.evals.size());
  const int cAcc = evals.column("val_accuracy");
  for (std::size_t i = 0; i < r.evals.size(); ++i)
    EXPECT_EQ(std::stod(evals.rows[i][static_cast<std::size_t>(cAcc)]), r.evals[i].val_accuracy);
  const engine::CsvTable summary = engine::read_csv(QDir(request.dir).filePath("summary.csv").toStdString());
  ASSERT_EQ(summary.rows.size(), 1u);
  EXPECT_EQ(std::stoll(summary.rows[0][static_cast<std::size_t>(summary.column("steps"))]), 60);
  EXPECT_TRUE(QFile::exists(QDir(request.dir).filePath("config.json")));
  // Gradient statistics: one row per layer and statistics step.
  const engine::CsvTable grads = engine::read_csv(QDir(request.dir).filePath("grads.csv").toStdString());
  ASSERT_EQ(grads.rows.size(), r.grads.size());
  ASSERT_FALSE(r.grads.empty());
  EXPECT_EQ(grads.rows[0][static_cast<std::size_t>(grads.column("layer"))], r.grads[0].layer);
  // Charts: a PNG and an SVG each, named for what they show: the memory
  // stack is run 1's, the histogram one layer's.
  const QString layer = m_window->part<ChartArea>()->gradientPanel()->layer();
  ASSERT_FALSE(layer.isEmpty());
  for (const QString& stem : {QStringLiteral("loss"), QStringLiteral("loss-scale"), QStringLiteral("memory-run-1"),
                              QStringLiteral("accuracy"), QStringLiteral("gradients-") + layer}) {
    QFile png(QDir(request.dir).filePath(stem + ".png"));
    QFile svg(QDir(request.dir).filePath(stem + ".svg"));
    ASSERT_TRUE(png.open(QIODevice::ReadOnly)) << stem.toStdString();
    EXPECT_TRUE(png.read(8).startsWith("\x89PNG")) << stem.toStdString();
    ASSERT_TRUE(svg.open(QIODevice::ReadOnly)) << stem.toStdString();
    const QByteArray text = svg.readAll();
    EXPECT_TRUE(text.contains("<svg")) << stem.toStdString();
    EXPECT_TRUE(text.contains("<path") || text.contains("<polyline")) << stem.toStdString();
  }
}

TEST_F(LiveTrainingTest, BadSettingsAreRefusedWithAMessage) {
  engine::RunConfig c = spirals(10);
  c.model = "cnn";  // a cnn cannot take 2-D points
  m_window->part<PrecisionTableController>()->setBaseConfig(c);
  EXPECT_FALSE(m_window->part<RunLauncher>()->startRun());
  EXPECT_TRUE(m_window->part<UserMessages>()->lastError().contains(QStringLiteral("cnn"))) << m_window->part<UserMessages>()->lastError().toStdString();
  EXPECT_FALSE(m_window->part<UserMessages>()->lastError().contains(QLatin1Char('\n')));
  EXPECT_FALSE(controller().active());
  EXPECT_EQ(store().count(), 0);  // nothing half-started
  // Out-of-range values from a config (keys the panel has no control for)
  // are refused the same way, naming the field.
  c = spirals(10);
  c.momentum = 1.5;
  m_window->part<PrecisionTableController>()->setBaseConfig(c);
  EXPECT_FALSE(m_window->part<RunLauncher>()->startComparison({"fp32", "fp16"}));
  EXPECT_TRUE(m_window->part<UserMessages>()->lastError().contains(QStringLiteral("momentum"))) << m_window->part<UserMessages>()->lastError().toStdString();
  EXPECT_EQ(store().count(), 0);
}

TEST_F(LiveTrainingTest, AFailedRunShowsItsMessage) {
  engine::RunConfig c = spirals(10);
  c.dataset = "/nonexistent/idx-folder";
  m_window->part<PrecisionTableController>()->setBaseConfig(c);
  ASSERT_TRUE(m_window->part<RunLauncher>()->startRun());
  ASSERT_TRUE(waitFinished());
  const RunData& r = store().run(0);
  EXPECT_EQ(r.state, engine::RunState::Failed);
  EXPECT_TRUE(r.message.contains(QStringLiteral("/nonexistent/idx-folder"))) << r.message.toStdString();
  // The status says failed and why (the tooltip has the whole line).
  EXPECT_EQ(m_window->part<RunsList>()->runStatus(0), QStringLiteral("failed: ") + r.message);
  EXPECT_TRUE(m_window->part<UserMessages>()->lastError().contains(r.message));
  // The window is still usable: a good run starts afterwards.
  m_window->part<PrecisionTableController>()->setBaseConfig(spirals(20));
  ASSERT_TRUE(m_window->part<RunLauncher>()->startRun());
  ASSERT_TRUE(waitFinished());
  EXPECT_EQ(store().run(1).state, engine::RunState::Finished);
}

// Today Pause/Stop stayed enabled behind the failure's dialog.
TEST_F(LiveTrainingTest, AFailedRunLeavesTheToolbarRight) {
  engine::RunConfig c = spirals(10);
  c.dataset = "/nonexistent/idx-folder";
  m_window->part<PrecisionTableController>()->setBaseConfig(c);
  auto* start = m_window->findChild<QAction*>(QStringLiteral("actionStart"));
  auto* pause = m_window->findChild<QAction*>(QStringLiteral("actionPause"));
  auto* stop = m_window->findChild<QAction*>(QStringLiteral("actionStop"));
  ASSERT_TRUE(start && pause && stop);
  bool seen = false, startOn = false, pauseOn = true, stopOn = true;
  // At the moment the store says "failed" (the window's handler runs first).
  QObject::connect(&store(), &RunStore::runChanged, m_window.get(), [&](int id) {
    if (seen || store().run(id).state != engine::RunState::Failed) return;
    seen = true;
    startOn = start->isEnabled();
    pauseOn = pause->isEnabled();
    stopOn = stop->isEnabled();
  });
  ASSERT_TRUE(m_window->part<RunLauncher>()->startRun());
  ASSERT_TRUE(waitFor([&] { return seen; }));
  EXPECT_TRUE(startOn);
  EXPECT_FALSE(pauseOn);
  EXPECT_FALSE(stopOn);
  ASSERT_TRUE(waitFinished());
  EXPECT_TRUE(start->isEnabled());
  EXPECT_FALSE(stop->isEnabled());
}

TEST_F(LiveTrainingTest, DivergenceIsAnEventMarkerNotACrash) {
  engine::RunConfig c = spirals(60);
  c.recipe = "fp16";
  c.optimizer = "adam";
  c.lr = 10.0;  // FP16 weights overflow within a few steps
  m_window->part<PrecisionTableController>()->setBaseConfig(c);
  ASSERT_TRUE(m_window->part<RunLauncher>()->startRun());
  ASSERT_TRUE(waitFinished());
  const RunData& r = store().run(0);
  bool nanEvent = false;
  for (const engine::Event& e : r.events) nanEvent = nanEvent || e.kind == engine::EventKind::NanLoss;
  ASSERT_TRUE(nanEvent);
  auto* stars = m_window->part<ChartArea>()->runSeries(ChartArea::Loss, 0, ChartArea::Markers);
  ASSERT_NE(stars, nullptr);
  EXPECT_GT(stars->count(), 0);
  // The markers sit inside the plot (at the top of the loss axis).
  const double top = m_window->part<ChartArea>()->yAxis(ChartArea::Loss)->max();
  for (const QPointF& p : stars->points()) EXPECT_LE(p.y(), top);
}

TEST_F(LiveTrainingTest, ClosingDuringARunStopsPromptlyAndKeepsTheHistory) {
  m_window->part<PrecisionTableController>()->setBaseConfig(spirals(1'000'000));
  ASSERT_TRUE(m_window->part<RunLauncher>()->startRun());
  ASSERT_TRUE(waitFor([this] { return stepsOf(0) > 10; }));
  QElapsedTimer t;
  t.start();
  m_window->close();
  EXPECT_LT(t.elapsed(), 1000);
  EXPECT_FALSE(controller().active());
  const RunData& r = store().run(0);
  EXPECT_EQ(r.state, engine::RunState::Stopped);
  expectContiguous(r);
  ASSERT_TRUE(r.summary.has_value());
  EXPECT_EQ(r.summary->steps, stepsOf(0));
}

TEST(Decimation, KeepsExtremesWithinTheColumnBudget) {
  const std::int64_t n = 100000;
  auto sample = [](std::int64_t i) {
    double y = std::sin(static_cast<double>(i) * 0.01);
    if (i == 54321) y = 9.0;   // a spike
    if (i == 7777) y = -9.0;
    if (i == 99) y = std::nan("");
    return QPointF(static_cast<double>(i + 1), y);
  };
  const QList<QPointF> pts = decimateMinMax(n, sample, 0, static_cast<double>(n), 500);
  EXPECT_LE(pts.size(), 4 * 500);
  EXPECT_GT(pts.size(), 500);
  double lo = 0, hi = 0;
  for (int i = 0; i < pts.size(); ++i) {
    lo = std::min(lo, pts[i].y());
    hi = std::max(hi, pts[i].y());
    ASSERT_TRUE(std::isfinite(pts[i].y()));
    if (i > 0) {
      ASSERT_GT(pts[i].x(), pts[i - 1].x());
    }
  }
  EXPECT_EQ(hi, 9.0);
  EXPECT_EQ(lo, -9.0);
  // Short series pass through unchanged.
  EXPECT_EQ(decimateMinMax(10, sample, 0, 1000, 500).size(), 10);
  EXPECT_EQ(niceCeil(0.71), 1.0);
  EXPECT_EQ(niceCeil(301), 500.0);
  EXPECT_EQ(niceCeil(2.3), 2.5);
}

TEST(Decimation, IncrementalEqualsOneShotWhateverTheBatches) {
  const std::int64_t n = 20000;
  auto sample = [](std::int64_t i) {
    return QPointF(static_cast<double>(i + 1), std::cos(static_cast<double>(i) * 0.003) + (i % 97 == 0 ? 3.0 : 0.0));
  };
  ColumnDecimator inc;
  inc.reset(0, 40000, 300);
  // Fed in uneven frames, as the 30 Hz drain delivers them.
  for (std::int64_t fed = 0; fed < n;) {
    fed = std::min(n, fed + 1 + (fed * 7919) % 1500);
    inc.feed(fed, sample);
  }
  const QList<QPointF> once = decimateMinMax(n, sample, 0, 40000, 300);
  EXPECT_EQ(inc.points(), once);
  EXPECT_EQ(inc.consumed(), n);
}

TEST_F(LiveTrainingTest, LatencyProbeSeesABlockedEventLoop) {
  LatencyProbe probe;
  probe.start();
  QTest::qWait(50);
  QTimer::singleShot(0, [] { QThread::msleep(80); });  // the UI thread busy for 80 ms
  // Long enough after it for a few ticks on a loaded machine (100 ms gave 5).
  QTest::qWait(300);
  probe.stop();
  const LatencyProbe::Stats s = probe.stats();
  EXPECT_GT(s.ticks, 5u);
  EXPECT_GE(s.maxMs, 60.0);
  EXPECT_LT(s.p50Ms, 20.0);
  ASSERT_FALSE(s.worst.empty());
  EXPECT_GE(s.worst.front().cpuMs, 0.0);
}

TEST(DatasetCache, LoadsIdxSetsInTheBackgroundAndSkipsGeneratedOnes) {
  if (!QDir(QStringLiteral("/usr/share/datasets/fashion-mnist")).exists()) GTEST_SKIP() << "no Fashion-MNIST here";
  ensureApplication();
  DatasetCache cache;
  cache.request(QStringLiteral("spirals"));
  QTest::qWait(DatasetCache::kSettleMs + 50);
  EXPECT_FALSE(cache.loading());
  cache.request(QStringLiteral("fashion-mnist"));
  ASSERT_TRUE(waitFor([&] { return cache.get("fashion-mnist") != nullptr; }, 10000));
  const auto data = cache.get("fashion-mnist");
  EXPECT_EQ(data->train.count, 60000u);
  EXPECT_EQ(data->test.count, 10000u);
  EXPECT_EQ(cache.get("spirals"), nullptr);
}

TEST(CommandLine, BadInputGetsOneLineNamingIt) {
  QTemporaryDir dir;
  const QString bad = dir.filePath(QStringLiteral("bad.json"));
  {
    QFile f(bad);
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write(R"({"recipe": "fp16", "lerning_rate": 0.1})");
  }
  LaunchOptions o;
  QString error;
  bool exitNow = false;
  // A bad or missing --config is not fatal to the parse: the window opens
  // and shows the one line (configError) in a dialog.
  ASSERT_TRUE(parseLaunchOptions({"precision-lab", "--config", bad}, o, &error, &exitNow));
  error = o.configError;
  EXPECT_TRUE(error.contains(QStringLiteral("bad.json"))) << error.toStdString();
  EXPECT_TRUE(error.contains(QStringLiteral("lerning_rate"))) << error.toStdString();
  EXPECT_FALSE(error.contains(QLatin1Char('\n')));

  ASSERT_TRUE(parseLaunchOptions({"precision-lab", "--config", dir.filePath("missing.json")}, o, &error, &exitNow));
  EXPECT_TRUE(o.configError.contains(QStringLiteral("missing.json"))) << o.configError.toStdString();
  EXPECT_FALSE(parseLaunchOptions({"precision-lab", "--recipe", "fp12"}, o, &error, &exitNow));
  EXPECT_TRUE(error.contains(QStringLiteral("fp12"))) << error.toStdString();
  EXPECT_FALSE(parseLaunchOptions({"precision-lab", "--compare", "fp32,bogus"}, o, &error, &exitNow));
  EXPECT_TRUE(error.contains(QStringLiteral("bogus"))) << error.toStdString();
  EXPECT_FALSE(parseLaunchOptions({"precision-lab", "--steps", "ten"}, o, &error, &exitNow));
  EXPECT_FALSE(parseLaunchOptions({"precision-lab", "--frobnicate"}, o, &error, &exitNow));

  ASSERT_TRUE(parseLaunchOptions({"precision-lab", "--dataset", "spirals", "--model", "mlp", "--compare",
                                  "fp32,fp16,mixed-fp16", "--steps", "200", "--start", "--screenshot", "/tmp/x.png"},
                                 o, &error, &exitNow))
      << error.toStdString();
  EXPECT_FALSE(exitNow);
  EXPECT_EQ(o.config.dataset, "spirals");
  EXPECT_EQ(o.config.steps, 200);
  EXPECT_TRUE(o.start);
  EXPECT_EQ(o.compare, (QStringList{"fp32", "fp16", "mixed-fp16"}));
  EXPECT_EQ(o.screenshot, QStringLiteral("/tmp/x.png"));
}

}  // namespace
