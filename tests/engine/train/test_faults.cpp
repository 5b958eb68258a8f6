// Numerical faults are events (issue: runs are never lost): inf or NaN put
// into weights, activations, gradients or the loss is attributed to its
// layer and tensor; a run that cannot recover stops with its reason; a run
// with a loss scaler skips the step and goes on.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "engine/support/test_backend.h"
#include "data/dataset.h"
#include "engine/train/trainer_test_support.h"
#include "train/run.h"

namespace {

using namespace engine;

// The CPU backend, or the guarded one (ctest runs this file both ways).
Backend& backend() { return test::run_backend(); }

std::shared_ptr<const DatasetPair> spirals_data() {
  static auto d = std::make_shared<const DatasetPair>(load_dataset("spirals", 3));
  return d;
}

struct Outcome {
  std::string error;  // the run's failure ("" when it went on)
  std::int64_t steps = 0;
  std::vector<Event> events;
};

Outcome run_with_fault(const char* recipe, FaultTarget target, const char* layer, bool inf = false) {
  RunConfig c = trainer_test::spirals(40);
  c.recipe = recipe;
  engine::Run run(0, c, spirals_data(), backend());
  std::vector<Record> out;
  Outcome o;
  try {
    for (int i = 0; i < 5; ++i) run.step(out);
    run.inject_fault(target, layer, inf);
    while (!run.finished()) run.step(out);
  } catch (const std::runtime_error& e) {
    o.error = e.what();
  }
  o.steps = run.steps_done();
  o.events = run.events();
  return o;
}

bool attributed(const Outcome& o, const std::string& layer, const std::string& tensor) {
  for (const Event& e : o.events)
    if (e.kind == EventKind::Overflow && e.step == 6 && e.layer == layer && e.tensor == tensor && e.count > 0) return true;
  return false;
}

TEST(Faults, Fp32CannotRecoverFromANaNAndStopsWithItsReason) {
  for (FaultTarget t : {FaultTarget::Weights, FaultTarget::Activations, FaultTarget::Gradients, FaultTarget::Loss}) {
    SCOPED_TRACE(fault_target_name(t));
    const Outcome o = run_with_fault("fp32", t, "fc2");
    EXPECT_EQ(o.steps, 6) << "stops at the step that applied non-finite gradients";
    EXPECT_EQ(o.error.rfind("diverged at step 6: ", 0), 0u) << o.error;
  }
}

TEST(Faults, TheOverflowNamesTheLayerAndTensorItAppearedIn) {
  EXPECT_TRUE(attributed(run_with_fault("fp32", FaultTarget::Activations, "relu1"), "relu1", "activation"));
  EXPECT_TRUE(attributed(run_with_fault("fp32", FaultTarget::Gradients, "fc2"), "fc2", "weight_grad"));
  // A NaN weight makes its layer's output NaN first.
  EXPECT_TRUE(attributed(run_with_fault("fp32", FaultTarget::Weights, "fc2"), "fc2", "activation"));
  const Outcome loss = run_with_fault("fp32", FaultTarget::Loss, "");
  bool nan_loss = false;
  for (const Event& e : loss.events) nan_loss = nan_loss || (e.kind == EventKind::NanLoss && e.step == 6);
  EXPECT_TRUE(nan_loss);
}

TEST(Faults, ALossScalerSkipsTheStepAndTrainingGoesOn) {
  for (FaultTarget t : {FaultTarget::Activations, FaultTarget::Gradients, FaultTarget::Loss}) {
    SCOPED_TRACE(fault_target_name(t));
    const Outcome o = run_with_fault("mixed-fp16", t, "fc2", true);
    EXPECT_EQ(o.error, "");
    EXPECT_EQ(o.steps, 40);
    bool skipped = false;
    for (const Event& e : o.events) skipped = skipped || (e.kind == EventKind::Skipped && e.step == 6);
    EXPECT_TRUE(skipped);
  }
  // A NaN in the master weights stays: every later step overflows, and the
  // run stops once the loss has been NaN for ten steps.
  const Outcome w = run_with_fault("mixed-fp16", FaultTarget::Weights, "fc2");
  EXPECT_EQ(w.error.rfind("diverged at step 15: the loss has been inf or NaN for 10 steps", 0), 0u) << w.error;
}

TEST(Faults, AnUnknownLayerIsRefusedByName) {
  RunConfig c = trainer_test::spirals(10);
  engine::Run run(0, c, spirals_data(), backend());
  try {
    run.inject_fault(FaultTarget::Weights, "fc9", false);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("inject_fault: the model has no layer 'fc9' (layers: ", 0), 0u) << e.what();
  }
  EXPECT_THROW(run.inject_fault(FaultTarget::Weights, "relu1", false), std::invalid_argument);  // no weights
}

TEST(Inputs, APerLayerSettingForALayerTheModelLacksIsRefused) {
  RunConfig c = trainer_test::spirals(10);
  c.layers["fc9"] = LayerPrecision{Format::FP16, Format::FP16, Format::FP32, Format::FP16};
  try {
    engine::Run run(0, c, spirals_data(), backend());
    FAIL() << "accepted a layer the mlp does not have";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("'layers.fc9': the mlp has no layer 'fc9' (its layers: fc1, relu1", 0), 0u)
        << e.what();
  }
}

}  // namespace
