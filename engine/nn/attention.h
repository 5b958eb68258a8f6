// Multi-head self-attention: qkv projection, scores, softmax, values, output projection.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/composite.h"
#include "nn/layernorm.h"
#include "nn/linear.h"
#include "nn/softmax.h"

namespace engine {

// Free functions run on the thread that owns `be` (the trainer's).
// Shape letters: B batch, T tokens, C channels (= H heads * d per head).
// qkv [B, T, 3C] holds q | k | v along the last dimension; head h uses
// columns h*d .. h*d+d-1 of each. scores and probs are [B, H, T, T].
// Every GEMM reads its operands in their own formats (the tensors' formats)
// and writes f32; one batched GEMM over all (b, h) per product (strided
// sub-matrices of qkv, no copies).

// scores[b,h] = q k^T / sqrt(d)
void attention_scores_forward(Backend& be, const Tensor& qkv, float* scores, std::int64_t B, std::int64_t T,
                              std::int64_t C, std::int64_t H, Format accumulate);
// dq = dscores k / sqrt(d), dk = dscores^T q / sqrt(d), written into the q
// and k columns of dqkv (f32 [B, T, 3C]); the v columns are left untouched.
void attention_scores_backward(Backend& be, const Tensor& dscores, const Tensor& qkv, float* dqkv,
                               std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t H,
                               Format accumulate);
// out[b, :, h*d..] = probs[b,h] v   (out f32 [B, T, C])
void attention_values_forward(Backend& be, const Tensor& probs, const Tensor& qkv, float* out, std::int64_t B,
                              std::int64_t T, std::int64_t C, std::int64_t H, Format accumulate);
// dprobs = dout v^T (f32 [B, H, T, T]); dv = probs^T dout into the v columns of dqkv.
void attention_values_backward(Backend& be, const Tensor& dout, const Tensor& probs, const Tensor& qkv,
                               float* dprobs, float* dqkv, std::int64_t B, std::int64_t T, std::int64_t C,
                               std::int64_t H, Format accumulate);

// What AttentionScores saves: qkv in its compute format (the caller's tensor
// when it already was, else an owned copy).
struct AttentionScoresContext : Context {
  const Tensor* qkv = nullptr;
  Tensor qkv_compute;
  std::size_t bytes() const override { return qkv ? qkv->bytes() : 0; }
};

// The q k^T GEMMs as a leaf (kind "attention_scores", a matmul layer: FP16
// under autocast, as torch.bmm is). Input qkv [B, T, 3C], output the scaled
// scores [B, H, T, T]. Usable on its own; standalone backward writes dx
// [B, T, 3C] with zero v columns. The caller keeps qkv alive until backward.
class AttentionScores : public Layer {
 public:
  AttentionScores(std::string name, std::int64_t dim, std::int64_t heads);

  const char* kind() const override { return "attention_scores"; }
  Shape output_shape(const Shape& in) const override;
  std::unique_ptr<Context> make_context() const override;
  void forward(Backend& be, const Tensor& x, Tensor& y, Context& ctx) override;
  void backward(Backend& be, const Tensor& dy, Tensor* dx, Context& ctx) override;
  bool is_matmul() const override { return true; }

  // Inside Attention: dq and dk into the q and k columns of the f32 dqkv
  // [B, T, 3C], not yet rounded (Attention rounds the whole buffer once).
  void backward_into(Backend& be, const Tensor& dy, float* dqkv, Context& ctx);

  // Causal attention: the scores of future keys (column > row in each
  // [T, T] plane) are written as +0 before the output's rounding, so they
  // can neither overflow nor widen a shared scale; standalone backward
  // takes no gradient from them.
  bool causal = false;

