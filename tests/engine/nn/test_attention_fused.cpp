// Attention's fused core (Backend::attention_forward and
// attention_backward on the CPU) against the same layer run op by op: every
// tensor the forward keeps for the backward, the output and the gradients
// after a backward, bit for bit, in
// the precisions the recipes give attention (fp8's: the values' place
// taken by the projection's FP8 cast), with and without the native
// bf16 kernels, at shapes that do and do not divide into softmax's row
// blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/fused.h"
#include "engine/nn/gradcheck.h"
#include "nn/attention.h"
#include "nn/linear.h"

namespace {

using namespace engine;

std::unique_ptr<CpuBackend> cpu(bool fuse, bool native_bf16) {
  CpuBackendOptions o;
  o.threads = 2;
  o.fuse_attention = fuse;
  o.allow_native_bf16 = native_bf16;
  return std::make_unique<CpuBackend>(o);
}

struct Precisions {
  const char* name;
  LayerPrecision gemms;    // scores and values leaves
  LayerPrecision softmax;  // the softmax leaf
  LayerPrecision linears;  // the qkv and output projections
};

constexpr LayerPrecision kF32{Format::FP32, Format::FP32, Format::FP32, Format::FP32};
constexpr LayerPrecision kBf16{Format::BF16, Format::BF16, Format::FP32, Format::BF16};
constexpr LayerPrecision kFp16{Format::FP16, Format::FP16, Format::FP32, Format::FP16};
const Precisions kCases[] = {
    // dqkv encoded by the fused backward (one grad format throughout).
    {"mixed-bf16", kBf16, kF32, kBf16},
    // The projection's E5M2 dvalues rounded to the values leaf's BF16.
    {"fp8", {Format::BF16, Format::FP32, Format::FP32, Format::BF16}, kF32,
     {Format::E4M3, Format::FP32, Format::FP32, Format::E5M2}},
    {"mixed-fp16", kFp16, kF32, kFp16},
    // fp16's .half() model: the softmax computes and stores FP16 too.
    {"fp16", kFp16, kFp16, kFp16},
    // A softmax computing in BF16 on FP16 scores, its gradient in BF16.
    {"BF16 softmax on FP16 GEMMs", kFp16, {Format::BF16, Format::FP32, Format::FP32, Format::BF16}, kFp16},
    // dqkv in f32 from the fused backward, rounded after it.
    {"FP16 GEMMs, FP32 projections", kFp16, kF32, kF32},
    {"fp32", kF32, kF32, kF32},
};

struct Shapes {
  std::int64_t B, T, C, H;
};
// The transformer's own (T 16, d 16), a T that is no multiple of softmax's
// 8-row block with an odd d, one product per batch row, and T of several
// 16-row blocks (the gpt's baby shape, T 64 and d 32, and T 32 with d 32),
// where the causal kernels skip the masked products block by block.
const Shapes kShapes[] = {{3, 16, 64, 4}, {2, 5, 12, 3}, {4, 24, 32, 1}, {2, 64, 128, 4}, {1, 32, 64, 2}};

void expect_same_bytes(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.format(), b.format()) << what;
  ASSERT_EQ(a.shape(), b.shape()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.bytes()), 0) << what << " differs";
}

struct Trained {
  Tensor y, dx;
  std::unique_ptr<Context> ctx;
  std::vector<std::vector<float>> grads;
};

// One forward and backward of an Attention layer on `be`, weights and
// inputs from `seed`; x scaled by `x_scale` (large values overflow FP16 scores);
// inf_v: the first value channel's bias +inf (every token's v there infinite).
Trained run(Backend& be, const Precisions& p, const Shapes& s, std::uint64_t seed, float x_scale,
            std::unique_ptr<Attention>& keep, bool causal, bool inf_v = false) {
  std::mt19937_64 rng(seed);
  keep = std::make_unique<Attention>("attn", s.C, s.H, causal);
  Attention& attn = *keep;
  test::randomize(attn.parameters(), rng, 0.5f);
  if (inf_v) {
    Parameter& bias = *attn.qkv().parameters().at(1);
    std::vector<float> b = bias.weight.to_f32();
    b.at(static_cast<std::size_t>(2 * s.C)) = INFINITY;
    bias.weight.from_f32(b.data(), bias.numel());
  }
  attn.scores().set_precision(p.gemms);
  attn.values().set_precision(p.gemms);
  attn.softmax().set_precision(p.softmax);
  attn.qkv().set_precision(p.linears);
  attn.proj().set_precision(p.linears);
  Trained t;
  t.ctx = attn.make_context();
  Tensor x = test::random_tensor({s.B, s.T, s.C}, rng, -x_scale, x_scale);
  attn.forward(be, x, t.y, *t.ctx);
  Tensor dy = test::random_tensor(t.y.shape(), rng);
  attn.backward(be, dy, &t.dx, *t.ctx);
  for (Parameter* q : attn.parameters()) t.grads.push_back(q->grad.to_f32());
  return t;
}

