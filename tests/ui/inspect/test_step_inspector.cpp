// ui/inspect/step_inspector: Step advances every run by exactly one step
// and the inspector shows that step's numbers, layer by layer.
#include <gtest/gtest.h>

#include <QDockWidget>
#include <QTableWidget>

#include <cmath>

#include "charts/number_text.h"
#include "lecture/preset.h"
#include "inspect/step_inspector.h"
#include "main_window.h"
#include "session/run_store.h"
#include "session/training_controller.h"
#include "../ui_test_support.h"
#include "../window_parts.h"

namespace {

QString text(QTableWidget* t, int row, int column) {
  QTableWidgetItem* item = t->item(row, column);
  return item ? item->text() : QString();
}

// The inspector's row of run `id` shows its inspection.
void expectShown(StepInspector* inspector, const RunData& r, int row) {
  ASSERT_TRUE(r.inspection.has_value());
  const engine::StepInspection& in = *r.inspection;
  QTableWidget* runs = inspector->runsTable();
  EXPECT_EQ(text(runs, row, StepInspector::RunName), r.name);
  EXPECT_EQ(text(runs, row, StepInspector::RunStep), QString::number(in.step));
  EXPECT_EQ(text(runs, row, StepInspector::RunLoss), number_text::significant(in.loss, 5));
  EXPECT_TRUE(text(runs, row, StepInspector::RunSkipped).startsWith(in.skipped ? "skipped" : "applied"));
  // The step's own loss, as the step record has it.
  ASSERT_FALSE(r.steps.empty());
  EXPECT_EQ(r.steps.back().step, in.step);
  EXPECT_DOUBLE_EQ(r.steps.back().loss, in.loss);
}

}  // namespace

TEST(StepInspector, StepAdvancesExactlyOneStepAndShowsIt) {
  ui_test::ensureApplication();
  MainWindow w;
  w.part<UserMessages>()->setQuiet(true);
  engine::RunConfig c = ui_test::config("mixed-fp16");
  c.steps = 50;
  c.threads = 1;
  w.part<PrecisionTableController>()->setBaseConfig(c);
  StepInspector* inspector = w.part<StepInspector>();

  w.part<RunLauncher>()->stepOnce();  // no run yet: one is built paused and takes its first step
  ASSERT_EQ(w.part<TrainingController>()->currentRuns().size(), 1);
  const int id = w.part<TrainingController>()->currentRuns().front();
  ASSERT_TRUE(ui_test::waitFor([&] { return w.part<RunStore>()->run(id).inspection.has_value(); }, 20000));
  EXPECT_FALSE(w.findChild<QDockWidget*>(QStringLiteral("stepInspectorDock"))->isHidden());
  ui_test::waitFor([] { return false; }, 300);  // nothing more arrives: paused
  const RunData& r = w.part<RunStore>()->run(id);
  EXPECT_EQ(r.steps.size(), 1u);
  EXPECT_EQ(r.inspection->step, 1);
  EXPECT_TRUE(w.part<TrainingController>()->paused());
  expectShown(inspector, r, 0);
  EXPECT_EQ(inspector->runsTable()->item(0, StepInspector::RunScaleBefore)->text(),
            QStringLiteral("2^%1").arg(static_cast<int>(std::log2(r.inspection->scale_before))));
  // Layer by layer: every leaf, with the numbers of that step.
  QTableWidget* layers = inspector->layerTable();
  ASSERT_EQ(layers->rowCount(), static_cast<int>(r.inspection->layers.size()));
  ASSERT_GT(layers->rowCount(), 0);
  for (int row = 0; row < layers->rowCount(); ++row) {
    const engine::LayerInspection& l = r.inspection->layers[static_cast<std::size_t>(row)];
    EXPECT_EQ(text(layers, row, StepInspector::LayerName).toStdString(), l.layer);
    EXPECT_EQ(text(layers, row, StepInspector::NonfiniteActivation), QString::number(l.nonfinite_activation));
    EXPECT_EQ(text(layers, row, StepInspector::NonfiniteActivationGrad),
              QString::number(l.nonfinite_activation_grad));
    if (l.has_weights) {
      EXPECT_EQ(text(layers, row, StepInspector::NonfiniteWeightGrad), QString::number(l.nonfinite_weight_grad));
      EXPECT_EQ(text(layers, row, StepInspector::Underflow), number_text::percent(l.underflow));
      EXPECT_EQ(text(layers, row, StepInspector::MaxAbsGrad), number_text::significant(l.max_abs_grad, 3));
      EXPECT_GT(l.max_abs_grad, 0.0);
    }
  }

  // Again: exactly one more.
  w.part<RunLauncher>()->stepOnce();
  ASSERT_TRUE(ui_test::waitFor([&] { return w.part<RunStore>()->run(id).inspection->step == 2; }, 20000));
  ui_test::waitFor([] { return false; }, 300);
  EXPECT_EQ(w.part<RunStore>()->run(id).steps.size(), 2u);
  expectShown(inspector, w.part<RunStore>()->run(id), 0);
  w.part<TrainingController>()->shutdown();
}

TEST(StepInspector, StepInALessonStepsEveryRunOnce) {
  ui_test::ensureApplication();
  MainWindow w;
  w.part<UserMessages>()->setQuiet(true);
  w.part<LessonController>()->set(engine::parse_preset(R"({"title": "t", "explanation": "Three runs on spirals, one step at a time: watch the inspector.", "dataset": "spirals", "model": "mlp",
      "steps": 40, "threads": 1, "recipes": ["fp32", "fp16", "mixed-fp16"],
      "expect": [{"metric": "skipped_steps", "run": "fp32", "max": 0}]})",
                                    "t.json", "t"));
  w.part<RunLauncher>()->stepOnce();
  const QVector<int> ids = w.part<TrainingController>()->currentRuns();
  ASSERT_EQ(ids.size(), 3);
  ASSERT_TRUE(ui_test::waitFor([&] {
    for (int id : ids)
      if (!w.part<RunStore>()->run(id).inspection) return false;
    return true;
  }, 20000));
  ui_test::waitFor([] { return false; }, 300);
  for (int row = 0; row < ids.size(); ++row) {
    const RunData& r = w.part<RunStore>()->run(ids[row]);
    EXPECT_EQ(r.steps.size(), 1u) << r.name.toStdString();
    expectShown(w.part<StepInspector>(), r, row);
  }
  EXPECT_EQ(w.part<RunStore>()->run(ids[0]).name, QStringLiteral("fp32"));
  w.part<TrainingController>()->shutdown();
}
