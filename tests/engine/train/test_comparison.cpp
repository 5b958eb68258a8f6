// Comparisons (engine/train/comparison.h): the one rule the CLI and the app
// build a comparison's runs with, and the run history they all keep.
#include <gtest/gtest.h>

#include "train/comparison.h"
#include "records/metrics.h"

namespace {

using namespace engine;

TEST(Comparison, EachRecipeKeepsItsOwnLossScalingRule) {
  RunConfig base;
  base.seed = 7;
  base.loss_scale.init_scale = 1024;  // --loss-scale-init 1024
  base.loss_scale_set = true;
  const auto runs = comparison_runs(base, {"fp32", "fp16", "mixed-fp16", "mixed-bf16", "fp8"});
  ASSERT_EQ(runs.size(), 5u);
  for (const ComparisonRun& r : runs) {
    SCOPED_TRACE(r.name);
    EXPECT_EQ(r.name, r.config.recipe);
    EXPECT_EQ(r.config.seed, 7u);  // same data, same initial weights
    EXPECT_EQ(r.config.compare.size(), 5u);
    const bool scales = r.config.recipe == "mixed-fp16" || r.config.recipe == "fp8";
    // Unscaled recipes stay unscaled (their recipe default, mode none).
    EXPECT_EQ(r.config.loss_scale_set, scales);
    if (scales) {
      EXPECT_EQ(r.config.loss_scale.init_scale, 1024);
      EXPECT_EQ(r.config.loss_scale.mode, ScalingMode::Dynamic);
    }
  }
}

TEST(Comparison, WithoutScalerSettingsEveryRecipeHasItsDefaults) {
  RunConfig base;
  base.layers["fc1"] = LayerPrecision{Format::FP16, Format::FP16, Format::FP16, Format::FP16};
  for (const ComparisonRun& r : comparison_runs(base, {"fp32", "mixed-fp16"})) {
    EXPECT_FALSE(r.config.loss_scale_set);
    EXPECT_EQ(r.config.layers.size(), 1u) << "a config's overrides apply to every run";
  }
}

TEST(Comparison, ARepeatedRecipeGetsANameOfItsOwn) {
  const auto runs = comparison_runs(RunConfig{}, {"fp16", "fp32", "fp16"});
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].name, "fp16");
  EXPECT_EQ(runs[1].name, "fp32");
  EXPECT_EQ(runs[2].name, "fp16 (2)");
}

TEST(RunHistory, KeepsRecordsAndTheSummaryCounters) {
  RunHistory h;
  for (int i = 1; i <= 4; ++i) {
    StepMetrics m;
    m.step = i;
    m.loss = 1.0 / i;
    m.loss_scale = i < 3 ? 65536.0 : 32768.0;
    m.overflow = m.skipped = i == 2;
    m.mem.weights = 100 * i;
    m.mem.emulation = 1 << 20;  // never part of the peak
    m.wall_ms = 10;
    m.samples_per_second = 12800;  // 128 samples in 10 ms
    EXPECT_TRUE(h.add(Record{m}));
  }
  EXPECT_FALSE(h.add(Record{RunStatus{}}));
  GradStats g;
  g.step = 4;
  g.layer = "fc2";
  h.add(g);
  g.layer = "fc1";
  h.add(g);
  EXPECT_EQ(h.overflow_steps, 1);
  EXPECT_EQ(h.skipped_steps, 1);
  EXPECT_EQ(h.peak_memory, 400);
  EXPECT_EQ(h.loss_scale_at(3), 32768.0);
  EXPECT_EQ(h.grad_layers(), (std::vector<std::string>{"fc2", "fc1"}));
  ASSERT_NE(h.latest_grad("fc1"), nullptr);
  const RunSummary s = h.summarize(16384.0);
  EXPECT_EQ(s.steps, 4);
  EXPECT_EQ(s.final_loss, 0.25);
  EXPECT_EQ(s.final_loss_scale, 16384.0);
  EXPECT_DOUBLE_EQ(s.wall_seconds, 0.04);
  EXPECT_DOUBLE_EQ(s.samples_per_second, 12800.0);
}

TEST(Events, KindsHaveTheirCsvNames) {
  for (EventKind k : {EventKind::Overflow, EventKind::NanLoss, EventKind::Skipped, EventKind::ScaleChange,
                      EventKind::PrecisionChange, EventKind::Error})
    EXPECT_EQ(parse_event_kind(event_kind_name(k)), k);
  EXPECT_STREQ(event_kind_name(EventKind::NanLoss), "nan_loss");
  EXPECT_FALSE(parse_event_kind("overflows").has_value());
}

}  // namespace
