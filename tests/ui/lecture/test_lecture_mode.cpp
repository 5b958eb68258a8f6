// ui/lecture in the window: the Lecture menu lists every built-in preset;
// choosing one fills the setup panel, shows the lesson and enlarges its
// charts; Start runs all its runs under their names and the claims are
// checked when they end; a bad preset file is an error with its one line;
// the speed control paces the engine; the presentation view comes and goes
// on one shortcut.
#include <gtest/gtest.h>

#include <QAction>
#include <QApplication>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QDockWidget>
#include <QFile>
#include <QLineSeries>
#include <QMessageBox>
#include <QSpinBox>
#include <QSplitter>
#include <QStatusBar>
#include <QTabBar>
#include <QTabWidget>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTimer>

#include "backend/registry.h"
#include "charts/chart_area.h"
#include "charts/chart_style.h"
#include "lecture/lecture_menu.h"
#include "lecture/lecture_panel.h"
#include "lecture/claims.h"
#include "lecture/preset.h"
#include "lecture/speed_control.h"
#include "main_window.h"
#include "panels/setup_panel.h"
#include "session/run_store.h"
#include "session/training_controller.h"
#include "solver/solver_view.h"
#include "../ui_test_support.h"
#include "../window_parts.h"

namespace {

// A small lesson on spirals (two runs, a claim that holds and one that
// cannot), so the test does not depend on which presets ship.
engine::Preset testLesson() {
  const std::string json = R"({
    "title": "Test lesson",
    "explanation": "Two runs on spirals. Watch the loss and the loss scale.",
    "watch": ["loss", "loss_scale"],
    "dataset": "spirals", "model": "mlp", "steps": 60, "batch": 64, "lr": 0.05, "seed": 3, "threads": 1,
    "runs": [{"name": "base", "recipe": "fp32"}, {"name": "half", "recipe": "mixed-fp16"}],
    "expect": [
      {"metric": "final_loss", "run": "half", "vs": "base", "max": 100},
      {"metric": "skipped_steps", "run": "base", "min": 5}
    ]
  })";
  return engine::parse_preset(json, "test.json", "test-lesson");
}

}  // namespace

