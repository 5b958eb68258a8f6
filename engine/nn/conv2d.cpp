// 2-D convolution layer on the backend's conv kernels (oneDNN on the CPU).
#include "nn/conv2d.h"

#include <functional>
#include <stdexcept>

#include "nn/fp8_scaling.h"
#include "backend/backend.h"
#include "backend/fused.h"
#include "nn/layer_io.h"
#include "numeric/block.h"

namespace engine {

void conv2d_forward(Backend& be, const ConvShape& s, Format compute, const float* x, const float* w,
                    const float* bias, float* y) {
  be.conv2d_forward(s, compute, x, w, bias, y);
}

Conv2d::Conv2d(std::string name, std::int64_t c_in, std::int64_t c_out, std::int64_t kernel,
               std::int64_t pad, std::int64_t stride, bool bias)
    : Layer(std::move(name)), m_c_in(c_in), m_c_out(c_out), m_kernel(kernel), m_pad(pad),
      m_stride(stride), m_has_bias(bias) {
  if (c_in <= 0 || c_out <= 0 || kernel <= 0 || pad < 0 || stride <= 0)
    throw std::invalid_argument(this->name() + ": channels, kernel and stride must be positive, padding not negative");
  m_weight = make_parameter(this->name() + ".weight", {c_out, c_in, kernel, kernel}, true);
  if (bias) m_bias = make_parameter(this->name() + ".bias", {c_out}, false);
}

ConvShape Conv2d::conv_shape(const Shape& in) const {
  ConvShape s;
  s.n = in[0];
  s.c_in = in[1];
  s.h = in[2];
  s.w = in[3];
  s.c_out = m_c_out;
  s.kh = s.kw = m_kernel;
  s.stride = m_stride;
  s.pad = m_pad;
  return s;
}

Shape Conv2d::output_shape(const Shape& in) const {
  if (in.size() != 4 || in[1] != m_c_in)
    throw_shape(name(), "expects input [batch, " + std::to_string(m_c_in) + ", height, width]", in);
  if (in[2] + 2 * m_pad < m_kernel || in[3] + 2 * m_pad < m_kernel)
    throw_shape(name(), "input smaller than the " + std::to_string(m_kernel) + "x" +
                            std::to_string(m_kernel) + " kernel", in);
  const ConvShape s = conv_shape(in);
  return {in[0], m_c_out, s.out_h(), s.out_w()};
}

std::unique_ptr<Context> Conv2d::make_context() const { return std::make_unique<Conv2dContext>(); }

std::vector<Parameter*> Conv2d::parameters() {
  if (m_has_bias) return {&m_weight, &m_bias};
  return {&m_weight};
}

void Conv2d::set_delayed_scaling(const DelayedScaling& c) {
  m_scaling = c;
  m_x_scale = {};
  m_dy_scale = {};
  m_w_scale = {};
}

const float* Conv2d::weight_values(Backend& be, bool record, float* scale) {
  const Format compute = m_precision.compute;
  if (m_weight.weight.format() == compute) {
    // Stored by the AMP code in FP8, holding weight * weight_scale.
    *scale = m_weight.weight_scale;
    return f32_values(be, m_weight.weight, m_w32);
  }
  // Not stored in FP8: the layer scales it itself (delayed, per forward).
  DelayedScale& ds = delayed_scale_for(m_w_scale, compute, m_scaling);
  if (record) {
    *scale = ds.scale() * m_weight.weight_scale;
    round_scaled(be, m_weight.weight, compute, ds.scale(), m_w8, m_w32, true, ds.amax_slot());
    return m_w32.f32();
  }
  *scale = m_w_used_scale;
  return f32_values(be, m_w8, m_w32);
}

// Block compute (MXFP8, MXFP6, MXFP4, NVFP4). Convolution has no block
// layout in Transformer Engine; here every operand is quantized once, in
// blocks along its innermost dimension: activations and gradients along
// each row of pixels ([N*C, H*W] row-wise), filters along their C*k*k
// weights (NVFP4: 16 x 16 tiles of [C_out, C*k*k]). The same copy serves
// the forward and both backward convolutions. Values are exact in BF16
// (block.h), so the backend's BF16 path stays exact; NVFP4's tensor scales
// multiply the f32 results.
void Conv2d::forward_block(Backend& be, const Tensor& x, Tensor& y, Conv2dContext& ctx) {
  const LayerPrecision& p = m_precision;
  const Shape ys = output_shape(x.shape());
  const ConvShape cs = conv_shape(x.shape());
  const Format f = p.compute;
  ctx.block = true;
  ctx.x = &x;
  ctx.x_scale = 1.0f;
  ctx.x32 = nullptr;
  const std::int64_t rows = cs.n * cs.c_in, hw = cs.h * cs.w;
  ctx.x_block.resize(x.shape(), Format::FP32);
  ctx.x_info.reserve(sizeof(BlockQuantized));
  be.block_quantize(f, f32_values(be, x, m_x32), ctx.x_block.f32(), rows, hw, BlockLayout::Rows, {},
                    ctx.x_info.as<BlockQuantized>());
  ctx.x_device_bytes = block_bytes(f, rows, hw, BlockLayout::Rows);
  const std::int64_t wcols = m_weight.numel() / m_c_out;
  const BlockLayout wl = block_info(f).tensor_scale ? BlockLayout::Tiles : BlockLayout::Rows;
  m_wq.resize(m_weight.shape, Format::FP32);
  m_wq_info.reserve(sizeof(BlockQuantized));
  be.block_quantize(f, weight_f32(be, m_weight, Format::FP32, m_w32), m_wq.f32(), m_c_out, wcols, wl, {},
                    m_wq_info.as<BlockQuantized>());
  ConvBlockArgs g;
  g.kind = ConvBlockArgs::Kind::Forward;
  g.shape = cs;
  g.a = ctx.x_block.f32();
  g.a_block = ctx.x_info.as<BlockQuantized>();
  g.b = m_wq.f32();
  g.b_block = m_wq_info.as<BlockQuantized>();
  g.bias = m_has_bias ? f32_values(be, m_bias.weight, m_b32) : nullptr;
  g.out = output_begin(y, ys, p.storage, m_y32);
  be.conv2d_block(g);
  output_end(be, y, p.storage, m_y32, saturates_forward(p.storage), tracked(*this, NonfiniteSlot::Activation));
}

void Conv2d::backward_block(Backend& be, const Tensor& dy, Tensor* dx, Conv2dContext& ctx) {
  const LayerPrecision& p = m_precision;
  const Tensor& x = *ctx.x;
  const ConvShape cs = conv_shape(x.shape());
  const std::int64_t hw_out = cs.out_h() * cs.out_w();
  const bool dy_block = is_block_format(p.grad);
  const Format gout = dy_block ? Format::FP32 : p.grad;
  float* dxf = dx ? output_begin(*dx, x.shape(), gout, m_dx32) : nullptr;
  float* dw = grad_begin(m_weight, m_dw32);
  float* db = m_has_bias ? grad_begin(m_bias, m_db32) : nullptr;
  const float* dyu = f32_values(be, dy, m_dyu32);
  const float* dyf;
  const BlockQuantized* dyq = nullptr;
  if (dy_block) {
    BlockRounding r;
    r.stochastic = stochastic_grads;
    r.seed = std::hash<std::string>{}(name()) + m_sr_calls++;
    m_dyq.resize(dy.shape(), Format::FP32);
    m_dyq_info.reserve(sizeof(BlockQuantized));
    be.block_quantize(p.grad, dyu, m_dyq.f32(), cs.n * cs.c_out, hw_out, BlockLayout::Rows, r,
                      m_dyq_info.as<BlockQuantized>());
    dyq = m_dyq_info.as<BlockQuantized>();
    dyf = m_dyq.f32();
  } else {
    dyf = f32_rounded(be, dy, p.grad, m_dy32, false);
  }
  const bool dy_exact = p.grad == Format::BF16 || is_fp8(p.grad);
  ConvBlockArgs g;
  g.shape = cs;
  if (dxf) {
    g.kind = ConvBlockArgs::Kind::BackwardData;
    g.a = dyf;
    g.a_block = dyq;
    g.a_exact = dy_exact;
    g.b = m_wq.f32();
    g.b_block = m_wq_info.as<BlockQuantized>();
    g.out = dxf;
    be.conv2d_block(g);
  }
  g.kind = ConvBlockArgs::Kind::BackwardWeights;
  g.a = ctx.x_block.f32();
  g.a_block = ctx.x_info.as<BlockQuantized>();
  g.a_exact = false;
  g.b = dyf;
  g.b_block = dyq;
  g.b_exact = dy_exact;
  g.out = dw;
  be.conv2d_block(g);
  // The bias gradient sums the unquantized dy.
  if (db) be.channel_sums(dyu, db, cs.n, cs.c_out, hw_out);
  if (dx) output_end(be, *dx, gout, m_dx32, false, tracked(*this, NonfiniteSlot::ActivationGrad));
  grad_end(be, m_weight, gout, m_dw32, tracked(*this, NonfiniteSlot::WeightGrad));
  if (m_has_bias) grad_end(be, m_bias, gout, m_db32, tracked(*this, NonfiniteSlot::WeightGrad));
}

void Conv2d::forward(Backend& be, const Tensor& x, Tensor& y, Context& context) {
  auto& ctx = static_cast<Conv2dContext&>(context);
  ctx.block = false;
  if (is_block_format(m_precision.compute)) {
    forward_block(be, x, y, ctx);
    return;
  }
  const Shape ys = output_shape(x.shape());
  const LayerPrecision& p = m_precision;
  const bool sat = saturates_forward(p.compute);
  ctx.x_scale = 1.0f;
  float* yf = output_begin(y, ys, p.storage, m_y32);
  if (is_fp8(p.compute)) {
    // FP8 delayed scaling: x, w hold value * scale on the FP8 grid (so the
    // backend's exact FP8 path applies); bias is FP32 and added after the
    // result is multiplied by 1/(s_x s_w).
    DelayedScale& ds = delayed_scale_for(m_x_scale, p.compute, m_scaling);
    ctx.x_scale = ds.scale();
    const ConvShape cs = conv_shape(x.shape());
    round_scaled(be, x, p.compute, ctx.x_scale, ctx.x_compute, m_x32, true, ds.amax_slot());
    ctx.x = &ctx.x_compute;
    const float* xf = m_x32.f32();
    ctx.x32 = xf;
    float sw = 1.0f;
    const float* wf = weight_values(be, true, &sw);
    m_w_used_scale = sw;
    const float* bf = m_has_bias ? f32_values(be, m_bias.weight, m_b32) : nullptr;
    const float alpha = unscale_alpha(ctx.x_scale, sw);
    conv2d_forward(be, cs, p.compute, xf, wf, alpha == 1.0f ? bf : nullptr, yf);
    // y = alpha * y + bias[c] (bias may be null).
    if (alpha != 1.0f) fused::scale_bias_add_channels(be, yf, alpha, bf, cs.n, cs.c_out, cs.out_h() * cs.out_w());
  } else {
    const Tensor& xc = round_to(be, x, p.compute, ctx.x_compute, sat);
    ctx.x = &xc;
    ctx.x32 = nullptr;
    const float* wf = weight_f32(be, m_weight, p.compute, m_w32);
    const float* bf = m_has_bias ? f32_rounded(be, m_bias.weight, p.compute, m_b32, sat) : nullptr;
    // A scaled FP8 weight divided by its scale may leave the FP8 grid: only
    // the f32 path is exact for it then.
    const Format wfmt = m_weight.weight_scale == 1.0f ? p.compute : Format::FP32;
    const ConvShape cs = conv_shape(x.shape());
    const Format cc = common_compute(p.compute, wfmt);
    // BF16 activations go to the backend as codes where it takes them (no
    // f32 copy); otherwise decoded here.
    if (xc.format() != Format::BF16 || !fused::conv2d_forward_coded(be, cs, cc, {Format::BF16, xc.data()}, wf, bf, yf))
      conv2d_forward(be, cs, cc, f32_values(be, xc, m_x32), wf, bf, yf);
  }
  output_end(be, y, p.storage, m_y32, saturates_forward(p.storage), tracked(*this, NonfiniteSlot::Activation));
}

void Conv2d::backward(Backend& be, const Tensor& dy, Tensor* dx, Context& context) {
  auto& ctx = static_cast<Conv2dContext&>(context);
  if (!ctx.x) throw std::logic_error(name() + ": backward before forward");
  const Tensor& x = *ctx.x;
  const Shape ys = output_shape(x.shape());
  if (dy.shape() != ys) throw_shape(name(), "gradient does not match the output " + shape_string(ys), dy.shape());
  if (ctx.block) {
    backward_block(be, dy, dx, ctx);
    return;
  }
  const LayerPrecision& p = m_precision;
  float* dxf = dx ? output_begin(*dx, x.shape(), p.grad, m_dx32) : nullptr;
  float* dw = grad_begin(m_weight, m_dw32);
  float* db = m_has_bias ? grad_begin(m_bias, m_db32) : nullptr;
  const ConvShape cs = conv_shape(x.shape());
  const bool fp8_forward = is_fp8(p.compute);
  if (!fp8_forward && !is_fp8(p.grad)) {
    const float* wf = weight_f32(be, m_weight, p.compute, m_w32);
    const Format wfmt = m_weight.weight_scale == 1.0f ? p.compute : Format::FP32;
    const Format data_c = common_compute(p.grad, wfmt), weight_c = common_compute(p.grad, p.compute);
    // x and dy as BF16 codes where the backend takes them and rounding dy to
    // the grad format changes nothing; f32 copies only where it declines.
    const float* dyf = nullptr;
    const float* xf = nullptr;
    auto dy_f32 = [&] { return dyf ? dyf : (dyf = f32_rounded(be, dy, p.grad, m_dy32, false)); };
    auto x_f32 = [&] { return xf ? xf : (xf = f32_values(be, x, m_x32)); };
    const bool dy_codes = dy.format() == Format::BF16 && (p.grad == Format::BF16 || p.grad == Format::FP32);
    const ConvInput dy_in = dy_codes ? ConvInput{Format::BF16, dy.data()} : ConvInput{Format::FP32, dy_f32()};
    const ConvInput x_in = x.format() == Format::BF16 ? ConvInput{Format::BF16, x.data()}
                                                      : ConvInput{Format::FP32, x_f32()};
    if (dxf && !fused::conv2d_backward_data_coded(be, cs, data_c, dy_in, wf, dxf))
      be.conv2d_backward_data(cs, data_c, dy_f32(), wf, dxf);
    if (!fused::conv2d_backward_weights_coded(be, cs, weight_c, x_in, dy_in, dw, db))
      be.conv2d_backward_weights(cs, weight_c, x_f32(), dy_f32(), dw, db);
  } else {
    // FP8: dy (grad format FP8) holds dy * s_dy, x holds x * s_x, w holds
    // w * s_w; the results are multiplied by 1/(s_dy s_w) and 1/(s_dy s_x).
    float sdy = 1.0f;
    const float* dyf;
    const std::int64_t hw_in = cs.h * cs.w, hw_out = cs.out_h() * cs.out_w();
    if (is_fp8(p.grad)) {
      DelayedScale& ds = delayed_scale_for(m_dy_scale, p.grad, m_scaling);
      sdy = ds.scale();
      // The bias gradient sums the unscaled, unrounded dy (TE's fused
      // dbias), in the cast's pass.
      round_scaled(be, dy, p.grad, sdy, m_dy8, m_dy32, true, ds.amax_slot(), db, cs.c_out, hw_out);
      dyf = m_dy32.f32();
    } else {
      dyf = f32_rounded(be, dy, p.grad, m_dy32, false);
    }
    // The forward's f32 copy of x where this context's forward made the
    // last one (one context per layer: Model), else a decode of x's codes.
    const float* xf = ctx.x32 && ctx.x32 == m_x32.f32() && m_x32.numel() == x.numel() ? ctx.x32
                                                                                       : f32_values(be, x, m_x32);
    float sw = 1.0f;
    const float* wf;
    Format wfmt = p.compute;
    if (fp8_forward) {
      wf = weight_values(be, false, &sw);
    } else {
      wf = weight_f32(be, m_weight, p.compute, m_w32);
      if (m_weight.weight_scale != 1.0f) wfmt = Format::FP32;
    }
    if (dxf) {
      be.conv2d_backward_data(cs, common_compute(p.grad, wfmt), dyf, wf, dxf);
      const float a = unscale_alpha(sdy, sw);
      if (a != 1.0f) be.scale(dxf, a, cs.n * cs.c_in * hw_in);
    }
    be.conv2d_backward_weights(cs, common_compute(p.grad, p.compute), xf, dyf, dw, nullptr);
    const float a = unscale_alpha(sdy, ctx.x_scale);
    if (a != 1.0f) be.scale(dw, a, m_weight.numel());
    if (db && !is_fp8(p.grad)) be.channel_sums(f32_values(be, dy, m_dyu32), db, cs.n, cs.c_out, hw_out);
  }
  if (dx) output_end(be, *dx, p.grad, m_dx32, false, tracked(*this, NonfiniteSlot::ActivationGrad));
  // FP8 gradients: weight and bias gradients stay FP32 (see Linear).
  const Format gf = is_fp8(p.grad) ? Format::FP32 : p.grad;
  grad_end(be, m_weight, gf, m_dw32, tracked(*this, NonfiniteSlot::WeightGrad));
  if (m_has_bias) grad_end(be, m_bias, gf, m_db32, tracked(*this, NonfiniteSlot::WeightGrad));
}

}  // namespace engine
