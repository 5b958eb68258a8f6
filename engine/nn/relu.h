// ReLU layer: y = max(x, 0).
#pragma once

#include <cstdint>
#include <string>

#include "nn/pointwise.h"

namespace engine {

// Free functions run on the thread that owns `be` (the trainer's).
void relu_forward(Backend& be, const float* x, float* y, std::int64_t n);
// dx = dy where x > 0, else 0 (dx may alias dy).
void relu_backward(Backend& be, const float* x, const float* dy, float* dx, std::int64_t n);

// Saves its input (not its output: the next layer usually saves that one
// already, so saving x keeps every activation counted once).
class ReLU : public PointwiseLayer {
 public:
  explicit ReLU(std::string name) : PointwiseLayer(std::move(name)) {}
  const char* kind() const override { return "relu"; }

 protected:
  // The next FP8 layer's input cast written by the ReLU (PointwiseLayer::forward_cast_for).
  ForwardEncode forward_encode() const override;
  void apply_forward(Backend& be, const float* x, float* y, std::int64_t n) override { relu_forward(be, x, y, n); }
  void apply_backward(Backend& be, const float* x, const float* dy, float* dx, std::int64_t n) override {
    relu_backward(be, x, dy, dx, n);
  }
  bool forward_bits(Backend& be, const Tensor& x, Tensor& y) override;
  bool backward_bits(Backend& be, const Tensor& x, const Tensor& dy, Tensor& dx) override;
  // FP8 (or FP16/BF16) gradient codes into FP32 math: Backend::relu_backward_coded.
  bool backward_coded_dy(Backend& be, const Tensor& x, const Tensor& dy, Tensor& dx) override;
};

}  // namespace engine
