// Multi-head self-attention: one batched GEMM over (batch, head) per product.
#include "nn/attention.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "backend/backend.h"
#include "backend/fused.h"
#include "nn/layer_io.h"

namespace engine {

namespace {

// 1/sqrt(d): for d a power of four (16 with the default 64 channels and 4
// heads) this is a power of two and the scaling is exact.
float score_scale(std::int64_t d) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))); }

GemmArgs gemm(std::int64_t m, std::int64_t n, std::int64_t k, GemmOperand a, GemmOperand b, float* c,
              std::int64_t ldc, float alpha, Format accumulate) {
  GemmArgs g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a;
  g.b = b;
  g.c = c;
  g.ldc = ldc;
  g.alpha = alpha;
  g.accumulate = accumulate;
  return g;
}

// Head h of batch b of a [B, T, ld] tensor: rows of T, starting at column
// col0 + h * d of batch b's first row.
GemmOperand heads_operand(const Tensor& t, std::int64_t col0, std::int64_t ld, bool trans, std::int64_t T,
                          std::int64_t d) {
  GemmOperand op = gemm_operand(t, col0, ld, trans);
  op.batch_stride[0] = T * ld;
  op.batch_stride[1] = d;
  return op;
}

// Scores-shaped [B, H, T, T]: product (b, h) is the T x T matrix at (b * H + h) * T * T.
GemmOperand scores_operand(const Tensor& t, bool trans, std::int64_t H, std::int64_t T) {
  GemmOperand op = gemm_operand(t, 0, T, trans);
  op.batch_stride[0] = H * T * T;
  op.batch_stride[1] = T * T;
  return op;
}

// Makes g a B x H batch writing C at batch strides {c0, c1}.
void batch_over(GemmArgs& g, std::int64_t B, std::int64_t H, std::int64_t c0, std::int64_t c1) {
  g.batch[0] = B;
  g.batch[1] = H;
  g.c_batch_stride[0] = c0;
  g.c_batch_stride[1] = c1;
}

// Rounds columns [col0, col0 + ncols) of each of `rows` rows (row stride ld)
// to f in place (f != FP32), one backend call per row.
void round_columns(Backend& be, float* base, std::int64_t rows, std::int64_t ld, std::int64_t col0,
                   std::int64_t ncols, Format f) {
  for (std::int64_t r = 0; r < rows; ++r) be.quantize(f, base + r * ld + col0, ncols, false);
}

// The inf/NaN count of columns [col0, col0 + ncols) over `rows` rows.
void count_columns(Backend& be, const float* base, std::int64_t rows, std::int64_t ld, std::int64_t col0,
                   std::int64_t ncols, std::int64_t* counter) {
  for (std::int64_t r = 0; r < rows; ++r) be.count_nonfinite(base + r * ld + col0, ncols, counter);
}

void check_heads(const std::string& name, std::int64_t dim, std::int64_t heads) {
  if (dim <= 0 || heads <= 0 || dim % heads != 0)
    throw std::invalid_argument(name + ": channels (" + std::to_string(dim) + ") must be a positive multiple of heads (" +
                                std::to_string(heads) + ")");
}

}  // namespace

// Every attention GEMM is one batched call over (b, h): B x H products,
// operands at batch strides. Head h of a [B, T, ld] tensor starts at
// column h * d of batch b's rows: batch strides {T * ld, d}. Scores and
// probs [B, H, T, T]: {H * T * T, T * T}.
void attention_scores_forward(Backend& be, const Tensor& qkv, float* scores, std::int64_t B, std::int64_t T,
                              std::int64_t C, std::int64_t H, Format accumulate) {
  const std::int64_t d = C / H, ld = 3 * C;
  // [T, T] = q [T, d] k^T [d, T]
  GemmArgs g = gemm(T, T, d, heads_operand(qkv, 0, ld, false, T, d), heads_operand(qkv, C, ld, true, T, d), scores,
                    T, score_scale(d), accumulate);
  batch_over(g, B, H, H * T * T, T * T);
  be.gemm(g);
}

void attention_scores_backward(Backend& be, const Tensor& dscores, const Tensor& qkv, float* dqkv,
                               std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t H,
                               Format accumulate) {
  const std::int64_t d = C / H, ld = 3 * C;
  const float alpha = score_scale(d);
  // dq [T, d] = dS [T, T] k [T, d]
  GemmArgs g = gemm(T, d, T, scores_operand(dscores, false, H, T), heads_operand(qkv, C, ld, false, T, d), dqkv, ld,
                    alpha, accumulate);
  batch_over(g, B, H, T * ld, d);
  be.gemm(g);
  // dk [T, d] = dS^T [T, T] q [T, d]
  g = gemm(T, d, T, scores_operand(dscores, true, H, T), heads_operand(qkv, 0, ld, false, T, d), dqkv + C, ld,
           alpha, accumulate);
  batch_over(g, B, H, T * ld, d);
  be.gemm(g);
}