TEST(LectureMode, TheMenuListsEveryBuiltInPresetAndChoosingOneSetsTheLessonUp) {
  ui_test::ensureApplication();
  MainWindow w;
  w.part<UserMessages>()->setQuiet(true);
  // The training lessons first, then the solver lessons.
  std::vector<engine::Preset> presets, solvers;
  for (const engine::Preset& p : engine::builtin_presets())
    (p.kind == engine::PresetKind::Train ? presets : solvers).push_back(p);
  ASSERT_FALSE(presets.empty());
  ASSERT_FALSE(solvers.empty()) << "the solver lessons are built in";
  const QList<QAction*> actions = w.part<LectureMenu>()->presetActions();
  ASSERT_EQ(actions.size(), static_cast<int>(presets.size() + solvers.size()));
  for (std::size_t i = 0; i < presets.size() + solvers.size(); ++i) {
    const engine::Preset& p = i < presets.size() ? presets[i] : solvers[i - presets.size()];
    EXPECT_EQ(actions[static_cast<int>(i)]->text(), QString::fromStdString(p.title));
    EXPECT_TRUE(w.part<LectureMenu>()->actions().contains(actions[static_cast<int>(i)]));
  }
  EXPECT_TRUE(w.part<LectureMenu>()->actions().contains(w.part<LectureMenu>()->openFileAction()));
  EXPECT_TRUE(w.part<LectureMenu>()->openFileAction()->text().startsWith(QStringLiteral("Open preset file")));

  for (std::size_t i = 0; i < presets.size(); ++i) {
    const engine::Preset& p = presets[i];
    SCOPED_TRACE(p.name);
    actions[static_cast<int>(i)]->trigger();
    ASSERT_NE(w.part<LessonController>()->lesson(), nullptr);
    EXPECT_EQ(w.part<LessonController>()->lesson()->name, p.name);
    EXPECT_TRUE(actions[static_cast<int>(i)]->isChecked());
    EXPECT_FALSE(w.part<LecturePanel>()->isHidden());
    EXPECT_EQ(w.part<LecturePanel>()->title(), QString::fromStdString(p.title));
    EXPECT_EQ(w.part<LecturePanel>()->explanation(), QString::fromStdString(p.explanation));
    // The setup panel holds the preset's settings.
    const engine::RunConfig& c = p.runs.front().config;
    const SetupSettings s = w.part<SetupPanel>()->settings();
    EXPECT_EQ(s.dataset.toStdString(), c.dataset);
    EXPECT_EQ(s.model.toStdString(), c.model);
    EXPECT_EQ(s.recipe.toStdString(), c.recipe);
    if (c.steps > 0) {
      EXPECT_EQ(s.steps, c.steps);
    }
    EXPECT_EQ(static_cast<std::uint64_t>(s.seed), c.seed);
    // The watched charts are the enlarged ones.
    QVector<ChartArea::Metric> expected;
    for (const std::string& watch : p.watch) {
      const std::string chart = watch.substr(0, watch.find(':'));
      const ChartArea::Metric m = chart == "loss"         ? ChartArea::Loss
                                  : chart == "loss_scale" ? ChartArea::LossScale
                                  : chart == "memory"     ? ChartArea::Memory
                                  : chart == "accuracy"   ? ChartArea::Accuracy
                                                          : ChartArea::Gradients;
      if (!expected.contains(m)) expected << m;
    }
    EXPECT_EQ(w.part<ChartArea>()->watched(), expected);
  }
  // A solver lesson opens the Solver tab with its system, its panel beside
  // the solver; a training lesson after it brings the panel back beside the
  // charts and the solver's own settings back.
  auto* tabs = w.findChild<QTabWidget*>(QStringLiteral("centreTabs"));
  auto* solverTab = w.findChild<QSplitter*>(QStringLiteral("solverTabSplitter"));
  auto* live = w.findChild<QSplitter*>(QStringLiteral("liveSplitter"));
  ASSERT_NE(tabs, nullptr);
  ASSERT_NE(solverTab, nullptr);
  ASSERT_NE(live, nullptr);
  for (std::size_t i = 0; i < solvers.size(); ++i) {
    const engine::Preset& p = solvers[i];
    SCOPED_TRACE(p.name);
    actions[static_cast<int>(presets.size() + i)]->trigger();
    ASSERT_NE(w.part<LessonController>()->lesson(), nullptr);
    EXPECT_EQ(w.part<LessonController>()->lesson()->name, p.name);
    EXPECT_EQ(tabs->currentWidget(), solverTab);
    EXPECT_EQ(w.part<LecturePanel>()->parentWidget(), solverTab);
    EXPECT_FALSE(w.part<LecturePanel>()->isHidden());
    EXPECT_EQ(w.part<LecturePanel>()->title(), QString::fromStdString(p.title));
    const SolverJob job = w.part<SolverView>()->job();
    EXPECT_EQ(job.n, p.problem.n);
    EXPECT_EQ(job.cond, p.problem.cond);
    EXPECT_EQ(job.matrixScale, p.problem.matrix_scale);
    ASSERT_EQ(job.runs.size(), p.solve_runs.size());
    for (std::size_t r = 0; r < job.runs.size(); ++r) EXPECT_EQ(job.runs[r].name, p.solve_runs[r].name);
  }
  actions[0]->trigger();
  EXPECT_EQ(w.part<LecturePanel>()->parentWidget(), live);
  EXPECT_FALSE(w.part<SolverView>()->lessonJobSet());
  EXPECT_TRUE(w.part<SolverView>()->job().runs.empty());
  // Leaving the lesson gives the usual grid back.
  w.part<LessonController>()->leave();
  EXPECT_EQ(w.part<LessonController>()->lesson(), nullptr);
  EXPECT_TRUE(w.part<ChartArea>()->watched().isEmpty());
  EXPECT_TRUE(w.part<LecturePanel>()->isHidden());
}

