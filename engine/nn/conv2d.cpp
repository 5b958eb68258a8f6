// 2-D convolution layer on the backend's conv kernels (oneDNN on the CPU).
#include "nn/conv2d.h"

#include <stdexcept>

#include "nn/layer_io.h"

namespace engine {

void conv2d_forward(Backend& be, const ConvShape& s, Format compute, const float* x, const float* w,
                    const float* bias, float* y) {
  be.conv2d_forward(s, compute, x, w, bias, y);
}

void conv2d_backward(Backend& be, const ConvShape& s, Format data_compute, Format weight_compute,
                     const float* dy, const float* x, const float* w, float* dx, float* dw, float* db) {
  if (dx) be.conv2d_backward_data(s, data_compute, dy, w, dx);
  be.conv2d_backward_weights(s, weight_compute, x, dy, dw, db);
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

void Conv2d::forward(Backend& be, const Tensor& x, Tensor& y, Context& context) {
  auto& ctx = static_cast<Conv2dContext&>(context);
  const Shape ys = output_shape(x.shape());
  nonfinite = {};
  const LayerPrecision& p = m_precision;
  const bool sat = saturates_forward(p.compute);
  const Tensor& xc = round_to(x, p.compute, ctx.x_compute, sat);
  ctx.x = &xc;
  const float* xf = f32_values(xc, m_x32);
  const float* wf = weight_f32(be, m_weight, p.compute, m_w32);
  const float* bf = m_has_bias ? f32_rounded(be, m_bias.weight, p.compute, m_b32, sat) : nullptr;
  // A scaled FP8 weight divided by its scale may leave the FP8 grid: only
  // the f32 path is exact for it then.
  const Format wfmt = m_weight.weight_scale == 1.0f ? p.compute : Format::FP32;
  float* yf = output_begin(y, ys, p.storage, m_y32);
  conv2d_forward(be, conv_shape(x.shape()), common_compute(p.compute, wfmt), xf, wf, bf, yf);
  output_end(be, y, p.storage, m_y32, saturates_forward(p.storage), tracked(*this, nonfinite.activation));
}

void Conv2d::backward(Backend& be, const Tensor& dy, Tensor* dx, Context& context) {
  auto& ctx = static_cast<Conv2dContext&>(context);
  if (!ctx.x) throw std::logic_error(name() + ": backward before forward");
  const Tensor& x = *ctx.x;
  const Shape ys = output_shape(x.shape());
  if (dy.shape() != ys) throw_shape(name(), "gradient does not match the output " + shape_string(ys), dy.shape());
  const LayerPrecision& p = m_precision;
  const float* dyf = f32_rounded(be, dy, p.grad, m_dy32, false);
  const float* xf = f32_values(x, m_x32);
  const float* wf = weight_f32(be, m_weight, p.compute, m_w32);
  const Format wfmt = m_weight.weight_scale == 1.0f ? p.compute : Format::FP32;
  float* dxf = dx ? output_begin(*dx, x.shape(), p.grad, m_dx32) : nullptr;
  float* dw = grad_begin(m_weight, m_dw32);
  float* db = m_has_bias ? grad_begin(m_bias, m_db32) : nullptr;
  conv2d_backward(be, conv_shape(x.shape()), common_compute(p.grad, wfmt), common_compute(p.grad, p.compute),
                  dyf, xf, wf, dxf, dw, db);
  if (dx) output_end(be, *dx, p.grad, m_dx32, false, tracked(*this, nonfinite.activation_grad));
  grad_end(be, m_weight, p.grad, m_dw32, tracked(*this, nonfinite.weight_grad));
  if (m_has_bias) grad_end(be, m_bias, p.grad, m_db32, tracked(*this, nonfinite.weight_grad));
}

}  // namespace engine
