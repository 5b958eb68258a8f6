// Lecture presets: parsing with one-line errors naming the field, the built-in
// set, and every claim metric measured as engine/lecture/claims.h defines it.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "lecture/claims.h"
#include "lecture/preset.h"

namespace {

using namespace engine;

std::string error_of(const std::string& text) {
  try {
    parse_preset(text, "p.json", "p");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

const char* kExplanation = "\"explanation\": \"Watch the loss chart: the runs differ only in their number formats.\"";

std::string preset(const std::string& body) {
  return std::string("{\"title\": \"T\", ") + kExplanation + ", \"dataset\": \"spirals\", " + body + "}";
}

TEST(Preset, ParsesRecipesRunsClaimsAndRunSettings) {
  const Preset p = parse_preset(
      preset(R"("steps": 40, "loss_scale": {"init": 1024}, "recipes": ["fp32", "mixed-fp16"],
                "runs": [{"name": "no master", "recipe": "mixed-fp16", "master_weights": false}],
                "watch": ["loss", "gradients:fc3"],
                "expect": [{"metric": "final_loss", "run": "no master", "vs": "fp32", "max": 2}],
                "quick": {"steps": 10}, "quick_note": "short")"),
      "p.json", "p");
  ASSERT_EQ(p.runs.size(), 3u);
  EXPECT_EQ(p.runs[0].name, "fp32");
  EXPECT_EQ(p.runs[2].name, "no master");
  for (const PresetRun& r : p.runs) {
    EXPECT_EQ(r.config.dataset, "spirals");
    EXPECT_EQ(r.config.steps, 40);
    EXPECT_EQ(r.config.compare.size(), 3u);
  }
  // The comparison rule: the scaler settings reach only runs that scale.
  EXPECT_FALSE(p.runs[0].config.loss_scale_set);
  EXPECT_EQ(p.runs[1].config.loss_scale.init_scale, 1024);
  EXPECT_EQ(p.runs[2].config.master_weights, 0);
  EXPECT_EQ(p.runs[2].config.loss_scale.init_scale, 1024);
  EXPECT_EQ(p.watch.size(), 2u);
  const Preset q = quick_version(p);
  for (const PresetRun& r : q.runs) EXPECT_EQ(r.config.steps, 10);
}

TEST(Preset, BadInputGetsOneLineNamingTheField) {
  EXPECT_EQ(error_of(preset(R"("recipes": ["fp32"], "expect": [{"metric": "loss", "run": "fp32", "min": 1}])")),
            "p.json: 'expect[0].metric' is not a metric: 'loss' (expected one of final_loss, val_loss, val_accuracy, "
            "peak_memory, overflow_steps, skipped_steps, scale_backoffs, scale_growths, underflow, output_error, "
            "grad_error, grad_bias, attributed_overflows, samples_per_second, device_memory)");
  EXPECT_EQ(error_of(preset(R"("recipes": ["fp32"], "expect": [{"metric": "final_loss", "run": "fp16", "min": 1}])")),
            "p.json: 'expect[0].run' names no run of the preset: 'fp16' (runs: fp32)");
  EXPECT_EQ(error_of(preset(R"("recipes": ["fp32"], "expect": [{"metric": "final_loss", "run": "fp32"}])")),
            "p.json: 'expect[0]' needs min or max");
  EXPECT_EQ(error_of(preset(R"("recipes": ["fp32"])")),
            "p.json: 'expect' must be a non-empty array of claims: a preset proves its point");
  EXPECT_EQ(error_of(preset(R"("runs": [{"name": "a", "lr": "fast"}], "expect": [])")),
            "p.json: 'runs[0].lr' must be a number (got the string \"fast\")");
  EXPECT_EQ(error_of(preset(R"("recipes": ["fp32", "fp99"], "expect": [])")).rfind("p.json: 'recipes[1]' unknown recipe 'fp99'", 0), 0u);
  EXPECT_EQ(error_of(preset(R"("lerning_rate": 1, "recipes": ["fp32"])")), "p.json: unknown key 'lerning_rate'");
  EXPECT_EQ(error_of(preset(R"("recipes": ["fp32"], "watch": ["speed"], "expect": [{"metric": "final_loss", "run": "fp32", "max": 1}])")),
            "p.json: 'watch[0]' is not a chart: 'speed' (loss, loss_scale, memory, accuracy, gradients[:layer])");
  EXPECT_EQ(error_of(preset(R"("recipes": ["fp32"], "quick": {"steps": 5}, "expect": [{"metric": "final_loss", "run": "fp32", "max": 1}])")),
            "p.json: 'quick_note' must say why the claims survive the quick settings");
  EXPECT_EQ(error_of("{\"title\": \"T\"}"), "p.json: 'explanation' is missing");
  EXPECT_EQ(error_of("[1, 2]"), "p.json: a preset must be a JSON object");
  EXPECT_EQ(error_of("{").rfind("p.json: not valid JSON: ", 0), 0u);
  EXPECT_EQ(error_of("{").find('\n'), std::string::npos);
}

TEST(Preset, TheBuiltInSetHasTenLessonsThatProveTheirPoint) {
  const auto& all = builtin_presets();
  ASSERT_GE(all.size(), 10u);
  std::size_t training = 0;
  for (const Preset& p : all) {
    SCOPED_TRACE(p.name);
    EXPECT_FALSE(p.title.empty());
    EXPECT_FALSE(p.expect.empty());
    EXPECT_EQ(find_preset(p.name).title, p.title);
    if (p.kind == PresetKind::Solve) continue;  // test_solve_lesson checks the solver lessons
    ++training;
    EXPECT_GE(p.runs.size(), 2u) << "a lesson compares";
    EXPECT_FALSE(p.watch.empty());
  }
  EXPECT_GE(training, 10u);
  EXPECT_THROW(find_preset("no-such-lesson"), std::runtime_error);
}

// A run's export with the figures the metrics read.
RunExport run(const std::string& name, double final_loss, double accuracy, std::int64_t peak) {
  RunExport r;
  r.name = name;
  r.recipe = name;
  r.summary.final_loss = final_loss;
  r.summary.val_accuracy = accuracy;
  r.summary.peak_memory_bytes = peak;
  return r;
}

TEST(Claims, EveryMetricAsTheDesignDefinesIt) {
  std::vector<RunExport> runs = {run("fp32", 0.5, 0.9, 1000), run("fp16", 2.0, 0.8, 500)};
  RunExport& f = runs[1];
  f.summary.overflow_steps = 3;
  f.summary.skipped_steps = 2;
  for (double s : {4.0, 8.0, 4.0, 2.0, 4.0}) {
    StepMetrics m;
    m.loss_scale = s;
    f.history.add(m);
  }
  for (std::int64_t step : {100, 200}) {
    for (const char* layer : {"fc1", "fc2"}) {
      GradStats g;
      g.step = step;
      g.layer = layer;
      g.underflow_unscaled = step == 200 ? (layer == std::string("fc1") ? 0.25 : 0.75) : 0.9;
      g.output_error = layer == std::string("fc1") ? 0.01 : 0.02;
      g.grad_error = 0.5;
      f.history.add(g);
    }
  }
  f.history.add(Event{0, 3, EventKind::Overflow, "fc2", "weight_grad", 4});
  f.history.add(Event{0, 3, EventKind::Overflow, "", "loss", 1});  // not attributed
  f.history.add(Event{0, 3, EventKind::Skipped, "", "optimizer", 4});
  auto value = [&](const char* metric, const char* r, const char* vs = "", const char* layer = "") {
    Claim c;
    c.metric = metric;
    c.run = r;
    c.vs = vs;
    c.layer = layer;
    c.min = 0;
    return claim_value(c, runs);
  };
  EXPECT_EQ(value("final_loss", "fp16"), 2.0);
  EXPECT_EQ(value("final_loss", "fp16", "fp32"), 4.0);
  EXPECT_DOUBLE_EQ(value("val_accuracy", "fp16"), 80.0);
  EXPECT_DOUBLE_EQ(value("val_accuracy", "fp16", "fp32"), 10.0);  // the gap, in points
  EXPECT_EQ(value("peak_memory", "fp16", "fp32"), 0.5);
  EXPECT_EQ(value("overflow_steps", "fp16"), 3.0);
  EXPECT_EQ(value("skipped_steps", "fp16"), 2.0);
  EXPECT_EQ(value("scale_backoffs", "fp16"), 2.0);
  EXPECT_EQ(value("scale_growths", "fp16"), 2.0);
  EXPECT_EQ(value("underflow", "fp16", "", "fc1"), 0.25);  // the last statistics step
  EXPECT_EQ(value("underflow", "fp16"), 0.75);             // the largest over layers
  EXPECT_EQ(value("output_error", "fp16", "", "fc1"), 0.01);
  EXPECT_EQ(value("grad_error", "fp16"), 0.5);
  EXPECT_EQ(value("attributed_overflows", "fp16"), 1.0);
  EXPECT_TRUE(std::isnan(value("final_loss", "bf16")));
  EXPECT_TRUE(std::isnan(value("underflow", "fp32")));  // no statistics

  Preset p;
  Claim c;
  c.metric = "final_loss";
  c.run = "fp16";
  c.vs = "fp32";
  c.min = 10;
  p.expect = {c};
  const auto results = check_claims(p, runs);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].pass);
  EXPECT_EQ(results[0].text, "FAIL  final_loss fp16 / fp32 = 4  (>= 10)");
}

// A run that diverged before its first evaluation (lm-fp16-adam's fp16)
// has no validation loss: NaN, so a claim on it fails instead of reading 0.
TEST(Claims, ValidationLossNeedsAnEvaluation) {
  std::vector<RunExport> runs = {run("fp32", 0.5, 0.9, 1000), run("fp16", 2.0, -1, 500)};
  runs[0].summary.val_loss = 1.5;
  runs[0].history.add(EvalMetrics{0, 10, 0, 1.5, 0.9});
  Claim c;
  c.metric = "val_loss";
  c.run = "fp32";
  c.max = 2;
  EXPECT_EQ(claim_value(c, runs), 1.5);
  c.run = "fp16";
  EXPECT_TRUE(std::isnan(claim_value(c, runs)));
  c.vs = "fp32";
  EXPECT_TRUE(std::isnan(claim_value(c, runs)));
  c.run = "fp32";
  c.vs = "fp16";
  EXPECT_TRUE(std::isnan(claim_value(c, runs)));
}

// The speed and memory a GPU lesson claims: samples/s is the median step
// after the first two; memory the device's own peak where the backend
// reports one (the run's own allocation before the whole device's use),
// else the recipe's accounting.
TEST(Claims, SpeedAndDeviceMemoryAsTheRunMeasuredThem) {
  std::vector<RunExport> runs = {run("fp32", 0.5, 0.9, 1000), run("mixed-bf16", 0.5, 0.9, 600)};
  const double fp32_rates[] = {10.0, 50.0, 100.0, 120.0, 80.0};   // median of 100, 120, 80: 100
  const double bf16_rates[] = {5.0, 400.0, 250.0, 300.0, 200.0, 260.0};  // median of 250, 300, 200, 260: 255
  for (double r : fp32_rates) {
    StepMetrics m;
    m.samples_per_second = r;
    runs[0].history.add(m);
  }
  for (double r : bf16_rates) {
    StepMetrics m;
    m.samples_per_second = r;
    runs[1].history.add(m);
  }
  Claim c;
  c.metric = "samples_per_second";
  c.run = "mixed-bf16";
  c.min = 1.3;
  EXPECT_EQ(claim_value(c, runs), 255.0);
  c.vs = "fp32";
  EXPECT_EQ(claim_value(c, runs), 2.55);
  c.metric = "device_memory";
  EXPECT_EQ(claim_value(c, runs), 0.6);  // no device figure: the accounting's peak_memory
  runs[0].history.steps[3].device_used = 4000;
  runs[1].history.steps[2].device_used = 3000;
  EXPECT_EQ(claim_value(c, runs), 0.75);  // the whole device's peaks
  c.vs.clear();
  EXPECT_EQ(claim_value(c, runs), 3000.0);
  // Each run's own allocation (its context's pool) wins over the device's.
  c.vs = "fp32";
  runs[0].history.steps[1].device_allocated = 2000;
  runs[1].history.steps[4].device_allocated = 900;
  EXPECT_EQ(claim_value(c, runs), 0.45);
  c.vs.clear();
  RunExport one = run("one", 1, 1, 1);
  StepMetrics m;
  m.samples_per_second = 7.0;
  one.history.add(m);
  c.metric = "samples_per_second";
  c.run = "one";
  EXPECT_EQ(claim_value(c, {one}), 7.0);  // fewer than three steps: all of them
  c.run = "fp32";
  EXPECT_TRUE(std::isnan(claim_value(c, {run("fp32", 1, 1, 1)})));  // no steps
}

// "requires": "cuda" claims are skipped with the reason on a CPU's runs and
// judged on a GPU's; a lesson whose every claim needs it says so.
TEST(Claims, ARequiredBackendSkipsTheClaimWithItsReasonElsewhere) {
  const Preset p = parse_preset(preset(R"("recipes": ["fp32", "fp16"], "expect": [
      {"metric": "peak_memory", "run": "fp16", "vs": "fp32", "max": 0.9, "requires": "cuda"},
      {"metric": "final_loss", "run": "fp16", "max": 10}])"),
                                "p.json", "p");
  ASSERT_EQ(p.expect.size(), 2u);
  EXPECT_EQ(p.expect[0].required_backend, "cuda");
  EXPECT_EQ(p.expect[1].required_backend, "");
  EXPECT_EQ(required_backend(p), "");  // not every claim needs it
  std::vector<RunExport> runs = {run("fp32", 0.5, 0.9, 1000), run("fp16", 2.0, 0.8, 500)};
  for (RunExport& r : runs) r.summary.backend = "cpu";
  auto results = check_claims(p, runs);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0].skipped);
  EXPECT_FALSE(results[0].pass);
  EXPECT_EQ(results[0].reason, "needs the cuda backend; this machine ran cpu");
  EXPECT_EQ(results[0].text, "SKIP  peak_memory fp16 / fp32: needs the cuda backend; this machine ran cpu");
  EXPECT_FALSE(results[1].skipped);
  EXPECT_TRUE(results[1].pass);
  // On the GPU's runs the claim is judged, and can fail.
  for (RunExport& r : runs) r.summary.backend = "cuda";
  results = check_claims(p, runs);
  EXPECT_FALSE(results[0].skipped);
  EXPECT_TRUE(results[0].pass) << results[0].text;
  runs[1].summary.peak_memory_bytes = 950;
  EXPECT_FALSE(check_claims(p, runs)[0].pass);
  // No runs at all (not trained): skipped with what the machine has.
  results = check_claims(p, {}, "cpu (no CUDA device)");
  EXPECT_EQ(results[0].text, "SKIP  peak_memory fp16 / fp32: needs the cuda backend; this machine ran cpu (no CUDA device)");
  EXPECT_FALSE(results[1].pass);  // a claim without the requirement has nothing to judge
  EXPECT_FALSE(results[1].skipped);

  EXPECT_EQ(error_of(preset(R"("recipes": ["fp32"], "expect": [{"metric": "final_loss", "run": "fp32", "max": 1, "requires": "tpu"}])")),
            "p.json: 'expect[0].requires' must be cuda or cpu (got 'tpu')");
  const Preset gpu = find_preset("gpu-mixed-precision-pays");
  EXPECT_EQ(required_backend(gpu), "cuda");
  ASSERT_EQ(gpu.runs.size(), 2u);
  EXPECT_EQ(gpu.runs[0].config.recipe, "fp32");
  EXPECT_EQ(gpu.runs[1].config.recipe, "mixed-bf16");
  EXPECT_EQ(gpu.runs[0].config.model, "transformer");
  EXPECT_EQ(gpu.runs[0].config.batch, 512);
  EXPECT_EQ(gpu.expect[0].metric, "samples_per_second");
  EXPECT_EQ(gpu.expect[1].metric, "device_memory");
}

TEST(Preset, ANumberBeyondDoubleIsAnErrorNotACrash) {
  EXPECT_EQ(error_of(R"({"title": "T", "steps": 1e999})").rfind("p.json: not valid JSON: ", 0), 0u);
}

}  // namespace
