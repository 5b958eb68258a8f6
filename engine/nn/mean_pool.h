// Mean pooling over tokens: [B, T, C] -> [B, C].
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "nn/layer.h"

namespace engine {

// Free functions run on the thread that owns `be` (the trainer's).
// The math on f32 values: y[b, c] = (1/T) sum_t x[b, t, c] (f32 sums), as
// one batched GEMM (1/T) * ones[1 x T] x[b] (`ones`: T ones in backend memory);
// x stored in format fx (FP32, or a format the GEMM decodes).
void mean_pool_forward(Backend& be, const void* x, Format fx, float* y, std::int64_t B, std::int64_t T,
                       std::int64_t C, const float* ones);
// dx[b, t, c] = dy[b, c] * (1/T); sdy: B*C floats of scratch (dy scaled
// there first, then repeated: one pass over dx instead of two).
void mean_pool_backward(Backend& be, const float* dy, float* dx, std::int64_t B, std::int64_t T, std::int64_t C,
                        float* sdy);

// Saves only the input shape (0 bytes).
struct MeanPoolContext : Context {
  Shape x_shape;
  std::size_t bytes() const override { return 0; }
};

// Trainer thread only.
class MeanPool : public Layer {
 public:
  explicit MeanPool(std::string name) : Layer(std::move(name)) {}

  const char* kind() const override { return "mean_pool"; }
  Shape output_shape(const Shape& in) const override;
  std::unique_ptr<Context> make_context() const override;
  void forward(Backend& be, const Tensor& x, Tensor& y, Context& ctx) override;
  void backward(Backend& be, const Tensor& dy, Tensor* dx, Context& ctx) override;

 private:
  Tensor m_x32, m_xc, m_y32, m_dy32, m_dx32, m_ones, m_dys;
  std::size_t workspace_bytes() const override {
    return tensors_bytes({&m_x32, &m_xc, &m_y32, &m_dy32, &m_dx32, &m_ones, &m_dys});
  }
};

}  // namespace engine
