// tests/ui/session: the command line changes only what each option names,
// a bad --config opens the window with the error, --help needs no display;
// the run store holds the engine's RunHistory.
#include <gtest/gtest.h>

#include <QAction>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>

#include "main_window.h"
#include "session/command_line.h"
#include "train/model_defaults.h"
#include "ui/ui_test_support.h"
#include "ui/window_parts.h"

namespace {

class CommandLineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ui_test::ensureApplication(); }
};

// Today `--dataset spirals` also reset recipe, loss scaling, batch, seed and length.
TEST_F(CommandLineTest, AnOptionChangesOnlyWhatItNames) {
  MainWindow window;
  window.part<UserMessages>()->setQuiet(true);
  const engine::RunConfig before = window.part<PrecisionTableController>()->nextRunConfig();
  LaunchOptions o;
  QString error;
  bool exitNow = false;
  ASSERT_TRUE(parseLaunchOptions({"precision-lab", "--dataset", "spirals"}, o, &error, &exitNow)) << error.toStdString();
  ASSERT_TRUE(window.part<PrecisionTableController>()->applyLaunchOptions(o)) << window.part<UserMessages>()->lastError().toStdString();
  const engine::RunConfig after = window.part<PrecisionTableController>()->nextRunConfig();
  EXPECT_EQ(after.dataset, "spirals");
  EXPECT_EQ(after.recipe, before.recipe);
  EXPECT_EQ(after.loss_scale_set, before.loss_scale_set);
  EXPECT_EQ(after.batch, before.batch);
  EXPECT_EQ(after.seed, before.seed);
  EXPECT_EQ(after.steps, before.steps);
  EXPECT_EQ(after.epochs, before.epochs);
  EXPECT_EQ(after.lr, before.lr);
  EXPECT_EQ(after.threads, before.threads);

  // A second option on top: only the steps change.
  ASSERT_TRUE(parseLaunchOptions({"precision-lab", "--steps", "123"}, o, &error, &exitNow));
  ASSERT_TRUE(window.part<PrecisionTableController>()->applyLaunchOptions(o));
  const engine::RunConfig third = window.part<PrecisionTableController>()->nextRunConfig();
  EXPECT_EQ(third.steps, 123);
  EXPECT_EQ(third.dataset, "spirals");
  EXPECT_EQ(third.recipe, before.recipe);
}

// As precision-lab-cli: --model gpt starts from AdamW at the gpt's rate,
// unless --optimizer or --lr say otherwise (applied on the panel's settings).
TEST_F(CommandLineTest, AGptNamedHereStartsFromAdamW) {
  engine::RunConfig panel;  // the image models' SGD at 0.05
  panel.dataset = "spirals";
  const auto launch = [&](const QStringList& args) {
    LaunchOptions o;
    QString error;
    bool exitNow = false;
    EXPECT_TRUE(parseLaunchOptions(QStringList{"precision-lab"} + args, o, &error, &exitNow)) << error.toStdString();
    return applyLaunchSettings(panel, o);
  };
  engine::RunConfig c = launch({"--model", "gpt", "--dataset", "jargon"});
  EXPECT_EQ(c.optimizer, "adamw");
  EXPECT_EQ(c.lr, engine::kGptLearningRate);
  c = launch({"--model", "gpt", "--dataset", "jargon", "--lr", "0.004"});
  EXPECT_EQ(c.optimizer, "adamw");
  EXPECT_EQ(c.lr, 0.004);
  c = launch({"--model", "gpt", "--dataset", "jargon", "--optimizer", "sgd"});
  EXPECT_EQ(c.optimizer, "sgd");
  EXPECT_EQ(c.lr, 0.05);
  // An option that names no model leaves the panel's optimizer alone.
  panel.model = "gpt";
  panel.dataset = "jargon";
  panel.optimizer = "adam";
  panel.lr = 0.02;
  c = launch({"--steps", "10"});
  EXPECT_EQ(c.optimizer, "adam");
  EXPECT_EQ(c.lr, 0.02);
}

// Today: one stderr line and no window.
TEST_F(CommandLineTest, AMissingConfigOpensTheWindowWithTheError) {
  QTemporaryDir dir;
  const QString missing = dir.filePath(QStringLiteral("missing.json"));
  LaunchOptions o;
  QString error;
  bool exitNow = false;
  ASSERT_TRUE(parseLaunchOptions({"precision-lab", "--config", missing, "--dataset", "spirals"}, o, &error, &exitNow));
  EXPECT_TRUE(o.configError.contains(QStringLiteral("missing.json"))) << o.configError.toStdString();
  MainWindow window;
  window.part<UserMessages>()->setQuiet(true);
  EXPECT_FALSE(window.part<PrecisionTableController>()->applyLaunchOptions(o));
  EXPECT_TRUE(window.part<UserMessages>()->lastError().contains(QStringLiteral("missing.json"))) << window.part<UserMessages>()->lastError().toStdString();
  EXPECT_EQ(window.part<PrecisionTableController>()->nextRunConfig().dataset, "spirals");  // the rest of the line still applies
}