void attention_values_forward(Backend& be, const Tensor& probs, const Tensor& qkv, float* out, std::int64_t B,
                              std::int64_t T, std::int64_t C, std::int64_t H, Format accumulate) {
  const std::int64_t d = C / H, ld = 3 * C;
  // [T, d] = P [T, T] v [T, d]
  GemmArgs g = gemm(T, d, T, scores_operand(probs, false, H, T), heads_operand(qkv, 2 * C, ld, false, T, d), out, C,
                    1.0f, accumulate);
  batch_over(g, B, H, T * C, d);
  be.gemm(g);
}

void attention_values_backward(Backend& be, const Tensor& dout, const Tensor& probs, const Tensor& qkv,
                               float* dprobs, float* dqkv, std::int64_t B, std::int64_t T, std::int64_t C,
                               std::int64_t H, Format accumulate) {
  const std::int64_t d = C / H, ld = 3 * C;
  // dP [T, T] = dO [T, d] v^T [d, T]
  GemmArgs g = gemm(T, T, d, heads_operand(dout, 0, C, false, T, d), heads_operand(qkv, 2 * C, ld, true, T, d),
                    dprobs, T, 1.0f, accumulate);
  batch_over(g, B, H, H * T * T, T * T);
  be.gemm(g);
  // dv [T, d] = P^T [T, T] dO [T, d]
  g = gemm(T, d, T, scores_operand(probs, true, H, T), heads_operand(dout, 0, C, false, T, d), dqkv + 2 * C, ld,
           1.0f, accumulate);
  batch_over(g, B, H, T * ld, d);
  be.gemm(g);
}

// ---------------------------------------------------------------- scores

AttentionScores::AttentionScores(std::string name, std::int64_t dim, std::int64_t heads)
    : Layer(std::move(name)), m_dim(dim), m_heads(heads) {
  check_heads(this->name(), dim, heads);
}

Shape AttentionScores::output_shape(const Shape& in) const {
  if (in.size() != 3 || in[2] != 3 * m_dim)
    throw_shape(name(), "expects qkv [batch, tokens, " + std::to_string(3 * m_dim) + "]", in);
  return {in[0], m_heads, in[1], in[1]};
}

std::unique_ptr<Context> AttentionScores::make_context() const {
  return std::make_unique<AttentionScoresContext>();
}

void AttentionScores::forward(Backend& be, const Tensor& x, Tensor& y, Context& context) {
  auto& ctx = static_cast<AttentionScoresContext&>(context);
  const Shape ys = output_shape(x.shape());
  const LayerPrecision& p = m_precision;
  const Tensor& qkv = round_to(be, x, p.compute, ctx.qkv_compute, saturates_forward(p.compute));
  ctx.qkv = &qkv;
  float* yf = output_begin(y, ys, p.storage, m_y32);
  attention_scores_forward(be, qkv, yf, x.dim(0), x.dim(1), m_dim, m_heads, p.accumulate);
  if (causal) fused::causal_zero(be, yf, x.dim(0) * m_heads * x.dim(1), x.dim(1));
  output_end(be, y, p.storage, m_y32, saturates_forward(p.storage), tracked(*this, NonfiniteSlot::Activation));
}

void AttentionScores::check_dy(const Tensor& dy, const Tensor& qkv) const {
  const Shape ys = output_shape(qkv.shape());
  if (dy.shape() != ys) throw_shape(name(), "gradient does not match the output " + shape_string(ys), dy.shape());
}