TEST(LectureMode, WatchedChartsAreLargerThanTheOthers) {
  ui_test::ensureApplication();
  MainWindow w;
  w.resize(1280, 720);
  w.show();
  w.part<LessonController>()->set(testLesson());
  ui_test::settle();
  ui_test::waitFor([&] { return false; }, 200);
  ChartArea* a = w.part<ChartArea>();
  const int watched = a->view(ChartArea::Loss)->height() * a->view(ChartArea::Loss)->width();
  const int other = a->view(ChartArea::Memory)->height() * a->view(ChartArea::Memory)->width();
  EXPECT_GT(watched, other * 3 / 2) << "loss " << a->view(ChartArea::Loss)->size().width() << "x"
                                     << a->view(ChartArea::Loss)->size().height() << ", memory "
                                     << a->view(ChartArea::Memory)->size().width() << "x"
                                     << a->view(ChartArea::Memory)->size().height();
}

TEST(LectureMode, StartRunsAllItsRunsAndTheClaimsAreCheckedWhenTheyEnd) {
  ui_test::ensureApplication();
  MainWindow w;
  w.part<UserMessages>()->setQuiet(true);
  w.part<LessonController>()->set(testLesson());
  bool checked = false;
  QObject::connect(w.part<LessonController>(), &LessonController::checked, [&] { checked = true; });
  ASSERT_TRUE(w.part<RunLauncher>()->startRun()) << w.part<UserMessages>()->lastError().toStdString();
  ASSERT_EQ(w.part<LessonController>()->runs().size(), 2);
  EXPECT_EQ(w.part<RunStore>()->run(w.part<LessonController>()->runs()[0]).name, QStringLiteral("base"));
  EXPECT_EQ(w.part<RunStore>()->run(w.part<LessonController>()->runs()[1]).name, QStringLiteral("half"));
  EXPECT_EQ(w.part<RunStore>()->run(w.part<LessonController>()->runs()[1]).config.recipe, "mixed-fp16");
  EXPECT_TRUE(w.part<LecturePanel>()->claimsText().contains(QStringLiteral("Checked when the runs end")));
  ASSERT_TRUE(ui_test::waitFor([&] { return checked; }, 60000));
  // Side by side: both ran every step.
  for (int id : w.part<LessonController>()->runs()) EXPECT_EQ(w.part<RunStore>()->run(id).steps.size(), 60u);
  const auto& results = w.part<LecturePanel>()->claimResults();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0].pass) << results[0].text;
  EXPECT_FALSE(results[1].pass) << results[1].text;
  const QString text = w.part<LecturePanel>()->claimsText();
  EXPECT_TRUE(text.contains(QStringLiteral("PASS final_loss half / base"))) << text.toStdString();
  EXPECT_TRUE(text.contains(QStringLiteral("FAIL skipped_steps base"))) << text.toStdString();
}

