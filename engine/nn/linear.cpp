// Linear layer: typed-operand GEMMs forward and backward.
#include "nn/linear.h"

#include <stdexcept>

#include "nn/fp8_scaling.h"
#include "backend/backend.h"
#include "backend/fused.h"
#include "nn/layer_io.h"

namespace engine {

void linear_forward(Backend& be, const Tensor& x, const Tensor& w, const GemmScales& s, const float* bias,
                    float* y, std::int64_t rows, std::int64_t in, std::int64_t out, Format accumulate,
                    const GemmEncode* y_codes, std::uint64_t x_keep, std::uint64_t w_keep) {
  GemmArgs g;
  g.m = rows;
  g.n = out;
  g.k = in;
  g.a = gemm_operand(x, 0, in, false);
  g.a.keep = x_keep;
  g.b = gemm_operand(w, 0, in, true);  // op(B) = W^T: [in, out]
  g.b.keep = w_keep;
  g.c = y;
  g.ldc = out;
  // Scaled FP8 operands: the f32 GEMM result times 1/(s_x s_w), then the
  // (unscaled) bias, as cuBLASLt applies the scale_inv pointers.
  g.alpha = unscale_alpha(s.x, s.w);
  g.bias = bias;
  g.accumulate = accumulate;
  if (y_codes) fused::gemm_encode(be, g, *y_codes);
  else be.gemm(g);
}

void linear_backward(Backend& be, const Tensor& dy, const float* dy_f32, const Tensor& x,
                     const Tensor& w, const GemmScales& s, float* dx, float* dw, float* db,
                     std::int64_t rows, std::int64_t in, std::int64_t out, Format accumulate,
                     const GemmEncode* dx_codes, const GemmEncode* dw_codes, std::uint64_t x_keep,
                     std::uint64_t w_keep) {
  // dy is read by both products below: tagged, its decode may serve both
  // (the transformer's dgrad and token-split weight gradient take the same
  // rows on each thread).
  const std::uint64_t dy_keep = dx ? new_keep_tag() : 0;
  if (dx) {
    // dx [rows, in] = dy [rows, out] W [out, in]
    GemmArgs g;
    g.m = rows;
    g.n = in;
    g.k = out;
    g.a = gemm_operand(dy, 0, out, false);
    g.a.keep = dy_keep;
    g.a.keep_next = true;
    g.b = gemm_operand(w, 0, in, false);
    g.b.keep = w_keep;
    g.b.keep_last = true;
    g.c = dx;
    g.ldc = in;
    g.alpha = unscale_alpha(s.dy, s.w);
    g.accumulate = accumulate;
    if (dx_codes) fused::gemm_encode(be, g, *dx_codes);
    else be.gemm(g);
  }
  // dW [out, in] = dy^T [out, rows] x [rows, in]: the gradient of the real
  // weight, so the weight's scale plays no part.
  GemmArgs g;
  g.m = out;
  g.n = in;
  g.k = rows;
  g.a = gemm_operand(dy, 0, out, true);
  g.a.keep = dy_keep;
  g.a.keep_last = true;
  g.b = gemm_operand(x, 0, in, false);
  g.b.keep = x_keep;
  g.b.keep_last = true;
  g.c = dw;
  g.ldc = in;
  g.alpha = unscale_alpha(s.dy, s.x);
  g.accumulate = accumulate;
  if (dw_codes) fused::gemm_encode(be, g, *dw_codes);
  else be.gemm(g);
  if (db) be.column_sums(dy_f32, rows, out, db);
}

Linear::Linear(std::string name, std::int64_t in, std::int64_t out, bool bias)
    : Layer(std::move(name)), m_in(in), m_out(out), m_has_bias(bias), m_block(this->name()) {
  if (in <= 0 || out <= 0)
    throw std::invalid_argument(this->name() + ": features must be positive (in " + std::to_string(in) +
                                ", out " + std::to_string(out) + ")");
  m_weight = make_parameter(this->name() + ".weight", {out, in}, true);
  if (bias) m_bias = make_parameter(this->name() + ".bias", {out}, false);
}

Shape Linear::output_shape(const Shape& in) const {
  if (in.size() < 2 || in.back() != m_in)
    throw_shape(name(), "expects input [batch, ..., " + std::to_string(m_in) + "]", in);
  Shape out = in;
  out.back() = m_out;
  return out;
}

std::unique_ptr<Context> Linear::make_context() const { return std::make_unique<LinearContext>(); }

std::vector<Parameter*> Linear::parameters() {
  if (m_has_bias) return {&m_weight, &m_bias};
  return {&m_weight};
}

void Linear::set_delayed_scaling(const DelayedScaling& c) {
  m_scaling = c;
  m_x_scale = {};
  m_dy_scale = {};
  m_w_scale = {};
}

void Linear::forward_block(Backend& be, const Tensor& x, Tensor& y, LinearContext& ctx) {
  const LayerPrecision& p = m_precision;
  const Shape ys = output_shape(x.shape());
  ctx.block = true;
  ctx.x = &x;
  ctx.x_scale = ctx.w_scale = 1.0f;
  ctx.w = &m_weight.weight;
  const std::int64_t rows = x.numel() / m_in;
  // Bias: no GEMM operand, FP32 (as with FP8).
  const float* b = m_has_bias ? f32_rounded(be, m_bias.weight, Format::FP32, m_b32, false) : nullptr;
  const float* w = weight_f32(be, m_weight, Format::FP32, m_w_compute);
  float* yf = output_begin(y, ys, p.storage, m_y32);
  m_block.forward(be, p.compute, f32_values(be, x, m_x32), w, b, yf, rows, m_in, m_out, p.accumulate, ctx.x_block);
  output_end(be, y, p.storage, m_y32, saturates_forward(p.storage), tracked(*this, NonfiniteSlot::Activation));
}

void Linear::backward_block(Backend& be, const Tensor& dy, Tensor* dx, LinearContext& ctx) {
  const LayerPrecision& p = m_precision;
  const Tensor& x = *ctx.x;
  const std::int64_t rows = x.numel() / m_in;
  // A block grad format quantizes dy itself; any other is a plain rounding.
  const bool dy_block = is_block_format(p.grad);
  const float* dyf = dy_block ? f32_values(be, dy, m_dy32) : f32_rounded(be, dy, p.grad, m_dy32, false);
  const Format dx_format = dy_block ? Format::FP32 : p.grad;
  float* dxf = dx ? output_begin(*dx, x.shape(), dx_format, m_dx32) : nullptr;
  float* dw = grad_begin(m_weight, m_dw32);
  float* db = m_has_bias ? grad_begin(m_bias, m_db32) : nullptr;
  const float* w = weight_f32(be, m_weight, Format::FP32, m_w_compute);
  m_block.backward(be, p.compute, p.grad, stochastic_grads, dyf, ctx.x_block, w, dxf, dw, rows, m_in, m_out,
                   p.accumulate);
  // The bias gradient sums the unquantized dy (as Transformer Engine's fused dbias).
  if (db) be.column_sums(dyf, rows, m_out, db);
  if (dx) output_end(be, *dx, dx_format, m_dx32, false, tracked(*this, NonfiniteSlot::ActivationGrad));
  // Parameter gradients leave the GEMM in FP32 (TE's wgrad into main_grad).
  const Format gf = dy_block ? Format::FP32 : p.grad;
  grad_end(be, m_weight, gf, m_dw32, tracked(*this, NonfiniteSlot::WeightGrad));
  if (m_has_bias) grad_end(be, m_bias, gf, m_db32, tracked(*this, NonfiniteSlot::WeightGrad));
}

void Linear::forward(Backend& be, const Tensor& x, Tensor& y, Context& context) {
  forward_into(be, x, y, static_cast<LinearContext&>(context), nullptr);
}

bool Linear::forward_copy(Backend& be, const Tensor& x, Tensor& y, Context& context, Format f, bool saturate,
                          Tensor& copy) {
  auto& ctx = static_cast<LinearContext&>(context);
  if (!is_half_format(f) || m_precision.storage != Format::FP32 || is_block_format(m_precision.compute) ||
      tracked(*this, NonfiniteSlot::Activation) || x.numel() == 0) {
    forward_into(be, x, y, ctx, nullptr);
    return false;
  }
  copy.resize(output_shape(x.shape()), f);
  GemmEncode e{f, copy.data(), {}};
  e.opt.saturate = saturate;
  return forward_into(be, x, y, ctx, &e);
}

bool Linear::forward_into(Backend& be, const Tensor& x, Tensor& y, LinearContext& ctx, const GemmEncode* copy,
                          float x_scale) {
  ctx.block = false;
  if (is_block_format(m_precision.compute)) {
    forward_block(be, x, y, ctx);
    return false;
  }
  const Shape ys = output_shape(x.shape());
  const LayerPrecision& p = m_precision;
  const bool sat = saturates_forward(p.compute);
  const bool fp8 = is_fp8(p.compute);
  ctx.x_scale = 1.0f;
  if (x_scale > 0.0f) {
    // Cast by the layer before (input_cast, forward_cast).
    ctx.x_scale = x_scale;
    ctx.x = &x;
  } else if (fp8) {
    // Delayed scaling: this step's scale comes from earlier steps' amaxes;
    // this step's amax is recorded after the cast.
    DelayedScale& ds = delayed_scale_for(m_x_scale, p.compute, m_scaling);
    ctx.x_scale = ds.scale();
    round_scaled(be, x, p.compute, ctx.x_scale, ctx.x_compute, m_fp8_ws, false, ds.amax_slot());
    ctx.x = &ctx.x_compute;
  } else {
    ctx.x = &round_to(be, x, p.compute, ctx.x_compute, sat);
  }
  const Tensor& xc = *ctx.x;
  ctx.w_scale = m_weight.weight_scale;
  if (fp8 && m_weight.weight.format() != p.compute) {
    // A weight the AMP code did not store in FP8: scaled here, per forward.
    DelayedScale& ds = delayed_scale_for(m_w_scale, p.compute, m_scaling);
    ctx.w_scale = ds.scale() * m_weight.weight_scale;
    round_scaled(be, m_weight.weight, p.compute, ds.scale(), m_w_compute, m_fp8_ws, false, ds.amax_slot());
    ctx.w = &m_w_compute;
  } else {
    ctx.w = &round_to(be, m_weight.weight, p.compute, m_w_compute, sat);
  }
  const Tensor& wc = *ctx.w;
  // FP8 layers keep the bias out of FP8 (it is no GEMM operand).
  const float* b = m_has_bias ? f32_rounded(be, m_bias.weight, fp8 ? Format::FP32 : p.compute, m_b32, sat) : nullptr;
  const std::int64_t rows = x.numel() / m_in;
  float* yf = output_begin(y, ys, p.storage, m_y32);
  std::int64_t* nonfinite = tracked(*this, NonfiniteSlot::Activation);
  GemmEncode y_codes;
  if (is_half_format(p.storage) && !nonfinite && y.numel()) {
    // FP16/BF16 output encoded as the GEMM finishes its rows (output_end's
    // cast, the same bits).
    y_codes = {p.storage, y.data(), {}};
    y_codes.opt.saturate = saturates_forward(p.storage);
    y_codes.c_scratch = true;  // yf is m_y32: output_end does not run
  }
  // An FP32 output's copy (forward_copy): C stays in y, the codes go there.
  const GemmEncode* encode = y_codes.codes ? &y_codes : copy;
  // x stays as it is until backward (the caller's promise, or ctx's copy),
  // and so does w (the optimizer steps after backward). w is tagged only
  // where the last backward computed dx, its tag's last use: a first
  // layer's w would otherwise leave a kept copy behind every step.
  ctx.x_keep = new_keep_tag();
  ctx.w_keep = m_dgrad ? new_keep_tag() : 0;
  linear_forward(be, xc, wc, {ctx.x_scale, ctx.w_scale, 1.0f}, b, yf, rows, m_in, m_out, p.accumulate, encode,
                 ctx.x_keep, ctx.w_keep);
  if (!y_codes.codes) output_end(be, y, p.storage, m_y32, saturates_forward(p.storage), nonfinite);
  return encode == copy && copy;
}

bool Linear::input_cast(const Shape& x, InputCast& c) {
  // forward_into's round_to, or its round_scaled with its scratch (block
  // formats quantize instead).
  const Format f = m_precision.compute;
  c = {};
  c.format = f;
  if (is_half_format(f)) {
    c.saturate = saturates_forward(f);
    return true;
  }
  if (!is_fp8(f)) return false;
  DelayedScale& ds = delayed_scale_for(m_x_scale, f, m_scaling);
  c.scale = ds.scale();
  c.amax = ds.amax_slot();
  m_fp8_ws.resize(x, Format::FP32);
  c.scratch = m_fp8_ws.f32();
  return true;
}

void Linear::forward_cast(Backend& be, const Tensor& codes, float scale, Tensor& y, Context& context) {
  if (!is_fp8(m_precision.compute) || codes.format() != m_precision.compute || !(scale > 0.0f))
    throw std::logic_error(name() + ": forward_cast of codes not cast as input_cast said");
  forward_into(be, codes, y, static_cast<LinearContext&>(context), nullptr, scale);
}

Format Linear::dy_codes_format() const {
  const Format g = m_precision.grad;
  return is_half_format(g) && !is_block_format(m_precision.compute) ? g : Format::FP32;
}

void Linear::backward(Backend& be, const Tensor& dy, Tensor* dx, Context& context) {
  backward_from(be, dy, nullptr, dx, static_cast<LinearContext&>(context));
}

void Linear::backward_rounded(Backend& be, const Tensor& dy, const Tensor& rounded, Tensor* dx, Context& context) {
  if (rounded.format() != dy_codes_format() || rounded.shape() != dy.shape())
    throw std::logic_error(name() + ": rounded gradient of the wrong format or shape");
  backward_from(be, dy, &rounded, dx, static_cast<LinearContext&>(context));
}

void Linear::backward_from(Backend& be, const Tensor& dy, const Tensor* rounded, Tensor* dx, LinearContext& ctx) {
  if (!ctx.x) throw std::logic_error(name() + ": backward before forward");
  const Tensor& x = *ctx.x;
  const std::int64_t rows = x.numel() / m_in;
  if (dy.numel() != rows * m_out) throw_shape(name(), "gradient does not match the output " +
                                                          shape_string(output_shape(x.shape())), dy.shape());
  if (ctx.block) {
    backward_block(be, dy, dx, ctx);
    return;
  }
  const LayerPrecision& p = m_precision;
  GemmScales s{ctx.x_scale, ctx.w_scale, 1.0f};
  const Tensor* dyg;
  // The bias gradient sums the unscaled, unrounded dy for FP8 (TE's fused
  // dbias, in the same pass as dy's cast: round_scaled's sums), the
  // rounded dy otherwise (below).
  const bool fp8 = is_fp8(p.grad);
  if (fp8) {
    DelayedScale& ds = delayed_scale_for(m_dy_scale, p.grad, m_scaling);
    s.dy = ds.scale();
    round_scaled(be, dy, p.grad, s.dy, m_dy_grad, m_fp8_ws, false, ds.amax_slot(),
                 m_has_bias ? grad_begin(m_bias, m_db32) : nullptr, m_out);
    dyg = &m_dy_grad;
  } else {
    dyg = rounded ? rounded : &round_to(be, dy, p.grad, m_dy_grad, false);
  }
  // FP16/BF16 codes are summed as they are decoded (Backend::column_sums16).
  const bool sum_codes = m_has_bias && !fp8 && is_half_format(dyg->format());
  const float* dy32 = m_has_bias && !fp8 && !sum_codes ? f32_values(be, *dyg, m_dy32) : nullptr;
  float* dxf = dx ? output_begin(*dx, x.shape(), p.grad, m_dx32) : nullptr;
  float* dw = grad_begin(m_weight, m_dw32);
  float* db = m_has_bias ? grad_begin(m_bias, m_db32) : nullptr;
  std::int64_t* dx_nonfinite = dx ? tracked(*this, NonfiniteSlot::ActivationGrad) : nullptr;
  GemmEncode dx_codes;
  // dx in an FP16/BF16 or (unscaled, as output_end casts it) FP8 grad
  // format: encoded by the GEMM as it finishes its rows.
  if (dx && (is_half_format(p.grad) || is_fp8(p.grad)) && !dx_nonfinite && dx->numel())
    dx_codes = {p.grad, dx->data(), {}, true};  // dxf is m_dx32: output_end does not run
  // FP8 gradients: weight and bias gradients leave the GEMM in FP32 (as
  // Transformer Engine's wgrad into an FP32 main_grad); E5M2 is dy's format.
  const Format gf = is_fp8(p.grad) ? Format::FP32 : p.grad;
  // The weight gradient in an FP16/BF16 grad format is rounded (FP32
  // storage) or encoded (storage in that format) by the GEMM as it finishes
  // its rows: grad_end's quantize or cast, the same bits.
  std::int64_t* dw_nonfinite = tracked(*this, NonfiniteSlot::WeightGrad);
  const Format dw_storage = m_weight.grad.format();
  const bool dw_done = is_half_format(gf) && !dw_nonfinite && m_weight.grad.numel() &&
                       (dw_storage == Format::FP32 || dw_storage == gf);
  // Encoded into the grad's own storage, dw is m_dw32, which grad_end then
  // does not read.
  const GemmEncode dw_codes{gf, dw_storage == Format::FP32 ? nullptr : m_weight.grad.data(), {}, true};
  linear_backward(be, *dyg, dy32, x, *ctx.w, s, dxf, dw, dy32 ? db : nullptr, rows, m_in, m_out, p.accumulate,
                  dx_codes.codes ? &dx_codes : nullptr, dw_done ? &dw_codes : nullptr, ctx.x_keep, ctx.w_keep);
  m_dgrad = dx != nullptr;
  if (sum_codes) {
    m_dy32.resize(dyg->shape(), Format::FP32);
    fused::column_sums16(be, dyg->format(), dyg->data(), rows, m_out, db, m_dy32.f32());
  }
  if (dx && !dx_codes.codes) output_end(be, *dx, p.grad, m_dx32, false, dx_nonfinite);
  if (!dw_done) grad_end(be, m_weight, gf, m_dw32, dw_nonfinite);
  if (m_has_bias) grad_end(be, m_bias, gf, m_db32, tracked(*this, NonfiniteSlot::WeightGrad));
}

}  // namespace engine
