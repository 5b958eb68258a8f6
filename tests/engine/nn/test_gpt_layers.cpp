// The gpt's layers: embeddings and causal attention against finite differences, the
// embedding's fixed-order scatter-add, and the causal mask of the whole model.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "engine/nn/gradcheck.h"
#include "nn/attention.h"
#include "nn/embedding.h"
#include "nn/model.h"
#include "nn/softmax.h"

namespace {

using namespace engine;
using test::expect_layer_gradients;

Tensor token_ids(const Shape& s, std::int64_t vocab, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::int64_t> d(0, vocab - 1);
  std::vector<float> v(static_cast<std::size_t>(shape_numel(s)));
  for (auto& x : v) x = static_cast<float>(d(rng));
  return Tensor::from_values(s, Format::FP32, v);
}

TEST(GptLayers, TokenEmbeddingGradient) {
  std::mt19937_64 rng(21);
  TokenEmbedding emb("embed.tok", 5, 6);
  test::randomize(emb.parameters(), rng);
  // 3 x 4 ids over 5 tokens: repeats, so rows of the gradient sum several dy rows.
  expect_layer_gradients(emb, token_ids({3, 4}, 5, rng), {}, false);
}

TEST(GptLayers, TokenEmbeddingForwardPicksRows) {
  TokenEmbedding emb("e", 3, 2);
  const std::vector<float> w = {1, 2, 3, 4, 5, 6};
  emb.weight().weight.from_f32(w.data(), 6);
  Tensor x = Tensor::from_values({1, 4}, Format::FP32, {2, 0, 2, 7});  // 7: no such token
  Tensor y;
  auto ctx = emb.make_context();
  emb.forward(test::backend(), x, y, *ctx);
  EXPECT_EQ(y.to_f32(), (std::vector<float>{5, 6, 1, 2, 5, 6, 0, 0}));
}

TEST(GptLayers, PositionEmbeddingGradient) {
  std::mt19937_64 rng(22);
  PositionEmbedding pos("embed.pos", 4, 5);
  test::randomize(pos.parameters(), rng);
  expect_layer_gradients(pos, test::random_tensor({3, 4, 5}, rng));
  // A shorter input uses the first positions only.
  expect_layer_gradients(pos, test::random_tensor({2, 3, 5}, rng));
}

// The scatter-add's bits do not depend on the thread count, and are the sums
// taken in token order.
TEST(GptLayers, EmbeddingBackwardIsDeterministic) {
  const std::int64_t n = 4096, vocab = 7, dim = 96;
  std::mt19937_64 rng(23);
  std::vector<float> ids(n), dy = test::uniform_values(n * dim, rng);
  std::uniform_int_distribution<int> d(0, vocab - 1);
  for (auto& x : ids) x = static_cast<float>(d(rng));
  std::vector<float> expect(static_cast<std::size_t>(vocab * dim), 0.0f);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t c = 0; c < dim; ++c) expect[ids[i] * dim + c] += dy[i * dim + c];
  for (int threads : {1, 2, 4}) {
    auto be = make_cpu_backend(threads);
    BackendScope scope(*be);
    Tensor tid = Tensor::from_values({n}, Format::FP32, ids);
    Tensor tdy = Tensor::from_values({n, dim}, Format::FP32, dy);
    Tensor g({vocab, dim}, Format::FP32);
    be->embedding(Pass::Backward, tid.f32(), tdy.f32(), g.f32(), n, vocab, dim);
    const std::vector<float> got = g.to_f32();
    EXPECT_EQ(std::memcmp(got.data(), expect.data(), expect.size() * sizeof(float)), 0) << threads << " threads";
  }
}

TEST(GptLayers, CausalSoftmaxGradientAndMask) {
  std::mt19937_64 rng(24);
  Softmax sm("softmax");
  sm.causal = true;
  std::vector<float> v = test::uniform_values(64, rng, -2.0f, 2.0f);
  expect_layer_gradients(sm, Tensor::from_values({2, 2, 4, 4}, Format::FP32, v));
  // Future scores, even inf and NaN, get probability 0 and gradient 0.
  v[1] = INFINITY;   // row 0, key 1
  v[4 + 3] = NAN;    // row 1, key 3
  Tensor xi = Tensor::from_values({2, 2, 4, 4}, Format::FP32, v);
  Tensor y, dx;
  auto ctx = sm.make_context();
  sm.forward(test::backend(), xi, y, *ctx);
  const std::vector<float> p = y.to_f32();
  EXPECT_EQ(p[0], 1.0f);
  for (int j = 1; j < 4; ++j) EXPECT_EQ(p[j], 0.0f);
  for (int j = 2; j < 4; ++j) EXPECT_EQ(p[4 + j], 0.0f);
  Tensor dy = test::random_tensor({2, 2, 4, 4}, rng);
  sm.backward(test::backend(), dy, &dx, *ctx);
  const std::vector<float> g = dx.to_f32();
  for (int j = 1; j < 4; ++j) EXPECT_EQ(g[j], 0.0f);
}

