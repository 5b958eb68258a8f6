// Softmax layer over the last dimension (attention's probabilities).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "nn/layer.h"

namespace engine {

// Free functions run on the thread that owns `be` (the trainer's).
// The math on f32 values, row by row, max subtracted. FP16/BF16
// `accumulate` rounds the running sum of exponentials after every addition.
void softmax_forward(Backend& be, const float* x, float* y, std::int64_t rows, std::int64_t cols,
                     Format accumulate);
// dx = y * (dy - sum(dy * y)) per row
void softmax_backward(Backend& be, const float* y, const float* dy, float* dx, std::int64_t rows,
                      std::int64_t cols);

// What Softmax saves: its output (the caller's y, in the storage format);
// the input is not needed.
struct SoftmaxContext : Context {
  const Tensor* y = nullptr;
  std::size_t bytes() const override { return y ? y->bytes() : 0; }
};

// Any shape [batch, ..., cols] -> same shape. The caller keeps y alive and
// unchanged until backward. Kind "softmax": the recipes treat it like a
// norm (FP32 under mixed precision), so a custom recipe can force it to FP16.
// Trainer thread only.
class Softmax : public Layer {
 public:
  explicit Softmax(std::string name) : Layer(std::move(name)) {}

  const char* kind() const override { return "softmax"; }
  Shape output_shape(const Shape& in) const override;
  std::unique_ptr<Context> make_context() const override;
  void forward(Backend& be, const Tensor& x, Tensor& y, Context& ctx) override;
  void backward(Backend& be, const Tensor& dy, Tensor* dx, Context& ctx) override;

  // Causal attention's softmax: the input's last two dimensions are [T, T]
  // score planes, and row t normalises its first t + 1 values only
  // (fused::causal_softmax); the others get probability +0 and gradient +0.
  bool causal = false;

 private:
  Tensor m_x32, m_y32, m_yb32, m_dy32, m_dx32;
  std::size_t workspace_bytes() const override {
    return tensors_bytes({&m_x32, &m_y32, &m_yb32, &m_dy32, &m_dx32});
  }
};

}  // namespace engine
