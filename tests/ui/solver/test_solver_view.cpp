// The Solver tab: its curves and summary rows against the engine's own
// solve of the same case, the κ·u wall, Stop, and a solve that leaves the
// UI thread free (offscreen).
#include <gtest/gtest.h>

#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QLogValueAxis>
#include <QSlider>
#include <QTabWidget>
#include <QTableWidget>
#include <QTimer>

#include <cmath>

#include "lecture/solve_lesson.h"
#include "main_window.h"
#include "session/command_line.h"
#include "solve/matrix.h"
#include "solver/solver_chart.h"
#include "solver/solver_view.h"
#include "ui/ui_test_support.h"

namespace {

SolverJob smallJob(double cond, std::vector<engine::SolveFormat> formats, std::vector<engine::Method> methods) {
  SolverJob j;
  j.n = 64;
  j.cond = cond;
  j.seed = 3;
  j.formats = std::move(formats);
  j.methods = std::move(methods);
  return j;
}

// The engine's own solve of smallJob's system (the view's matrix: n = 64,
// seed 3, b = A x for x of seed 4) with config c.
engine::SolveResult engineSolve(double cond, const engine::RefineConfig& c) {
  engine::Matrix a;
  std::vector<double> x, b;
  engine::build_solve_system({64, cond, 3, 1.0}, a, x, b);
  return engine::solve_refine(a, b, &x, c);
}

bool solveAndWait(SolverView& v, int ms = 120000) {
  bool done = false;
  QObject::connect(&v, &SolverView::solveFinished, &v, [&done] { done = true; }, Qt::SingleShotConnection);
  if (!v.solve()) return false;
  return ui_test::waitFor([&] { return done; }, ms);
}

const SolverChart::Shown* findSeries(const QVector<SolverChart::Shown>& all, const QString& name) {
  for (const auto& s : all)
    if (s.name == name) return &s;
  return nullptr;
}

QString cell(const QTableWidget* t, int row, int column) {
  const QTableWidgetItem* item = t->item(row, column);
  return item ? item->text() : QString();
}

const engine::SolveFormat kFp16 = engine::SolveFormat::of(engine::Format::FP16);
const engine::SolveFormat kFp32 = engine::SolveFormat::of(engine::Format::FP32);

}  // namespace

TEST(SolverView, SliderIsLogarithmicAndShowsKappa) {
  ui_test::ensureApplication();
  SolverView v;
  auto* slider = v.findChild<QSlider*>(QStringLiteral("solverCond"));
  auto* label = v.findChild<QLabel*>(QStringLiteral("solverCondLabel"));
  EXPECT_EQ(slider->minimum(), 0);
  EXPECT_DOUBLE_EQ(SolverView::condForSlider(slider->minimum()), 1.0);
  EXPECT_DOUBLE_EQ(SolverView::condForSlider(slider->maximum()), 1e12);
  for (double k : {1.0, 1e2, 1e4, 1e8, 1e12}) EXPECT_NEAR(SolverView::condForSlider(SolverView::sliderForCond(k)) / k, 1.0, 1e-12);
  slider->setValue(SolverView::sliderForCond(1e8));
  EXPECT_EQ(label->text(), QStringLiteral("κ = 1e+08"));
  EXPECT_EQ(v.job().cond, 1e8);
  slider->setValue(SolverView::sliderForCond(1e2) + 1);  // a quarter decade up
  EXPECT_EQ(label->text(), QStringLiteral("κ = 178"));
}