void AttentionScores::backward(Backend& be, const Tensor& dy, Tensor* dx, Context& context) {
  auto& ctx = static_cast<AttentionScoresContext&>(context);
  if (!ctx.qkv) throw std::logic_error(name() + ": backward before forward");
  if (!dx) return;
  const Tensor& qkv = *ctx.qkv;
  check_dy(dy, qkv);
  const LayerPrecision& p = m_precision;
  const Tensor* dyg = &round_to(be, dy, p.grad, m_dy_grad, false);
  if (causal) {
    // The masked scores are constants: their gradient goes nowhere.
    m_dy_masked.resize(dy.shape(), Format::FP32);
    be.convert(dyg->format(), dyg->data(), Format::FP32, m_dy_masked.data(), dy.numel(), {});
    fused::causal_zero(be, m_dy_masked.f32(), dy.numel() / dy.shape().back(), dy.shape().back());
    dyg = &m_dy_masked;
  }
  float* dxf = output_begin(*dx, qkv.shape(), p.grad, m_dx32);
  be.fill_zero(dxf, static_cast<std::size_t>(qkv.numel()) * sizeof(float));  // v columns: no gradient
  attention_scores_backward(be, *dyg, qkv, dxf, qkv.dim(0), qkv.dim(1), m_dim, m_heads, p.accumulate);
  output_end(be, *dx, p.grad, m_dx32, false, tracked(*this, NonfiniteSlot::ActivationGrad));
}

void AttentionScores::backward_into(Backend& be, const Tensor& dy, float* dqkv, Context& context) {
  auto& ctx = static_cast<AttentionScoresContext&>(context);
  if (!ctx.qkv) throw std::logic_error(name() + ": backward before forward");
  const Tensor& qkv = *ctx.qkv;
  check_dy(dy, qkv);
  const LayerPrecision& p = m_precision;
  const Tensor& dyg = round_to(be, dy, p.grad, m_dy_grad, false);
  attention_scores_backward(be, dyg, qkv, dqkv, qkv.dim(0), qkv.dim(1), m_dim, m_heads, p.accumulate);
}

// ---------------------------------------------------------------- values

AttentionValues::AttentionValues(std::string name, std::int64_t dim, std::int64_t heads)
    : Layer(std::move(name)), m_dim(dim), m_heads(heads) {
  check_heads(this->name(), dim, heads);
}

Shape AttentionValues::output_shape(const Shape& in) const {
  if (in.size() != 4 || in[1] != m_heads || in[2] != in[3])
    throw_shape(name(), "expects probs [batch, " + std::to_string(m_heads) + ", tokens, tokens]", in);
  return {in[0], in[2], m_dim};
}

std::unique_ptr<Context> AttentionValues::make_context() const {
  return std::make_unique<AttentionValuesContext>();
}

void AttentionValues::forward(Backend&, const Tensor&, Tensor&, Context&) {
  throw std::logic_error(name() + ": takes two inputs (probs, qkv); it runs inside its attention layer");
}

void AttentionValues::backward(Backend&, const Tensor&, Tensor*, Context&) {
  throw std::logic_error(name() + ": takes two inputs (probs, qkv); it runs inside its attention layer");
}

void AttentionValues::forward_pair(Backend& be, const Tensor& probs, const Tensor& qkv, Tensor& y,
                                   Context& context) {
  auto& ctx = static_cast<AttentionValuesContext&>(context);
  const Shape ys = output_shape(probs.shape());
  if (qkv.rank() != 3 || qkv.dim(0) != ys[0] || qkv.dim(1) != ys[1] || qkv.dim(2) != 3 * m_dim)
    throw_shape(name(), "expects qkv [" + std::to_string(ys[0]) + ", " + std::to_string(ys[1]) + ", " +
                            std::to_string(3 * m_dim) + "]", qkv.shape());
  const LayerPrecision& p = m_precision;
  const bool sat = saturates_forward(p.compute);
  ctx.probs = &round_to(be, probs, p.compute, ctx.probs_compute, sat);
  ctx.qkv = &round_to(be, qkv, p.compute, ctx.qkv_compute, sat);
  float* yf = output_begin(y, ys, p.storage, m_y32);
  attention_values_forward(be, *ctx.probs, *ctx.qkv, yf, ys[0], ys[1], m_dim, m_heads, p.accumulate);
  output_end(be, y, p.storage, m_y32, saturates_forward(p.storage), tracked(*this, NonfiniteSlot::Activation));
}

void AttentionValues::backward_pair(Backend& be, const Tensor& dy, Tensor& dprobs, float* dqkv, Context& context) {
  auto& ctx = static_cast<AttentionValuesContext&>(context);
  if (!ctx.probs) throw std::logic_error(name() + ": backward before forward");
  const Tensor& probs = *ctx.probs;
  const Shape ys = output_shape(probs.shape());
  if (dy.shape() != ys) throw_shape(name(), "gradient does not match the output " + shape_string(ys), dy.shape());
  const LayerPrecision& p = m_precision;
  const Tensor& dyg = round_to(be, dy, p.grad, m_dy_grad, false);
  float* dpf = output_begin(dprobs, probs.shape(), p.grad, m_dp32);
  attention_values_backward(be, dyg, probs, *ctx.qkv, dpf, dqkv, ys[0], ys[1], m_dim, m_heads, p.accumulate);
  if (causal) fused::causal_zero(be, dpf, probs.numel() / ys[1], ys[1]);
  output_end(be, dprobs, p.grad, m_dp32, false, tracked(*this, NonfiniteSlot::ActivationGrad));
}

