// Pre-LayerNorm transformer block: children run in order, residuals added here.
#include "nn/transformer_block.h"

#include <stdexcept>

#include "backend/backend.h"
#include "backend/fused.h"
#include "nn/layer_io.h"

namespace engine {

Format residual_format(Format stream, Format branch) {
  if (is_f32_container(stream) || is_f32_container(branch)) return Format::FP32;
  return branch;
}

void residual_add(Backend& be, const Tensor& a, const Tensor& b, Tensor& y, Tensor& ws_a, Tensor& ws_b,
                  Tensor& ws_y, bool saturate, std::int64_t* nonfinite) {
  if (a.shape() != b.shape())
    throw std::invalid_argument("residual add: shapes " + shape_string(a.shape()) + " and " +
                                shape_string(b.shape()) + " differ");
  const Format f = residual_format(a.format(), b.format());
  if (is_half_format(a.format()) && is_half_format(b.format()) && is_half_format(f) && !nonfinite) {
    // Codes in, codes out: one pass (Backend::add_encode; the f32 scratch
    // is only its default's).
    ws_a.resize(a.shape(), Format::FP32);
    ws_b.resize(b.shape(), Format::FP32);
    ws_y.resize(a.shape(), Format::FP32);
    y.resize(a.shape(), f);
    CastOptions opt;
    opt.saturate = saturate;
    if (a.numel())
      fused::add_encode(be, a.format(), a.data(), b.format(), b.data(), f, y.data(), a.numel(), opt, ws_a.f32(), ws_b.f32(),
                    ws_y.f32());
    return;
  }
  const float* af = f32_values(be, a, ws_a);
  const float* bf = f32_values(be, b, ws_b);
  float* yf = output_begin(y, a.shape(), f, ws_y);
  be.add(af, bf, yf, a.numel());
  output_end(be, y, f, ws_y, saturate, nonfinite);
}

std::size_t TransformerBlockContext::bytes() const {
  std::size_t n = 0;
  for (const auto* c : {&ln1_ctx, &attn_ctx, &ln2_ctx, &fc1_ctx, &gelu_ctx, &fc2_ctx})
    if (*c) n += (*c)->bytes();
  return n;
}

std::size_t TransformerBlockContext::emulation_bytes() const {
  std::size_t n = 0;
  for (const auto* c : {&ln1_ctx, &attn_ctx, &ln2_ctx, &fc1_ctx, &gelu_ctx, &fc2_ctx})
    if (*c) n += (*c)->emulation_bytes();
  return n;
}

TransformerBlock::TransformerBlock(std::string name, std::int64_t dim, std::int64_t heads, std::int64_t mlp_ratio,
                                   bool causal, bool qk_norm)
    : CompositeLayer(name), m_dim(dim), m_ln1(name + ".ln1", dim), m_attn(name + ".attn", dim, heads, causal, qk_norm),
      m_ln2(name + ".ln2", dim), m_fc1(name + ".fc1", dim, mlp_ratio * dim), m_gelu(name + ".gelu"),
      m_fc2(name + ".fc2", mlp_ratio * dim, dim) {}

Shape TransformerBlock::output_shape(const Shape& in) const {
  if (in.size() != 3 || in[2] != m_dim)
    throw_shape(name(), "expects input [batch, tokens, " + std::to_string(m_dim) + "]", in);
  return in;
}

std::unique_ptr<Context> TransformerBlock::make_context() const {
  auto ctx = std::make_unique<TransformerBlockContext>();
  ctx->ln1_ctx = m_ln1.make_context();
  ctx->attn_ctx = m_attn.make_context();
  ctx->ln2_ctx = m_ln2.make_context();
  ctx->fc1_ctx = m_fc1.make_context();
  ctx->gelu_ctx = m_gelu.make_context();
  ctx->fc2_ctx = m_fc2.make_context();
  return ctx;
}

std::vector<Parameter*> TransformerBlock::parameters() {
  std::vector<Parameter*> out;
  for (Layer* l : leaves())
    for (Parameter* p : l->parameters()) out.push_back(p);
  return out;
}

std::vector<Layer*> TransformerBlock::leaves() {
  std::vector<Layer*> out = {&m_ln1};
  for (Layer* l : m_attn.leaves()) out.push_back(l);
  out.insert(out.end(), {&m_ln2, &m_fc1, &m_gelu, &m_fc2});
  return out;
}

void TransformerBlock::leaf_shapes(const Shape& in, std::vector<std::pair<Layer*, Shape>>& out) {
  output_shape(in);
  out.emplace_back(&m_ln1, in);
  m_attn.leaf_shapes(in, out);
  out.emplace_back(&m_ln2, in);
  const Shape hidden = m_fc1.output_shape(in);
  out.emplace_back(&m_fc1, hidden);
  out.emplace_back(&m_gelu, hidden);
  out.emplace_back(&m_fc2, in);
}

namespace {

// A LayerNorm whose output only the Linear `next` reads: where next computes
// in FP16/BF16, the norm writes that format itself (the rounding next would
// make, in the same pass; next then uses the codes as they are).
void norm_for(Backend& be, LayerNorm& ln, const Tensor& x, Tensor& y, Context& ctx, const Linear& next) {
  const Format f = next.precision().compute;
  if (!ln.forward_codes(be, x, y, ctx, f, saturates_forward(f))) ln.forward(be, x, y, ctx);
}

}  // namespace

void TransformerBlock::forward(Backend& be, const Tensor& x, Tensor& y, Context& context) {
  auto& ctx = static_cast<TransformerBlockContext&>(context);
  output_shape(x.shape());
  norm_for(be, m_ln1, x, ctx.ln1_out, *ctx.ln1_ctx, m_attn.qkv());
  record_output(be, m_ln1, ctx.ln1_out);
  m_attn.forward(be, ctx.ln1_out, ctx.attn_out, *ctx.attn_ctx);
  Linear& proj = m_attn.proj();
  residual_add(be, x, ctx.attn_out, ctx.h, m_ws_a, m_ws_b, m_ws_y, saturates_forward(ctx.attn_out.format()),
               tracked(proj, NonfiniteSlot::Activation));
  norm_for(be, m_ln2, ctx.h, ctx.ln2_out, *ctx.ln2_ctx, m_fc1);
  record_output(be, m_ln2, ctx.ln2_out);
  m_fc1.forward(be, ctx.ln2_out, ctx.fc1_out, *ctx.fc1_ctx);
  record_output(be, m_fc1, ctx.fc1_out);
  // Where fc2 casts its input to FP8 with a delayed scale, the GELU writes
  // that cast itself (Layer::forward_cast_for) and fc2 takes the codes.
  Layer::InputCast cast;
  if (m_fc2.input_cast(ctx.fc1_out.shape(), cast) && cast.amax &&
      m_gelu.forward_cast_for(be, ctx.fc1_out, ctx.gelu_out, *ctx.gelu_ctx, cast)) {
    m_fc2.forward_cast(be, ctx.gelu_out, cast.scale, ctx.fc2_out, *ctx.fc2_ctx);
  } else {
    m_gelu.forward(be, ctx.fc1_out, ctx.gelu_out, *ctx.gelu_ctx);
    m_fc2.forward(be, ctx.gelu_out, ctx.fc2_out, *ctx.fc2_ctx);
  }
  record_output(be, m_fc2, ctx.fc2_out);
  residual_add(be, ctx.h, ctx.fc2_out, y, m_ws_a, m_ws_b, m_ws_y, saturates_forward(ctx.fc2_out.format()),
               tracked(m_fc2, NonfiniteSlot::Activation));
}

void TransformerBlock::backward(Backend& be, const Tensor& dy, Tensor* dx, Context& context) {
  auto& ctx = static_cast<TransformerBlockContext&>(context);
  // MLP branch, then the residual: dh = dy + d(mlp branch)/dh.
  m_fc2.backward(be, dy, &ctx.d_gelu_out, *ctx.fc2_ctx);
  m_gelu.backward(be, ctx.d_gelu_out, &ctx.d_fc1_out, *ctx.gelu_ctx);
  m_fc1.backward(be, ctx.d_fc1_out, &ctx.d_ln2_out, *ctx.fc1_ctx);
  // In one pass where the norm's gradient is FP32 (LayerNorm::backward_add),
  // dh also rounded there for the projection's backward.
  Tensor* codes = nullptr;
  if (const Format f = m_attn.proj().dy_codes_format(); f != Format::FP32 && dy.format() == Format::FP32) {
    ctx.dh_codes.resize(dy.shape(), f);
    codes = &ctx.dh_codes;
  }
  if (m_ln2.backward_add(be, ctx.d_ln2_out, dy, ctx.dh, codes, *ctx.ln2_ctx)) {
    if (codes) m_attn.backward_rounded(be, ctx.dh, *codes, &ctx.d_ln1_out, *ctx.attn_ctx);
    else m_attn.backward(be, ctx.dh, &ctx.d_ln1_out, *ctx.attn_ctx);
  } else {
    m_ln2.backward(be, ctx.d_ln2_out, &ctx.d_h_mlp, *ctx.ln2_ctx);
    residual_add(be, dy, ctx.d_h_mlp, ctx.dh, m_ws_a, m_ws_b, m_ws_y, false,
                 tracked(m_ln2, NonfiniteSlot::ActivationGrad));
    m_attn.backward(be, ctx.dh, &ctx.d_ln1_out, *ctx.attn_ctx);
  }
  // Attention branch, then the residual: dx = dh + d(attention branch)/dx.
  if (!dx) {
    m_ln1.backward(be, ctx.d_ln1_out, nullptr, *ctx.ln1_ctx);
  } else if (!m_ln1.backward_add(be, ctx.d_ln1_out, ctx.dh, *dx, nullptr, *ctx.ln1_ctx)) {
    m_ln1.backward(be, ctx.d_ln1_out, &ctx.d_x_attn, *ctx.ln1_ctx);
    residual_add(be, ctx.dh, ctx.d_x_attn, *dx, m_ws_a, m_ws_b, m_ws_y, false,
                 tracked(m_ln1, NonfiniteSlot::ActivationGrad));
  }
}

}  // namespace engine
