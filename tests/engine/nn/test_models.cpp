// Models: whole-model gradient checks, builders, shapes, errors, describe() and seeded initialisation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>

#include "engine/nn/gradcheck.h"
#include "nn/attention.h"
#include "nn/conv2d.h"
#include "nn/linear.h"
#include "nn/model.h"

namespace {

using namespace engine;

// ------------------------------------------------------------ gradients

// ReLU models: a step of 1e-3 keeps hidden pre-activations on their side of
// the kink for all but a rare element, which the L2 criterion tolerates.
TEST(ModelGradients, Mlp) {
  std::mt19937_64 rng(21);
  auto m = build_mlp({6}, 3, {5, 4});
  m->init(1);
  test::GradCheckOptions opt;
  opt.step = 1e-3f;
  test::expect_model_gradients(*m, test::random_tensor({4, 6}, rng), opt);
}

TEST(ModelGradients, Cnn) {
  std::mt19937_64 rng(22);
  auto m = build_cnn({1, 8, 8}, 3, 2, 3, 5);
  m->init(2);
  test::GradCheckOptions opt;
  opt.step = 1e-3f;
  opt.samples = 20;
  test::expect_model_gradients(*m, test::random_tensor({2, 1, 8, 8}, rng), opt);
}

TEST(ModelGradients, Transformer) {
  std::mt19937_64 rng(23);
  auto m = build_transformer({1, 14, 14}, 3, 8, 2, 2, 2, 7);
  m->init(3);
  test::GradCheckOptions opt;
  opt.samples = 20;
  test::expect_model_gradients(*m, test::random_tensor({2, 1, 14, 14}, rng), opt);
}

// ------------------------------------------------------------ builders and shapes

TEST(Builders, MlpForFashionMnist) {
  auto m = build_model("mlp", {1, 28, 28}, 10);
  EXPECT_EQ(m->parameter_count(), 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
  std::vector<std::string> names;
  for (Layer* l : m->leaves()) names.push_back(l->name());
  EXPECT_EQ(names, (std::vector<std::string>{"flatten", "fc1", "relu1", "fc2", "relu2", "fc3"}));
  m->init(1);
  std::mt19937_64 rng(1);
  Tensor x = test::random_tensor({3, 1, 28, 28}, rng);
  const Tensor& y = m->forward(test::backend(), x);
  EXPECT_EQ(y.shape(), (Shape{3, 10}));
  EXPECT_EQ(y.format(), Format::FP32);
}

TEST(Builders, MlpOnFlatSamples) {
  // Spirals (2 features, 2 classes) and tiny-gradients (4 regression outputs).
  auto spirals = build_model("mlp", {2}, 2);
  EXPECT_EQ(spirals->leaves().front()->name(), "fc1");  // no flatten for flat samples
  auto reg = build_mlp({8}, 4, {16});
  EXPECT_EQ(reg->parameter_count(), 8 * 16 + 16 + 16 * 4 + 4);
  reg->init(5);
  std::mt19937_64 rng(2);
  Tensor x = test::random_tensor({5, 8}, rng);
  EXPECT_EQ(reg->forward(test::backend(), x).shape(), (Shape{5, 4}));
}

TEST(Builders, CnnForFashionMnist) {
  auto m = build_model("cnn", {1, 28, 28}, 10);
  EXPECT_EQ(m->parameter_count(),
            (1 * 32 * 25 + 32) + (32 * 64 * 25 + 64) + (64 * 7 * 7 * 128 + 128) + (128 * 10 + 10));
  int matmuls = 0;
  for (Layer* l : m->leaves()) matmuls += l->is_matmul();
  EXPECT_EQ(matmuls, 4);  // two convs, two linears
  m->init(1);
  std::mt19937_64 rng(3);
  Tensor x = test::random_tensor({2, 1, 28, 28}, rng);
  EXPECT_EQ(m->forward(test::backend(), x).shape(), (Shape{2, 10}));
}

TEST(Builders, TransformerForFashionMnist) {
  auto m = build_model("transformer", {1, 28, 28}, 10);
  const std::int64_t block = 2 * 64 * 2 + (64 * 192 + 192) + (64 * 64 + 64) + (64 * 128 + 128) + (128 * 64 + 64);
  EXPECT_EQ(m->parameter_count(), (64 * 49 + 64 + 16 * 64) + 2 * block + 2 * 64 + (64 * 10 + 10));
  int norms = 0, softmaxes = 0;
  for (Layer* l : m->leaves()) {
    norms += std::strcmp(l->kind(), "layernorm") == 0;
    softmaxes += std::strcmp(l->kind(), "softmax") == 0;
    if (std::strcmp(l->kind(), "layernorm") == 0 || std::strcmp(l->kind(), "softmax") == 0) {
      EXPECT_FALSE(l->is_matmul()) << l->name();
    }
  }
  EXPECT_EQ(norms, 5);      // ln1, ln2 per block, final norm
  EXPECT_EQ(softmaxes, 2);  // one per block: its own leaf, so a recipe can set it alone
  m->init(1);
  std::mt19937_64 rng(4);
  Tensor x = test::random_tensor({2, 1, 28, 28}, rng);
  const Tensor& y = m->forward(test::backend(), x);
  EXPECT_EQ(y.shape(), (Shape{2, 10}));
  for (float v : y.to_f32()) EXPECT_TRUE(std::isfinite(v));
}

TEST(Builders, FlatBatchForAnImageModel) {
  // The trainer may hand over [B, 784]: same values, same logits.
  auto m = build_model("cnn", {1, 28, 28}, 10);
  m->init(9);
  std::mt19937_64 rng(5);
  Tensor x4 = test::random_tensor({2, 1, 28, 28}, rng);
  Tensor x2 = Tensor::from_values({2, 784}, Format::FP32, x4.to_f32());
  const std::vector<float> a = m->forward(test::backend(), x4).to_f32();
  const std::vector<float> b = m->forward(test::backend(), x2).to_f32();
  EXPECT_EQ(a, b);
}

TEST(Builders, Describe) {
  auto m = build_model("transformer", {1, 28, 28}, 10);
  const std::string d = m->describe();
  EXPECT_EQ(static_cast<std::size_t>(std::count(d.begin(), d.end(), '\n')), m->leaves().size());
  EXPECT_NE(d.find("block0.attn.softmax"), std::string::npos);
  EXPECT_NE(d.find("4x16x16"), std::string::npos);  // scores per sample: heads x tokens x tokens
  EXPECT_NE(d.find("12480 params"), std::string::npos);  // qkv: 64*192 + 192
  auto mlp = build_model("mlp", {1, 28, 28}, 10);
  EXPECT_NE(mlp->describe().find("200960 params"), std::string::npos);
}

// ------------------------------------------------------------ errors

TEST(Errors, WrongInputShapeNamesTheLayer) {
  Backend& be = test::backend();
  Linear fc("fc7", 4, 3);
  auto ctx = fc.make_context();
  Tensor x({2, 5}, Format::FP32), y;
  try {
    fc.forward(be, x, y, *ctx);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("fc7"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("2x5"), std::string::npos) << e.what();
  }
  Conv2d conv("conv3", 3, 4, 5, 2);
  auto cctx = conv.make_context();
  Tensor img({1, 2, 8, 8}, Format::FP32);
  EXPECT_THROW(
      {
        try {
          conv.forward(be, img, y, *cctx);
        } catch (const std::invalid_argument& e) {
          EXPECT_NE(std::string(e.what()).find("conv3"), std::string::npos) << e.what();
          throw;
        }
      },
      std::invalid_argument);
}

TEST(Errors, ModelInputAndGradientShapes) {
  auto m = build_model("mlp", {1, 28, 28}, 10);
  Tensor bad({2, 100}, Format::FP32);
  EXPECT_THROW(m->forward(test::backend(), bad), std::invalid_argument);
  Tensor dl({2, 10}, Format::FP32);
  EXPECT_THROW(m->backward(test::backend(), dl), std::logic_error);  // before forward
  Tensor x({2, 1, 28, 28}, Format::FP32);
  m->forward(test::backend(), x);
  Tensor wrong({3, 10}, Format::FP32);
  EXPECT_THROW(m->backward(test::backend(), wrong), std::invalid_argument);
}

TEST(Errors, UnknownModelIsOneLine) {
  try {
    build_model("resnet", {1, 28, 28}, 10);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("resnet"), std::string::npos);
    EXPECT_EQ(w.find('\n'), std::string::npos);
  }
  EXPECT_THROW(build_model("cnn", {2}, 2), std::runtime_error);          // spirals are not images
  EXPECT_THROW(build_model("transformer", {1, 30, 30}, 10), std::runtime_error);  // 30 is no multiple of 7
  EXPECT_THROW(build_transformer({1, 28, 28}, 10, 60, 7), std::runtime_error);   // 60 channels, 7 heads
}

TEST(Errors, ValuesLeafRunsOnlyInsideAttention) {
  Attention attn("attn", 8, 2);
  auto ctx = attn.values().make_context();
  Tensor p({1, 2, 3, 3}, Format::FP32), y;
  EXPECT_THROW(attn.values().forward(test::backend(), p, y, *ctx), std::logic_error);
}

// ------------------------------------------------------------ initialisation

std::vector<std::vector<float>> weights_of(Model& m) {
  std::vector<std::vector<float>> w;
  for (Parameter* p : m.parameters()) w.push_back(p->weight.to_f32());
  return w;
}

TEST(Init, SameSeedSameWeights) {
  for (const char* name : {"mlp", "cnn", "transformer"}) {
    auto a = build_model(name, {1, 28, 28}, 10);
    auto b = build_model(name, {1, 28, 28}, 10);
    a->init(42);
    b->init(42);
    EXPECT_EQ(weights_of(*a), weights_of(*b)) << name;
    b->init(43);
    EXPECT_NE(weights_of(*a), weights_of(*b)) << name;
  }
}

TEST(Init, PinnedValues) {
  // The generator and transforms are our own integer/IEEE arithmetic, so
  // these bits hold on every platform; a change here changes every run.
  auto m = build_model("mlp", {2}, 2);
  m->init(1);
  const std::vector<float> w = m->parameters()[0]->weight.to_f32();
  std::uint32_t bits[3];
  std::memcpy(bits, w.data(), sizeof bits);
  // fc1.weight[0..2] for seed 1 (fan_in 2, bound 1/sqrt(2)).
  EXPECT_EQ(bits[0], 0x3EA5D78Eu);  // 0.3239102
  EXPECT_EQ(bits[1], 0xBF10B672u);  // -0.5652839
  EXPECT_EQ(bits[2], 0xBBC0195Bu);  // -0.005862398
}

TEST(Init, PyTorchDefaults) {
  auto m = build_model("transformer", {1, 28, 28}, 10);
  m->init(7);
  std::map<std::string, std::int64_t> fan_in_of;  // layer name -> fan_in of its weight
  for (Parameter* p : m->parameters())
    if (p->name.ends_with(".weight")) fan_in_of[p->name.substr(0, p->name.size() - 7)] = p->numel() / p->shape[0];
  EXPECT_EQ(fan_in_of["patch_embed"], 49);
  for (Parameter* p : m->parameters()) {
    const std::vector<float> v = p->weight.to_f32();
    const std::string& n = p->name;
    if (n.ends_with(".gamma")) {
      for (float x : v) ASSERT_EQ(x, 1.0f) << n;
      EXPECT_FALSE(p->decay);
    } else if (n.ends_with(".beta")) {
      for (float x : v) ASSERT_EQ(x, 0.0f) << n;
      EXPECT_FALSE(p->decay);
    } else if (n.ends_with(".pos")) {
      double s2 = 0;
      for (float x : v) s2 += double(x) * x;
      EXPECT_NEAR(std::sqrt(s2 / v.size()), 0.02, 0.002) << n;
      EXPECT_FALSE(p->decay);
    } else {
      // U(-1/sqrt(fan_in), 1/sqrt(fan_in)); fan_in from the layer's weight.
      const std::int64_t fan_in = fan_in_of.at(n.substr(0, n.rfind('.')));
      double lo = 0, hi = 0;
      for (float x : v) {
        lo = std::min(lo, double(x));
        hi = std::max(hi, double(x));
      }
      const double bound = 1.0 / std::sqrt(double(fan_in));
      EXPECT_LE(hi, bound) << n;
      EXPECT_GE(lo, -bound) << n;
      if (v.size() >= 64) {  // fills the range (0.9^64: a miss is a broken transform)
        EXPECT_GT(hi, 0.8 * bound) << n;
        EXPECT_LT(lo, -0.8 * bound) << n;
      }
      EXPECT_EQ(p->decay, n.ends_with(".weight")) << n;
    }
  }
}

}  // namespace
