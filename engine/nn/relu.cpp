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

bool ReLU::forward_bits(Backend& be, const Tensor& x, Tensor& y) {
  if (inf_bits16(x.format()) == 0 || y.format() != x.format()) return false;
  be.relu16_forward(x.format(), x.data(), y.data(), x.numel());
  return true;
}

bool ReLU::backward_bits(Backend& be, const Tensor& x, const Tensor& dy, Tensor& dx) {
  if (inf_bits16(x.format()) == 0 || inf_bits16(dy.format()) == 0 || dx.format() != dy.format()) return false;
  be.relu16_backward(x.format(), x.data(), dy.format(), dy.data(), dx.data(), x.numel());
  return true;
}

}  // namespace engine
