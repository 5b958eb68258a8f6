// Layers in low precision: rounding of inputs, weights, outputs and gradients, stored widths,
// saved-activation bytes, accumulation format and non-finite counts.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/nn/gradcheck.h"
#include "nn/attention.h"
#include "nn/conv2d.h"
#include "nn/linear.h"
#include "nn/model.h"
#include "nn/relu.h"
#include "numeric/cast.h"
#include "numeric/convert.h"

namespace {

using namespace engine;

constexpr LayerPrecision kFp16{Format::FP16, Format::FP16, Format::FP32, Format::FP16};

float fp16(double v) { return quantize(Format::FP16, static_cast<float>(v)); }

// Distance from |v| to the next FP16 value up (v a nonzero integer < 2048).
double fp16_ulp(double v) { return std::ldexp(1.0, static_cast<int>(std::floor(std::log2(std::abs(v)))) - 10); }

// Integer values in +-[1, 40] and, beside them, the same plus 0.45 ulp (in
// magnitude): not
// FP16 values, but they round (to nearest) back to the integers.
struct Operands {
  std::vector<float> ints, off;
};
Operands integer_operands(std::int64_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> mag(1, 40);
  std::bernoulli_distribution neg(0.5);
  Operands o;
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = (neg(rng) ? -1 : 1) * mag(rng);
    o.ints.push_back(static_cast<float>(v));
    // Away from zero: below a power of two the spacing halves.
    o.off.push_back(static_cast<float>(v + std::copysign(0.45 * fp16_ulp(v), v)));
  }
  return o;
}

// Sizes: rows 4, K = in 4, out 8. Every product is an integer below 1600 and
// every sum of K of them below 2^13, so f32 accumulation is exact and the
// only roundings are the ones under test; sums above 2048 land between FP16
// values (spacing 2 and 4 there), so the output rounding shows as well.
struct Fp16LinearCase {
  static constexpr std::int64_t rows = 4, in = 4, out = 8;
  std::mt19937_64 rng{31};
  Operands x = integer_operands(rows * in, rng);
  Operands w = integer_operands(out * in, rng);
  std::vector<float> b;
  Fp16LinearCase() {
    for (std::int64_t j = 0; j < out; ++j) b.push_back(static_cast<float>(static_cast<int>(j) - 4));
  }
  // fp16( sum_k xv[r,k] wv[j,k] + b[j] ), in double (exact here).
  std::vector<float> expected(const std::vector<float>& xv, const std::vector<float>& wv) const {
    std::vector<float> y;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < out; ++j) {
        double s = b[static_cast<std::size_t>(j)];
        for (std::int64_t k = 0; k < in; ++k) s += double(xv[r * in + k]) * wv[j * in + k];
        y.push_back(fp16(s));
      }
    return y;
  }
};

TEST(LowPrecision, Fp16LinearEqualsRoundedFp32Computation) {
  Fp16LinearCase c;
  for (std::size_t i = 0; i < c.x.off.size(); ++i) ASSERT_EQ(fp16(c.x.off[i]), c.x.ints[i]);
  for (bool amp_layout : {true, false}) {
    SCOPED_TRACE(amp_layout ? "weight stored FP16 with an FP32 master" : "weight left FP32");
    Linear fc("fc", c.in, c.out);
    fc.weight().weight.from_f32(c.w.off.data(), c.out * c.in);
    fc.bias().weight.from_f32(c.b.data(), c.out);
    if (amp_layout) {
      // What the AMP code does: FP32 master, FP16 compute copy.
      Parameter& p = fc.weight();
      p.master = std::move(p.weight);
      p.weight = Tensor();  // a moved-from Tensor keeps its old capacity: reset it
      encode_to(test::backend(), p.master, Format::FP16, p.weight);
    }
    fc.set_precision(kFp16);
    auto ctx = fc.make_context();
    Tensor x = Tensor::from_values({c.rows, c.in}, Format::FP32, c.x.off), y;
    fc.forward(test::backend(), x, y, *ctx);
    EXPECT_EQ(y.format(), Format::FP16);
    EXPECT_EQ(y.bytes(), static_cast<std::size_t>(2 * c.rows * c.out));
    EXPECT_EQ(y.to_f32(), c.expected(c.x.ints, c.w.ints));
    // The test can tell: without rounding the inputs, some outputs differ.
    EXPECT_NE(c.expected(c.x.off, c.w.off), c.expected(c.x.ints, c.w.ints));
    // Saved for backward: the FP16 input, 2 bytes per element.
    EXPECT_EQ(ctx->bytes(), static_cast<std::size_t>(2 * c.rows * c.in));
  }
}

