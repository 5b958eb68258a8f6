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
#include <QTabBar>
#include <QTabWidget>
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
  // The solver lessons are the CLI's for now: the menu leaves them out.
  std::vector<engine::Preset> presets;
  for (const engine::Preset& p : engine::builtin_presets())
    if (p.kind == engine::PresetKind::Train) presets.push_back(p);
  ASSERT_FALSE(presets.empty());
  ASSERT_LT(presets.size(), engine::builtin_presets().size()) << "the solver lessons are built in";
  const QList<QAction*> actions = w.part<LectureMenu>()->presetActions();
  ASSERT_EQ(actions.size(), static_cast<int>(presets.size()));
  for (std::size_t i = 0; i < presets.size(); ++i) {
    EXPECT_EQ(actions[static_cast<int>(i)]->text(), QString::fromStdString(presets[i].title));
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
  // A solver lesson (by name, as a file would give it) is refused in one
  // message that says where it runs; the lesson shown stays.
  const std::string shown = w.part<LessonController>()->lesson()->name;
  EXPECT_FALSE(w.part<LessonController>()->open(QStringLiteral("solve-the-wall")));
  EXPECT_TRUE(w.part<UserMessages>()->lastError().contains(
      QStringLiteral("CLI only for now: precision-lab-cli lecture solve-the-wall")))
      << qPrintable(w.part<UserMessages>()->lastError());
  EXPECT_EQ(w.part<LessonController>()->lesson()->name, shown);
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
