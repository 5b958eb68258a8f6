// LayerNorm layer on the backend's row kernels.
#include "nn/layernorm.h"

#include <stdexcept>

#include "backend/backend.h"
#include "backend/fused.h"
#include "nn/layer_io.h"

namespace engine {

void layernorm_forward(Backend& be, const float* x, const float* gamma, const float* beta, float* y,
                       float* mean, float* rstd, std::int64_t rows, std::int64_t cols, float eps,
                       Format accumulate) {
  be.layernorm_forward(x, gamma, beta, y, mean, rstd, rows, cols, eps, accumulate);
}

void layernorm_backward(Backend& be, const float* dy, const float* x, const float* mean, const float* rstd,
                        const float* gamma, float* dx, float* dgamma, float* dbeta, std::int64_t rows,
                        std::int64_t cols) {
  be.layernorm_backward(dy, x, mean, rstd, gamma, dx, dgamma, dbeta, rows, cols);
}

namespace {

// The formats Backend::layernorm_coded_* take for a tensor; dy may also be
// FP8 codes (the FP8 recipe's unscaled E5M2 gradients).
bool coded(Format f) { return f == Format::FP32 || is_half_format(f); }
bool coded_dy(Format f) { return coded(f) || is_fp8(f); }

}  // namespace

LayerNorm::LayerNorm(std::string name, std::int64_t dim, float eps)
    : Layer(std::move(name)), m_dim(dim), m_eps(eps) {
  if (dim <= 0) throw std::invalid_argument(this->name() + ": dimension must be positive");
  m_gamma = make_parameter(this->name() + ".gamma", {dim}, false);
  m_beta = make_parameter(this->name() + ".beta", {dim}, false);
  // Usable before Model::init: identity scale.
  std::vector<float> ones(static_cast<std::size_t>(dim), 1.0f);
  m_gamma.weight.from_f32(ones.data(), dim);
}

Shape LayerNorm::output_shape(const Shape& in) const {
  if (in.size() < 2 || in.back() != m_dim)
    throw_shape(name(), "expects input [batch, ..., " + std::to_string(m_dim) + "]", in);
  return in;
}

std::unique_ptr<Context> LayerNorm::make_context() const { return std::make_unique<LayerNormContext>(); }

void LayerNorm::forward(Backend& be, const Tensor& x, Tensor& y, Context& context) {
  forward_as(be, x, y, context, m_precision.storage, saturates_forward(m_precision.storage), true);
}

bool LayerNorm::forward_codes(Backend& be, const Tensor& x, Tensor& y, Context& context, Format out,
                              bool saturate) {
  const LayerPrecision& p = m_precision;
  if (!is_half_format(out) || p.storage != Format::FP32 || p.accumulate != Format::FP32 || capture_output ||
      fault_output || tracked(*this, NonfiniteSlot::Activation))
    return false;
  return forward_as(be, x, y, context, out, saturate, false);
}

bool LayerNorm::forward_as(Backend& be, const Tensor& x, Tensor& y, Context& context, Format out,
                           bool out_saturate, bool required) {
  auto& ctx = static_cast<LayerNormContext&>(context);
  const Shape ys = output_shape(x.shape());
  const LayerPrecision& p = m_precision;
  const bool sat = saturates_forward(p.compute);
  std::int64_t* nonfinite = tracked(*this, NonfiniteSlot::Activation);
  // FP32 compute of FP16/BF16 codes: the coded kernels read the codes (their
  // decode is exact), so the input is saved as it is, not copied to FP32.
  const bool read_codes = p.compute == Format::FP32 && is_half_format(x.format()) &&
                          p.accumulate == Format::FP32 && coded(out) && !nonfinite;
  // The format of xc below (round_to keeps TF32 values for FP32 compute).
  const Format xcf = read_codes || x.format() == p.compute || (p.compute == Format::FP32 && x.format() == Format::TF32)
                         ? x.format()
                         : p.compute;
  const bool one_pass = p.accumulate == Format::FP32 && coded(xcf) && coded(out) &&
                        (is_half_format(xcf) || is_half_format(out)) && !nonfinite;
  if (!required && !one_pass) return false;
  const Tensor& xc = read_codes ? x : round_to(be, x, p.compute, ctx.x_compute, sat);
  ctx.x = &xc;
  const std::int64_t rows = x.numel() / m_dim;
  ctx.mean.resize({rows}, Format::FP32);
  ctx.rstd.resize({rows}, Format::FP32);
  const float* g = f32_rounded(be, m_gamma.weight, p.compute, m_g32, sat);
  const float* b = f32_rounded(be, m_beta.weight, p.compute, m_b32, sat);
  if (one_pass) {
    // FP16/BF16 codes in or out: one pass (Backend::layernorm_coded_forward;
    // the f32 scratch is only its default's).
    if (xc.format() != Format::FP32) m_x32.resize(x.shape(), Format::FP32);
    if (out != Format::FP32) m_y32.resize(ys, Format::FP32);
    y.resize(ys, out);
    CastOptions opt;
    opt.saturate = out_saturate;
    if (x.numel())
      fused::layernorm_coded_forward(be, xc.format(), xc.data(), g, b, out, y.data(), ctx.mean.f32(), ctx.rstd.f32(), rows,
                                 m_dim, m_eps, opt, m_x32.f32(), m_y32.f32());
    return true;
  }
  const float* xf = f32_values(be, xc, m_x32);
  float* yf = output_begin(y, ys, out, m_y32);
  layernorm_forward(be, xf, g, b, yf, ctx.mean.f32(), ctx.rstd.f32(), rows, m_dim, m_eps, p.accumulate);
  output_end(be, y, out, m_y32, out_saturate, nonfinite);
  return true;
}

bool LayerNorm::backward_add(Backend& be, const Tensor& dy, const Tensor& r, Tensor& dx, Tensor* codes,
                             Context& context) {
  auto& ctx = static_cast<LayerNormContext&>(context);
  if (!ctx.x) throw std::logic_error(name() + ": backward before forward");
  const Tensor& x = *ctx.x;
  const LayerPrecision& p = m_precision;
  if (p.grad != Format::FP32 || p.accumulate != Format::FP32 || tracked(*this, NonfiniteSlot::ActivationGrad) ||
      dy.shape() != x.shape() || r.shape() != x.shape() || r.format() != Format::FP32 || !coded_dy(dy.format()) ||
      !coded(x.format()) || (codes && !is_half_format(codes->format())))
    return false;
  const std::int64_t rows = x.numel() / m_dim;
  const float* g = f32_rounded(be, m_gamma.weight, p.compute, m_g32, saturates_forward(p.compute));
  float* dg = grad_begin(m_gamma, m_dg32);
  float* db = grad_begin(m_beta, m_db32);
  if (dy.format() != Format::FP32) m_dy32.resize(x.shape(), Format::FP32);
  if (x.format() != Format::FP32) m_x32.resize(x.shape(), Format::FP32);
  dx.resize(x.shape(), Format::FP32);
  if (codes) codes->resize(x.shape(), codes->format());
  if (x.numel())
    fused::layernorm_backward_add(be, dy.format(), dy.data(), x.format(), x.data(), ctx.mean.f32(), ctx.rstd.f32(), g,
                              r.f32(), dx.f32(), codes ? codes->format() : Format::FP32,
                              codes ? codes->data() : nullptr, dg, db, rows, m_dim, m_dy32.f32(), m_x32.f32());
  grad_end(be, m_gamma, p.grad, m_dg32, tracked(*this, NonfiniteSlot::WeightGrad));
  grad_end(be, m_beta, p.grad, m_db32, tracked(*this, NonfiniteSlot::WeightGrad));
  return true;
}

void LayerNorm::backward(Backend& be, const Tensor& dy, Tensor* dx, Context& context) {
  auto& ctx = static_cast<LayerNormContext&>(context);
  if (!ctx.x) throw std::logic_error(name() + ": backward before forward");
  const Tensor& x = *ctx.x;
  if (dy.shape() != x.shape()) throw_shape(name(), "gradient does not match the output " + shape_string(x.shape()), dy.shape());
  const LayerPrecision& p = m_precision;
  const std::int64_t rows = x.numel() / m_dim;
  const float* g = f32_rounded(be, m_gamma.weight, p.compute, m_g32, saturates_forward(p.compute));
  std::int64_t* dx_nonfinite = dx ? tracked(*this, NonfiniteSlot::ActivationGrad) : nullptr;
  // dy is read as f32_rounded(dy, p.grad) reads it: decoded, when it is in
  // p.grad already or p.grad is FP32.
  const bool dy_exact = dy.format() == p.grad || p.grad == Format::FP32;
  float* dg = grad_begin(m_gamma, m_dg32);
  float* db = grad_begin(m_beta, m_db32);
  if (dx && dy_exact && coded_dy(dy.format()) && coded(x.format()) && coded(p.grad) &&
      (dy.format() != Format::FP32 || x.format() != Format::FP32 || p.grad != Format::FP32) && !dx_nonfinite) {
    // Codes in or out: one pass (Backend::layernorm_coded_backward).
    if (dy.format() != Format::FP32) m_dy32.resize(x.shape(), Format::FP32);
    if (x.format() != Format::FP32) m_x32.resize(x.shape(), Format::FP32);
    if (p.grad != Format::FP32) m_dx32.resize(x.shape(), Format::FP32);
    dx->resize(x.shape(), p.grad);
    if (x.numel())
      fused::layernorm_coded_backward(be, dy.format(), dy.data(), x.format(), x.data(), ctx.mean.f32(), ctx.rstd.f32(), g,
                                  p.grad, dx->data(), dg, db, rows, m_dim, m_dy32.f32(), m_x32.f32(), m_dx32.f32());
  } else {
    const float* dyf = f32_rounded(be, dy, p.grad, m_dy32, false);
    const float* xf = f32_values(be, x, m_x32);
    float* dxf = nullptr;
    if (dx) {
      dxf = output_begin(*dx, x.shape(), p.grad, m_dx32);
    } else {
      // The kernel always writes dx; give it scratch.
      m_dx32.resize(x.shape(), Format::FP32);
      dxf = m_dx32.f32();
    }
    layernorm_backward(be, dyf, xf, ctx.mean.f32(), ctx.rstd.f32(), g, dxf, dg, db, rows, m_dim);
    if (dx) output_end(be, *dx, p.grad, m_dx32, false, dx_nonfinite);
  }
  grad_end(be, m_gamma, p.grad, m_dg32, tracked(*this, NonfiniteSlot::WeightGrad));
  grad_end(be, m_beta, p.grad, m_db32, tracked(*this, NonfiniteSlot::WeightGrad));
}

}  // namespace engine