// ---------------------------------------------------------------- attention

std::size_t AttentionContext::bytes() const {
  std::size_t n = 0;
  for (const auto* c : {&qkv_ctx, &scores_ctx, &softmax_ctx, &values_ctx, &proj_ctx, &q_norm_ctx, &k_norm_ctx})
    if (*c) n += (*c)->bytes();
  return n + q_in.bytes() + k_in.bytes();
}

std::size_t AttentionContext::emulation_bytes() const {
  std::size_t n = 0;
  for (const auto* c : {&qkv_ctx, &scores_ctx, &softmax_ctx, &values_ctx, &proj_ctx, &q_norm_ctx, &k_norm_ctx})
    if (*c) n += (*c)->emulation_bytes();
  return n;
}

Attention::Attention(std::string name, std::int64_t dim, std::int64_t heads, bool causal, bool qk_norm)
    : CompositeLayer(name), m_dim(dim), m_heads(heads), m_causal(causal), m_qk_norm(qk_norm),
      m_qkv(name + ".qkv", dim, 3 * dim), m_q_norm(name + ".q_norm", heads > 0 ? dim / heads : 1),
      m_k_norm(name + ".k_norm", heads > 0 ? dim / heads : 1),
      m_scores(name + ".scores", dim, heads), m_softmax(name + ".softmax"), m_values(name + ".values", dim, heads),
      m_proj(name + ".proj", dim, dim) {
  m_scores.causal = m_softmax.causal = m_values.causal = causal;
}

Shape Attention::output_shape(const Shape& in) const {
  if (in.size() != 3 || in[2] != m_dim)
    throw_shape(name(), "expects input [batch, tokens, " + std::to_string(m_dim) + "]", in);
  return in;
}

std::unique_ptr<Context> Attention::make_context() const {
  auto ctx = std::make_unique<AttentionContext>();
  ctx->qkv_ctx = m_qkv.make_context();
  ctx->scores_ctx = m_scores.make_context();
  ctx->softmax_ctx = m_softmax.make_context();
  ctx->values_ctx = m_values.make_context();
  ctx->proj_ctx = m_proj.make_context();
  if (m_qk_norm) {
    ctx->q_norm_ctx = m_q_norm.make_context();
    ctx->k_norm_ctx = m_k_norm.make_context();
  }
  return ctx;
}

std::vector<Parameter*> Attention::parameters() {
  std::vector<Parameter*> out = m_qkv.parameters();
  if (m_qk_norm)
    for (Layer* l : {static_cast<Layer*>(&m_q_norm), static_cast<Layer*>(&m_k_norm)})
      for (Parameter* p : l->parameters()) out.push_back(p);
  for (Parameter* p : m_proj.parameters()) out.push_back(p);
  return out;
}

std::vector<Layer*> Attention::leaves() {
  if (m_qk_norm) return {&m_qkv, &m_q_norm, &m_k_norm, &m_scores, &m_softmax, &m_values, &m_proj};
  return {&m_qkv, &m_scores, &m_softmax, &m_values, &m_proj};
}

void Attention::leaf_shapes(const Shape& in, std::vector<std::pair<Layer*, Shape>>& out) {
  output_shape(in);
  Shape qkv = m_qkv.output_shape(in);
  Shape scores = m_scores.output_shape(qkv);
  out.emplace_back(&m_qkv, qkv);
  if (m_qk_norm) {
    // Per sample, T * H rows of d (the norms see them batched as rows).
    const Shape heads = {in[0], in[1] * m_heads, m_dim / m_heads};
    out.emplace_back(&m_q_norm, heads);
    out.emplace_back(&m_k_norm, heads);
  }
  out.emplace_back(&m_scores, scores);
  out.emplace_back(&m_softmax, scores);
  out.emplace_back(&m_values, m_values.output_shape(scores));
  out.emplace_back(&m_proj, in);
}

