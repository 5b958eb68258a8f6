// Max pooling layer: k x k windows with stride k, no padding (NCHW).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/layer.h"

namespace engine {

// Free functions run on the thread that owns `be` (the trainer's).
// The math on f32 values: y [n, c, h/k, w/k] and, per output, the flat index
// within its image plane of the input that won (the only thing backward needs).
void maxpool2d_forward(Backend& be, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                       std::int64_t k, const float* x, float* y, std::int32_t* argmax);
// dx (overwritten) receives dy at the winners and zero elsewhere.
void maxpool2d_backward(Backend& be, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                        std::int64_t k, const float* dy, const std::int32_t* argmax, float* dx);

// What MaxPool2d saves: the winners' indices (4 bytes per output), not the input.
struct MaxPool2dContext : Context {
  Shape x_shape;
  Buffer argmax;  // int32 per output (backend memory)
  std::size_t argmax_count = 0;
  std::size_t bytes() const override { return argmax_count * sizeof(std::int32_t); }
};

// Input [N, C, H, W] -> [N, C, H/k, W/k] (floor, as PyTorch). Rounding to a
// format commutes with max, so the result is the max of the rounded inputs.
// Trainer thread only.
class MaxPool2d : public Layer {
 public:
  explicit MaxPool2d(std::string name, std::int64_t kernel = 2);

  const char* kind() const override { return "maxpool2d"; }
  Shape output_shape(const Shape& in) const override;
  std::unique_ptr<Context> make_context() const override;
  void forward(Backend& be, const Tensor& x, Tensor& y, Context& ctx) override;
  void backward(Backend& be, const Tensor& dy, Tensor* dx, Context& ctx) override;

 private:
  std::int64_t m_kernel;
  Tensor m_x32, m_y32, m_dy32, m_dx32;
  std::size_t workspace_bytes() const override {
    return tensors_bytes({&m_x32, &m_y32, &m_dy32, &m_dx32});
  }
};

}  // namespace engine
