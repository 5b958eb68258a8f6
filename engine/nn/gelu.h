// GELU layer, exact erf form: y = x * Phi(x) (PyTorch's approximate='none').
#pragma once

#include <cstdint>
#include <string>

#include "nn/pointwise.h"

namespace engine {

// Free functions run on the thread that owns `be` (the trainer's).
void gelu_forward(Backend& be, const float* x, float* y, std::int64_t n);
// dx = dy * (Phi(x) + x * phi(x))
void gelu_backward(Backend& be, const float* x, const float* dy, float* dx, std::int64_t n);

class GELU : public PointwiseLayer {
 public:
  explicit GELU(std::string name) : PointwiseLayer(std::move(name)) {}
  const char* kind() const override { return "gelu"; }

 protected:
  // fc2's FP8 input cast written by the GELU (PointwiseLayer::forward_cast_for).
  ForwardEncode forward_encode() const override;
  void apply_forward(Backend& be, const float* x, float* y, std::int64_t n) override { gelu_forward(be, x, y, n); }
  void apply_backward(Backend& be, const float* x, const float* dy, float* dx, std::int64_t n) override {
    gelu_backward(be, x, dy, dx, n);
  }
  // FP16/BF16 codes in and out: one pass (Backend::gelu16_*).
  bool forward_bits(Backend& be, const Tensor& x, Tensor& y) override;
  bool backward_bits(Backend& be, const Tensor& x, const Tensor& dy, Tensor& dx) override;
  // FP8 (or FP16/BF16) gradient codes into FP32 math: Backend::gelu_backward_coded.
  bool backward_coded_dy(Backend& be, const Tensor& x, const Tensor& dy, Tensor& dx) override;
};

}  // namespace engine