void Attention::forward(Backend& be, const Tensor& x, Tensor& y, Context& context) {
  auto& ctx = static_cast<AttentionContext&>(context);
  output_shape(x.shape());
  // An FP32 qkv that the fused path rounds to FP16/BF16 anyway: the
  // projection's GEMM writes that copy as it finishes its rows (not where a
  // fault is injected into qkv afterwards).
  const Format fq = m_scores.precision().compute;
  auto& sctx = static_cast<AttentionScoresContext&>(*ctx.scores_ctx);
  bool copied = false;
  if (fused_forward_applies() && !m_qkv.fault_output)  // runs the forward either way
    copied = m_qkv.forward_copy(be, x, ctx.qkv, *ctx.qkv_ctx, fq, saturates_forward(fq), sctx.qkv_compute);
  else
    m_qkv.forward(be, x, ctx.qkv, *ctx.qkv_ctx);
  record_output(be, m_qkv, ctx.qkv);
  // Where the fused path rounded qkv and then found no kernel, the leaves
  // take the rounded copy (their own rounding then has nothing to do).
  const Tensor* qkv_in = m_qk_norm ? &normalise_qk(be, ctx) : &ctx.qkv;
  // Where the projection casts FP32 values to FP8 with a delayed scale, the
  // fused kernel writes that cast instead of the values.
  Layer::InputCast cast;
  const bool cast_values = fused_forward_applies() && m_values.precision().storage == Format::FP32 &&
                           m_proj.input_cast(output_shape(x.shape()), cast) && cast.amax && is_fp8(cast.format);
  bool cast_done = false;
  if (forward_fused(be, ctx, qkv_in, copied, cast_values ? &cast : nullptr)) {
    cast_done = cast_values;
  } else {
    m_scores.forward(be, *qkv_in, ctx.scores, *ctx.scores_ctx);
    m_softmax.forward(be, ctx.scores, ctx.probs, *ctx.softmax_ctx);
    // Where both leaves compute in one format, the values leaf reads the
    // scores leaf's rounded qkv (its own rounding would give the same bits):
    // one copy, as a device would keep.
    const Tensor* qkv = qkv_in;
    if (m_values.precision().compute == m_scores.precision().compute)
      qkv = static_cast<const AttentionScoresContext&>(*ctx.scores_ctx).qkv;
    m_values.forward_pair(be, ctx.probs, *qkv, ctx.values, *ctx.values_ctx);
  }
  if (cast_done) m_proj.forward_cast(be, ctx.values, cast.scale, y, *ctx.proj_ctx);
  else m_proj.forward(be, ctx.values, y, *ctx.proj_ctx);
  record_output(be, m_proj, y);
}

bool Attention::fused_forward_applies() {
  if (m_qk_norm) return false;
  const LayerPrecision &ps = m_scores.precision(), &pm = m_softmax.precision(), &pv = m_values.precision();
  const Format fq = ps.compute;
  auto f32_or_half = [](Format f) { return f == Format::FP32 || is_half_format(f); };
  if (pv.compute != fq || ps.accumulate != Format::FP32 || pv.accumulate != Format::FP32) return false;
  // The softmax sums in FP32 and stores FP32 or the GEMMs' format (fp16's
  // all-FP16 softmax).
  if (pm.accumulate != Format::FP32 || (pm.storage != Format::FP32 && pm.storage != fq)) return false;
  if (!f32_or_half(fq) || !f32_or_half(ps.storage) || !f32_or_half(pv.storage) || !f32_or_half(pm.compute))
    return false;
  return !tracked(m_scores, NonfiniteSlot::Activation) && !tracked(m_softmax, NonfiniteSlot::Activation) &&
         !tracked(m_values, NonfiniteSlot::Activation);
}