// Returns how many non-finite probabilities the FP16 cases produced.
// causal: the gpt's attention (the leaves' causal_zero / causal_softmax
// against the fused kernels' causal rows).
std::int64_t compare(bool native_bf16, float x_scale, bool causal = false, bool inf_v = false) {
  std::int64_t nonfinite = 0;
  auto fused = cpu(true, native_bf16), plain = cpu(false, native_bf16);
  for (const Precisions& p : kCases)
    for (const Shapes& s : kShapes) {
      const std::string what = std::string(p.name) + " B" + std::to_string(s.B) + " T" + std::to_string(s.T) + " C" +
                               std::to_string(s.C) + " H" + std::to_string(s.H);
      SCOPED_TRACE(what);
      std::unique_ptr<Attention> la, lb;
      const Trained a = run(*fused, p, s, 11, x_scale, la, causal, inf_v),
                    b = run(*plain, p, s, 11, x_scale, lb, causal, inf_v);
      const auto& ca = static_cast<const AttentionContext&>(*a.ctx);
      const auto& cb = static_cast<const AttentionContext&>(*b.ctx);
      // The fused kernels ran: they keep scores and dprobs to themselves.
      EXPECT_EQ(ca.scores.numel(), 0) << "the fused forward did not run";
      EXPECT_EQ(ca.dprobs.numel(), 0) << "the fused backward did not run";
      EXPECT_GT(cb.scores.numel(), 0);
      expect_same_bytes(ca.probs, cb.probs, "probs");
      if (p.gemms.storage == Format::FP16 && p.softmax.compute == Format::FP32)
        for (float v : ca.probs.to_f32()) nonfinite += std::isfinite(v) ? 0 : 1;
      if (is_fp8(p.linears.compute)) {
        // The fused kernel writes the FP8 projection's delayed-scaled cast
        // in the values' place (Backend::attention_forward's values_cast):
        // the projection's codes and amax as its own cast of the values.
        EXPECT_EQ(ca.values.format(), p.linears.compute);
        const auto& pa = static_cast<const LinearContext&>(*ca.proj_ctx);
        const auto& pb = static_cast<const LinearContext&>(*cb.proj_ctx);
        EXPECT_TRUE(pa.x && pb.x);
        if (!pa.x || !pb.x) continue;
        EXPECT_EQ(pa.x, &ca.values);
        expect_same_bytes(*pa.x, *pb.x, "the projection's cast of the values");
        EXPECT_EQ(pa.x_scale, pb.x_scale);
        float amax[2];
        fused->download(&amax[0], la->proj().x_scale().pending_slot(), sizeof(float));
        plain->download(&amax[1], lb->proj().x_scale().pending_slot(), sizeof(float));
        if (!inf_v) {  // an infinite value gives a NaN amax
          EXPECT_GT(amax[0], 0.0f);
        }
        EXPECT_EQ(std::memcmp(&amax[0], &amax[1], sizeof(float)), 0) << "the cast's amax";
      } else {
        expect_same_bytes(ca.values, cb.values, "values");
      }
      const auto& va = static_cast<const AttentionValuesContext&>(*ca.values_ctx);
      const auto& vb = static_cast<const AttentionValuesContext&>(*cb.values_ctx);
      EXPECT_NE(va.probs, nullptr);
      if (!va.probs) continue;
      expect_same_bytes(*va.probs, *vb.probs, "values' probs operand");
      expect_same_bytes(a.y, b.y, "output");
      expect_same_bytes(a.dx, b.dx, "dx");
      EXPECT_EQ(a.grads.size(), b.grads.size());
      if (a.grads.size() != b.grads.size()) continue;
      for (std::size_t i = 0; i < a.grads.size(); ++i)
        EXPECT_EQ(std::memcmp(a.grads[i].data(), b.grads[i].data(), a.grads[i].size() * sizeof(float)), 0)
            << "parameter gradient " << i;
    }
  return nonfinite;
}

TEST(AttentionFused, ForwardAndBackwardMatchTheOpsOneByOne) { EXPECT_EQ(compare(true, 1.0f), 0); }

TEST(AttentionFused, MatchesWithoutNativeBf16) { EXPECT_EQ(compare(false, 1.0f), 0); }