// A solver lesson in the app: Start (the F5 path) solves its runs on the
// Solver tab under the lesson's names, and its claims are checked on what
// the solves gave, the CLI's check (one holds, one cannot). A control
// changed by hand makes Solve the user's own job: its result checks no
// claim, and Start runs the lesson's job again. Step has nothing to do.
TEST(LectureMode, ASolverLessonSolvesItsRunsAndItsClaimsAreChecked) {
  ui_test::ensureApplication();
  MainWindow w;
  w.part<UserMessages>()->setQuiet(true);
  const engine::Preset lesson = engine::parse_preset(R"({
    "kind": "solve", "title": "Test solve", "explanation": "FP32 refines; FP16 GMRES-IR takes updates.",
    "n": 96, "cond": 100, "seed": 2,
    "runs": [{"name": "single", "factor": "fp32"}, {"name": "half-gmres", "factor": "fp16", "method": "gmres-ir"}],
    "expect": [
      {"metric": "converged", "run": "single", "min": 1},
      {"metric": "iterations", "run": "half-gmres", "max": 0}
    ]
  })", "test.json", "test-solve");
  ASSERT_TRUE(w.part<LessonController>()->set(lesson));
  int checks = 0;
  QObject::connect(w.part<LessonController>(), &LessonController::checked, [&] { ++checks; });
  SolverView* solver = w.part<SolverView>();
  EXPECT_FALSE(w.part<LessonController>()->start(true)) << "Step: a solve has no steps";
  ASSERT_TRUE(w.part<RunLauncher>()->startRun()) << w.part<UserMessages>()->lastError().toStdString();
  EXPECT_TRUE(w.part<LecturePanel>()->claimsText().contains(QStringLiteral("Checked when the runs end")));
  ASSERT_TRUE(ui_test::waitFor([&] { return checks == 1; }, 60000));
  ASSERT_EQ(solver->outcomes().size(), 2u);
  ASSERT_EQ(solver->table()->rowCount(), 2);
  EXPECT_EQ(solver->table()->item(0, SolverView::Run)->text(), QStringLiteral("single"));
  EXPECT_EQ(solver->table()->item(1, SolverView::Run)->text(), QStringLiteral("half-gmres"));
  // The claims are the CLI's on the same solves.
  std::vector<engine::SolveRun> runs = lesson.solve_runs;
  for (std::size_t i = 0; i < runs.size(); ++i) runs[i].result = solver->outcomes()[i].result;
  const auto expected = engine::check_claims(lesson, runs);
  const auto& results = w.part<LecturePanel>()->claimResults();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0].pass) << results[0].text;
  EXPECT_FALSE(results[1].pass) << results[1].text;
  EXPECT_EQ(results[0].text, expected[0].text);
  EXPECT_EQ(results[1].text, expected[1].text);
  const QString text = w.part<LecturePanel>()->claimsText();
  EXPECT_TRUE(text.contains(QStringLiteral("PASS converged single"))) << text.toStdString();
  EXPECT_TRUE(text.contains(QStringLiteral("FAIL iterations half-gmres"))) << text.toStdString();
  EXPECT_TRUE(w.statusBar()->currentMessage().contains(QStringLiteral("1 of 2 claims hold")))
      << w.statusBar()->currentMessage().toStdString();

  // By hand: the seed changed, Solve runs the controls' job, no check.
  auto* seed = solver->findChild<QSpinBox*>(QStringLiteral("solverSeed"));
  ASSERT_NE(seed, nullptr);
  seed->setValue(7);
  EXPECT_FALSE(solver->lessonJobSet());
  EXPECT_TRUE(solver->job().runs.empty());
  ASSERT_TRUE(solver->solve());
  ASSERT_TRUE(ui_test::waitFor([&] { return !solver->running(); }, 60000));
  ui_test::settle();
  EXPECT_FALSE(solver->lastJobWasLesson());
  EXPECT_EQ(checks, 1);
  // Start: the lesson's job again, checked again.
  ASSERT_TRUE(w.part<RunLauncher>()->startRun());
  EXPECT_TRUE(solver->lessonJobSet());
  ASSERT_TRUE(ui_test::waitFor([&] { return checks == 2; }, 60000));
  EXPECT_EQ(solver->table()->item(0, SolverView::Run)->text(), QStringLiteral("single"));
}

