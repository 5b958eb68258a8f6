// Generated sets: spirals and tiny-gradients shapes, determinism, and the documented magnitudes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "data/dataset.h"
#include "data/synthetic.h"
#include "numeric/convert.h"

namespace {

TEST(Spirals, ShapesLabelsAndRange) {
  const engine::DatasetPair p = engine::load_dataset("spirals", 3);
  EXPECT_EQ(p.train.name, "spirals");
  EXPECT_EQ(p.train.count, 2000u);
  EXPECT_EQ(p.test.count, 1000u);
  EXPECT_FALSE(p.train.shape.is_image());
  EXPECT_EQ(p.train.shape.features, 2u);
  EXPECT_EQ(p.train.classes, 2);
  EXPECT_EQ(p.train.output_width(), 2u);
  ASSERT_EQ(p.train.inputs.size(), 4000u);
  ASSERT_EQ(p.train.labels.size(), 2000u);
  int ones = 0;
  for (auto l : p.train.labels) {
    ASSERT_TRUE(l == 0 || l == 1);
    ones += l;
  }
  EXPECT_EQ(ones, 1000);
  // Radius <= 5 plus noise 0.25 per coordinate, divided by 5.
  const float bound = static_cast<float>((5.0 + 0.25 * std::sqrt(2.0)) / 5.0);
  for (std::size_t i = 0; i < p.train.count; ++i) {
    const float r = std::hypot(p.train.inputs[2 * i], p.train.inputs[2 * i + 1]);
    ASSERT_LE(r, bound) << i;
  }
}

TEST(Spirals, TheTwoClassesAreInterleavedSpiralsNotBlobs) {
  // Noise-free geometry: a point of class c at radius r = 5u sits at angle
  // 1.75 * 2 pi u + c pi. Class 1 is class 0 turned by pi: at equal radius
  // the two classes are on opposite sides of the origin.
  const engine::DatasetPair p = engine::make_spirals(11, 4000, 10);
  double class_mean[2][2] = {{0, 0}, {0, 0}};
  for (std::size_t i = 0; i < p.train.count; ++i) {
    class_mean[p.train.labels[i]][0] += p.train.inputs[2 * i];
    class_mean[p.train.labels[i]][1] += p.train.inputs[2 * i + 1];
  }
  // Class centroids mirror each other through the origin.
  EXPECT_NEAR(class_mean[0][0] / 2000, -class_mean[1][0] / 2000, 0.05);
  EXPECT_NEAR(class_mean[0][1] / 2000, -class_mean[1][1] / 2000, 0.05);
  // Every point lies within the noise (0.25 * sqrt 2, in radius-5 units) of
  // its class's noise-free spiral, sampled finely here; and points are
  // nearer their own spiral than the other one (most of them: noise blurs
  // the centre, where the spirals meet).
  std::vector<double> curve[2];
  for (int c = 0; c < 2; ++c) {
    for (int k = 0; k <= 4000; ++k) {
      const double u = k / 4000.0, r = 5 * u, t = 1.75 * 2 * std::numbers::pi * u + c * std::numbers::pi;
      curve[c].push_back(r * std::sin(t));
      curve[c].push_back(r * std::cos(t));
    }
  }
  auto dist = [&](int c, double x, double y) {
    double best = 1e9;
    for (std::size_t k = 0; k < curve[c].size(); k += 2) {
      best = std::min(best, std::hypot(x - curve[c][k], y - curve[c][k + 1]));
    }
    return best;
  };
  int own_closer = 0;
  for (std::size_t i = 0; i < p.train.count; i += 4) {  // 1000 points
    const double x = p.train.inputs[2 * i] * 5.0, y = p.train.inputs[2 * i + 1] * 5.0;
    const int c = p.train.labels[i];
    const double own = dist(c, x, y);
    ASSERT_LT(own, 0.25 * std::sqrt(2.0) + 0.01) << i;
    own_closer += own < dist(1 - c, x, y);
  }
  EXPECT_GT(own_closer, 950);
}

TEST(Spirals, DeterministicForASeedAndDifferentAcrossSeeds) {
  const auto a = engine::load_dataset("spirals", 42);
  const auto b = engine::load_dataset("spirals", 42);
  const auto c = engine::load_dataset("spirals", 43);
  EXPECT_EQ(a.train.inputs, b.train.inputs);
  EXPECT_EQ(a.test.inputs, b.test.inputs);
  EXPECT_EQ(a.train.labels, b.train.labels);
  EXPECT_NE(a.train.inputs, c.train.inputs);
  EXPECT_NE(a.train.inputs, a.test.inputs);
}

constexpr std::size_t kIn = engine::kTinyGradientsInputs, kOut = engine::kTinyGradientsOutputs;

TEST(TinyGradients, ShapesAndDeterminism) {
  const auto a = engine::load_dataset("tiny-gradients", 5);
  const auto b = engine::load_dataset("tiny-gradients", 5);
  const auto c = engine::load_dataset("tiny-gradients", 6);
  EXPECT_EQ(a.train.name, "tiny-gradients");
  EXPECT_EQ(a.train.count, 8192u);
  EXPECT_EQ(a.test.count, 1024u);
  EXPECT_EQ(a.train.shape.features, 4u);
  EXPECT_EQ(a.train.classes, 0);
  EXPECT_FALSE(a.train.is_classification());
  EXPECT_EQ(a.train.target_width, 128u);
  EXPECT_EQ(a.train.output_width(), 128u);
  EXPECT_EQ(a.train.target_scale, std::ldexp(1.0, -14));
  EXPECT_EQ(a.train.inputs.size(), 8192u * 4u);
  EXPECT_EQ(a.train.targets.size(), 8192u * 128u);
  EXPECT_TRUE(a.train.labels.empty());
  float lo = 0, hi = 0;
  for (float v : a.train.inputs) {
    ASSERT_TRUE(v >= -8.0f && v <= 8.0f);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_LT(lo, -7.9f);  // the documented range is used, not a corner of it
  EXPECT_GT(hi, 7.9f);
  EXPECT_EQ(a.train.inputs, b.train.inputs);
  EXPECT_EQ(a.train.targets, b.train.targets);
  EXPECT_EQ(a.test.targets, b.test.targets);
  EXPECT_NE(a.train.targets, c.train.targets);
}

// Solves the normal equations (double, Gaussian elimination) for one
// output: the targets must be an exactly linear function of the inputs with
// one matrix shared by train and test.
std::vector<double> fit_row(const engine::Dataset& d, std::size_t out) {
  const std::size_t n = kIn;
  std::vector<double> m(n * (n + 1), 0.0);
  for (std::size_t s = 0; s < d.count; ++s) {
    const float* x = &d.inputs[s * n];
    const double y = d.targets[s * kOut + out] / d.target_scale;
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < n; ++j) m[i * (n + 1) + j] += double(x[i]) * x[j];
      m[i * (n + 1) + n] += double(x[i]) * y;
    }
  }
  for (std::size_t c = 0; c < n; ++c) {
    for (std::size_t r = c + 1; r < n; ++r) {
      const double f = m[r * (n + 1) + c] / m[c * (n + 1) + c];
      for (std::size_t k = c; k <= n; ++k) m[r * (n + 1) + k] -= f * m[c * (n + 1) + k];
    }
  }
  std::vector<double> a(n);
  for (std::size_t c = n; c-- > 0;) {
    double s = m[c * (n + 1) + n];
    for (std::size_t k = c + 1; k < n; ++k) s -= m[c * (n + 1) + k] * a[k];
    a[c] = s / m[c * (n + 1) + c];
  }
  return a;
}

