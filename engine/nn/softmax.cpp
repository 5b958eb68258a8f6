// Softmax layer on the backend's row kernels.
#include "nn/softmax.h"

#include <stdexcept>

#include "backend/backend.h"
#include "backend/fused.h"
#include "nn/layer_io.h"

namespace engine {

void softmax_forward(Backend& be, const float* x, float* y, std::int64_t rows, std::int64_t cols,
                     Format accumulate) {
  be.softmax_forward(x, y, rows, cols, accumulate);
}

void softmax_backward(Backend& be, const float* y, const float* dy, float* dx, std::int64_t rows,
                      std::int64_t cols) {
  be.softmax_backward(y, dy, dx, rows, cols);
}

Shape Softmax::output_shape(const Shape& in) const {
  if (in.size() < 2 || in.back() < 1) throw_shape(name(), "expects input [batch, ..., classes]", in);
  return in;
}

std::unique_ptr<Context> Softmax::make_context() const { return std::make_unique<SoftmaxContext>(); }

void Softmax::forward(Backend& be, const Tensor& x, Tensor& y, Context& context) {
  auto& ctx = static_cast<SoftmaxContext&>(context);
  const Shape ys = output_shape(x.shape());
  const LayerPrecision& p = m_precision;
  const std::int64_t cols = x.shape().back(), rows = x.numel() / cols;
  if (causal && (ys.size() < 3 || ys[ys.size() - 2] != cols))
    throw_shape(name(), "is causal: expects [.., tokens, tokens] score planes", ys);
  float* yf = output_begin(y, ys, p.storage, m_y32);
  if (causal) {
    const float* xf = f32_rounded(be, x, p.compute, m_x32, saturates_forward(p.compute));
    fused::causal_softmax(be, Pass::Forward, xf, nullptr, yf, rows, cols, p.accumulate);
  } else if (p.compute == Format::FP32 && p.accumulate == Format::FP32 && is_half_format(x.format())) {
    // FP16/BF16 codes (the attention's scores): decoded as the rows are read.
    m_x32.resize(x.shape(), Format::FP32);
    fused::softmax_coded_forward(be, x.format(), x.data(), yf, rows, cols, m_x32.f32());
  } else {
    const float* xf = f32_rounded(be, x, p.compute, m_x32, saturates_forward(p.compute));
    softmax_forward(be, xf, yf, rows, cols, p.accumulate);
  }
  output_end(be, y, p.storage, m_y32, saturates_forward(p.storage), tracked(*this, NonfiniteSlot::Activation));
  ctx.y = &y;
}

void Softmax::backward(Backend& be, const Tensor& dy, Tensor* dx, Context& context) {
  auto& ctx = static_cast<SoftmaxContext&>(context);
  if (!ctx.y) throw std::logic_error(name() + ": backward before forward");
  if (!dx) return;
  const Tensor& y = *ctx.y;
  if (dy.shape() != y.shape()) throw_shape(name(), "gradient does not match the output " + shape_string(y.shape()), dy.shape());
  const LayerPrecision& p = m_precision;
  const std::int64_t cols = y.shape().back(), rows = y.numel() / cols;
  const float* yf = f32_values(be, y, m_yb32);
  float* dxf = output_begin(*dx, y.shape(), p.grad, m_dx32);
  if (causal) {
    const float* dyf = f32_rounded(be, dy, p.grad, m_dy32, false);
    fused::causal_softmax(be, Pass::Backward, yf, dyf, dxf, rows, cols, Format::FP32);
  } else if (p.grad == Format::FP32 && is_half_format(dy.format())) {
    // FP16/BF16 gradient codes: decoded as the rows are read.
    m_dy32.resize(dy.shape(), Format::FP32);
    fused::softmax_coded_backward(be, yf, dy.format(), dy.data(), dxf, rows, cols, m_dy32.f32());
  } else {
    const float* dyf = f32_rounded(be, dy, p.grad, m_dy32, false);
    softmax_backward(be, yf, dyf, dxf, rows, cols);
  }
  output_end(be, *dx, p.grad, m_dx32, false, tracked(*this, NonfiniteSlot::ActivationGrad));
}

}  // namespace engine
