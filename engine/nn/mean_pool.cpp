// Mean pooling over tokens with the backend's column sums.
#include "nn/mean_pool.h"

#include <cstring>
#include <stdexcept>

#include "backend/backend.h"
#include "nn/layer_io.h"

namespace engine {

void mean_pool_forward(Backend& be, const void* x, Format fx, float* y, std::int64_t B, std::int64_t T,
                       std::int64_t C, const float* ones) {
  // One call for the whole batch (a column sum per sample was B calls of
  // T x C, 128 a step). Sum first, then alpha's one multiply: for T a power
  // of two (16 tokens) the division is exact.
  GemmArgs g;
  g.m = 1;
  g.n = C;
  g.k = T;
  g.a = {ones, Format::FP32, false, T};
  g.b = {x, fx, false, C};
  g.b.batch_stride[0] = T * C;
  g.c = y;
  g.ldc = C;
  g.c_batch_stride[0] = C;
  g.batch[0] = B;
  g.alpha = 1.0f / static_cast<float>(T);
  be.gemm(g);
}

void mean_pool_backward(Backend& be, const float* dy, float* dx, std::int64_t B, std::int64_t T, std::int64_t C,
                        float* sdy) {
  // The same product per element as scaling dx after the repeat, on T
  // times fewer values (and no second pass over dx, whose other half the
  // repeat may have written on the other core: 6-86 us a transformer step).
  be.copy(sdy, dy, static_cast<std::size_t>(B * C) * sizeof(float));
  be.scale(sdy, 1.0f / static_cast<float>(T), B * C);
  be.repeat_rows(sdy, dx, B, T, C);
}

Shape MeanPool::output_shape(const Shape& in) const {
  if (in.size() != 3 || in[1] < 1) throw_shape(name(), "expects input [batch, tokens, channels]", in);
  return {in[0], in[2]};
}

std::unique_ptr<Context> MeanPool::make_context() const { return std::make_unique<MeanPoolContext>(); }

void MeanPool::forward(Backend& be, const Tensor& x, Tensor& y, Context& context) {
  auto& ctx = static_cast<MeanPoolContext&>(context);
  const Shape ys = output_shape(x.shape());
  const LayerPrecision& p = m_precision;
  ctx.x_shape = x.shape();
  const bool sat = saturates_forward(p.compute);
  // FP16/BF16 compute: the GEMM reads the codes (one cast), the values a
  // rounded f32 copy would hold.
  const void* xd;
  Format xf = p.compute;
  if (is_half_format(p.compute)) {
    xd = round_to(be, x, p.compute, m_xc, sat).data();
  } else {
    xd = f32_rounded(be, x, p.compute, m_x32, sat);
    xf = Format::FP32;
  }
  float* yf = output_begin(y, ys, p.storage, m_y32);
  m_ones.resize({x.dim(1)}, Format::FP32);
  be.fill(m_ones.f32(), 1.0f, x.dim(1));
  mean_pool_forward(be, xd, xf, yf, x.dim(0), x.dim(1), x.dim(2), m_ones.f32());
  output_end(be, y, p.storage, m_y32, saturates_forward(p.storage), tracked(*this, NonfiniteSlot::Activation));
}

void MeanPool::backward(Backend& be, const Tensor& dy, Tensor* dx, Context& context) {
  auto& ctx = static_cast<MeanPoolContext&>(context);
  if (ctx.x_shape.empty()) throw std::logic_error(name() + ": backward before forward");
  if (!dx) return;
  const Shape ys = output_shape(ctx.x_shape);
  if (dy.shape() != ys) throw_shape(name(), "gradient does not match the output " + shape_string(ys), dy.shape());
  const LayerPrecision& p = m_precision;
  const float* dyf = f32_rounded(be, dy, p.grad, m_dy32, false);
  float* dxf = output_begin(*dx, ctx.x_shape, p.grad, m_dx32);
  m_dys.resize(ys, Format::FP32);
  mean_pool_backward(be, dyf, dxf, ctx.x_shape[0], ctx.x_shape[1], ctx.x_shape[2], m_dys.f32());
  output_end(be, *dx, p.grad, m_dx32, false, tracked(*this, NonfiniteSlot::ActivationGrad));
}

}  // namespace engine