TEST(TinyGradients, TargetsAreOneLinearMapScaledBy2ToTheMinus14) {
  const auto p = engine::load_dataset("tiny-gradients", 9);
  double sq = 0, zmax = 0;
  for (float y : p.train.targets) {
    sq += double(y) * y;
    zmax = std::max(zmax, std::abs(y / p.train.target_scale));
  }
  const double rms = std::sqrt(sq / p.train.targets.size());
  // Documented: unscaled targets have E[z^2] = 1 over the random matrix
  // (averaged over 128 outputs, so close to it), and |z| <= 6.
  EXPECT_GT(rms, 0.8 * std::ldexp(1.0, -14));
  EXPECT_LT(rms, 1.25 * std::ldexp(1.0, -14));
  EXPECT_LE(zmax, 6.0);
  for (std::size_t o = 0; o < kOut; ++o) {
    const auto a = fit_row(p.train, o);
    double max_err = 0;
    for (std::size_t s = 0; s < p.test.count; ++s) {
      double z = 0;
      for (std::size_t j = 0; j < kIn; ++j) z += a[j] * p.test.inputs[s * kIn + j];
      max_err = std::max(max_err, std::abs(z - p.test.targets[s * kOut + o] / p.test.target_scale));
    }
    ASSERT_LT(max_err, 1e-5) << "output " << o;  // float rounding of the targets only
  }
}

TEST(TinyGradients, MseGradientUnderflowsInFp16UnlessTheLossIsScaled) {
  // The documented arithmetic: the MSE gradient (mean over a batch of
  // 128 x 128 outputs) with respect to the zero predictions of a
  // zero-initialised head is 2 (0 - y) / 2^14 = -2^-27 z.
  const auto p = engine::load_dataset("tiny-gradients", 1);
  const std::size_t batch = 128;
  std::size_t zero_fp16 = 0, zero_scaled = 0, normal_targets = 0, total = 0;
  double sum_abs = 0;
  for (std::size_t s = 0; s < batch * 16; ++s) {  // 16 batches
    for (std::size_t o = 0; o < kOut; ++o) {
      const float y = p.train.targets[s * kOut + o];
      const float g = static_cast<float>(2.0 * (0.0 - y) / double(batch * kOut));
      sum_abs += std::abs(g);
      zero_fp16 += engine::quantize(engine::Format::FP16, g) == 0.0f;
      zero_scaled += engine::quantize(engine::Format::FP16, g * 65536.0f) == 0.0f;
      normal_targets += std::abs(y) >= std::ldexp(1.0f, -14);
      ++total;
    }
  }
  const double mean_abs = sum_abs / total;
  EXPECT_GT(mean_abs, std::ldexp(0.5, -27));  // about 2^-27 (E|z| ~ 0.8) ...
  EXPECT_LT(mean_abs, std::ldexp(1.0, -27));
  EXPECT_LT(mean_abs, std::ldexp(1.0, -25));  // ... below half FP16's smallest subnormal
  EXPECT_GT(double(zero_fp16) / total, 0.999);  // unscaled: all but the far tail flush to zero
  EXPECT_LT(double(zero_scaled) / total, 0.001);  // scaled by 2^16: nearly none do
  // A fifth to a half of the targets are FP16 normals (|z| >= 1); the rest
  // are subnormals at spacing 2^-24, still fine-grained next to 2^-14.
  EXPECT_GT(double(normal_targets) / total, 0.2);
  EXPECT_LT(double(normal_targets) / total, 0.5);
}

}  // namespace