TEST(LowPrecision, Fp16LinearGradientsAreRoundedToFp16) {
  Fp16LinearCase c;
  std::mt19937_64 rng(32);
  const Operands dy = integer_operands(c.rows * c.out, rng);
  Linear fc("fc", c.in, c.out);
  fc.weight().weight.from_f32(c.w.ints.data(), c.out * c.in);
  fc.set_precision(kFp16);
  auto ctx = fc.make_context();
  Tensor x = Tensor::from_values({c.rows, c.in}, Format::FP32, c.x.off), y, dx;
  fc.forward(test::backend(), x, y, *ctx);
  // dy arrives unrounded in FP32; the layer rounds it to FP16 first.
  fc.backward(test::backend(), Tensor::from_values({c.rows, c.out}, Format::FP32, dy.off), &dx, *ctx);
  ASSERT_EQ(dx.format(), Format::FP16);
  std::vector<float> dx_ref, dw_ref, db_ref;
  for (std::int64_t r = 0; r < c.rows; ++r)
    for (std::int64_t k = 0; k < c.in; ++k) {
      double s = 0;
      for (std::int64_t j = 0; j < c.out; ++j) s += double(dy.ints[r * c.out + j]) * c.w.ints[j * c.in + k];
      dx_ref.push_back(fp16(s));
    }
  for (std::int64_t j = 0; j < c.out; ++j) {
    double sb = 0;
    for (std::int64_t r = 0; r < c.rows; ++r) sb += dy.ints[r * c.out + j];
    db_ref.push_back(fp16(sb));
    for (std::int64_t k = 0; k < c.in; ++k) {
      double s = 0;
      for (std::int64_t r = 0; r < c.rows; ++r) s += double(dy.ints[r * c.out + j]) * c.x.ints[r * c.in + k];
      dw_ref.push_back(fp16(s));
    }
  }
  EXPECT_EQ(dx.to_f32(), dx_ref);
  // Parameter gradients: FP16 values in the grad tensor's own format (FP32 here).
  EXPECT_EQ(fc.weight().grad.format(), Format::FP32);
  EXPECT_EQ(fc.weight().grad.to_f32(), dw_ref);
  EXPECT_EQ(fc.bias().grad.to_f32(), db_ref);
}

TEST(LowPrecision, Tf32AndBf16RoundTheInputs) {
  Backend& be = test::backend();
  // 1 + 2^-12 is below half an ulp of 1 in TF32 (2^-11) and BF16 (2^-8).
  const float x1 = 1.0f + std::ldexp(1.0f, -12);
  for (Format f : {Format::TF32, Format::BF16}) {
    SCOPED_TRACE(format_name(f));
    Linear fc("fc", 8, 1, false);
    std::vector<float> ones(8, 1.0f);
    fc.weight().weight.from_f32(ones.data(), 8);
    fc.set_precision({f, Format::FP32, Format::FP32, Format::FP32});
    auto ctx = fc.make_context();
    Tensor x = Tensor::from_values({1, 8}, Format::FP32, std::vector<float>(8, x1)), y;
    fc.forward(be, x, y, *ctx);
    EXPECT_EQ(y.to_f32()[0], 8.0f);
    fc.set_precision({});
    fc.forward(be, x, y, *ctx);
    EXPECT_EQ(y.to_f32()[0], 8.0f * x1);  // FP32: no rounding, exact sum
  }
}

