// ReLU layer: the backend's elementwise kernels.
#include "nn/relu.h"

#include "backend/backend.h"
#include "backend/fused.h"
#include "tensor/tensor.h"

namespace engine {

void relu_forward(Backend& be, const float* x, float* y, std::int64_t n) { be.relu_forward(x, y, n); }

void relu_backward(Backend& be, const float* x, const float* dy, float* dx, std::int64_t n) {
  be.relu_backward(x, dy, dx, n);
}

PointwiseLayer::ForwardEncode ReLU::forward_encode() const { return &fused::relu_forward_encode; }

bool ReLU::forward_bits(Backend& be, const Tensor& x, Tensor& y) {
  if (!is_half_format(x.format()) || y.format() != x.format()) return false;
  be.relu16_forward(x.format(), x.data(), y.data(), x.numel());
  return true;
}

bool ReLU::backward_coded_dy(Backend& be, const Tensor& x, const Tensor& dy, Tensor& dx) {
  m_dy32.resize(x.shape(), Format::FP32);
  if (x.numel()) fused::relu_backward_coded(be, x.f32(), dy.format(), dy.data(), dx.f32(), x.numel(), m_dy32.f32());
  return true;
}

bool ReLU::backward_bits(Backend& be, const Tensor& x, const Tensor& dy, Tensor& dx) {
  if (!is_half_format(x.format()) || !is_half_format(dy.format()) || dx.format() != dy.format()) return false;
  be.relu16_backward(x.format(), x.data(), dy.format(), dy.data(), dx.data(), x.numel());
  return true;
}

}  // namespace engine
