// Optimizer state stored in BF16/FP16: values are representable, rounded before use, counted at 2 bytes.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>

#include "engine/optim/reference.h"
#include "engine/support/test_backend.h"
#include "numeric/convert.h"
#include "optim/adam.h"
#include "optim/sgd.h"

namespace {

bool bf16_representable(float x) { return (std::bit_cast<std::uint32_t>(x) & 0xFFFFu) == 0; }

TEST(StateFormat, SgdMomentumInBf16IsRoundedBeforeTheUpdateUsesIt) {
  test::Problem prob({9, 70000});
  engine::Sgd sgd({0.9, 0.0, 0.0, false}, engine::Format::BF16);
  engine::Sgd exact({0.9, 0.0, 0.0, false});
  test::Problem prob_exact({9, 70000});
  EXPECT_EQ(sgd.state_bytes_for(100), 200u);
  for (int t = 1; t <= 4; ++t) {
    std::vector<std::vector<float>> g{prob.grad(0, t), prob.grad(1, t)};
    const auto before = prob.params;
    sgd.step(test::cpu_backend(), test::slots_for(prob.params, g, prob.decay), 0.1);
    exact.step(test::cpu_backend(), test::slots_for(prob_exact.params, g, prob_exact.decay), 0.1);
    for (std::size_t s = 0; s < 2; ++s) {
      const auto buf = sgd.state(s, 0);
      ASSERT_EQ(buf.size(), prob.params[s].size());
      for (std::size_t i = 0; i < buf.size(); ++i) {
        ASSERT_TRUE(bf16_representable(buf[i])) << "slot " << s << " [" << i << "] = " << buf[i];
        // The parameter moved by exactly lr times the *stored* (rounded) buffer.
        ASSERT_EQ(prob.params[s][i], before[s][i] - 0.1f * buf[i]) << "slot " << s << " [" << i << "]";
      }
    }
  }
  EXPECT_EQ(sgd.state_bytes(), (9u + 70000u) * 2u);
  // Rounding really happened: the FP32-state run differs.
  std::size_t differ = 0;
  const std::vector<float> rounded = sgd.state(1, 0), plain = exact.state(1, 0);
  for (std::size_t i = 0; i < 70000; ++i) differ += rounded[i] != plain[i];
  EXPECT_GT(differ, 60000u);
}

TEST(StateFormat, AdamMomentsInBf16AndFp16AreRepresentableAndStillClose) {
  for (engine::Format f : {engine::Format::BF16, engine::Format::FP16}) {
    test::Problem prob({40, 70000});
    test::Problem exact_prob({40, 70000});
    engine::Adam adam({}, true, f);
    engine::Adam exact({}, true);
    for (int t = 1; t <= 5; ++t) {
      std::vector<std::vector<float>> g{prob.grad(0, t), prob.grad(1, t)};
      adam.step(test::cpu_backend(), test::slots_for(prob.params, g, prob.decay), 0.01);
      exact.step(test::cpu_backend(), test::slots_for(exact_prob.params, g, exact_prob.decay), 0.01);
    }
    EXPECT_EQ(adam.state_bytes(), (40u + 70000u) * 2u * 2u) << engine::format_name(f);
    for (std::size_t s = 0; s < 2; ++s) {
      for (std::size_t b = 0; b < 2; ++b) {
        for (float x : adam.state(s, b)) ASSERT_EQ(engine::quantize(f, x), x) << engine::format_name(f);
      }
    }
    if (f != engine::Format::BF16) continue;
    // BF16 moments (FP32's range) change the trajectory only slightly. FP16
    // is not held to this: g^2 below 2^-24 flushes exp_avg_sq to 0 and the
    // step becomes m / eps -- what FP16 optimizer state does to Adam.
    double worst = 0;
    for (std::size_t i = 0; i < 40; ++i) {
      worst = std::max(worst, double(std::abs(prob.params[0][i] - exact_prob.params[0][i])));
    }
    EXPECT_GT(worst, 0.0) << engine::format_name(f);
    EXPECT_LT(worst, 0.01) << engine::format_name(f);
  }
}

TEST(StateFormat, SwitchingFormatRoundsExistingState) {
  test::Problem prob({500});
  engine::Sgd sgd({0.9, 0.0, 0.0, false});
  const std::vector<std::vector<float>> g{prob.grad(0, 1)};
  sgd.step(test::cpu_backend(), test::slots_for(prob.params, g, prob.decay), 0.1);
  bool any_unrepresentable = false;
  for (float x : sgd.state(0, 0)) any_unrepresentable |= !bf16_representable(x);
  EXPECT_TRUE(any_unrepresentable);
  EXPECT_EQ(sgd.state_bytes(), 2000u);
  sgd.set_state_format(engine::Format::BF16);
  EXPECT_EQ(sgd.state_format(), engine::Format::BF16);
  EXPECT_EQ(sgd.state_bytes(), 1000u);
  for (float x : sgd.state(0, 0)) ASSERT_TRUE(bf16_representable(x));
}

}  // namespace