TEST(LowPrecision, Fp8WeightScaleIsFoldedOut) {
  // E4M3 weights stored as value * 4 with weight_scale 4: y uses the real value.
  Linear fc("fc", 2, 1, false);
  Parameter& p = fc.weight();
  p.master = Tensor::from_values({1, 2}, Format::FP32, {0.25f, -0.375f});
  p.weight = Tensor::from_values({1, 2}, Format::E4M3, {1.0f, -1.5f});
  p.weight_scale = 4.0f;
  fc.set_precision({Format::E4M3, Format::FP32, Format::FP32, Format::E5M2});
  auto ctx = fc.make_context();
  Tensor x = Tensor::from_values({2, 2}, Format::FP32, {2.0f, 1.0f, -4.0f, 3.0f}), y, dx;
  fc.forward(test::backend(), x, y, *ctx);
  EXPECT_EQ(y.to_f32(), (std::vector<float>{2 * 0.25f - 0.375f, -4 * 0.25f - 3 * 0.375f}));
  fc.backward(test::backend(), Tensor::from_values({2, 1}, Format::FP32, {1.0f, 2.0f}), &dx, *ctx);
  EXPECT_EQ(dx.format(), Format::E5M2);
  EXPECT_EQ(dx.to_f32(), (std::vector<float>{0.25f, -0.375f, 0.5f, -0.75f}));
  EXPECT_EQ(p.grad.to_f32(), (std::vector<float>{2.0f - 8.0f, 1.0f + 6.0f}));
}

TEST(LowPrecision, Fp16AccumulationRoundsTheRunningSum) {
  // 4096 ones: an FP16 running sum sticks at 2048 (2048 + 1 rounds back to
  // 2048); FP32 accumulation of the same FP16 products gives 4096.
  Linear fc("fc", 4096, 1, false);
  std::vector<float> ones(4096, 1.0f);
  fc.weight().weight.from_f32(ones.data(), 4096);
  Tensor x = Tensor::from_values({1, 4096}, Format::FP32, ones), y;
  auto ctx = fc.make_context();
  fc.set_precision({Format::FP16, Format::FP32, Format::FP16, Format::FP32});
  fc.forward(test::backend(), x, y, *ctx);
  EXPECT_EQ(y.to_f32()[0], 2048.0f);
  fc.set_precision({Format::FP16, Format::FP32, Format::FP32, Format::FP32});
  fc.forward(test::backend(), x, y, *ctx);
  EXPECT_EQ(y.to_f32()[0], 4096.0f);
}

TEST(LowPrecision, Fp16ConvMatchesRoundedFp32Conv) {
  std::mt19937_64 rng(33);
  Backend& be = test::backend();
  Conv2d lo("conv", 2, 3, 5, 2), ref("conv", 2, 3, 5, 2);
  test::randomize(lo.parameters(), rng, 0.3f);
  // The reference gets the FP16-rounded weights and inputs, runs in FP32.
  for (std::size_t i = 0; i < 2; ++i) {
    std::vector<float> v = lo.parameters()[i]->weight.to_f32();
    for (auto& e : v) e = fp16(e);
    ref.parameters()[i]->weight.from_f32(v.data(), static_cast<std::int64_t>(v.size()));
  }
  Tensor x = test::random_tensor({2, 2, 6, 6}, rng);
  std::vector<float> xr = x.to_f32();
  for (auto& e : xr) e = fp16(e);
  Tensor x16 = Tensor::from_values(x.shape(), Format::FP32, xr);
  lo.set_precision(kFp16);
  auto c1 = lo.make_context(), c2 = ref.make_context();
  Tensor y, yr;
  lo.forward(be, x, y, *c1);
  ref.forward(be, x16, yr, *c2);
  ASSERT_EQ(y.format(), Format::FP16);
  const std::vector<float> a = y.to_f32(), b = yr.to_f32();
  for (std::size_t i = 0; i < a.size(); ++i) {
    // Same f32 conv up to summation order: at most one FP16 ulp apart.
    EXPECT_LE(std::abs(a[i] - fp16(b[i])), std::ldexp(std::abs(b[i]), -10) + 1e-7) << i;
  }
  EXPECT_EQ(c1->bytes() * 2, c2->bytes());  // FP16 input saved: half the bytes
}