bool Attention::forward_fused(Backend& be, AttentionContext& ctx, const Tensor*& qkv_in, bool copied,
                              const Layer::InputCast* values_cast) {
  const LayerPrecision &ps = m_scores.precision(), &pm = m_softmax.precision(), &pv = m_values.precision();
  const Format fq = ps.compute;
  if (!fused_forward_applies()) return false;
  const Shape ss = m_scores.output_shape(ctx.qkv.shape());
  if (ctx.qkv.numel() == 0) return false;
  auto& sctx = static_cast<AttentionScoresContext&>(*ctx.scores_ctx);
  auto& mctx = static_cast<SoftmaxContext&>(*ctx.softmax_ctx);
  auto& vctx = static_cast<AttentionValuesContext&>(*ctx.values_ctx);
  // The scores leaf's rounding of qkv, which the values leaf then shares
  // (made by the projection where `copied`).
  const Tensor& qkv = copied ? sctx.qkv_compute : round_to(be, ctx.qkv, fq, sctx.qkv_compute, saturates_forward(fq));
  qkv_in = &qkv;
  const std::int64_t B = qkv.dim(0), T = qkv.dim(1);
  // The scores live only inside the kernel (ctx.scores stays as it was).
  // Probabilities stored in the GEMMs' format are the values leaf's operand
  // themselves; stored FP32, they get a copy in that format.
  const bool probs_f32 = pm.storage == Format::FP32;
  ctx.probs.resize(ss, pm.storage);
  if (probs_f32 && fq != Format::FP32) vctx.probs_compute.resize(ss, fq);
  ctx.values.resize({B, T, m_dim}, values_cast ? values_cast->format : pv.storage);
  AttentionForward f;
  f.B = B;
  f.T = T;
  f.C = m_dim;
  f.H = ss[1];
  f.format = fq;
  f.qkv = qkv.data();
  f.alpha = score_scale(m_dim / ss[1]);
  f.causal = m_causal;
  f.scores_format = ps.storage;
  f.softmax_format = pm.compute;
  f.softmax_saturate = saturates_forward(pm.compute);
  f.probs_format = pm.storage;
  f.scores_saturate = saturates_forward(ps.storage);
  f.probs = probs_f32 ? ctx.probs.f32() : nullptr;
  f.probs_codes = fq == Format::FP32 ? nullptr : probs_f32 ? vctx.probs_compute.data() : ctx.probs.data();
  // Stored in fq either way: the softmax's encode or the values leaf's.
  f.probs_saturate = saturates_forward(fq);
  f.values_format = pv.storage;
  f.values_saturate = saturates_forward(pv.storage);
  if (values_cast) {
    f.values_cast = values_cast->format;
    f.values_codes = ctx.values.data();
    f.values_scale = values_cast->scale;
    f.values_amax = values_cast->amax;
  } else {
    f.values = ctx.values.data();
  }
  if (!fused::attention_forward(be, f)) return false;
  sctx.qkv = &qkv;
  mctx.y = &ctx.probs;
  vctx.probs = fq == Format::FP32 || !probs_f32 ? &ctx.probs : &vctx.probs_compute;
  vctx.qkv = &qkv;
  return true;
}

void Attention::backward(Backend& be, const Tensor& dy, Tensor* dx, Context& context) {
  backward_from(be, dy, nullptr, dx, context);
}

void Attention::backward_rounded(Backend& be, const Tensor& dy, const Tensor& rounded, Tensor* dx, Context& context) {
  backward_from(be, dy, &rounded, dx, context);
}

void Attention::backward_from(Backend& be, const Tensor& dy, const Tensor* rounded, Tensor* dx, Context& context) {
  auto& ctx = static_cast<AttentionContext&>(context);
  if (rounded) m_proj.backward_rounded(be, dy, *rounded, &ctx.d_values, *ctx.proj_ctx);
  else m_proj.backward(be, dy, &ctx.d_values, *ctx.proj_ctx);
  // q and k gradients come from the scores GEMMs, v's from the values GEMMs;
  // each is rounded to its own leaf's grad format inside an f32 buffer, and
  // the qkv projection rounds the whole to its grad format.
  ctx.dqkv.resize(ctx.qkv.shape(), Format::FP32);
  // As in the forward: dvalues already rounded by the fused path go to the
  // leaves as they are.
  const Tensor* dvalues = &ctx.d_values;
  const Tensor* dqkv = backward_fused(be, ctx, dvalues);
  if (!dqkv) {
    m_values.backward_pair(be, *dvalues, ctx.dprobs, ctx.dqkv.f32(), *ctx.values_ctx);
    m_softmax.backward(be, ctx.dprobs, &ctx.dscores, *ctx.softmax_ctx);
    m_scores.backward_into(be, ctx.dscores, ctx.dqkv.f32(), *ctx.scores_ctx);
    dqkv = &round_dqkv(be, ctx);
    if (m_qk_norm) normalise_qk_backward(be, ctx);
  }
  m_qkv.backward(be, *dqkv, dx, *ctx.qkv_ctx);
}

