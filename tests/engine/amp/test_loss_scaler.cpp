// LossScaler as a state machine: scripted overflow sequences replayed against
// GradScaler's rules, step by step.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "amp/loss_scaler.h"
#include "engine/support/test_backend.h"

using engine::LossScaler;
using engine::LossScalerConfig;
using engine::ScalerStateError;
using engine::ScalingMode;

namespace {

const float kInf = std::numeric_limits<float>::infinity();

// One step: gradients g (already scaled), returns whether the step was taken.
bool step(LossScaler& s, std::vector<float> g) {
  LossScaler::GradSpan span{g.data(), static_cast<std::int64_t>(g.size())};
  s.unscale(test::cpu_backend(), {&span, 1});
  const bool took = s.should_step();
  s.update();
  return took;
}

// GradScaler's update rule, written out independently for the replay.
struct Reference {
  double scale, growth, backoff;
  std::int64_t interval, tracker = 0;
  void update(bool found_inf) {
    if (found_inf) {
      scale *= backoff;
      tracker = 0;
    } else if (++tracker == interval) {
      scale *= growth;
      tracker = 0;
    }
  }
};

}  // namespace

TEST(LossScaler, DefaultsAreGradScalers) {
  LossScalerConfig c;
  EXPECT_EQ(c.mode, ScalingMode::Dynamic);
  EXPECT_EQ(c.init_scale, 65536.0);
  EXPECT_EQ(c.growth_factor, 2.0);
  EXPECT_EQ(c.backoff_factor, 0.5);
  EXPECT_EQ(c.growth_interval, 2000);
  LossScaler s;
  EXPECT_EQ(s.scale(), 65536.0f);
}

TEST(LossScaler, OverflowSkipsStepAndBacksOff) {
  LossScaler s;
  EXPECT_FALSE(step(s, {1.0f, kInf}));
  EXPECT_EQ(s.scale(), 32768.0f);
  EXPECT_FALSE(step(s, {std::nanf("")}));
  EXPECT_EQ(s.scale(), 16384.0f);
  EXPECT_TRUE(step(s, {1.0f, 2.0f}));
  EXPECT_EQ(s.scale(), 16384.0f);
  EXPECT_EQ(s.growth_tracker(), 1);
}

TEST(LossScaler, GrowsAfterIntervalOfCleanSteps) {
  LossScalerConfig c;
  c.growth_interval = 3;
  LossScaler s(c);
  EXPECT_TRUE(step(s, {1.0f}));
  EXPECT_TRUE(step(s, {1.0f}));
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_EQ(s.growth_tracker(), 2);
  EXPECT_TRUE(step(s, {1.0f}));
  EXPECT_EQ(s.scale(), 131072.0f);
  EXPECT_EQ(s.growth_tracker(), 0);
}

TEST(LossScaler, OverflowResetsGrowthCounter) {
  LossScalerConfig c;
  c.growth_interval = 3;
  LossScaler s(c);
  step(s, {1.0f});
  step(s, {1.0f});
  step(s, {kInf});  // backoff, tracker reset
  EXPECT_EQ(s.scale(), 32768.0f);
  step(s, {1.0f});
  step(s, {1.0f});
  EXPECT_EQ(s.scale(), 32768.0f);  // only 2 clean since the overflow
  step(s, {1.0f});
  EXPECT_EQ(s.scale(), 65536.0f);
}

TEST(LossScaler, ReplaysScriptedSequenceAgainstReference) {
  LossScalerConfig c;
  c.init_scale = 1024.0;
  c.growth_factor = 4.0;
  c.backoff_factor = 0.25;
  c.growth_interval = 5;
  LossScaler s(c);
  Reference ref{1024.0, 4.0, 0.25, 5};
  // A fixed pseudo-random script of overflow steps.
  std::uint32_t x = 12345;
  for (int i = 0; i < 500; ++i) {
    x = x * 1664525u + 1013904223u;
    const bool inf = (x >> 28) < 3;  // ~19% of the steps overflow
    ASSERT_EQ(s.scale(), static_cast<float>(ref.scale)) << "step " << i;
    const bool took = step(s, {1.0f, inf ? kInf : 2.0f});
    EXPECT_EQ(took, !inf) << "step " << i;
    ref.update(inf);
    EXPECT_EQ(s.growth_tracker(), ref.tracker) << "step " << i;
  }
}

TEST(LossScaler, UnscalesWithDoubleReciprocal) {
  LossScalerConfig c;
  c.init_scale = 3.0;  // not a power of two: the reciprocal's rounding shows
  LossScaler s(c);
  std::vector<float> g = {3.0f, 1.0f, -6.0f};
  LossScaler::GradSpan span{g.data(), 3};
  EXPECT_EQ(s.unscale(test::cpu_backend(), {&span, 1}), 0);
  const float inv = static_cast<float>(1.0 / 3.0);
  EXPECT_EQ(g[0], 3.0f * inv);
  EXPECT_EQ(g[1], inv);
  EXPECT_EQ(g[2], -6.0f * inv);
}