// The GPU lesson on a machine without one: listed, chosen, its claims shown
// skipped with the reason (not failed), and Start trains nothing (a
// GPU-sized transformer takes minutes a step on a CPU).
TEST(LectureMode, AGpuLessonWithoutAGpuShowsItsClaimsSkippedAndTrainsNothing) {
  for (const engine::BackendAvailability& b : engine::available_backends())
    if (b.name == "cuda" && b.available) GTEST_SKIP() << "a CUDA device is here: the lesson trains";
  ui_test::ensureApplication();
  MainWindow w;
  w.part<UserMessages>()->setQuiet(true);
  bool listed = false;
  for (QAction* a : w.part<LectureMenu>()->presetActions())
    listed = listed || a->data().toString() == QStringLiteral("gpu-mixed-precision-pays");
  EXPECT_TRUE(listed);
  ASSERT_TRUE(w.part<LessonController>()->open(QStringLiteral("gpu-mixed-precision-pays")))
      << w.part<UserMessages>()->lastError().toStdString();
  const auto check = [&] {
    const auto& results = w.part<LecturePanel>()->claimResults();
    ASSERT_EQ(results.size(), 2u);
    for (const engine::ClaimResult& r : results) {
      EXPECT_TRUE(r.skipped) << r.text;
      EXPECT_FALSE(r.pass) << r.text;
      EXPECT_EQ(r.reason.rfind("needs the cuda backend; this machine ran cpu (", 0), 0u) << r.reason;
    }
    const QString text = w.part<LecturePanel>()->claimsText();
    EXPECT_TRUE(text.contains(QStringLiteral("SKIP samples_per_second mixed-bf16 / fp32"))) << text.toStdString();
    EXPECT_TRUE(text.contains(QStringLiteral("SKIP device_memory mixed-bf16 / fp32"))) << text.toStdString();
    EXPECT_TRUE(text.contains(QStringLiteral("needs the cuda backend"))) << text.toStdString();
    EXPECT_FALSE(text.contains(QStringLiteral("FAIL"))) << text.toStdString();
  };
  check();
  const int before = w.part<RunStore>()->count();
  EXPECT_FALSE(w.part<RunLauncher>()->startRun());
  EXPECT_EQ(w.part<RunStore>()->count(), before);
  EXPECT_TRUE(w.part<LessonController>()->runs().isEmpty());
  check();
}

TEST(LectureMode, ABadPresetFileIsAnErrorDialogWithItsOneLine) {
  ui_test::ensureApplication();
  QTemporaryDir dir;
  const QString path = dir.filePath(QStringLiteral("broken.json"));
  QFile f(path);
  ASSERT_TRUE(f.open(QIODevice::WriteOnly));
  f.write(R"({"title": "Broken", "explanation": "x", "recipes": ["fp32"], "expect": [{"metric": "nope", "run": "fp32"}]})");
  f.close();
  MainWindow w;
  w.part<LessonController>()->set(testLesson());
  // The dialog: found and closed while it is open.
  QString dialogText;
  QTimer::singleShot(200, [&] {
    for (QWidget* top : QApplication::topLevelWidgets())
      if (auto* box = qobject_cast<QMessageBox*>(top); box && box->isVisible()) {
        dialogText = box->text();
        box->accept();
      }
  });
  EXPECT_FALSE(w.part<LessonController>()->open(path));
  EXPECT_FALSE(dialogText.isEmpty());
  EXPECT_FALSE(dialogText.contains(QLatin1Char('\n')));
  EXPECT_TRUE(dialogText.contains(QStringLiteral("broken.json"))) << dialogText.toStdString();
  EXPECT_EQ(dialogText, w.part<UserMessages>()->lastError());
  // The lesson before it stays.
  ASSERT_NE(w.part<LessonController>()->lesson(), nullptr);
  EXPECT_EQ(w.part<LessonController>()->lesson()->name, "test-lesson");
  // A name that is no preset: the same.
  w.part<UserMessages>()->setQuiet(true);
  EXPECT_FALSE(w.part<LessonController>()->open(QStringLiteral("no-such-lesson")));
  EXPECT_TRUE(w.part<UserMessages>()->lastError().contains(QStringLiteral("no-such-lesson")));
  EXPECT_FALSE(w.part<UserMessages>()->lastError().contains(QLatin1Char('\n')));
}

