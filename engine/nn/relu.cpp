// ReLU layer: the backend's elementwise kernels.
#include "nn/relu.h"

#include "backend/backend.h"
#include "tensor/tensor.h"

namespace engine {

void relu_forward(Backend& be, const float* x, float* y, std::int64_t n) { be.relu_forward(x, y, n); }

void relu_backward(Backend& be, const float* x, const float* dy, float* dx, std::int64_t n) {
  be.relu_backward(x, dy, dx, n);
}

namespace {

// The magnitude bits of +inf in a 16-bit format: patterns above it are NaN.
// 0 for formats this path does not handle.
std::uint16_t inf_bits16(Format f) {
  switch (f) {
    case Format::BF16: return 0x7F80;
    case Format::FP16: return 0x7C00;
    default: return 0;
  }
}

}  // namespace

// y = x < 0 ? 0 : x on the patterns: x < 0 exactly when the sign is set,
// the magnitude is non-zero and not NaN (-0 and NaN pass through, as in
// the f32 kernel).
bool ReLU::forward_bits(const Tensor& x, Tensor& y) {
  const std::uint16_t inf = inf_bits16(x.format());
  if (inf == 0 || y.format() != x.format()) return false;
  const auto* xs = static_cast<const std::uint16_t*>(x.data());
  auto* ys = static_cast<std::uint16_t*>(y.data());
  const std::int64_t n = x.numel();
  // Branch-free (the sign of an activation is a coin flip for a predictor):
  // negative non-NaN, non-zero patterns are 0x8001 .. 0x8000 + inf, one
  // unsigned compare after the subtraction.
  const std::uint32_t span = inf;
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint16_t v = xs[i];
    ys[i] = static_cast<std::uint32_t>(v) - 0x8001u < span ? std::uint16_t{0} : v;
  }
  return true;
}

// dx = x > 0 ? dy : 0 on the patterns (x > 0: sign clear, magnitude
// non-zero and not NaN); 0 is +0, as the f32 kernel's 0.0f encodes.
bool ReLU::backward_bits(const Tensor& x, const Tensor& dy, Tensor& dx) {
  const std::uint16_t inf = inf_bits16(x.format());
  if (inf == 0 || inf_bits16(dy.format()) == 0 || dx.format() != dy.format()) return false;
  const auto* xs = static_cast<const std::uint16_t*>(x.data());
  const auto* dys = static_cast<const std::uint16_t*>(dy.data());
  auto* dxs = static_cast<std::uint16_t*>(dx.data());
  const std::int64_t n = x.numel();
  // Positive patterns are 0x0001 .. inf (branch-free, as above).
  const std::uint32_t span = inf;
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint16_t v = xs[i];
    dxs[i] = static_cast<std::uint32_t>(v) - 1u < span ? dys[i] : std::uint16_t{0};
  }
  return true;
}

}  // namespace engine