const Tensor* Attention::backward_fused(Backend& be, AttentionContext& ctx, const Tensor*& dvalues_in) {
  if (m_qk_norm) return nullptr;
  const LayerPrecision &ps = m_scores.precision(), &pm = m_softmax.precision(), &pv = m_values.precision();
  const Format fq = ps.compute, gv = pv.grad, gs = ps.grad;
  auto f32_or_half = [](Format f) { return f == Format::FP32 || is_half_format(f); };
  if (pv.compute != fq || ps.accumulate != Format::FP32 || pv.accumulate != Format::FP32) return nullptr;
  if (!f32_or_half(pm.grad) || !f32_or_half(fq) || !f32_or_half(gv) || !f32_or_half(gs)) return nullptr;
  if (tracked(m_scores, NonfiniteSlot::ActivationGrad) || tracked(m_softmax, NonfiniteSlot::ActivationGrad) ||
      tracked(m_values, NonfiniteSlot::ActivationGrad))
    return nullptr;
  // What the forward left: one qkv and probs in the GEMMs' format, the
  // softmax's output in FP32 or that format.
  const auto& sctx = static_cast<const AttentionScoresContext&>(*ctx.scores_ctx);
  const auto& mctx = static_cast<const SoftmaxContext&>(*ctx.softmax_ctx);
  const auto& vctx = static_cast<const AttentionValuesContext&>(*ctx.values_ctx);
  if (!sctx.qkv || sctx.qkv != vctx.qkv || !vctx.probs || !mctx.y) return nullptr;
  const Tensor &qkv = *sctx.qkv, &probs = *mctx.y, &probs_op = *vctx.probs;
  if (qkv.format() != fq || probs_op.format() != fq || qkv.rank() != 3 ||
      (probs.format() != Format::FP32 && probs.format() != fq))
    return nullptr;
  const Shape ps_shape = probs.shape();
  const std::int64_t B = qkv.dim(0), T = qkv.dim(1);
  if (ctx.d_values.shape() != Shape{B, T, m_dim} || ps_shape.size() != 4 || qkv.numel() == 0) return nullptr;
  const Tensor& dvalues = round_to(be, ctx.d_values, gv, m_dvalues_grad, false);
  dvalues_in = &dvalues;
  // dprobs and dscores live only inside the kernel.
  const bool codes = dqkv_as_codes(true);
  if (codes) ctx.dqkv_codes.resize(ctx.dqkv.shape(), gs);
  AttentionBackward f;
  f.B = B;
  f.T = T;
  f.C = m_dim;
  f.H = ps_shape[1];
  f.format = fq;
  f.qkv = qkv.data();
  f.probs_operand = probs_op.data();
  f.probs_format = probs.format();
  f.probs = probs.data();
  f.alpha = score_scale(m_dim / ps_shape[1]);
  f.causal = m_causal;
  f.dvalues_format = gv;
  f.dvalues = dvalues.data();
  f.dprobs_format = gv;
  f.softmax_grad_format = pm.grad;
  f.dscores_format = gs;
  f.dqkv = ctx.dqkv.f32();
  // round_dqkv's one rounding, in the kernel: to codes, or (one grad format
  // for q, k and v) to that format's values in dqkv itself.
  const bool rounded = codes || gs == gv;
  if (rounded) f.dqkv_format = gs;
  if (codes) f.dqkv_codes = ctx.dqkv_codes.data();
  if (!fused::attention_backward(be, f)) return nullptr;
  if (codes) return &ctx.dqkv_codes;
  return rounded ? &ctx.dqkv : &round_dqkv(be, ctx);
}

const Tensor& Attention::normalise_qk(Backend& be, AttentionContext& ctx) {
  const std::int64_t rows = ctx.qkv.dim(0) * ctx.qkv.dim(1), d = m_dim / m_heads, ld = 3 * m_dim;
  const float* q32 = f32_values(be, ctx.qkv, m_qkv32);
  // qkv as f32 with the normalised queries and keys in place of the raw
  // ones; the v columns as the projection left them.
  ctx.qkv_norm.resize(ctx.qkv.shape(), Format::FP32);
  be.copy(ctx.qkv_norm.data(), q32, static_cast<std::size_t>(ctx.qkv.numel()) * sizeof(float));
  struct Side {
    LayerNorm& norm;
    Tensor& in;
    Tensor& out;
    Context& c;
    std::int64_t col0;
  };
  for (const Side& s : {Side{m_q_norm, ctx.q_in, ctx.q_out, *ctx.q_norm_ctx, 0},
                        Side{m_k_norm, ctx.k_in, ctx.k_out, *ctx.k_norm_ctx, m_dim}}) {
    // Rows of one token's heads are contiguous: C columns of the token's row.
    s.in.resize({rows * m_heads, d}, Format::FP32);
    fused::copy_columns(be, q32 + s.col0, ld, s.in.f32(), m_dim, rows, m_dim);
    s.norm.forward(be, s.in, s.out, s.c);
    record_output(be, s.norm, s.out);
    const float* o = f32_values(be, s.out, m_norm32);
    fused::copy_columns(be, o, m_dim, ctx.qkv_norm.f32() + s.col0, ld, rows, m_dim);
  }
  return ctx.qkv_norm;
}

