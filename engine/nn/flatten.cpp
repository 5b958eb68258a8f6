// Flatten layer: a copy of the bytes under a new shape.
#include "nn/flatten.h"

#include <cstring>
#include <stdexcept>

#include "backend/fused.h"
#include "nn/layer_io.h"

namespace engine {

void flatten_forward(Backend& be, const Tensor& x, Tensor& y) {
  y.resize({x.dim(0), x.numel() / (x.dim(0) ? x.dim(0) : 1)}, x.format());
  if (x.numel()) be.copy(y.data(), x.data(), x.bytes());
}

void flatten_backward(Backend& be, const Tensor& dy, const Shape& x_shape, Tensor& dx) {
  dx.resize(x_shape, dy.format());
  if (dy.numel()) be.copy(dx.data(), dy.data(), dy.bytes());
}

Shape Flatten::output_shape(const Shape& in) const {
  if (in.size() < 2) throw_shape(name(), "expects input [batch, ...]", in);
  std::int64_t f = 1;
  for (std::size_t i = 1; i < in.size(); ++i) f *= in[i];
  return {in[0], f};
}

std::unique_ptr<Context> Flatten::make_context() const { return std::make_unique<FlattenContext>(); }

void Flatten::forward(Backend& be, const Tensor& x, Tensor& y, Context& context) {
  auto& ctx = static_cast<FlattenContext&>(context);
  output_shape(x.shape());
  ctx.x_shape = x.shape();
  flatten_forward(be, x, y);
}

bool Flatten::forward_cast_for(Backend& be, const Tensor& x, Tensor& y, Context& context, const InputCast& c) {
  const bool scaled = c.amax != nullptr;
  if (x.format() != Format::FP32 || !(scaled ? is_fp8(c.format) && c.scratch : is_half_format(c.format))) return false;
  auto& ctx = static_cast<FlattenContext&>(context);
  y.resize(output_shape(x.shape()), c.format);
  ctx.x_shape = x.shape();
  CastOptions opt;
  opt.saturate = scaled || c.saturate;  // round_scaled always saturates
  if (!scaled) {
    if (x.numel()) be.convert(Format::FP32, x.data(), c.format, y.data(), x.numel(), opt);
  } else if (x.numel()) {
    fused::scale_amax_encode(be, x.f32(), c.scale, c.format, y.data(), x.numel(), opt, c.amax, c.scratch);
  } else {
    be.fill(c.amax, 0.0f, 1);
  }
  return true;
}

void Flatten::backward(Backend& be, const Tensor& dy, Tensor* dx, Context& context) {
  auto& ctx = static_cast<FlattenContext&>(context);
  if (ctx.x_shape.empty()) throw std::logic_error(name() + ": backward before forward");
  if (!dx) return;
  if (dy.numel() != shape_numel(ctx.x_shape))
    throw_shape(name(), "gradient does not match the output " + shape_string(output_shape(ctx.x_shape)), dy.shape());
  flatten_backward(be, dy, ctx.x_shape, *dx);
}

}  // namespace engine
