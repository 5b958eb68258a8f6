// GELU layer: the backend's elementwise kernels.
#include "nn/gelu.h"

#include "backend/backend.h"
#include "backend/fused.h"

namespace engine {

void gelu_forward(Backend& be, const float* x, float* y, std::int64_t n) { be.gelu_forward(x, y, n); }

void gelu_backward(Backend& be, const float* x, const float* dy, float* dx, std::int64_t n) {
  be.gelu_backward(x, dy, dx, n);
}

PointwiseLayer::ForwardEncode GELU::forward_encode() const { return &fused::gelu_forward_encode; }

bool GELU::forward_bits(Backend& be, const Tensor& x, Tensor& y) {
  if (!is_half_format(x.format()) || y.format() != x.format()) return false;
  m_x32.resize(x.shape(), Format::FP32);
  m_y32.resize(x.shape(), Format::FP32);
  if (x.numel()) fused::gelu16_forward(be, x.format(), x.data(), y.data(), x.numel(), m_x32.f32(), m_y32.f32());
  return true;
}

bool GELU::backward_bits(Backend& be, const Tensor& x, const Tensor& dy, Tensor& dx) {
  if (!is_half_format(x.format()) || !is_half_format(dy.format()) || dx.format() != dy.format()) return false;
  m_x32.resize(x.shape(), Format::FP32);
  m_dy32.resize(x.shape(), Format::FP32);
  m_dx32.resize(x.shape(), Format::FP32);
  if (x.numel())
    fused::gelu16_backward(be, x.format(), x.data(), dy.format(), dy.data(), dx.data(), x.numel(), m_x32.f32(), m_dy32.f32(),
                       m_dx32.f32());
  return true;
}

bool GELU::backward_coded_dy(Backend& be, const Tensor& x, const Tensor& dy, Tensor& dx) {
  m_dy32.resize(x.shape(), Format::FP32);
  if (x.numel()) fused::gelu_backward_coded(be, x.f32(), dy.format(), dy.data(), dx.f32(), x.numel(), m_dy32.f32());
  return true;
}

}  // namespace engine