void Attention::normalise_qk_backward(Backend& be, AttentionContext& ctx) {
  // dq and dk in dqkv are the normalised heads' gradients, rounded to the
  // scores leaf's grad format (round_dqkv); through each norm's backward
  // they become the raw heads' gradients, in its grad format.
  const std::int64_t rows = ctx.dqkv.dim(0) * ctx.dqkv.dim(1), d = m_dim / m_heads, ld = 3 * m_dim;
  float* g = ctx.dqkv.f32();
  struct Side {
    LayerNorm& norm;
    Tensor& dout;
    Tensor& din;
    Context& c;
    std::int64_t col0;
  };
  for (const Side& s : {Side{m_q_norm, ctx.dq_out, ctx.dq_in, *ctx.q_norm_ctx, 0},
                        Side{m_k_norm, ctx.dk_out, ctx.dk_in, *ctx.k_norm_ctx, m_dim}}) {
    s.dout.resize({rows * m_heads, d}, Format::FP32);
    fused::copy_columns(be, g + s.col0, ld, s.dout.f32(), m_dim, rows, m_dim);
    s.norm.backward(be, s.dout, &s.din, s.c);
    const float* di = f32_values(be, s.din, m_norm32);
    fused::copy_columns(be, di, m_dim, g + s.col0, ld, rows, m_dim);
  }
}

bool Attention::dqkv_as_codes(bool fused) {
  // The projection takes the codes as they are in its own grad format (the
  // same rounding), or, from the fused kernel, in FP8, whose scaled cast
  // decodes them to the same f32 values the rounded dqkv holds (and sums
  // them for the bias as column_sums16, the same bits as column_sums of
  // those values): half the bytes written and read, and no rounding pass
  // over an f32 dqkv. Leaf by leaf (a backend without the fused kernel),
  // FP8 keeps the f32 dqkv rounded in place: encoding it would be a pass
  // more, and decoding it another.
  const Format fs = m_scores.precision().grad, fq = m_qkv.precision().grad;
  return !m_qk_norm && fs == m_values.precision().grad && is_half_format(fs) && (fq == fs || (fused && is_fp8(fq))) &&
         !tracked(m_scores, NonfiniteSlot::ActivationGrad) && !tracked(m_values, NonfiniteSlot::ActivationGrad);
}

const Tensor& Attention::round_dqkv(Backend& be, AttentionContext& ctx) {
  Tensor& dqkv = ctx.dqkv;
  // dq, dk leave the scores leaf (its grad format), dv the values leaf (its
  // own). The usual case, one format or FP32, takes one call over the whole
  // buffer; per-row calls only when the two formats differ.
  float* g = dqkv.f32();
  const std::int64_t rows = dqkv.dim(0) * dqkv.dim(1), ld = 3 * m_dim;
  const Format fs = m_scores.precision().grad, fv = m_values.precision().grad;
  std::int64_t* count_qk = tracked(m_scores, NonfiniteSlot::ActivationGrad);
  std::int64_t* count_v = tracked(m_values, NonfiniteSlot::ActivationGrad);
  if (dqkv_as_codes(false)) {
    // One encode: the codes of the rounded values, which the projection's
    // round_to then passes through (rounding twice to one format is
    // rounding once).
    ctx.dqkv_codes.resize(dqkv.shape(), fs);
    be.convert(Format::FP32, g, fs, ctx.dqkv_codes.data(), dqkv.numel(), {});
    return ctx.dqkv_codes;
  }
  if (fs == fv) {
    if (fs != Format::FP32) be.quantize(fs, g, dqkv.numel(), false);
  } else {
    if (fs != Format::FP32) round_columns(be, g, rows, ld, 0, 2 * m_dim, fs);
    if (fv != Format::FP32) round_columns(be, g, rows, ld, 2 * m_dim, m_dim, fv);
  }
  // Attribution (overflow steps only): counted per leaf, row by row.
  if (count_qk) count_columns(be, g, rows, ld, 0, 2 * m_dim, count_qk);
  if (count_v) count_columns(be, g, rows, ld, 2 * m_dim, m_dim, count_v);
  return dqkv;
}

}  // namespace engine
