// Linear layer: y = x W^T + b over the last dimension (PyTorch layout, W [out, in]).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/layer.h"

namespace engine {

// Free functions run on the thread that owns `be` (the trainer's).
// The math, on operands already in their formats. x [rows, in] and w
// [out, in] are GEMM operands read in their own formats; w holds the weight
// times w_scale (FP8 per-tensor scaling), folded back out through alpha.
// bias (f32, length out) may be null. y [rows, out] is f32, overwritten.
void linear_forward(Backend& be, const Tensor& x, const Tensor& w, float w_scale, const float* bias,
                    float* y, std::int64_t rows, std::int64_t in, std::int64_t out, Format accumulate);
// dy [rows, out] is the GEMM operand, dy_f32 the same values as floats (for
// the bias sums; may be null when db is). dx [rows, in] (null: not needed),
// dw [out, in] and db [out] (null: no bias) are f32, overwritten.
void linear_backward(Backend& be, const Tensor& dy, const float* dy_f32, const Tensor& x,
                     const Tensor& w, float w_scale, float* dx, float* dw, float* db,
                     std::int64_t rows, std::int64_t in, std::int64_t out, Format accumulate);

// What Linear saves: its input as multiplied (the caller's tensor when it
// already was in the compute format, else an owned copy in that format).
struct LinearContext : Context {
  const Tensor* x = nullptr;
  Tensor x_compute;
  std::size_t bytes() const override { return x ? x->bytes() : 0; }
};

// Input [..., in] (any leading dimensions, flattened into rows), output
// [..., out]. The caller keeps x alive and unchanged until backward (the
// context refers to it). Trainer thread only.
class Linear : public Layer {
 public:
  Linear(std::string name, std::int64_t in, std::int64_t out, bool bias = true);

  const char* kind() const override { return "linear"; }
  Shape output_shape(const Shape& in) const override;
  std::unique_ptr<Context> make_context() const override;
  void forward(Backend& be, const Tensor& x, Tensor& y, Context& ctx) override;
  void backward(Backend& be, const Tensor& dy, Tensor* dx, Context& ctx) override;
  std::vector<Parameter*> parameters() override;
  bool is_matmul() const override { return true; }

  std::int64_t in_features() const { return m_in; }
  std::int64_t out_features() const { return m_out; }
  Parameter& weight() { return m_weight; }
  Parameter& bias() { return m_bias; }

 private:
  std::int64_t m_in, m_out;
  bool m_has_bias;
  Parameter m_weight, m_bias;
  // Reused workspaces (grow once, then steady state allocates nothing).
  Tensor m_w_compute, m_b32, m_y32, m_dy_grad, m_dy32, m_dx32, m_dw32, m_db32;
};

}  // namespace engine