TEST(GptLayers, CausalScoresGradient) {
  std::mt19937_64 rng(25);
  AttentionScores scores("scores", 8, 2);
  scores.causal = true;
  expect_layer_gradients(scores, test::random_tensor({2, 3, 24}, rng));
}

TEST(GptLayers, CausalAttentionGradient) {
  std::mt19937_64 rng(26);
  Attention attn("attn", 8, 2, true);
  test::randomize(attn.parameters(), rng, 0.5f);
  expect_layer_gradients(attn, test::random_tensor({2, 5, 8}, rng));
}

TEST(GptLayers, QkNormAttentionGradient) {
  std::mt19937_64 rng(29);
  Attention attn("attn", 8, 2, true, true);
  ASSERT_EQ(attn.parameters().size(), 8u);  // qkv, q_norm, k_norm, proj: weight and bias each
  EXPECT_EQ(attn.leaves().size(), 7u);
  EXPECT_EQ(attn.leaves()[1]->name(), "attn.q_norm");
  EXPECT_EQ(attn.leaves()[2]->name(), "attn.k_norm");
  test::randomize(attn.parameters(), rng, 0.5f);
  for (Parameter* p : {&attn.q_norm().gamma(), &attn.k_norm().gamma()}) {
    auto v = test::uniform_values(p->numel(), rng, 0.8f, 1.5f);
    p->weight.from_f32(v.data(), p->numel());
  }
  // k_norm's beta adds one vector to every key: q.b is the same for every
  // key of a query, which the softmax cancels, so its gradient is 0 (f32
  // noise, both ways), checked on its own below.
  test::GradCheckOptions opt;
  opt.zero_norm = 1e-4;
  expect_layer_gradients(attn, test::random_tensor({2, 5, 8}, rng), opt);
  for (float g : attn.k_norm().beta().grad.to_f32()) EXPECT_LT(std::abs(g), 1e-4f);
  double qb = 0;
  for (float g : attn.q_norm().beta().grad.to_f32()) qb += std::abs(g);
  EXPECT_GT(qb, 1e-2);
}

// With qk_norm each head's queries and keys have mean 0 and variance 1
// before gamma: scaling the input's queries cannot grow the scores.
TEST(GptLayers, QkNormBoundsTheScores) {
  std::mt19937_64 rng(30);
  Attention attn("attn", 8, 2, true, true);
  test::randomize(attn.parameters(), rng, 0.5f);
  const std::vector<float> ones(4, 1.0f);
  attn.q_norm().gamma().weight.from_f32(ones.data(), 4);
  attn.k_norm().gamma().weight.from_f32(ones.data(), 4);
  attn.q_norm().beta().weight.zero();
  attn.k_norm().beta().weight.zero();
  Tensor x = test::random_tensor({1, 4, 8}, rng, -50.0f, 50.0f);
  Tensor y;
  auto ctx = attn.make_context();
  attn.forward(test::backend(), x, y, *ctx);
  const auto& c = static_cast<const AttentionContext&>(*ctx);
  const std::vector<float> q = c.q_out.to_f32();
  for (std::size_t r = 0; r < q.size() / 4; ++r) {
    double m = 0, v = 0;
    for (int j = 0; j < 4; ++j) m += q[r * 4 + j] / 4.0;
    for (int j = 0; j < 4; ++j) v += (q[r * 4 + j] - m) * (q[r * 4 + j] - m) / 4.0;
    EXPECT_NEAR(m, 0.0, 1e-5);
    EXPECT_NEAR(v, 1.0, 1e-2);
  }
  // |score| <= d * 1 * scale = sqrt(d) for unit-variance heads of d = 4.
  for (float s : c.scores.to_f32()) EXPECT_LE(std::abs(s), 2.0f + 1e-4f);
}

