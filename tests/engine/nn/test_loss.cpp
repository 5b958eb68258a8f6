// Losses: finite-difference checks of dlogits, the loss-scale factor, and low-precision gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/nn/gradcheck.h"
#include "nn/loss.h"
#include "numeric/convert.h"

namespace {

using namespace engine;

TEST(Loss, CrossEntropyGradientMatchesFiniteDifferences) {
  Backend& be = test::backend();
  std::mt19937_64 rng(41);
  Tensor logits = test::random_tensor({5, 4}, rng, -2.0f, 2.0f);
  const std::vector<std::int32_t> labels = {0, 3, 1, 1, 2};
  LossWorkspace ws;
  Tensor dl;
  std::int64_t correct = -1;
  const double loss = cross_entropy_loss(be, logits, labels.data(), 1.0f, &dl, ws, &correct);
  // Reference loss in double.
  const std::vector<float> v = logits.to_f32();
  double ref = 0;
  std::int64_t ref_correct = 0;
  for (int r = 0; r < 5; ++r) {
    double mx = -1e30, s = 0;
    int arg = 0;
    for (int c = 0; c < 4; ++c)
      if (v[r * 4 + c] > mx) mx = v[r * 4 + c], arg = c;
    for (int c = 0; c < 4; ++c) s += std::exp(v[r * 4 + c] - mx);
    ref += -(v[r * 4 + labels[r]] - mx - std::log(s));
    ref_correct += arg == labels[r];
  }
  EXPECT_NEAR(loss, ref / 5, 1e-6);
  EXPECT_EQ(correct, ref_correct);
  ASSERT_EQ(dl.shape(), logits.shape());
  std::vector<std::int64_t> idx(20);
  for (int i = 0; i < 20; ++i) idx[i] = i;
  std::vector<double> num, ana;
  LossWorkspace ws2;
  test::numeric_gradient(logits.f32(), idx, 1e-2f,
                         [&] { return cross_entropy_loss(be, logits, labels.data(), 1.0f, nullptr, ws2); }, num);
  for (float g : dl.to_f32()) ana.push_back(g);
  test::expect_close("dlogits", ana, num, {});
}

TEST(Loss, MseGradientMatchesFiniteDifferences) {
  Backend& be = test::backend();
  std::mt19937_64 rng(42);
  Tensor pred = test::random_tensor({3, 4}, rng);
  const std::vector<float> target = test::uniform_values(12, rng);
  LossWorkspace ws;
  Tensor dp;
  const double loss = mse_loss(be, pred, target.data(), 1.0f, &dp, ws);
  const std::vector<float> v = pred.to_f32();
  double ref = 0;
  for (int i = 0; i < 12; ++i) ref += (double(v[i]) - target[i]) * (double(v[i]) - target[i]);
  EXPECT_NEAR(loss, ref / 12, 1e-6);
  std::vector<std::int64_t> idx(12);
  for (int i = 0; i < 12; ++i) idx[i] = i;
  std::vector<double> num, ana;
  test::numeric_gradient(pred.f32(), idx, 1e-2f,
                         [&] { return mse_loss(be, pred, target.data(), 1.0f, nullptr, ws); }, num);
  for (float g : dp.to_f32()) ana.push_back(g);
  test::expect_close("dpred", ana, num, {});
}

TEST(Loss, ScaleMultipliesTheGradientOnly) {
  Backend& be = test::backend();
  std::mt19937_64 rng(43);
  Tensor logits = test::random_tensor({3, 5}, rng);
  const std::vector<std::int32_t> labels = {4, 0, 2};
  LossWorkspace ws;
  Tensor g1, g1024;
  const double l1 = cross_entropy_loss(be, logits, labels.data(), 1.0f, &g1, ws);
  const double l1024 = cross_entropy_loss(be, logits, labels.data(), 1024.0f, &g1024, ws);
  EXPECT_EQ(l1, l1024);  // the reported loss is the true one
  const std::vector<float> a = g1.to_f32(), b = g1024.to_f32();
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(b[i], a[i] * 1024.0f);  // power of two: exact
}

TEST(Loss, Fp16GradientsOverflowWithAHugeScale) {
  Backend& be = test::backend();
  std::mt19937_64 rng(44);
  Tensor logits = test::random_tensor({2, 3}, rng);
  const std::vector<std::int32_t> labels = {1, 2};
  LossWorkspace ws;
  Tensor g, g32;
  cross_entropy_loss(be, logits, labels.data(), 8.0f, &g, ws, nullptr, Format::FP16);
  cross_entropy_loss(be, logits, labels.data(), 8.0f, &g32, ws);
  ASSERT_EQ(g.format(), Format::FP16);
  EXPECT_EQ(g.bytes(), 6u * 2);
  const std::vector<float> a = g.to_f32(), b = g32.to_f32();
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], quantize(Format::FP16, b[i]));
  // 2^20 times a gradient of order 0.1-0.5 passes 65504: inf, as a scaled FP16 backward would.
  cross_entropy_loss(be, logits, labels.data(), 1048576.0f, &g, ws, nullptr, Format::FP16);
  int infs = 0;
  for (float v : g.to_f32()) infs += std::isinf(v);
  EXPECT_GT(infs, 0);
}

TEST(Loss, AcceptsLowPrecisionLogits) {
  Backend& be = test::backend();
  std::mt19937_64 rng(45);
  Tensor l32 = test::random_tensor({4, 3}, rng);
  std::vector<float> v = l32.to_f32();
  for (auto& x : v) x = quantize(Format::FP16, x);
  Tensor l16 = Tensor::from_values({4, 3}, Format::FP16, v);
  Tensor lr = Tensor::from_values({4, 3}, Format::FP32, v);
  const std::vector<std::int32_t> labels = {0, 1, 2, 0};
  LossWorkspace ws;
  EXPECT_EQ(cross_entropy_loss(be, l16, labels.data(), 1.0f, nullptr, ws),
            cross_entropy_loss(be, lr, labels.data(), 1.0f, nullptr, ws));
  Tensor bad({12}, Format::FP32);
  EXPECT_THROW(cross_entropy_loss(be, bad, labels.data(), 1.0f, nullptr, ws), std::invalid_argument);
}

}  // namespace