 private:
  void check_dy(const Tensor& dy, const Tensor& qkv) const;
  std::int64_t m_dim, m_heads;
  Tensor m_y32, m_dy_grad, m_dx32, m_dy_masked;
  std::size_t workspace_bytes() const override {
    return tensors_bytes({&m_y32, &m_dy_grad, &m_dx32, &m_dy_masked});
  }
};

// What AttentionValues saves: probs and qkv in its compute format. When they
// already were (the usual case) they are Attention's own tensors, counted by
// the softmax and scores contexts, so only owned copies count here.
struct AttentionValuesContext : Context {
  const Tensor* probs = nullptr;
  const Tensor* qkv = nullptr;
  Tensor probs_compute, qkv_compute;
  std::size_t bytes() const override {
    return (probs == &probs_compute ? probs_compute.bytes() : 0) + (qkv == &qkv_compute ? qkv_compute.bytes() : 0);
  }
};

// The probs v GEMMs as a leaf (kind "attention_values", a matmul layer). It
// has two inputs (probs and qkv), so it runs only inside Attention through
// forward_pair / backward_pair; the one-input forward/backward throw
// std::logic_error saying so.
class AttentionValues : public Layer {
 public:
  AttentionValues(std::string name, std::int64_t dim, std::int64_t heads);

  const char* kind() const override { return "attention_values"; }
  // Input: probs [B, H, T, T]; output [B, T, C].
  Shape output_shape(const Shape& in) const override;
  std::unique_ptr<Context> make_context() const override;
  void forward(Backend& be, const Tensor& x, Tensor& y, Context& ctx) override;
  void backward(Backend& be, const Tensor& dy, Tensor* dx, Context& ctx) override;
  bool is_matmul() const override { return true; }

  // y [B, T, C] = probs v. The caller keeps probs and qkv alive until backward.
  void forward_pair(Backend& be, const Tensor& probs, const Tensor& qkv, Tensor& y, Context& ctx);
  // dprobs (resized, in precision().grad) and dv into the v columns of the
  // f32 dqkv [B, T, 3C], not yet rounded (Attention rounds the whole buffer).
  void backward_pair(Backend& be, const Tensor& dy, Tensor& dprobs, float* dqkv, Context& ctx);

  // Causal attention: dprobs of future keys written as +0 (the softmax
  // ignores them; zero keeps them out of the counts and the rounding).
  bool causal = false;

 private:
  std::int64_t m_dim, m_heads;
  Tensor m_y32, m_dy_grad, m_dp32;
  std::size_t workspace_bytes() const override {
    return tensors_bytes({&m_y32, &m_dy_grad, &m_dp32});
  }
};

// Everything Attention keeps between forward and backward: the children's
// contexts and the intermediate tensors they refer to.
struct AttentionContext : Context {
  std::unique_ptr<Context> qkv_ctx, scores_ctx, softmax_ctx, values_ctx, proj_ctx;
  std::unique_ptr<Context> q_norm_ctx, k_norm_ctx;  // qk_norm only
  // qk_norm: the heads' queries and keys as rows of d (in), normalised
  // (out), qkv with them in place (f32), and the backward's counterparts.
  Tensor q_in, q_out, k_in, k_out, qkv_norm, dq_out, dq_in, dk_out, dk_in;
  // Forward and backward intermediates (dqkv: f32). scores, dprobs and
  // dscores are written only where the leaves run one by one: the fused
  // kernels (Backend::attention_forward/backward) keep them to themselves.
  Tensor qkv, scores, probs, values;
  Tensor d_values, dprobs, dscores, dqkv;
  Tensor dqkv_codes;                       // dqkv encoded once for the qkv projection (round_dqkv)
  std::size_t bytes() const override;
  std::size_t emulation_bytes() const override;
};

// x [B, T, C] -> y [B, T, C]. Leaves, in forward order: "<name>.qkv"
// (Linear C -> 3C), "<name>.scores", "<name>.softmax", "<name>.values",
// "<name>.proj" (Linear C -> C); each has its own precision, so a recipe can
// run the GEMMs in FP16 and the softmax in FP32, or force the softmax to FP16.
// The caller keeps x alive until backward. Trainer thread only.
// causal: a decoder's self-attention, query t attending to keys 0..t only
// (the scores, softmax and values leaves' `causal`, and the fused kernels').
// qk_norm (Wortsman et al. 2023, "Small-scale proxies for large-scale
// Transformer training instabilities"): LayerNorm over each head's d
// queries and d keys, leaves "<name>.q_norm" and "<name>.k_norm" (after
// qkv, each with its own precision and parameters), before the scores; the
// attention then runs leaf by leaf (the fused kernels take raw qkv).
class Attention : public CompositeLayer {
 public:
  Attention(std::string name, std::int64_t dim, std::int64_t heads, bool causal = false, bool qk_norm = false);
  bool causal() const { return m_causal; }
  bool qk_norm() const { return m_qk_norm; }
  LayerNorm& q_norm() { return m_q_norm; }
  LayerNorm& k_norm() { return m_k_norm; }