// An FP8 convolution's dy cast with its bias gradient: from FP32 dy one
// fused pass (codes, decode, channel sums), from BF16 codes of the same
// values a decode first. Both give the same gradients, to the bit, and the
// bias gradient is the double sum of dy per channel.
TEST(LowPrecision, Fp8ConvGradientsFromFp32AndFromBf16CodesAgree) {
  std::mt19937_64 rng(35);
  Backend& be = test::backend();
  const LayerPrecision fp8{Format::E4M3, Format::FP32, Format::FP32, Format::E5M2};
  Conv2d a("conv", 3, 20, 3, 1), b("conv", 3, 20, 3, 1);
  test::randomize(a.parameters(), rng, 0.3f);
  for (std::size_t i = 0; i < 2; ++i) {
    const std::vector<float> v = a.parameters()[i]->weight.to_f32();
    b.parameters()[i]->weight.from_f32(v.data(), static_cast<std::int64_t>(v.size()));
  }
  a.set_precision(fp8);
  b.set_precision(fp8);
  const Tensor x = test::random_tensor({4, 3, 9, 9}, rng);
  auto ca = a.make_context(), cb = b.make_context();
  Tensor ya, yb, dxa, dxb;
  a.forward(be, x, ya, *ca);
  b.forward(be, x, yb, *cb);
  std::vector<float> g = test::random_tensor(ya.shape(), rng, -2.0f, 2.0f).to_f32();
  for (float& v : g) v = quantize(Format::BF16, v);  // values both tensors hold exactly
  const Tensor dy32 = Tensor::from_values(ya.shape(), Format::FP32, g);
  const Tensor dy16 = Tensor::from_values(ya.shape(), Format::BF16, g);
  a.backward(be, dy32, &dxa, *ca);
  b.backward(be, dy16, &dxb, *cb);
  EXPECT_EQ(dxa.to_f32(), dxb.to_f32());
  EXPECT_EQ(a.weight().grad.to_f32(), b.weight().grad.to_f32());
  const std::vector<float> db = a.bias().grad.to_f32();
  EXPECT_EQ(db, b.bias().grad.to_f32());
  const std::int64_t n = 4, c = 20, hw = 9 * 9;
  for (std::int64_t j = 0; j < c; ++j) {
    double s = 0.0;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t k = 0; k < hw; ++k) s += g[static_cast<std::size_t>((i * c + j) * hw + k)];
    EXPECT_NEAR(db[static_cast<std::size_t>(j)], s, 1e-6 * std::max(1.0, std::abs(s))) << "channel " << j;
  }
}

TEST(LowPrecision, SavedActivationBytesHalve) {
  std::mt19937_64 rng(34);
  Tensor x = test::random_tensor({8, 1, 28, 28}, rng);
  {
    auto m = build_model("mlp", {1, 28, 28}, 10);
    m->init(1);
    EXPECT_EQ(m->saved_activation_bytes(), 0u);
    m->forward(test::backend(), x);
    const std::size_t fp32 = m->saved_activation_bytes();
    EXPECT_EQ(fp32, static_cast<std::size_t>(8 * (784 + 256 + 256 + 128 + 128) * 4));
    m->set_precision(kFp16);
    m->forward(test::backend(), x);
    EXPECT_EQ(m->saved_activation_bytes() * 2, fp32);
  }
  {
    // LayerNorm statistics and pooling indices stay 4 bytes; the rest halves.
    auto m = build_model("transformer", {1, 28, 28}, 10);
    m->init(1);
    m->forward(test::backend(), x);
    const std::size_t fp32 = m->saved_activation_bytes();
    m->set_precision(kFp16);
    const Tensor& y = m->forward(test::backend(), x);
    EXPECT_EQ(y.format(), Format::FP16);
    EXPECT_EQ(y.bytes(), static_cast<std::size_t>(8 * 10 * 2));
    EXPECT_LT(m->saved_activation_bytes(), fp32 * 55 / 100);
    for (float v : y.to_f32()) EXPECT_TRUE(std::isfinite(v));
  }
}

// The model's layers run one by one on fresh contexts, outside
// Model::forward (where a Flatten only copies): the output's values, and
// the Flatten's output format in *flat.
std::vector<float> layer_by_layer(Model& m, const Tensor& x, Format* flat) {
  const Tensor* in = &x;
  std::vector<Tensor> outs(m.layers().size());
  std::vector<std::unique_ptr<Context>> ctxs;
  for (std::size_t i = 0; i < m.layers().size(); ++i) {
    ctxs.push_back(m.layers()[i]->make_context());
    m.layers()[i]->forward(test::backend(), *in, outs[i], *ctxs.back());
    in = &outs[i];
  }
  if (flat) *flat = outs[0].format();
  return in->to_f32();
}