TEST(LectureMode, TheSpeedControlPacesTheRunningTrainerAndTheNextOne) {
  ui_test::ensureApplication();
  MainWindow w;
  w.part<UserMessages>()->setQuiet(true);
  engine::RunConfig c = ui_test::config("fp32");
  c.steps = 2000;
  c.threads = 1;
  w.part<PrecisionTableController>()->setBaseConfig(c);
  // Set before the start: the next trainer gets it.
  w.part<SpeedControl>()->setRate(20);
  EXPECT_EQ(w.part<SpeedControl>()->rate(), 20.0);
  EXPECT_EQ(w.part<TrainingController>()->stepRate(), 20.0);
  ASSERT_TRUE(w.part<RunLauncher>()->startRun());
  const int id = w.part<TrainingController>()->currentRuns().front();
  ASSERT_TRUE(ui_test::waitFor([&] { return !w.part<RunStore>()->run(id).steps.empty(); }, 20000));
  ui_test::waitFor([] { return false; }, 1000);
  const std::size_t paced = w.part<RunStore>()->run(id).steps.size();
  EXPECT_LE(paced, 45u) << "20 steps/s for about a second";
  EXPECT_GE(paced, 5u);
  // As fast as possible, applied to the running trainer: it finishes.
  w.part<SpeedControl>()->setRate(0);
  EXPECT_EQ(w.part<TrainingController>()->stepRate(), 0.0);
  bool done = false;
  QObject::connect(&w, &MainWindow::trainingFinished, [&] { done = true; });
  ASSERT_TRUE(ui_test::waitFor([&] { return done; }, 30000));
  EXPECT_EQ(w.part<RunStore>()->run(id).steps.size(), 2000u);
  // Every offered rate, and "as fast as possible".
  EXPECT_EQ(SpeedControl::rates(), (QVector<double>{0, 1, 2, 5, 10, 20, 50, 100}));
}

TEST(LectureMode, PresentationViewOnOneShortcutAndBack) {
  ui_test::ensureApplication();
  MainWindow w;
  w.resize(1280, 720);
  w.show();
  w.part<LessonController>()->set(testLesson());
  ui_test::settle();
  EXPECT_EQ(w.findChild<QAction*>(QStringLiteral("actionPresentation"))->shortcut(), QKeySequence(Qt::Key_F11));
  QDockWidget* setup = w.findChild<QDockWidget*>(QStringLiteral("setupDock"));
  ASSERT_NE(setup, nullptr);
  ASSERT_TRUE(setup->isVisible());
  QChart* loss = w.part<ChartArea>()->chart(ChartArea::Loss);
  const QFont normalTitle = loss->titleFont();
  w.findChild<QAction*>(QStringLiteral("actionPresentation"))->trigger();
  ui_test::settle(w);
  EXPECT_TRUE(w.presentation());
  EXPECT_FALSE(setup->isVisible());
  EXPECT_FALSE(w.findChild<QWidget*>(QStringLiteral("precisionBox"))->isVisible());
  EXPECT_FALSE(w.findChild<QTabWidget*>(QStringLiteral("centreTabs"))->tabBar()->isVisible());
  EXPECT_TRUE(w.part<LecturePanel>()->isVisible());
  EXPECT_GE(w.part<LecturePanel>()->findChild<QWidget*>(QStringLiteral("lectureExplanation"))->font().pointSizeF(),
            chart_style::presentation::kTextPt);
  EXPECT_GE(loss->titleFont().pointSizeF(), chart_style::presentation::kTitlePt);
  // Only the watched charts.
  EXPECT_TRUE(w.part<ChartArea>()->view(ChartArea::Loss)->isVisible());
  EXPECT_TRUE(w.part<ChartArea>()->view(ChartArea::LossScale)->isVisible());
  EXPECT_FALSE(w.part<ChartArea>()->view(ChartArea::Memory)->isVisible());
  // Lines drawn after the switch are thick too.
  ASSERT_TRUE(w.part<RunLauncher>()->startRun());
  ASSERT_TRUE(ui_test::waitFor([&] {
    w.part<ChartArea>()->refresh();
    auto* s = qobject_cast<QLineSeries*>(w.part<ChartArea>()->runSeries(ChartArea::Loss, w.part<LessonController>()->runs().value(0, 0)));
    return s && s->pen().widthF() >= chart_style::kLossWidth * chart_style::presentation::kLineFactor - 1e-9;
  }, 20000));
  w.part<TrainingController>()->shutdown();
  // The same shortcut returns.
  w.findChild<QAction*>(QStringLiteral("actionPresentation"))->trigger();
  ui_test::settle(w);
  EXPECT_FALSE(w.presentation());
  EXPECT_TRUE(setup->isVisible());
  EXPECT_TRUE(w.findChild<QTabWidget*>(QStringLiteral("centreTabs"))->tabBar()->isVisible());
  EXPECT_EQ(loss->titleFont(), normalTitle);
  EXPECT_TRUE(w.part<ChartArea>()->view(ChartArea::Memory)->isVisible());
  auto* s = qobject_cast<QLineSeries*>(w.part<ChartArea>()->runSeries(ChartArea::Loss, w.part<LessonController>()->runs().value(0, 0)));
  ASSERT_NE(s, nullptr);
  EXPECT_DOUBLE_EQ(s->pen().widthF(), chart_style::kLossWidth);
}

