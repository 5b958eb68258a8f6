// Patch embedding: gather patches, one GEMM, add position embeddings.
#include "nn/patch_embed.h"

#include <cstring>
#include <stdexcept>

#include "backend/backend.h"
#include "nn/layer_io.h"
#include "nn/linear.h"
#include "numeric/cast.h"

namespace engine {


void patch_embed_forward(Backend& be, const Tensor& patches, const Tensor& w, const GemmScales& s,
                         const float* bias, const float* pos, float* y, std::int64_t B, std::int64_t T,
                         std::int64_t P, std::int64_t dim, Format accumulate, float* pos_rep) {
  linear_forward(be, patches, w, s, bias, y, B * T, P, dim, accumulate);
  add_positions(be, y, pos, B, T * dim, pos_rep);
}

void add_positions(Backend& be, float* y, const float* pos, std::int64_t B, std::int64_t n, float* pos_rep) {
  be.repeat_rows(pos, pos_rep, 1, B, n);
  be.add(y, pos_rep, y, B * n);
}

void patch_embed_backward(Backend& be, const Tensor& dy, const float* dy_f32, const Tensor& patches,
                          const Tensor& w, const GemmScales& s, float* dpatches, float* dw, float* db, float* dpos,
                          std::int64_t B, std::int64_t T, std::int64_t P, std::int64_t dim, Format accumulate) {
  linear_backward(be, dy, dy_f32, patches, w, s, dpatches, dw, db, B * T, P, dim, accumulate);
  // dpos[t, :] = sum over the batch of dy[b, t, :]: column sums of dy seen as [B, T*dim].
  be.column_sums(dy_f32, B, T * dim, dpos);
}

void PatchEmbed::set_delayed_scaling(const DelayedScaling& c) {
  m_scaling = c;
  m_x_scale = {};
  m_dy_scale = {};
}

PatchEmbed::PatchEmbed(std::string name, std::int64_t channels, std::int64_t height, std::int64_t width,
                       std::int64_t patch, std::int64_t dim)
    : Layer(std::move(name)), m_c(channels), m_h(height), m_w(width), m_patch(patch), m_dim(dim),
      m_block(this->name()) {
  if (channels <= 0 || patch <= 0 || dim <= 0 || height < patch || width < patch)
    throw std::invalid_argument(this->name() + ": needs positive channels, patch size and width, and an image at least one patch large");
  m_tokens = (height / patch) * (width / patch);
  m_patch_size = channels * patch * patch;
  m_weight = make_parameter(this->name() + ".weight", {dim, m_patch_size}, true);
  m_bias = make_parameter(this->name() + ".bias", {dim}, false);
  m_pos = make_parameter(this->name() + ".pos", {m_tokens, dim}, false);
}

Shape PatchEmbed::output_shape(const Shape& in) const {
  if (in.size() != 4 || in[1] != m_c || in[2] != m_h || in[3] != m_w)
    throw_shape(name(), "expects input [batch, " + std::to_string(m_c) + ", " + std::to_string(m_h) + ", " +
                            std::to_string(m_w) + "]", in);
  return {in[0], m_tokens, m_dim};
}

std::unique_ptr<Context> PatchEmbed::make_context() const { return std::make_unique<PatchEmbedContext>(); }

void PatchEmbed::forward_block(Backend& be, const Tensor& x, Tensor& y, PatchEmbedContext& ctx) {
  const LayerPrecision& p = m_precision;
  const Shape ys = output_shape(x.shape());
  const std::int64_t B = x.dim(0), rows = B * m_tokens;
  ctx.block = true;
  ctx.x_shape = x.shape();
  ctx.patch_scale = 1.0f;
  m_patch32.resize({rows, m_patch_size}, Format::FP32);
  be.patchify(f32_values(be, x, m_x32), m_patch32.f32(), B, m_c, m_h, m_w, m_patch);
  // Bias and position table: no GEMM operands, FP32.
  const float* bias = f32_rounded(be, m_bias.weight, Format::FP32, m_b32, false);
  const float* pos = f32_rounded(be, m_pos.weight, Format::FP32, m_pos32, false);
  const float* w = weight_f32(be, m_weight, Format::FP32, m_w_compute);
  float* yf = output_begin(y, ys, p.storage, m_y32);
  m_block.forward(be, p.compute, m_patch32.f32(), w, bias, yf, rows, m_patch_size, m_dim, p.accumulate,
                  ctx.patches_block);
  m_pos_rep.resize({rows, m_dim}, Format::FP32);
  add_positions(be, yf, pos, B, m_tokens * m_dim, m_pos_rep.f32());
  output_end(be, y, p.storage, m_y32, saturates_forward(p.storage), tracked(*this, NonfiniteSlot::Activation));
}

void PatchEmbed::backward_block(Backend& be, const Tensor& dy, Tensor* dx, PatchEmbedContext& ctx) {
  const LayerPrecision& p = m_precision;
  const std::int64_t B = ctx.x_shape[0], rows = B * m_tokens;
  const bool dy_block = is_block_format(p.grad);
  const float* dyf = dy_block ? f32_values(be, dy, m_dy32) : f32_rounded(be, dy, p.grad, m_dy32, false);
  float* dpatches = nullptr;
  if (dx) {
    m_dp32.resize({rows, m_patch_size}, Format::FP32);
    dpatches = m_dp32.f32();
  }
  float* dw = grad_begin(m_weight, m_dw32);
  float* db = grad_begin(m_bias, m_db32);
  float* dpos = grad_begin(m_pos, m_dpos32);
  const float* w = weight_f32(be, m_weight, Format::FP32, m_w_compute);
  m_block.backward(be, p.compute, p.grad, stochastic_grads, dyf, ctx.patches_block, w, dpatches, dw, rows,
                   m_patch_size, m_dim, p.accumulate);
  // Bias and position gradients sum the unquantized dy.
  be.column_sums(dyf, rows, m_dim, db);
  be.column_sums(dyf, B, m_tokens * m_dim, dpos);
  const Format gout = dy_block ? Format::FP32 : p.grad;
  if (dx) {
    float* dxf = output_begin(*dx, ctx.x_shape, gout, m_dx32);
    be.unpatchify(dpatches, dxf, B, m_c, m_h, m_w, m_patch);
    output_end(be, *dx, gout, m_dx32, false, tracked(*this, NonfiniteSlot::ActivationGrad));
  }
  grad_end(be, m_weight, gout, m_dw32, tracked(*this, NonfiniteSlot::WeightGrad));
  grad_end(be, m_bias, gout, m_db32, tracked(*this, NonfiniteSlot::WeightGrad));
  grad_end(be, m_pos, gout, m_dpos32, tracked(*this, NonfiniteSlot::WeightGrad));
}

void PatchEmbed::forward(Backend& be, const Tensor& x, Tensor& y, Context& context) {
  auto& ctx = static_cast<PatchEmbedContext&>(context);
  ctx.block = false;
  if (is_block_format(m_precision.compute)) {
    forward_block(be, x, y, ctx);
    return;
  }
  const Shape ys = output_shape(x.shape());
  const LayerPrecision& p = m_precision;
  const bool sat = saturates_forward(p.compute);
  const std::int64_t B = x.dim(0), rows = B * m_tokens;
  ctx.x_shape = x.shape();
  const float* xf = f32_values(be, x, m_x32);
  // Gather straight into the saved tensor when it is an f32 container;
  // otherwise gather in f32 and round once into the compute format.
  const bool fp8 = is_fp8(p.compute);
  ctx.patch_scale = 1.0f;
  if (is_f32_container(p.compute)) {
    ctx.patches.resize({rows, m_patch_size}, p.compute);
    be.patchify(xf, ctx.patches.f32(), B, m_c, m_h, m_w, m_patch);
    if (p.compute == Format::TF32) be.quantize(Format::TF32, ctx.patches.f32(), ctx.patches.numel(), false);
  } else if (fp8) {
    // FP8 delayed scaling of the patches (see Linear::forward).
    m_patch32.resize({rows, m_patch_size}, Format::FP32);
    be.patchify(xf, m_patch32.f32(), B, m_c, m_h, m_w, m_patch);
    if (!m_x_scale.active() || m_x_scale.format() != p.compute) m_x_scale = DelayedScale(p.compute, m_scaling);
    ctx.patch_scale = m_x_scale.scale();
    round_scaled(be, m_patch32, p.compute, ctx.patch_scale, ctx.patches, m_fp8_ws, false, m_x_scale.amax_slot());
  } else {
    m_patch32.resize({rows, m_patch_size}, Format::FP32);
    be.patchify(xf, m_patch32.f32(), B, m_c, m_h, m_w, m_patch);
    encode_to(be, m_patch32, p.compute, ctx.patches, sat);
  }
  const Tensor& wc = round_to(be, m_weight.weight, p.compute, m_w_compute, sat);
  // FP8: bias and position embedding are no GEMM operands; they stay FP32.
  const Format side = fp8 ? Format::FP32 : p.compute;
  const float* bias = f32_rounded(be, m_bias.weight, side, m_b32, sat);
  const float* pos = f32_rounded(be, m_pos.weight, side, m_pos32, sat);
  float* yf = output_begin(y, ys, p.storage, m_y32);
  m_pos_rep.resize({B * m_tokens, m_dim}, Format::FP32);
  patch_embed_forward(be, ctx.patches, wc, {ctx.patch_scale, m_weight.weight_scale, 1.0f}, bias, pos, yf, B,
                      m_tokens, m_patch_size, m_dim, p.accumulate, m_pos_rep.f32());
  output_end(be, y, p.storage, m_y32, saturates_forward(p.storage), tracked(*this, NonfiniteSlot::Activation));
}

void PatchEmbed::backward(Backend& be, const Tensor& dy, Tensor* dx, Context& context) {
  auto& ctx = static_cast<PatchEmbedContext&>(context);
  if (ctx.x_shape.empty()) throw std::logic_error(name() + ": backward before forward");
  const Shape ys = output_shape(ctx.x_shape);
  if (dy.shape() != ys) throw_shape(name(), "gradient does not match the output " + shape_string(ys), dy.shape());
  if (ctx.block) {
    backward_block(be, dy, dx, ctx);
    return;
  }
  const LayerPrecision& p = m_precision;
  const std::int64_t B = ctx.x_shape[0];
  GemmScales s{ctx.patch_scale, m_weight.weight_scale, 1.0f};
  const Tensor* dyg;
  const float* dy32;
  if (is_fp8(p.grad)) {
    if (!m_dy_scale.active() || m_dy_scale.format() != p.grad) m_dy_scale = DelayedScale(p.grad, m_scaling);
    s.dy = m_dy_scale.scale();
    round_scaled(be, dy, p.grad, s.dy, m_dy_grad, m_fp8_ws, false, m_dy_scale.amax_slot());
    dyg = &m_dy_grad;
    dy32 = f32_values(be, dy, m_dy32);  // bias and position sums: unscaled dy
  } else {
    dyg = &round_to(be, dy, p.grad, m_dy_grad, false);
    dy32 = f32_values(be, *dyg, m_dy32);
  }
  const Tensor& wc = round_to(be, m_weight.weight, p.compute, m_w_compute, saturates_forward(p.compute));
  float* dpatches = nullptr;
  if (dx) {
    m_dp32.resize({B * m_tokens, m_patch_size}, Format::FP32);
    dpatches = m_dp32.f32();
  }
  float* dw = grad_begin(m_weight, m_dw32);
  float* db = grad_begin(m_bias, m_db32);
  float* dpos = grad_begin(m_pos, m_dpos32);
  patch_embed_backward(be, *dyg, dy32, ctx.patches, wc, s, dpatches, dw, db, dpos, B, m_tokens, m_patch_size, m_dim,
                       p.accumulate);
  if (dx) {
    float* dxf = output_begin(*dx, ctx.x_shape, p.grad, m_dx32);
    be.unpatchify(dpatches, dxf, B, m_c, m_h, m_w, m_patch);
    output_end(be, *dx, p.grad, m_dx32, false, tracked(*this, NonfiniteSlot::ActivationGrad));
  }
  // FP8 gradients: parameter gradients stay FP32 (see Linear).
  const Format gf = is_fp8(p.grad) ? Format::FP32 : p.grad;
  grad_end(be, m_weight, gf, m_dw32, tracked(*this, NonfiniteSlot::WeightGrad));
  grad_end(be, m_bias, gf, m_db32, tracked(*this, NonfiniteSlot::WeightGrad));
  grad_end(be, m_pos, gf, m_dpos32, tracked(*this, NonfiniteSlot::WeightGrad));
}

}  // namespace engine
