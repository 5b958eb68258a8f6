// Linear layer: typed-operand GEMMs forward and backward.
#include "nn/linear.h"

#include <stdexcept>

#include "backend/backend.h"
#include "nn/layer_io.h"

namespace engine {

void linear_forward(Backend& be, const Tensor& x, const Tensor& w, float w_scale, const float* bias,
                    float* y, std::int64_t rows, std::int64_t in, std::int64_t out, Format accumulate) {
  GemmArgs g;
  g.m = rows;
  g.n = out;
  g.k = in;
  g.a = gemm_operand(x, 0, in, false);
  g.b = gemm_operand(w, 0, in, true);  // op(B) = W^T: [in, out]
  g.c = y;
  g.ldc = out;
  // FP8 weights hold w * scale; 1/scale is a power of two, so folding it into
  // alpha is exact.
  g.alpha = 1.0f / w_scale;
  g.bias = bias;
  g.accumulate = accumulate;
  be.gemm(g);
}

void linear_backward(Backend& be, const Tensor& dy, const float* dy_f32, const Tensor& x,
                     const Tensor& w, float w_scale, float* dx, float* dw, float* db,
                     std::int64_t rows, std::int64_t in, std::int64_t out, Format accumulate) {
  if (dx) {
    // dx [rows, in] = dy [rows, out] W [out, in]
    GemmArgs g;
    g.m = rows;
    g.n = in;
    g.k = out;
    g.a = gemm_operand(dy, 0, out, false);
    g.b = gemm_operand(w, 0, in, false);
    g.c = dx;
    g.ldc = in;
    g.alpha = 1.0f / w_scale;
    g.accumulate = accumulate;
    be.gemm(g);
  }
  // dW [out, in] = dy^T [out, rows] x [rows, in]: the gradient of the real
  // weight, so no scale here.
  GemmArgs g;
  g.m = out;
  g.n = in;
  g.k = rows;
  g.a = gemm_operand(dy, 0, out, true);
  g.b = gemm_operand(x, 0, in, false);
  g.c = dw;
  g.ldc = in;
  g.accumulate = accumulate;
  be.gemm(g);
  if (db) be.column_sums(dy_f32, rows, out, db);
}

Linear::Linear(std::string name, std::int64_t in, std::int64_t out, bool bias)
    : Layer(std::move(name)), m_in(in), m_out(out), m_has_bias(bias) {
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

void Linear::forward(Backend& be, const Tensor& x, Tensor& y, Context& context) {
  auto& ctx = static_cast<LinearContext&>(context);
  const Shape ys = output_shape(x.shape());
  nonfinite = {};
  const LayerPrecision& p = m_precision;
  const bool sat = saturates_forward(p.compute);
  const Tensor& xc = round_to(x, p.compute, ctx.x_compute, sat);
  ctx.x = &xc;
  const Tensor& wc = round_to(m_weight.weight, p.compute, m_w_compute, sat);
  const float* b = m_has_bias ? f32_rounded(be, m_bias.weight, p.compute, m_b32, sat) : nullptr;
  const std::int64_t rows = x.numel() / m_in;
  float* yf = output_begin(y, ys, p.storage, m_y32);
  linear_forward(be, xc, wc, m_weight.weight_scale, b, yf, rows, m_in, m_out, p.accumulate);
  output_end(be, y, p.storage, m_y32, saturates_forward(p.storage), tracked(*this, nonfinite.activation));
}

void Linear::backward(Backend& be, const Tensor& dy, Tensor* dx, Context& context) {
  auto& ctx = static_cast<LinearContext&>(context);
  if (!ctx.x) throw std::logic_error(name() + ": backward before forward");
  const Tensor& x = *ctx.x;
  const std::int64_t rows = x.numel() / m_in;
  if (dy.numel() != rows * m_out) throw_shape(name(), "gradient does not match the output " +
                                                          shape_string(output_shape(x.shape())), dy.shape());
  const LayerPrecision& p = m_precision;
  const Tensor& dyg = round_to(dy, p.grad, m_dy_grad, false);
  const float* dy32 = m_has_bias ? f32_values(dyg, m_dy32) : nullptr;
  const Tensor& wc = round_to(m_weight.weight, p.compute, m_w_compute, saturates_forward(p.compute));
  float* dxf = dx ? output_begin(*dx, x.shape(), p.grad, m_dx32) : nullptr;
  float* dw = grad_begin(m_weight, m_dw32);
  float* db = m_has_bias ? grad_begin(m_bias, m_db32) : nullptr;
  linear_backward(be, dyg, dy32, x, wc, m_weight.weight_scale, dxf, dw, db, rows, m_in, m_out, p.accumulate);
  if (dx) output_end(be, *dx, p.grad, m_dx32, false, tracked(*this, nonfinite.activation_grad));
  grad_end(be, m_weight, p.grad, m_dw32, tracked(*this, nonfinite.weight_grad));
  if (m_has_bias) grad_end(be, m_bias, p.grad, m_db32, tracked(*this, nonfinite.weight_grad));
}

}  // namespace engine