// The mlp's Flatten writes its FP32 input as the FP16 the first Linear
// rounds it to (Layer::input_cast): the model's output keeps the bits
// of running the layers one by one, where Flatten only copies.
TEST(LowPrecision, FlattenWritesTheNextLayersRounding) {
  std::mt19937_64 rng(35);
  Tensor x = test::random_tensor({8, 1, 28, 28}, rng, -3.0f, 3.0f);
  auto m = build_model("mlp", {1, 28, 28}, 10);
  m->init(1);
  m->set_precision(kFp16);
  Layer::InputCast rounding;
  rounding.saturate = true;
  ASSERT_EQ(std::string(m->layers()[0]->kind()), "flatten");
  ASSERT_TRUE(m->layers()[1]->input_cast({8, 784}, rounding));
  EXPECT_EQ(rounding.format, Format::FP16);
  EXPECT_FALSE(rounding.saturate);
  EXPECT_EQ(rounding.amax, nullptr);
  const std::vector<float> fused = m->forward(test::backend(), x).to_f32();
  // One by one: Flatten copies FP32, the Linear rounds.
  Format flat = Format::E5M2;
  EXPECT_EQ(layer_by_layer(*m, x, &flat), fused);
  EXPECT_EQ(flat, Format::FP32);
  // FP32 layers round nothing: the Flatten copies.
  Linear fc("fc", 4, 2);
  Layer::InputCast cast;
  EXPECT_FALSE(fc.input_cast({2, 4}, cast));
}

// With FP8 layers the Flatten writes the first Linear's delayed-scaled
// cast (Layer::input_cast) and that Linear takes the codes: the model's
// output and the recorded amax keep the bits of the layers one by one.
TEST(LowPrecision, FlattenWritesTheNextLayersFp8Cast) {
  std::mt19937_64 rng(36);
  Tensor x = test::random_tensor({8, 1, 28, 28}, rng, -3.0f, 3.0f);
  auto m = build_model("mlp", {1, 28, 28}, 10);
  m->init(1);
  m->set_precision({Format::E4M3, Format::FP32, Format::FP32, Format::E5M2});
  auto* fc1 = dynamic_cast<Linear*>(m->layers()[1].get());
  ASSERT_NE(fc1, nullptr);
  const std::vector<float> fused = m->forward(test::backend(), x).to_f32();
  std::vector<float> amax_fused(1);
  test::backend().download(amax_fused.data(), fc1->x_scale().pending_slot(), sizeof(float));
  // One by one: Flatten copies FP32, the Linear casts.
  Format flat = Format::E5M2;
  EXPECT_EQ(layer_by_layer(*m, x, &flat), fused);
  EXPECT_EQ(flat, Format::FP32);
  std::vector<float> amax(1);
  test::backend().download(amax.data(), fc1->x_scale().pending_slot(), sizeof(float));
  EXPECT_EQ(amax, amax_fused);
  EXPECT_GT(amax[0], 2.5f);  // the input's max |x| (uniform in [-3, 3])
}

TEST(LowPrecision, SoftmaxLeafTakesItsOwnPrecision) {
  // Custom recipe: only the attention softmax in FP16 (compute, storage,
  // accumulate). The logits move, slightly; everything else stays FP32.
  std::mt19937_64 rng(35);
  Tensor x = test::random_tensor({4, 1, 28, 28}, rng);
  auto m = build_model("transformer", {1, 28, 28}, 10);
  m->init(3);
  const std::vector<float> base = m->forward(test::backend(), x).to_f32();
  int changed = 0;
  for (Layer* l : m->leaves())
    if (l->name().ends_with(".softmax")) {
      l->set_precision({Format::FP16, Format::FP16, Format::FP16, Format::FP16});
      ++changed;
    }
  ASSERT_EQ(changed, 2);
  const std::vector<float> lo = m->forward(test::backend(), x).to_f32();
  double max_diff = 0;
  for (std::size_t i = 0; i < lo.size(); ++i) max_diff = std::max(max_diff, double(std::abs(lo[i] - base[i])));
  EXPECT_GT(max_diff, 0.0);
  EXPECT_LT(max_diff, 0.05);
}

