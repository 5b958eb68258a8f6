// Max pooling layer on the backend's pooling kernels.
#include "nn/maxpool2d.h"

#include <stdexcept>

#include "backend/backend.h"
#include "backend/fused.h"
#include "nn/layer_io.h"

namespace engine {

void maxpool2d_forward(Backend& be, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                       std::int64_t k, const float* x, float* y, std::int32_t* argmax) {
  be.maxpool2d_forward(n, c, h, w, k, x, y, argmax);
}

void maxpool2d_backward(Backend& be, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                        std::int64_t k, const float* dy, const std::int32_t* argmax, float* dx) {
  be.maxpool2d_backward(n, c, h, w, k, dy, argmax, dx);
}

MaxPool2d::MaxPool2d(std::string name, std::int64_t kernel) : Layer(std::move(name)), m_kernel(kernel) {
  if (kernel <= 0) throw std::invalid_argument(this->name() + ": kernel must be positive");
}

Shape MaxPool2d::output_shape(const Shape& in) const {
  if (in.size() != 4) throw_shape(name(), "expects input [batch, channels, height, width]", in);
  if (in[2] < m_kernel || in[3] < m_kernel)
    throw_shape(name(), "input smaller than the " + std::to_string(m_kernel) + "x" + std::to_string(m_kernel) +
                            " window", in);
  return {in[0], in[1], in[2] / m_kernel, in[3] / m_kernel};
}

std::unique_ptr<Context> MaxPool2d::make_context() const { return std::make_unique<MaxPool2dContext>(); }

void MaxPool2d::forward(Backend& be, const Tensor& x, Tensor& y, Context& context) {
  auto& ctx = static_cast<MaxPool2dContext&>(context);
  const Shape ys = output_shape(x.shape());
  const LayerPrecision& p = m_precision;
  ctx.x_shape = x.shape();
  ctx.argmax_count = static_cast<std::size_t>(shape_numel(ys));
  ctx.argmax.reserve(ctx.argmax_count * sizeof(std::int32_t));
  const Format xf16 = x.format();
  if (is_half_format(xf16) && p.compute == xf16 && p.storage == xf16 &&
      !tracked(*this, NonfiniteSlot::Activation)) {
    // FP16/BF16 in and out: the codes pooled as they are (the same bits as
    // decode, pool, encode; the decoded scratch is only the default's).
    m_x32.resize(x.shape(), Format::FP32);
    m_y32.resize(ys, Format::FP32);
    y.resize(ys, xf16);
    fused::maxpool2d_forward16(be, xf16, ys[0], ys[1], x.dim(2), x.dim(3), m_kernel, x.data(), y.data(),
                           ctx.argmax.as<std::int32_t>(), m_x32.f32(), m_y32.f32());
    return;
  }
  const float* xf = f32_rounded(be, x, p.compute, m_x32, saturates_forward(p.compute));
  float* yf = output_begin(y, ys, p.storage, m_y32);
  maxpool2d_forward(be, ys[0], ys[1], x.dim(2), x.dim(3), m_kernel, xf, yf, ctx.argmax.as<std::int32_t>());
  output_end(be, y, p.storage, m_y32, saturates_forward(p.storage), tracked(*this, NonfiniteSlot::Activation));
}

void MaxPool2d::backward(Backend& be, const Tensor& dy, Tensor* dx, Context& context) {
  auto& ctx = static_cast<MaxPool2dContext&>(context);
  if (ctx.x_shape.empty()) throw std::logic_error(name() + ": backward before forward");
  if (!dx) return;  // no parameters: nothing else to compute
  const Shape ys = output_shape(ctx.x_shape);
  if (dy.shape() != ys) throw_shape(name(), "gradient does not match the output " + shape_string(ys), dy.shape());
  const LayerPrecision& p = m_precision;
  const float* dyf = f32_rounded(be, dy, p.grad, m_dy32, false);
  float* dxf = output_begin(*dx, ctx.x_shape, p.grad, m_dx32);
  maxpool2d_backward(be, ys[0], ys[1], ctx.x_shape[2], ctx.x_shape[3], m_kernel, dyf, ctx.argmax.as<std::int32_t>(), dxf);
  output_end(be, *dx, p.grad, m_dx32, false, tracked(*this, NonfiniteSlot::ActivationGrad));
}

}  // namespace engine
