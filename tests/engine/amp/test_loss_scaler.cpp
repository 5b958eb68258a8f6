// LossScaler as a state machine, driven the way the training step drives it
// (a GradSet of parameters' gradients, the fused unscale-and-check, one read
// of its slots, record_nonfinite): scripted overflow sequences replayed
// against GradScaler's rules, step by step.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <vector>

#include "amp/grad_set.h"
#include "amp/loss_scaler.h"
#include "engine/support/test_backend.h"
#include "nn/parameter.h"

using engine::Format;
using engine::GradSet;
using engine::LossScaler;
using engine::LossScalerConfig;
using engine::ScalerStateError;
using engine::ScalingMode;

namespace {

const float kInf = std::numeric_limits<float>::infinity();

// Gradients as a step holds them: one parameter per value list, its
// gradient stored in `format`, bound to a GradSet whose slots (the sum of
// squares, then one count per parameter) are one buffer, read at once.
struct StepGrads {
  std::deque<engine::Parameter> params;
  std::vector<engine::Parameter*> ptrs;
  engine::Buffer slots;
  GradSet set;
  std::vector<std::int64_t> host;

  explicit StepGrads(const std::vector<std::vector<float>>& values, Format format = Format::FP32) {
    for (const auto& v : values) {
      engine::Parameter& p = params.emplace_back();
      p.shape = {static_cast<std::int64_t>(v.size())};
      p.grad = engine::Tensor::from_values(p.shape, format, v);
      ptrs.push_back(&p);
    }
    slots.reserve((1 + ptrs.size()) * sizeof(std::int64_t));
    set.bind(ptrs, slots.as<std::int64_t>() + 1, slots.as<double>());
  }
  // The step's one read; returns the total non-finite count.
  std::int64_t read() {
    host.resize(1 + ptrs.size());
    slots.download(host.data(), host.size() * sizeof(std::int64_t));
    std::int64_t total = 0;
    for (std::size_t k = 0; k < ptrs.size(); ++k) total += count(k);
    return total;
  }
  std::int64_t count(std::size_t k) const { return host[1 + k]; }
  double sum_squares() const {
    double d;
    std::memcpy(&d, host.data(), sizeof d);
    return d;
  }
  std::vector<float> values(std::size_t k) const {
    const float* v = set.values(k);
    return {v, v + set.numel(k)};
  }
};

// One step: gradients g (already scaled), returns whether the step was taken.
bool step(LossScaler& s, const std::vector<float>& g) {
  StepGrads grads({g});
  s.unscale(test::cpu_backend(), grads.set);
  s.record_nonfinite(grads.read());
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
  StepGrads grads({{3.0f, 1.0f, -6.0f}});
  s.unscale(test::cpu_backend(), grads.set);
  EXPECT_EQ(grads.read(), 0);
  const float inv = static_cast<float>(1.0 / 3.0);
  const std::vector<float> g = grads.values(0);
  EXPECT_EQ(g[0], 3.0f * inv);
  EXPECT_EQ(g[1], inv);
  EXPECT_EQ(g[2], -6.0f * inv);
}

TEST(LossScaler, CountsEveryNonFiniteValuePerGradient) {
  LossScaler s;
  std::vector<float> b(100000, 1.0f);
  b[777] = std::nanf("");
  StepGrads grads({{kInf, 1.0f, -kInf}, b});
  s.unscale(test::cpu_backend(), grads.set);
  s.record_nonfinite(grads.read());
  EXPECT_EQ(grads.count(0), 2);
  EXPECT_EQ(grads.count(1), 1);
  EXPECT_FALSE(s.should_step());
}

// FP16 gradients (the fp16 recipe's): the pass decodes them into their FP32
// views as it unscales, and an FP16 overflow (inf code) is counted.
TEST(LossScaler, CodedGradientsAreDecodedAsTheyAreUnscaled) {
  LossScalerConfig c;
  c.init_scale = 1024.0;
  LossScaler s(c);
  StepGrads grads({{2048.0f, -512.0f, 65504.0f}, {1.0f, 1e6f}}, Format::FP16);  // 1e6 -> inf in FP16
  ASSERT_TRUE(grads.set.coded(0));
  s.unscale(test::cpu_backend(), grads.set);
  s.record_nonfinite(grads.read());
  EXPECT_EQ(grads.values(0), (std::vector<float>{2.0f, -0.5f, 65504.0f / 1024.0f}));
  EXPECT_EQ(grads.count(0), 0);
  EXPECT_EQ(grads.count(1), 1);
  EXPECT_FALSE(s.should_step());
  s.update();
  EXPECT_EQ(s.scale(), 512.0f);
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
  StepGrads grads({{0.5f, kInf}});
  s.unscale(test::cpu_backend(), grads.set);
  s.record_nonfinite(grads.read());
  EXPECT_EQ(grads.count(0), 1);
  EXPECT_EQ(grads.values(0)[0], 0.5f);  // untouched
  EXPECT_TRUE(s.should_step());         // PyTorch without a scaler steps anyway
  s.update();
  EXPECT_EQ(s.scale(), 1.0f);
}

TEST(LossScaler, MisuseIsAPreciseError) {
  LossScaler s;
  StepGrads grads(std::vector<std::vector<float>>{{1.0f}});
  auto says = [](auto&& call, const char* what) {
    try {
      call();
      ADD_FAILURE() << "no error: " << what;
    } catch (const ScalerStateError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  says([&] { s.should_step(); }, "should_step() called before unscale()");
  says([&] { s.update(); }, "update() must follow");
  says([&] { s.record_nonfinite(0); }, "record_nonfinite() called before unscale()");
  says([&] { s.unscale_again(test::cpu_backend(), grads.set); }, "unscale_again() called before unscale()");
  s.unscale(test::cpu_backend(), grads.set);
  says([&] { s.unscale(test::cpu_backend(), grads.set); }, "unscale() has already been called");
  says([&] { s.should_step(); }, "should_step() called before record_nonfinite()");
  s.record_nonfinite(grads.read());
  says([&] { s.record_nonfinite(0); }, "record_nonfinite() already called");
  EXPECT_TRUE(s.should_step());
  says([&] { s.should_step(); }, "should_step() already called");
  s.update();
  EXPECT_NO_THROW(s.unscale(test::cpu_backend(), grads.set));  // ready again
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
  StepGrads grads({{12.0f, -16.0f}});  // unscaled: 3, -4
  s.unscale(test::cpu_backend(), grads.set);
  s.record_nonfinite(grads.read());
  EXPECT_EQ(grads.sum_squares(), 25.0);
}

// The overflow attribution re-run recomputes the (scaled) gradients after
// unscale(): unscale_again divides them by the same scale, coded ones
// decoded from their codes first, and counts nothing.
TEST(LossScaler, RecomputedGradientsAreUnscaledAgain) {
  LossScalerConfig c;
  c.init_scale = 4.0;
  LossScaler s(c);
  StepGrads coded({{8.0f, kInf}}, Format::FP16);
  StepGrads plain(std::vector<std::vector<float>>{{12.0f}});
  s.unscale(test::cpu_backend(), coded.set);
  s.record_nonfinite(coded.read());
  s.unscale_again(test::cpu_backend(), plain.set);  // (not unscaled before: only the multiply shows)
  EXPECT_EQ(plain.values(0)[0], 3.0f);
  // Backward again: an FP32 gradient rewritten in place, a coded one's
  // view stale until decoded.
  plain.params[0].grad.f32()[0] = 20.0f;
  coded.set.values(0)[0] = 99.0f;
  s.unscale_again(test::cpu_backend(), coded.set);
  s.unscale_again(test::cpu_backend(), plain.set);
  EXPECT_EQ(coded.values(0)[0], 2.0f);
  EXPECT_EQ(plain.values(0)[0], 5.0f);
  coded.read();
  EXPECT_EQ(coded.count(0), 1);  // the slots still hold unscale()'s counts
  EXPECT_FALSE(s.should_step());
}