TEST(NonFinite, CountsOverflowWhereItHappens) {
  Backend& be = test::backend();
  // 4 * 300 * 300 = 360000 > 65504: finite in FP32, inf once stored in FP16.
  Linear fc("fc", 4, 2, false);
  std::vector<float> w(8, 300.0f);
  fc.weight().weight.from_f32(w.data(), 8);
  Tensor x = Tensor::from_values({3, 4}, Format::FP32, std::vector<float>(12, 300.0f)), y, dx;
  auto ctx = fc.make_context();
  fc.set_track_nonfinite(true);
  fc.set_precision({Format::FP16, Format::FP32, Format::FP32, Format::FP16});
  fc.forward(be, x, y, *ctx);
  EXPECT_EQ(fc.nonfinite_counts().activation, 0);  // FP32 storage holds 360000
  fc.set_precision(kFp16);
  fc.set_track_nonfinite(true);  // counters zeroed (Model::forward does it per pass)
  fc.forward(be, x, y, *ctx);
  EXPECT_EQ(fc.nonfinite_counts().activation, 6);
  // Backward: dx = 2 * 60000 * 300 and dW = 3 * 60000 * 300 overflow FP16.
  Tensor dy = Tensor::from_values({3, 2}, Format::FP32, std::vector<float>(6, 60000.0f));
  fc.backward(be, dy, &dx, *ctx);
  EXPECT_EQ(fc.nonfinite_counts().activation_grad, 12);
  EXPECT_EQ(fc.nonfinite_counts().weight_grad, 8);
  for (float g : fc.weight().grad.to_f32()) EXPECT_TRUE(std::isinf(g));
  // Nothing is counted when not tracking.
  fc.set_track_nonfinite(false);
  EXPECT_EQ(fc.nonfinite_slot(NonfiniteSlot::Activation), nullptr);
  fc.forward(be, x, y, *ctx);
  fc.backward(be, dy, &dx, *ctx);
  const NonfiniteCounts none = fc.nonfinite_counts();
  EXPECT_EQ(none.activation, 0);
  EXPECT_EQ(none.activation_grad, 0);
  EXPECT_EQ(none.weight_grad, 0);
}

TEST(NonFinite, AttentionScoresOverflowIsAttributedToTheScoresLeaf) {
  // All-ones projections and x = 30: q = k = 240 per element, a score of
  // 4 * 240 * 240 / sqrt(4) = 115200, past FP16's 65504, while qkv (240)
  // is fine. The classic FP16 attention failure, pinned on the right leaf.
  Attention attn("attn", 8, 2);
  std::vector<float> ones(24 * 8, 1.0f);
  attn.qkv().weight().weight.from_f32(ones.data(), 24 * 8);
  for (Layer* l : attn.leaves()) {
    l->set_precision(kFp16);
    l->set_track_nonfinite(true);
  }
  auto ctx = attn.make_context();
  Tensor x = Tensor::from_values({1, 3, 8}, Format::FP32, std::vector<float>(24, 30.0f)), y;
  attn.forward(test::backend(), x, y, *ctx);
  EXPECT_EQ(attn.qkv().nonfinite_counts().activation, 0);
  EXPECT_EQ(attn.scores().nonfinite_counts().activation, 2 * 3 * 3);  // every score of both heads
  EXPECT_GT(attn.softmax().nonfinite_counts().activation, 0);         // and what follows from it
  // FP32 scores hold 115200: nothing to report.
  attn.scores().set_precision({Format::FP16, Format::FP32, Format::FP32, Format::FP16});
  attn.scores().set_track_nonfinite(true);
  attn.forward(test::backend(), x, y, *ctx);
  EXPECT_EQ(attn.scores().nonfinite_counts().activation, 0);
}

