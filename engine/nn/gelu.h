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
  // Layer::forward_cast_for where `c` is FP8's delayed-scaled cast (c.amax
  // set): the codes into y, y's f32 values never stored
  // (Backend::gelu_forward_encode). FP32 GELU only, without non-finite
  // attribution.
  bool forward_cast_for(Backend& be, const Tensor& x, Tensor& y, Context& ctx, const InputCast& c) override;

 protected:
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