// n = 64, κ = 1e2, fp16 and fp32 LU-IR: both converge, with the engine's
// own iteration counts and errors for the same matrix and config.
TEST(SolverView, SmallCaseMatchesTheEngine) {
  ui_test::ensureApplication();
  SolverView v;
  v.setJob(smallJob(1e2, {kFp16, kFp32}, {engine::Method::LuIr}));
  const SolverJob job = v.job();
  ASSERT_EQ(job.formats.size(), 2u);  // in the view's order: fp32, then fp16
  ASSERT_TRUE(solveAndWait(v)) << qPrintable(v.statusText());
  ASSERT_EQ(v.outcomes().size(), 2u) << qPrintable(v.statusText());
  QTableWidget* t = v.table();
  ASSERT_EQ(t->rowCount(), 2);

  const std::vector<engine::RefineConfig> configs = runConfigs(job);
  const auto shown = v.chart()->shown();
  for (int row = 0; row < 2; ++row) {
    const engine::SolveResult want = engineSolve(1e2, configs[static_cast<std::size_t>(row)]);
    const QString name = runName(configs[static_cast<std::size_t>(row)]);
    SCOPED_TRACE(name.toStdString());
    EXPECT_EQ(cell(t, row, SolverView::Run), name);
    EXPECT_TRUE(want.converged);
    EXPECT_EQ(cell(t, row, SolverView::Converged), QStringLiteral("yes"));
    EXPECT_EQ(cell(t, row, SolverView::Iterations), QString::number(want.iterations));
    EXPECT_EQ(cell(t, row, SolverView::Backward), QString::number(want.backward_error, 'e', 3));
    EXPECT_EQ(cell(t, row, SolverView::Forward), QString::number(want.forward_error, 'e', 3));
    EXPECT_EQ(cell(t, row, SolverView::Scale), QString::number(want.scale, 'g', 9));
    EXPECT_EQ(cell(t, row, SolverView::Reason), QString::fromStdString(want.reason));
    // The time: the engine's, to three significant digits (a time of its own here).
    const double seconds = cell(t, row, SolverView::Seconds).toDouble();
    const engine::SolveResult& got = v.outcomes()[static_cast<std::size_t>(row)].result;
    EXPECT_EQ(cell(t, row, SolverView::Seconds), QString::number(got.factor_seconds + got.refine_seconds, 'g', 3));
    EXPECT_GT(seconds, 0.0);
    EXPECT_LE(want.backward_error, 1e-15);
    // Its curve: one point per iterate at the engine's backward errors.
    const SolverChart::Shown* s = findSeries(shown, name);
    ASSERT_NE(s, nullptr);
    ASSERT_EQ(s->points.size(), static_cast<qsizetype>(want.history.size()));
    for (qsizetype i = 0; i < s->points.size(); ++i) {
      EXPECT_EQ(s->points[i].x(), want.history[static_cast<std::size_t>(i)].iteration);
      EXPECT_DOUBLE_EQ(s->points[i].y(), std::max(want.history[static_cast<std::size_t>(i)].backward_error, 1e-18));
    }
  }
  EXPECT_EQ(cell(t, 0, SolverView::Run), QStringLiteral("fp32-lu-ir"));
  EXPECT_EQ(cell(t, 1, SolverView::Run), QStringLiteral("fp16-lu-ir"));
  // fp16 needs at least one update; fp32's first solve is close already.
  EXPECT_GE(cell(t, 1, SolverView::Iterations).toInt(), 1);
  // The scale: fp16 is scaled by a power of two, fp32 is not.
  EXPECT_EQ(cell(t, 0, SolverView::Scale), QStringLiteral("1"));
  const double scale16 = cell(t, 1, SolverView::Scale).toDouble();
  EXPECT_EQ(std::exp2(std::round(std::log2(scale16))), scale16);

  // The marks: FP64's unit roundoff and each format's u·κ, flat lines.
  const SolverChart::Shown* u = findSeries(shown, QStringLiteral("FP64 u = 2^-53"));
  ASSERT_NE(u, nullptr);
  for (const QPointF& p : u->points) EXPECT_EQ(p.y(), 0x1p-53);
  const SolverChart::Shown* wall16 = findSeries(shown, QStringLiteral("fp16 u·κ = 4.9e-02"));  // 2^-11 * 100
  ASSERT_NE(wall16, nullptr);
  EXPECT_EQ(wall16->style, Qt::DashLine);
  for (const QPointF& p : wall16->points) EXPECT_DOUBLE_EQ(p.y(), 0x1p-11 * 100);
  ASSERT_NE(findSeries(shown, QStringLiteral("fp32 u·κ = 6.0e-06")), nullptr);  // 2^-24 * 100
  EXPECT_EQ(shown.size(), 5);  // two runs, three marks
  // Every mark and every point within the log axis.
  for (const auto& s : shown)
    for (const QPointF& p : s.points) {
      EXPECT_GE(p.y(), v.chart()->yAxis()->min()) << s.name.toStdString();
      EXPECT_LE(p.y(), v.chart()->yAxis()->max()) << s.name.toStdString();
    }
  EXPECT_TRUE(v.statusText().startsWith(QStringLiteral("2 runs done"))) << qPrintable(v.statusText());
}