TEST(NonFinite, ModelLeavesReportTheirOwn) {
  // An FP16 MLP fed huge inputs: the first linear overflows, and the leaves
  // after it see what it produced.
  auto m = build_model("mlp", {4}, 2);
  m->init(1);
  m->set_precision(kFp16);
  m->set_track_nonfinite(true);
  Tensor x = Tensor::from_values({2, 4}, Format::FP32, std::vector<float>(8, 1e6f));
  m->forward(test::backend(), x);
  const std::vector<Layer*> leaves = m->leaves();
  EXPECT_GT(leaves[0]->nonfinite_counts().activation, 0) << leaves[0]->name();  // fc1
  Tensor ok = Tensor::from_values({2, 4}, Format::FP32, std::vector<float>(8, 0.5f));
  m->forward(test::backend(), ok);
  for (Layer* l : leaves) EXPECT_EQ(l->nonfinite_counts().activation, 0) << l->name();
}

// ReLU in BF16 and FP16 works on the stored patterns; it must give the bits
// the decode / f32 kernel / encode path gives, for every 16-bit pattern of x
// (zeros, subnormals, infinities and NaNs included) forward and backward,
// and the f32 path (taken while non-finite values are counted) must agree.
TEST(LowPrecision, Relu16BitPatternsMatchTheF32PathExhaustively) {
  Backend& be = test::backend();
  constexpr std::int64_t kN = 65536;
  for (Format f : {Format::BF16, Format::FP16}) {
    SCOPED_TRACE(format_name(f));
    Tensor x({2, kN / 2}, f), dy({2, kN / 2}, f);
    auto* xs = static_cast<std::uint16_t*>(x.data());
    auto* dys = static_cast<std::uint16_t*>(dy.data());
    for (std::int64_t i = 0; i < kN; ++i) {
      xs[i] = static_cast<std::uint16_t>(i);
      dys[i] = static_cast<std::uint16_t>((i * 40503) ^ 0x5A5A);  // every pattern, shuffled
    }
    // Reference: decode, f32 ReLU, encode.
    std::vector<float> xf(kN), dyf(kN), yf(kN), dxf(kN);
    cast_to_f32(f, xs, xf.data(), kN);
    cast_to_f32(f, dys, dyf.data(), kN);
    for (std::int64_t i = 0; i < kN; ++i) {
      yf[i] = xf[i] < 0.0f ? 0.0f : xf[i];
      dxf[i] = xf[i] > 0.0f ? dyf[i] : 0.0f;
    }
    std::vector<std::uint16_t> y_ref(kN), dx_ref(kN);
    cast_from_f32(f, yf.data(), y_ref.data(), kN);
    cast_from_f32(f, dxf.data(), dx_ref.data(), kN);

    for (bool track : {false, true}) {
      SCOPED_TRACE(track ? "counting non-finite values (f32 path)" : "pattern path");
      ReLU relu("relu");
      relu.set_precision({f, f, Format::FP32, f});
      relu.set_track_nonfinite(track);
      auto ctx = relu.make_context();
      Tensor y, dx;
      relu.forward(be, x, y, *ctx);
      relu.backward(be, dy, &dx, *ctx);
      ASSERT_EQ(y.format(), f);
      ASSERT_EQ(dx.format(), f);
      const auto* yb = static_cast<const std::uint16_t*>(y.data());
      const auto* dxb = static_cast<const std::uint16_t*>(dx.data());
      std::int64_t y_bad = 0, dx_bad = 0, first_y = -1, first_dx = -1;
      for (std::int64_t i = 0; i < kN; ++i) {
        // A NaN result may be any NaN pattern (payloads are not part of the contract).
        const std::uint16_t inf = f == Format::BF16 ? 0x7F80 : 0x7C00;
        auto is_nan = [inf](std::uint16_t b) { return (b & 0x7FFF) > inf; };
        const bool y_ok = std::isnan(yf[i]) ? is_nan(yb[i]) : yb[i] == y_ref[i];
        const bool dx_ok = std::isnan(dxf[i]) ? is_nan(dxb[i]) : dxb[i] == dx_ref[i];
        if (!y_ok && y_bad++ == 0) first_y = i;
        if (!dx_ok && dx_bad++ == 0) first_dx = i;
      }
      EXPECT_EQ(y_bad, 0) << "first x pattern 0x" << std::hex << first_y;
      EXPECT_EQ(dx_bad, 0) << "first x pattern 0x" << std::hex << first_dx;
    }
  }
}

}  // namespace