TEST(GptLayers, GptModelGradient) {
  std::mt19937_64 rng(27);
  auto m = build_gpt(7, GptShape{2, 8, 2, 5});
  // Weights of order 1 (nanoGPT's 0.02 leaves the residual stream so small
  // that the LayerNorms' curvature swamps a finite difference).
  test::randomize(m->parameters(), rng, 0.4f);
  for (Parameter* p : m->parameters())
    if (p->name.ends_with(".gamma")) {
      auto v = test::uniform_values(p->numel(), rng, 0.8f, 1.2f);
      p->weight.from_f32(v.data(), p->numel());
    }
  test::GradCheckOptions opt;
  opt.samples = 12;
  opt.zero_norm = 1e-4;  // k_norm's beta: no effect on the loss (QkNormAttentionGradient)
  test::expect_model_gradients(*m, token_ids({2, 5}, 7, rng), opt);
  // And with qk_norm.
  auto q = build_gpt(7, GptShape{1, 8, 2, 5, true});
  test::randomize(q->parameters(), rng, 0.4f);
  for (Parameter* p : q->parameters())
    if (p->name.ends_with(".gamma")) {
      auto v = test::uniform_values(p->numel(), rng, 0.8f, 1.2f);
      p->weight.from_f32(v.data(), p->numel());
    }
  test::expect_model_gradients(*q, token_ids({2, 5}, 7, rng), opt);
}

TEST(GptLayers, GptLeavesAndInit) {
  auto m = build_gpt(11, GptShape{2, 16, 4, 8});
  EXPECT_EQ(m->leaf_names(),
            "embed.tok, embed.pos, blocks.0.ln1, blocks.0.attn.qkv, blocks.0.attn.scores, blocks.0.attn.softmax, "
            "blocks.0.attn.values, blocks.0.attn.proj, blocks.0.ln2, blocks.0.fc1, blocks.0.gelu, blocks.0.fc2, "
            "blocks.1.ln1, blocks.1.attn.qkv, blocks.1.attn.scores, blocks.1.attn.softmax, blocks.1.attn.values, "
            "blocks.1.attn.proj, blocks.1.ln2, blocks.1.fc1, blocks.1.gelu, blocks.1.fc2, ln_f, head");
  m->init(5);
  auto stdev = [](const Parameter& p) {
    double s = 0;
    for (float v : p.weight.to_f32()) s += static_cast<double>(v) * v;
    return std::sqrt(s / static_cast<double>(p.numel()));
  };
  Layer* fc1 = m->find_leaf("blocks.0.fc1");
  Layer* fc2 = m->find_leaf("blocks.0.fc2");
  EXPECT_NEAR(stdev(*fc1->parameters()[0]), 0.02, 0.002);
  EXPECT_NEAR(stdev(*fc2->parameters()[0]), 0.02 / 2.0, 0.001);  // 0.02 / sqrt(2 L), L = 2
  for (float v : fc1->parameters()[1]->weight.to_f32()) EXPECT_EQ(v, 0.0f);
}

// Logits at position t do not move when tokens after t change (FP32 here;
// every recipe in tests/engine/train/test_gpt.cpp).
TEST(GptLayers, GptIsCausal) {
  std::mt19937_64 rng(28);
  auto m = build_gpt(9, GptShape{2, 16, 4, 6});
  m->init(4);
  Tensor a = token_ids({2, 6}, 9, rng);
  std::vector<float> v = a.to_f32();
  for (int b = 0; b < 2; ++b) v[b * 6 + 4] = static_cast<float>((static_cast<int>(v[b * 6 + 4]) + 1) % 9);
  v[5] = static_cast<float>((static_cast<int>(v[5]) + 2) % 9);
  Tensor b2 = Tensor::from_values(a.shape(), Format::FP32, v);
  const std::vector<float> la = m->forward(test::backend(), a).to_f32();
  const std::vector<float> lb = m->forward(test::backend(), b2).to_f32();
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 6; ++t) {
      const bool same = std::memcmp(&la[(b * 6 + t) * 9], &lb[(b * 6 + t) * 9], 9 * sizeof(float)) == 0;
      if (t < 4) EXPECT_TRUE(same) << "batch " << b << " position " << t;
      else EXPECT_FALSE(same) << "batch " << b << " position " << t;
    }
}

}  // namespace