  const char* kind() const override { return "attention"; }
  Shape output_shape(const Shape& in) const override;
  std::unique_ptr<Context> make_context() const override;
  void forward(Backend& be, const Tensor& x, Tensor& y, Context& ctx) override;
  void backward(Backend& be, const Tensor& dy, Tensor* dx, Context& ctx) override;
  // backward() with dy already rounded to the output projection's grad
  // format (Linear::backward_rounded).
  void backward_rounded(Backend& be, const Tensor& dy, const Tensor& rounded, Tensor* dx, Context& ctx);
  std::vector<Parameter*> parameters() override;
  std::vector<Layer*> leaves() override;
  bool is_matmul() const override { return true; }
  void leaf_shapes(const Shape& in, std::vector<std::pair<Layer*, Shape>>& out) override;

  Linear& qkv() { return m_qkv; }
  AttentionScores& scores() { return m_scores; }
  Softmax& softmax() { return m_softmax; }
  AttentionValues& values() { return m_values; }
  Linear& proj() { return m_proj; }

 private:
  void backward_from(Backend& be, const Tensor& dy, const Tensor* rounded, Tensor* dx, Context& ctx);
  // Rounds dqkv to the leaves' grad formats; returns the tensor the qkv
  // projection's backward takes: dqkv, or its codes when one FP16/BF16
  // format serves all three (the projection's rounding then has nothing
  // left to do).
  const Tensor& round_dqkv(Backend& be, AttentionContext& ctx);
  // scores, softmax and values in one Backend::attention_forward, leaving
  // the leaves' contexts as their own forwards would; false (nothing the
  // leaves' forwards do not redo) where the precisions or the backend rule
  // it out: a softmax without FP32 sums or stored in a third format, GEMMs
  // in two formats or non-FP32 sums, a leaf counting non-finite values.
  // qkv_in becomes qkv rounded to the GEMMs' format where it rounded it,
  // for the leaves to take if the backend then declines.
  // Whether the precisions and overflow counts let forward_fused run.
  bool fused_forward_applies();
  // `copied`: the projection already left qkv rounded in the scores leaf's
  // qkv_compute (Linear::forward_copy).
  // values_cast: the projection's FP8 input cast (Layer::input_cast, with an
  // amax), which the kernel then writes into ctx.values instead of the
  // values (the projection takes them through forward_cast).
  bool forward_fused(Backend& be, AttentionContext& ctx, const Tensor*& qkv_in, bool copied,
                     const Layer::InputCast* values_cast);
  // The same for the backward through values, softmax and scores; returns
  // what the qkv projection's backward takes (round_dqkv's result), or null
  // where the backward must run leaf by leaf (dvalues_in then as qkv_in).
  const Tensor* backward_fused(Backend& be, AttentionContext& ctx, const Tensor*& dvalues_in);
  // round_dqkv's one encode: one FP16/BF16 grad format for q, k, v and the
  // projection (or, fused, an FP8 projection), nothing counted.
  bool dqkv_as_codes(bool fused);
  // backward_fused's copy of dvalues in the values leaf's grad format,
  // where the projection gave another (FP8's E5M2 to BF16).
  Tensor m_dvalues_grad;
  std::size_t workspace_bytes() const override { return tensors_bytes({&m_dvalues_grad, &m_qkv32, &m_norm32}); }

  // qk_norm's forward: ctx.qkv_norm, qkv (f32) with the normalised heads.
  const Tensor& normalise_qk(Backend& be, AttentionContext& ctx);
  // qk_norm's backward: dq and dk in dqkv (f32) through the norms.
  void normalise_qk_backward(Backend& be, AttentionContext& ctx);
  Tensor m_qkv32, m_norm32;

  std::int64_t m_dim, m_heads;
  bool m_causal = false, m_qk_norm = false;
  Linear m_qkv;
  LayerNorm m_q_norm, m_k_norm;
  AttentionScores m_scores;
  Softmax m_softmax;
  AttentionValues m_values;
  Linear m_proj;
};

}  // namespace engine
