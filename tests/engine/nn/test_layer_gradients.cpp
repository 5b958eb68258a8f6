// Finite-difference checks of every layer's backward (dx and every parameter gradient), in FP32.
//
// Loss = sum(y * R) for a fixed random R, so dy = R; central differences with
// the loss accumulated in double. Tolerance: relative L2 error < 1e-2 and
// largest element error < 3e-2 of the largest gradient, on up to 40 sampled
// elements per tensor (f32 forward noise is ~1e-6 of the loss, far below).
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "engine/nn/gradcheck.h"
#include "nn/attention.h"
#include "nn/conv2d.h"
#include "nn/flatten.h"
#include "nn/gelu.h"
#include "nn/layernorm.h"
#include "nn/linear.h"
#include "nn/maxpool2d.h"
#include "nn/mean_pool.h"
#include "nn/patch_embed.h"
#include "nn/relu.h"
#include "nn/softmax.h"
#include "nn/transformer_block.h"

namespace {

using namespace engine;
using test::expect_layer_gradients;

TEST(LayerGradients, Linear) {
  std::mt19937_64 rng(1);
  Linear fc("fc", 7, 5);
  test::randomize(fc.parameters(), rng);
  expect_layer_gradients(fc, test::random_tensor({4, 7}, rng));
}

TEST(LayerGradients, LinearOnTokens) {
  // [B, T, C] input: rows are B*T (the transformer's use).
  std::mt19937_64 rng(2);
  Linear fc("fc", 6, 4);
  test::randomize(fc.parameters(), rng);
  expect_layer_gradients(fc, test::random_tensor({2, 3, 6}, rng));
}

TEST(LayerGradients, LinearWithoutBias) {
  std::mt19937_64 rng(3);
  Linear fc("fc", 5, 3, false);
  ASSERT_EQ(fc.parameters().size(), 1u);
  test::randomize(fc.parameters(), rng);
  expect_layer_gradients(fc, test::random_tensor({3, 5}, rng));
}

TEST(LayerGradients, Conv2dPadded5x5) {
  std::mt19937_64 rng(4);
  Conv2d conv("conv", 2, 3, 5, 2);
  test::randomize(conv.parameters(), rng, 0.3f);
  expect_layer_gradients(conv, test::random_tensor({2, 2, 6, 6}, rng));
}

TEST(LayerGradients, Conv2dUnpadded3x3) {
  std::mt19937_64 rng(5);
  Conv2d conv("conv", 3, 2, 3, 0);
  test::randomize(conv.parameters(), rng, 0.3f);
  expect_layer_gradients(conv, test::random_tensor({2, 3, 5, 4}, rng));
}

TEST(LayerGradients, MaxPool2d) {
  // Distinct values 0.05 apart: a step of 1e-2 never changes a window's winner.
  std::mt19937_64 rng(6);
  const Shape s = {2, 2, 5, 4};  // odd height: the last row is dropped (floor)
  std::vector<float> v(static_cast<std::size_t>(shape_numel(s)));
  std::iota(v.begin(), v.end(), 0.0f);
  std::shuffle(v.begin(), v.end(), rng);
  for (auto& x : v) x = (x - 40.0f) * 0.05f;
  MaxPool2d pool("pool", 2);
  expect_layer_gradients(pool, Tensor::from_values(s, Format::FP32, v));
}

TEST(LayerGradients, ReLU) {
  std::mt19937_64 rng(7);
  ReLU relu("relu");
  expect_layer_gradients(relu, Tensor::from_values({3, 8}, Format::FP32, test::away_from_zero(24, rng, 0.1f, 1.0f)));
}

TEST(LayerGradients, GELU) {
  std::mt19937_64 rng(8);
  GELU gelu("gelu");
  expect_layer_gradients(gelu, test::random_tensor({3, 10}, rng, -3.0f, 3.0f));
}

TEST(LayerGradients, LayerNorm) {
  std::mt19937_64 rng(9);
  LayerNorm ln("ln", 8);
  test::randomize(ln.parameters(), rng, 1.0f);
  expect_layer_gradients(ln, test::random_tensor({2, 3, 8}, rng, -2.0f, 2.0f));
}

TEST(LayerGradients, Softmax) {
  std::mt19937_64 rng(10);
  Softmax sm("softmax");
  expect_layer_gradients(sm, test::random_tensor({2, 3, 6}, rng, -2.0f, 2.0f));
}

TEST(LayerGradients, Flatten) {
  std::mt19937_64 rng(11);
  Flatten f("flatten");
  expect_layer_gradients(f, test::random_tensor({2, 2, 3, 2}, rng));
}

TEST(LayerGradients, MeanPool) {
  std::mt19937_64 rng(12);
  MeanPool pool("pool");
  expect_layer_gradients(pool, test::random_tensor({2, 5, 4}, rng));
}

TEST(LayerGradients, PatchEmbed) {
  std::mt19937_64 rng(13);
  PatchEmbed pe("patch_embed", 2, 6, 9, 3, 5);  // 2x3 patches of 2*3*3 values
  EXPECT_EQ(pe.tokens(), 6);
  test::randomize(pe.parameters(), rng, 0.3f);
  expect_layer_gradients(pe, test::random_tensor({2, 2, 6, 9}, rng));
}

TEST(LayerGradients, AttentionScores) {
  std::mt19937_64 rng(14);
  AttentionScores scores("scores", 8, 2);
  expect_layer_gradients(scores, test::random_tensor({2, 3, 24}, rng));
}

TEST(LayerGradients, Attention) {
  // Covers qkv, scores, softmax, values (only usable inside attention) and proj.
  std::mt19937_64 rng(15);
  Attention attn("attn", 8, 2);
  ASSERT_EQ(attn.parameters().size(), 4u);
  test::randomize(attn.parameters(), rng, 0.5f);
  expect_layer_gradients(attn, test::random_tensor({2, 4, 8}, rng));
}

TEST(LayerGradients, TransformerBlock) {
  std::mt19937_64 rng(16);
  TransformerBlock block("block", 8, 2, 2);
  ASSERT_EQ(block.parameters().size(), 12u);
  test::randomize(block.parameters(), rng, 0.4f);
  // LayerNorm parameters near their usual values, so the block is well conditioned.
  for (Parameter* p : {&block.ln1().gamma(), &block.ln2().gamma()}) {
    auto v = test::uniform_values(p->numel(), rng, 0.8f, 1.2f);
    p->weight.from_f32(v.data(), p->numel());
  }
  expect_layer_gradients(block, test::random_tensor({2, 4, 8}, rng));
}

// A Linear whose weight gradient is 5% too large: the check must notice.
class SkewedLinear : public Linear {
 public:
  using Linear::Linear;
  void backward(Backend& be, const Tensor& dy, Tensor* dx, Context& ctx) override {
    Linear::backward(be, dy, dx, ctx);
    be.scale(weight().grad.f32(), 1.05f, weight().grad.numel());
  }
};

TEST(LayerGradients, CheckDetectsAWrongGradient) {
  std::mt19937_64 rng(17);
  SkewedLinear fc("fc", 6, 4);
  test::randomize(fc.parameters(), rng);
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    expect_layer_gradients(fc, test::random_tensor({3, 6}, rng));
  }
  ASSERT_GE(failures.size(), 1);
  for (int i = 0; i < failures.size(); ++i) {
    const std::string msg = failures.GetTestPartResult(i).message();
    EXPECT_NE(msg.find("fc.weight"), std::string::npos) << msg;  // only the skewed tensor fails
  }
}

}  // namespace