TEST(AttentionFused, MatchesWhereFp16ScoresOverflow) {
  // x up to 400: scores past FP16's 65504 (inf, then NaN probabilities),
  // the same non-finite bits both ways.
  EXPECT_GT(compare(true, 400.0f), 0);
}

TEST(AttentionFused, CausalMatchesTheOpsOneByOne) {
  EXPECT_EQ(compare(true, 1.0f, true), 0);
  EXPECT_EQ(compare(false, 1.0f, true), 0);
}

TEST(AttentionFused, CausalMatchesWhereFp16ScoresOverflow) {
  // The leaves zero the future scores before FP16 rounds them; the fused
  // kernel never reads them: the same probabilities, and fewer non-finite
  // ones than without the mask (a row's first score cannot overflow alone).
  const std::int64_t causal = compare(true, 400.0f, true);
  EXPECT_LT(causal, compare(true, 400.0f));
}

TEST(AttentionFused, CausalMatchesWhereValuesAreInfinite) {
  // The ops one by one multiply the masked probabilities' zeros by the
  // infinite values (NaN); the fused kernels, which skip the masked
  // products where v and dO are finite, must take every product whole here.
  compare(true, 1.0f, true, true);
  compare(false, 1.0f, true, true);
}

TEST(AttentionFused, RunsWhereItFitsAndDeclinesElsewhere) {
  auto fused = cpu(true, true), plain = cpu(false, true);
  const std::int64_t B = 2, T = 16, C = 64, H = 4;
  std::vector<std::uint16_t> qkv(static_cast<std::size_t>(B * T * 3 * C), 0x3F80);  // BF16 ones
  const std::size_t plane = static_cast<std::size_t>(B * H * T * T);
  std::vector<std::uint16_t> probs16(plane), values(static_cast<std::size_t>(B * T * C));
  std::vector<float> probs(plane);
  AttentionForward f;
  f.B = B;
  f.T = T;
  f.C = C;
  f.H = H;
  f.format = Format::BF16;
  f.qkv = qkv.data();
  f.alpha = 0.25f;
  f.scores_format = Format::BF16;
  f.probs = probs.data();
  f.probs_codes = probs16.data();
  f.values_format = Format::BF16;
  f.values = values.data();
  EXPECT_FALSE(fused::attention_forward(*plain, f));
  ASSERT_TRUE(fused::attention_forward(*fused, f));
  // All-equal scores (16 * 0.25 = 4): uniform probabilities 1/16, and each
  // value the mean of ones.
  EXPECT_EQ(probs[0], 1.0f / 16.0f);
  EXPECT_EQ(probs16[0], 0x3D80);  // BF16 1/16
  EXPECT_EQ(values[0], 0x3F80);
  // Backward with dvalues all ones: dprobs = 16 everywhere (v all ones),
  // so the softmax backward gives dscores 1/16 (16 - 16) = 0 and
  // dq = dk = 0, while dv = P^T dO = 16 * 1/16 = 1.
  std::vector<std::uint16_t> dvalues(values.size(), 0x3F80), dqkv(qkv.size(), 0xFFFF);
  AttentionBackward g;
  g.B = B;
  g.T = T;
  g.C = C;
  g.H = H;
  g.format = Format::BF16;
  g.qkv = qkv.data();
  g.probs_operand = probs16.data();
  g.probs = probs.data();
  g.alpha = 0.25f;
  g.dvalues_format = g.dprobs_format = g.dscores_format = g.dqkv_format = Format::BF16;
  g.dvalues = dvalues.data();
  g.dqkv_codes = dqkv.data();
  EXPECT_FALSE(fused::attention_backward(*plain, g));
  ASSERT_TRUE(fused::attention_backward(*fused, g));
  EXPECT_EQ(dqkv[0], 0x0000);           // dq
  EXPECT_EQ(dqkv[C], 0x0000);           // dk
  EXPECT_EQ(dqkv[2 * C], 0x3F80);       // dv
  // A product past the small kernels (T 65), or TF32 operands: declined.
  f.T = g.T = 65;
  EXPECT_FALSE(fused::attention_forward(*fused, f));
  EXPECT_FALSE(fused::attention_backward(*fused, g));
  f.T = g.T = T;
  f.format = g.format = Format::TF32;
  EXPECT_FALSE(fused::attention_forward(*fused, f));
  EXPECT_FALSE(fused::attention_backward(*fused, g));
  // The default Backend has no fused kernel (run_fused declines): the
  // layers run the ops.
  EXPECT_FALSE(test::backend().Backend::run_fused(FusedOp{fused::AttentionForwardOp{f}}));
  EXPECT_FALSE(test::backend().Backend::run_fused(FusedOp{fused::AttentionBackwardOp{g}}));
}

}  // namespace