QProcessEnvironment withoutDisplay() {
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  for (const char* v : {"DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"}) env.remove(QString::fromLatin1(v));
  return env;
}

// Today --help aborted without a display (QApplication needs a platform).
TEST_F(CommandLineTest, HelpWorksWithoutADisplay) {
  QProcess p;
  p.setProcessEnvironment(withoutDisplay());
  p.start(QStringLiteral(PL_GUI_BINARY), {QStringLiteral("--help")});
  ASSERT_TRUE(p.waitForFinished(20000));
  EXPECT_EQ(p.exitStatus(), QProcess::NormalExit);
  EXPECT_EQ(p.exitCode(), 0) << p.readAllStandardError().toStdString();
  EXPECT_TRUE(p.readAllStandardOutput().contains("--dataset"));
}

TEST_F(CommandLineTest, ABadConfigWithScreenshotExitsTwo) {
  QTemporaryDir dir;
  QProcess p;
  p.setProcessEnvironment(withoutDisplay());
  p.start(QStringLiteral(PL_GUI_BINARY), {QStringLiteral("--config"), dir.filePath(QStringLiteral("none.json")),
                                          QStringLiteral("--screenshot"), dir.filePath(QStringLiteral("x.png"))});
  ASSERT_TRUE(p.waitForFinished(30000));
  EXPECT_EQ(p.exitCode(), 2);
  EXPECT_TRUE(p.readAllStandardError().contains("none.json"));
  EXPECT_FALSE(QFile::exists(dir.filePath(QStringLiteral("x.png"))));
}

// A lesson this machine does not train (every claim needs the cuda backend)
// started from the command line shows its skipped claims: the screenshot is
// written and the exit is 0 (it was 2, with an empty error).
TEST_F(CommandLineTest, AGpuLessonStartedOnACpuIsNotAnError) {
  QTemporaryDir dir;
  QProcess p;
  QProcessEnvironment env = withoutDisplay();
  env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
  env.insert(QStringLiteral("XDG_DATA_HOME"), dir.path());
  env.insert(QStringLiteral("PL_CUDA_MODULE"), dir.filePath(QStringLiteral("no-such-module.so")));  // no GPU either way
  p.setProcessEnvironment(env);
  p.start(QStringLiteral(PL_GUI_BINARY),
          {QStringLiteral("--lecture"), QStringLiteral("gpu-mixed-precision-pays"), QStringLiteral("--start"),
           QStringLiteral("--screenshot"), dir.filePath(QStringLiteral("x.png")), QStringLiteral("--screenshot-after-ms"),
           QStringLiteral("500")});
  ASSERT_TRUE(p.waitForFinished(60000));
  EXPECT_EQ(p.exitCode(), 0) << p.readAllStandardError().toStdString();
  EXPECT_TRUE(QFile::exists(dir.filePath(QStringLiteral("x.png"))));
}

TEST_F(CommandLineTest, TheStoreKeepsTheEngineRunHistory) {
  RunStore store;
  const int id = store.addRun(QStringLiteral("run 7"), QStringLiteral("fp16"), Qt::red, ui_test::config("fp16"));
  engine::StepMetrics a = ui_test::step(id, 1, 1.0);
  a.overflow = true;
  a.skipped = true;
  engine::Event e;
  e.run_id = id;
  e.step = 1;
  e.kind = engine::EventKind::PrecisionChange;
  e.layer = "fc2";
  e.precision.compute = engine::Format::FP16;
  ui_test::feed(store, {a, ui_test::step(id, 2, 0.5), e});
  const RunData& r = store.run(id);
  const engine::RunHistory& h = r;  // one history, the engine's
  EXPECT_EQ(h.steps.size(), 2u);
  EXPECT_EQ(h.overflow_steps, 1);
  EXPECT_EQ(h.skipped_steps, 1);
  ASSERT_EQ(h.events.size(), 1u);
  EXPECT_EQ(h.events[0].precision.compute, engine::Format::FP16);
  const engine::RunExport x = r.toExport();
  EXPECT_EQ(x.name, "run 7");  // the `run` CSV column is the UI's name
  EXPECT_EQ(x.history.steps.size(), 2u);
  EXPECT_FALSE(r.scalesLoss());
  RunData scaled;
  scaled.config = ui_test::config("mixed-fp16");
  EXPECT_TRUE(scaled.scalesLoss());
}

}  // namespace
