// Pointwise layers' shared frame: format handling around an f32 elementwise op.
#include "nn/pointwise.h"

#include <stdexcept>

#include "nn/layer_io.h"

namespace engine {

Shape PointwiseLayer::output_shape(const Shape& in) const {
  if (in.size() < 2) throw_shape(name(), "expects input [batch, ...]", in);
  return in;
}

std::unique_ptr<Context> PointwiseLayer::make_context() const { return std::make_unique<PointwiseContext>(); }

void PointwiseLayer::forward(Backend& be, const Tensor& x, Tensor& y, Context& context) {
  auto& ctx = static_cast<PointwiseContext&>(context);
  const Shape ys = output_shape(x.shape());
  const LayerPrecision& p = m_precision;
  const Tensor& xc = round_to(be, x, p.compute, ctx.x_compute, saturates_forward(p.compute));
  ctx.x = &xc;
  if (!track_nonfinite && xc.format() == p.storage) {
    y.resize(ys, p.storage);
    if (forward_bits(be, xc, y)) return;
  }
  const float* xf = f32_values(be, xc, m_x32);
  float* yf = output_begin(y, ys, p.storage, m_y32);
  apply_forward(be, xf, yf, x.numel());
  output_end(be, y, p.storage, m_y32, saturates_forward(p.storage), tracked(*this, NonfiniteSlot::Activation));
}

bool PointwiseLayer::forward_cast_for(Backend& be, const Tensor& x, Tensor& y, Context& context,
                                      const InputCast& c) {
  const LayerPrecision& p = m_precision;
  const ForwardEncode encode = forward_encode();
  if (!encode || !c.amax || !is_fp8(c.format) || !c.scratch || track_nonfinite || x.format() != Format::FP32 ||
      p.compute != Format::FP32 || p.storage != Format::FP32)
    return false;
  auto& ctx = static_cast<PointwiseContext&>(context);
  ctx.x = &x;  // forward()'s rounding to FP32 keeps x as it is
  y.resize(output_shape(x.shape()), c.format);
  if (!x.numel()) {
    be.fill(c.amax, 0.0f, 1);
    return true;
  }
  CastOptions opt;
  opt.saturate = true;  // round_scaled's
  encode(be, x.f32(), x.numel(), c.scale, c.format, y.data(), opt, c.amax, c.scratch);
  return true;
}

void PointwiseLayer::backward(Backend& be, const Tensor& dy, Tensor* dx, Context& context) {
  auto& ctx = static_cast<PointwiseContext&>(context);
  if (!ctx.x) throw std::logic_error(name() + ": backward before forward");
  if (!dx) return;  // no parameters: nothing else to compute
  const Tensor& x = *ctx.x;
  if (dy.shape() != x.shape()) throw_shape(name(), "gradient does not match the output " + shape_string(x.shape()), dy.shape());
  const LayerPrecision& p = m_precision;
  if (!track_nonfinite && dy.format() == p.grad) {
    dx->resize(x.shape(), p.grad);
    if (backward_bits(be, x, dy, *dx)) return;
  }
  if (!track_nonfinite && p.grad == Format::FP32 && x.format() == Format::FP32 &&
      (is_half_format(dy.format()) || is_fp8(dy.format()))) {
    dx->resize(x.shape(), Format::FP32);
    if (backward_coded_dy(be, x, dy, *dx)) return;
  }
  const float* dyf = f32_rounded(be, dy, p.grad, m_dy32, false);
  const float* xf = f32_values(be, x, m_x32);
  float* dxf = output_begin(*dx, x.shape(), p.grad, m_dx32);
  apply_backward(be, xf, dyf, dxf, x.numel());
  output_end(be, *dx, p.grad, m_dx32, false, tracked(*this, NonfiniteSlot::ActivationGrad));
}

}  // namespace engine