// κ = 1e8 is far past fp16's wall (u·κ = 4.9e4): LU-IR says it did not
// converge, as the engine does.
TEST(SolverView, Fp16LuIrDoesNotConvergeAtKappa1e8) {
  ui_test::ensureApplication();
  SolverView v;
  v.setJob(smallJob(1e8, {kFp16}, {engine::Method::LuIr}));
  ASSERT_TRUE(solveAndWait(v)) << qPrintable(v.statusText());
  ASSERT_EQ(v.table()->rowCount(), 1);
  EXPECT_EQ(cell(v.table(), 0, SolverView::Run), QStringLiteral("fp16-lu-ir"));
  EXPECT_EQ(cell(v.table(), 0, SolverView::Converged), QStringLiteral("no"));
  EXPECT_FALSE(v.outcomes().at(0).result.converged);
  EXPECT_FALSE(cell(v.table(), 0, SolverView::Reason).isEmpty());
  EXPECT_GT(cell(v.table(), 0, SolverView::Backward).toDouble(), 1e-15);
  // The wall's line is named with its value even where it lies above the axis.
  ASSERT_NE(findSeries(v.chart()->shown(), QStringLiteral("fp16 u·κ = 4.9e+04")), nullptr);
}

// Tensor Core mode: the LU held in FP32 (the CLI's --storage fp32), named
// as the CLI names it, with the engine's result.
TEST(SolverView, TensorCoreModeIsTheEnginesFp32Storage) {
  ui_test::ensureApplication();
  SolverView v;
  SolverJob j = smallJob(1e4, {kFp16}, {engine::Method::LuIr});
  j.tensorCore = true;
  v.setJob(j);
  EXPECT_TRUE(v.findChild<QCheckBox*>(QStringLiteral("solverTensorCore"))->isChecked());
  const std::vector<engine::RefineConfig> configs = runConfigs(v.job());
  ASSERT_EQ(configs.size(), 1u);
  EXPECT_EQ(configs[0].lu.storage, engine::LuConfig::Storage::FP32);
  ASSERT_TRUE(solveAndWait(v)) << qPrintable(v.statusText());
  ASSERT_EQ(v.table()->rowCount(), 1);
  EXPECT_EQ(cell(v.table(), 0, SolverView::Run), QStringLiteral("fp16-tc-lu-ir"));
  const engine::SolveResult want = engineSolve(1e4, configs[0]);
  EXPECT_EQ(cell(v.table(), 0, SolverView::Converged), want.converged ? QStringLiteral("yes") : QStringLiteral("no"));
  EXPECT_EQ(cell(v.table(), 0, SolverView::Iterations), QString::number(want.iterations));
  EXPECT_EQ(cell(v.table(), 0, SolverView::Backward), QString::number(want.backward_error, 'e', 3));
}

// FP32 inner steps for GMRES-IR (the CLI's --gmres fp32): the engine's
// five-precision GMRES-IR, named with -fp32, its result the engine's.
TEST(SolverView, Fp32GmresIsTheEnginesFivePrecisionGmresIr) {
  ui_test::ensureApplication();
  SolverView v;
  SolverJob j = smallJob(1e2, {kFp16}, {engine::Method::LuIr, engine::Method::GmresIr});
  j.gmres = engine::Arith::FP32;
  v.setJob(j);
  EXPECT_EQ(v.findChild<QComboBox*>(QStringLiteral("solverGmres"))->currentText(), QStringLiteral("fp32"));
  const std::vector<engine::RefineConfig> configs = runConfigs(v.job());
  ASSERT_EQ(configs.size(), 2u);
  EXPECT_EQ(configs[1].gmres, engine::Arith::FP32);
  ASSERT_TRUE(solveAndWait(v)) << qPrintable(v.statusText());
  ASSERT_EQ(v.table()->rowCount(), 2);
  EXPECT_EQ(cell(v.table(), 0, SolverView::Run), QStringLiteral("fp16-lu-ir"));  // LU-IR has no inner solve
  EXPECT_EQ(cell(v.table(), 1, SolverView::Run), QStringLiteral("fp16-gmres-ir-fp32"));
  const engine::SolveResult want = engineSolve(1e2, configs[1]);
  EXPECT_TRUE(want.converged) << want.reason;
  EXPECT_EQ(cell(v.table(), 1, SolverView::Gmres), QString::number(want.gmres_iterations));
  EXPECT_EQ(cell(v.table(), 1, SolverView::Backward), QString::number(want.backward_error, 'e', 3));
}