TEST(LossScaler, CountsEveryNonFiniteValue) {
  LossScaler s;
  std::vector<float> a = {kInf, 1.0f, -kInf};
  std::vector<float> b(100000, 1.0f);
  b[777] = std::nanf("");
  LossScaler::GradSpan spans[2] = {{a.data(), 3}, {b.data(), 100000}};
  EXPECT_EQ(s.unscale(test::cpu_backend(), spans), 3);
  EXPECT_FALSE(s.should_step());
}

TEST(LossScaler, GrowthStopsAtFloatMax) {
  LossScalerConfig c;
  c.init_scale = 2.0e38;
  c.growth_interval = 1;
  LossScaler s(c);
  step(s, {1.0f});
  EXPECT_EQ(s.scale(), 2.0e38f);  // 4e38 is not finite in float: not applied
  EXPECT_EQ(s.growth_tracker(), 0);
}

TEST(LossScaler, StaticKeepsScaleButSkipsOverflow) {
  LossScalerConfig c;
  c.mode = ScalingMode::Static;
  c.init_scale = 128.0;
  c.growth_interval = 1;
  LossScaler s(c);
  EXPECT_FALSE(step(s, {kInf}));
  EXPECT_EQ(s.scale(), 128.0f);
  EXPECT_TRUE(step(s, {1.0f}));
  EXPECT_EQ(s.scale(), 128.0f);
}

TEST(LossScaler, NoneIsANoOpThatStillCounts) {
  LossScalerConfig c;
  c.mode = ScalingMode::None;
  LossScaler s(c);
  EXPECT_EQ(s.scale(), 1.0f);
  std::vector<float> g = {0.5f, kInf};
  LossScaler::GradSpan span{g.data(), 2};
  EXPECT_EQ(s.unscale(test::cpu_backend(), {&span, 1}), 1);
  EXPECT_EQ(g[0], 0.5f);               // untouched
  EXPECT_TRUE(s.should_step());        // PyTorch without a scaler steps anyway
  s.update();
  EXPECT_EQ(s.scale(), 1.0f);
}

TEST(LossScaler, MisuseIsAPreciseError) {
  LossScaler s;
  std::vector<float> g = {1.0f};
  LossScaler::GradSpan span{g.data(), 1};
  EXPECT_THROW(s.should_step(), ScalerStateError);  // before unscale
  EXPECT_THROW(s.update(), ScalerStateError);
  s.unscale(test::cpu_backend(), {&span, 1});
  EXPECT_THROW(s.unscale(test::cpu_backend(), {&span, 1}), ScalerStateError);  // twice
  EXPECT_TRUE(s.should_step());
  EXPECT_THROW(s.should_step(), ScalerStateError);
  s.update();
  EXPECT_NO_THROW(s.unscale(test::cpu_backend(), {&span, 1}));  // ready again
}

TEST(LossScaler, SettingsChangeAtRuntime) {
  LossScaler s;
  step(s, {kInf});
  EXPECT_EQ(s.scale(), 32768.0f);
  LossScalerConfig c;
  c.growth_interval = 1;
  s.set_config(c);  // same mode: scale kept
  EXPECT_EQ(s.scale(), 32768.0f);
  step(s, {1.0f});
  EXPECT_EQ(s.scale(), 65536.0f);
  c.mode = ScalingMode::Static;
  c.init_scale = 8.0;
  s.set_config(c);  // mode change: restarts from init
  EXPECT_EQ(s.scale(), 8.0f);
}

TEST(LossScaler, RejectsOutOfRangeSettingsByName) {
  LossScalerConfig c;
  c.growth_factor = 1.0;
  try {
    LossScaler s(c);
    FAIL() << "accepted growth_factor 1";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("loss_scale.growth_factor"), std::string::npos) << e.what();
  }
  c = {};
  c.backoff_factor = 1.5;
  EXPECT_THROW(LossScaler{c}, std::invalid_argument);
  c = {};
  c.growth_interval = 0;
  EXPECT_THROW(LossScaler{c}, std::invalid_argument);
  c = {};
  c.init_scale = -1;
  EXPECT_THROW(LossScaler{c}, std::invalid_argument);
}

TEST(LossScaler, FusedSumOfSquaresIsTheUnscaledNorm) {
  LossScalerConfig c;
  c.init_scale = 4.0;
  LossScaler s(c);
  std::vector<float> g = {12.0f, -16.0f};  // unscaled: 3, -4
  LossScaler::GradSpan span{g.data(), 2};
  double sq = -1.0;
  s.unscale(test::cpu_backend(), {&span, 1}, &sq);
  EXPECT_EQ(sq, 25.0);
  std::vector<float> h = {8.0f};
  LossScaler::GradSpan hs{h.data(), 1};
  LossScaler::multiply_by_inverse(test::cpu_backend(), {&hs, 1}, 4.0f);
  EXPECT_EQ(h[0], 2.0f);
}