// Counts printed as "17.0" and their bounds as "≥ 5.00": a count is an
// integer; a ratio keeps its three significant digits.
TEST(LectureMode, ClaimCountsPrintAsIntegers) {
  ui_test::ensureApplication();
  LecturePanel panel;
  const engine::Preset lesson = testLesson();
  panel.setPreset(lesson);
  EXPECT_TRUE(panel.claimsText().contains(QStringLiteral("skipped_steps base ≥ 5"))) << panel.claimsText().toStdString();
  EXPECT_FALSE(panel.claimsText().contains(QStringLiteral("5.00"))) << panel.claimsText().toStdString();
  std::vector<engine::ClaimResult> results(2);
  results[0].claim = lesson.expect[0];
  results[0].value = 2.0;
  results[0].pass = true;
  results[1].claim = lesson.expect[1];
  results[1].value = 17.0;
  results[1].pass = true;
  panel.setClaimResults(results);
  const QString text = panel.claimsText();
  EXPECT_TRUE(text.contains(QStringLiteral("skipped_steps base = 17 ≥ 5"))) << text.toStdString();
  EXPECT_FALSE(text.contains(QStringLiteral("17.0"))) << text.toStdString();
  EXPECT_TRUE(text.contains(QStringLiteral("final_loss half / base = 2.00 ≤ 100"))) << text.toStdString();
}

// The list said "1 steps/s".
TEST(LectureMode, TheSpeedListSaysOneStepPerSecond) {
  ui_test::ensureApplication();
  SpeedControl speed;
  auto* combo = speed.findChild<QComboBox*>(QStringLiteral("speedCombo"));
  ASSERT_NE(combo, nullptr);
  QStringList items;
  for (int i = 0; i < combo->count(); ++i) items << combo->itemText(i);
  EXPECT_TRUE(items.contains(QStringLiteral("1 step/s"))) << items.join(QLatin1Char('|')).toStdString();
  EXPECT_TRUE(items.contains(QStringLiteral("2 steps/s"))) << items.join(QLatin1Char('|')).toStdString();
  for (const QString& item : items) EXPECT_FALSE(item.startsWith(QStringLiteral("1 steps"))) << item.toStdString();
}