// No format ticked: nothing starts, and the status line says why.
TEST(SolverView, NothingToSolveSaysSo) {
  ui_test::ensureApplication();
  SolverView v;
  v.setJob(smallJob(1e2, {}, {engine::Method::LuIr}));
  EXPECT_FALSE(v.solve());
  EXPECT_FALSE(v.running());
  EXPECT_EQ(v.statusText(), QStringLiteral("Tick at least one factorization format."));
}

// Stop ends the job before its remaining runs.
TEST(SolverView, StopEndsTheJob) {
  ui_test::ensureApplication();
  SolverView v;
  SolverJob j = smallJob(1e2, {engine::SolveFormat::f64(), kFp32, kFp16}, {engine::Method::LuIr, engine::Method::GmresIr});
  j.n = 512;
  v.setJob(j);
  bool done = false;
  QObject::connect(&v, &SolverView::solveFinished, &v, [&done] { done = true; });
  ASSERT_TRUE(v.solve());
  EXPECT_FALSE(v.solve());  // one job at a time
  v.stop();
  ASSERT_TRUE(ui_test::waitFor([&] { return done; }, 120000));
  EXPECT_LT(v.outcomes().size(), 6u);
  EXPECT_TRUE(v.statusText().startsWith(QStringLiteral("Stopped"))) << qPrintable(v.statusText());
  EXPECT_FALSE(v.running());
}

// An n = 1024 solve takes seconds; the UI thread keeps running its timers
// all the while (a blocked thread would deliver no tick until the end).
TEST(SolverView, SolveRunsOffTheUiThread) {
  ui_test::ensureApplication();
  SolverView v;
  SolverJob j = smallJob(1e2, {kFp16}, {engine::Method::LuIr});
  j.n = 1024;
  v.setJob(j);
  QElapsedTimer clock;
  qint64 last = 0, maxGap = 0;
  int ticksWhileRunning = 0;
  QTimer heartbeat;
  heartbeat.setInterval(10);
  QObject::connect(&heartbeat, &QTimer::timeout, [&] {
    const qint64 now = clock.elapsed();
    maxGap = std::max(maxGap, now - last);
    last = now;
    if (v.running()) ++ticksWhileRunning;
  });
  bool done = false;
  QObject::connect(&v, &SolverView::solveFinished, &v, [&done] { done = true; });
  clock.start();
  heartbeat.start();
  ASSERT_TRUE(v.solve());
  // The event loop alone, as the app runs it (no polling loop of the test's).
  QEventLoop loop;
  QObject::connect(&v, &SolverView::solveFinished, &loop, &QEventLoop::quit);
  QTimer::singleShot(300000, &loop, &QEventLoop::quit);
  if (!done) loop.exec();
  ASSERT_TRUE(done);
  const qint64 took = clock.elapsed();
  ASSERT_EQ(v.outcomes().size(), 1u);
  EXPECT_TRUE(v.outcomes()[0].result.converged);
  // The job took long enough for the test to mean something, and the
  // heartbeat beat all through it: gaps far below the job's length.
  EXPECT_GT(took, 200) << "an n = 1024 solve took " << took << " ms";
  EXPECT_GE(ticksWhileRunning, 10) << took << " ms";
  EXPECT_LT(maxGap, std::max<qint64>(took / 2, 1)) << "the UI thread stalled " << maxGap << " ms of " << took;
  EXPECT_LT(maxGap, 1000) << "the UI thread stalled " << maxGap << " ms of " << took;
}

// The window's Solver tab, and the command line that shoots it.
TEST(SolverView, WindowHasASolverTab) {
  ui_test::ensureApplication();
  MainWindow w;
  auto* tabs = w.findChild<QTabWidget*>(QStringLiteral("centreTabs"));
  int index = -1;
  for (int i = 0; i < tabs->count(); ++i)
    if (tabs->tabText(i) == QStringLiteral("Solver")) index = i;
  ASSERT_GE(index, 0);
  w.showSolver();
  EXPECT_EQ(tabs->currentIndex(), index);
  EXPECT_TRUE(tabs->currentWidget()->isAncestorOf(w.findChild<SolverView*>()));

  LaunchOptions o;
  QString error;
  bool exitNow = false;
  EXPECT_TRUE(parseLaunchOptions({QStringLiteral("precision-lab"), QStringLiteral("--view"), QStringLiteral("solver")},
                                 o, &error, &exitNow))
      << qPrintable(error);
  EXPECT_EQ(o.view, QStringLiteral("solver"));
}
