// Global-norm clipping: a clipping case, a non-clipping case, the boundary, non-finite norms.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/support/test_backend.h"
#include "optim/clip.h"

namespace {

// clip_grad_norm_ as PyTorch calls it: the global norm, then the clip.
double clip(const std::vector<engine::GradBuffer>& g, double max_norm) {
  return engine::clip_grad_norm(test::cpu_backend(), g, engine::global_grad_norm(test::cpu_backend(), g), max_norm);
}

TEST(ClipGradNorm, ClipsToMaxNormAcrossAllTensors) {
  std::vector<float> a{3.0f, 4.0f}, b{12.0f};  // global norm 13
  const std::vector<engine::GradBuffer> g{{a.data(), 2}, {b.data(), 1}};
  const double total = clip(g, 1.0);
  EXPECT_DOUBLE_EQ(total, 13.0);  // returned before clipping
  const double coef = 1.0 / (13.0 + 1e-6);
  EXPECT_FLOAT_EQ(a[0], float(3.0 * coef));
  EXPECT_FLOAT_EQ(a[1], float(4.0 * coef));
  EXPECT_FLOAT_EQ(b[0], float(12.0 * coef));
  EXPECT_NEAR(engine::global_grad_norm(test::cpu_backend(), g), 1.0, 1e-6);
}

TEST(ClipGradNorm, LeavesGradientsAloneBelowTheThreshold) {
  std::vector<float> a{3.0f, 4.0f}, b{12.0f};
  const auto a0 = a, b0 = b;
  const std::vector<engine::GradBuffer> g{{a.data(), 2}, {b.data(), 1}};
  EXPECT_DOUBLE_EQ(clip(g, 100.0), 13.0);
  EXPECT_EQ(a, a0);
  EXPECT_EQ(b, b0);
}

TEST(ClipGradNorm, AtExactlyMaxNormTheEpsilonStillClipsSlightly) {
  // PyTorch: coef = max / (total + 1e-6) < 1 when max == total.
  std::vector<float> a{3.0f, 4.0f};
  const std::vector<engine::GradBuffer> g{{a.data(), 2}};
  clip(g, 5.0);
  EXPECT_LT(a[0], 3.0f);
  EXPECT_FLOAT_EQ(a[0], float(3.0 * 5.0 / (5.0 + 1e-6)));
}

TEST(ClipGradNorm, NonFiniteNormIsReturnedAndGradientsUntouched) {
  std::vector<float> a{1.0f, std::numeric_limits<float>::infinity()}, b{2.0f};
  const auto a0 = a, b0 = b;
  const std::vector<engine::GradBuffer> g{{a.data(), 2}, {b.data(), 1}};
  EXPECT_TRUE(std::isinf(clip(g, 1.0)));
  EXPECT_EQ(a, a0);
  EXPECT_EQ(b, b0);

  std::vector<float> c{1.0f, std::numeric_limits<float>::quiet_NaN()};
  const std::vector<engine::GradBuffer> h{{c.data(), 2}};
  EXPECT_TRUE(std::isnan(clip(h, 1.0)));
  EXPECT_EQ(c[0], 1.0f);
}

TEST(ClipGradNorm, NoFloatOverflowInTheSumOfSquares) {
  // 3e38^2 overflows float; in double the norm is exact enough.
  std::vector<float> a{3e38f, 3e38f};
  const std::vector<engine::GradBuffer> g{{a.data(), 2}};
  EXPECT_NEAR(engine::global_grad_norm(test::cpu_backend(), g) / (3e38 * std::sqrt(2.0)), 1.0, 1e-7);
}

TEST(ClipGradNorm, LargeSpansMatchADoubleReferenceAndAreDeterministic) {
  std::vector<float> a(1'000'003), b(70'001);
  double ref = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(std::sin(0.001 * i) * 1e-3);
    ref += double(a[i]) * a[i];
  }
  for (std::size_t i = 0; i < b.size(); ++i) {
    b[i] = static_cast<float>(std::cos(0.01 * i));
    ref += double(b[i]) * b[i];
  }
  ref = std::sqrt(ref);
  const std::vector<engine::GradBuffer> g{{a.data(), static_cast<std::int64_t>(a.size())}, {b.data(), static_cast<std::int64_t>(b.size())}};
  const double n1 = engine::global_grad_norm(test::cpu_backend(), g);
  EXPECT_NEAR(n1 / ref, 1.0, 1e-12);
  EXPECT_EQ(engine::global_grad_norm(test::cpu_backend(), g), n1);  // bit-identical on a second call
  const double total = clip(g, 1.0);
  EXPECT_EQ(total, n1);
  EXPECT_NEAR(engine::global_grad_norm(test::cpu_backend(), g), 1.0, 1e-5);
}

TEST(ClipGradNorm, RejectsNegativeMaxNorm) {
  std::vector<float> a{1.0f};
  const std::vector<engine::GradBuffer> g{{a.data(), 1}};
  EXPECT_THROW(clip(g, -1.0), std::invalid_argument);
  EXPECT_THROW(clip(g, std::nan("")), std::invalid_argument);
}

}  // namespace
