// LayerNorm layer over the last dimension: y = (x - mean) * rstd * gamma + beta.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/layer.h"

namespace engine {

// Free functions run on the thread that owns `be` (the trainer's).
// The math on f32 values (x [rows, cols]). mean and rstd (length rows) are
// written for backward. `accumulate` FP16/BF16 rounds every partial sum to
// that format (what an FP16 LayerNorm does to a model).
void layernorm_forward(Backend& be, const float* x, const float* gamma, const float* beta, float* y,
                       float* mean, float* rstd, std::int64_t rows, std::int64_t cols, float eps,
                       Format accumulate);
// dx, dgamma, dbeta overwritten.
void layernorm_backward(Backend& be, const float* dy, const float* x, const float* mean, const float* rstd,
                        const float* gamma, float* dx, float* dgamma, float* dbeta, std::int64_t rows,
                        std::int64_t cols);

// What LayerNorm saves: its input in the compute format (the caller's
// tensor when it already was, else an owned copy) and per-row mean and
// 1/std in FP32.
struct LayerNormContext : Context {
  const Tensor* x = nullptr;
  Tensor x_compute;
  Tensor mean, rstd;
  std::size_t bytes() const override { return (x ? x->bytes() : 0) + mean.bytes() + rstd.bytes(); }
};

// Input [..., dim] -> same shape. Parameters "<name>.gamma" (ones) and
// "<name>.beta" (zeros), no weight decay. eps 1e-5 (PyTorch's default).
// The caller keeps x alive until backward. Trainer thread only.
class LayerNorm : public Layer {
 public:
  LayerNorm(std::string name, std::int64_t dim, float eps = 1e-5f);

  const char* kind() const override { return "layernorm"; }
  Shape output_shape(const Shape& in) const override;
  std::unique_ptr<Context> make_context() const override;
  void forward(Backend& be, const Tensor& x, Tensor& y, Context& ctx) override;
  void backward(Backend& be, const Tensor& dy, Tensor* dx, Context& ctx) override;
  // forward() for a reader that rounds the FP32 output to `out` (FP16 or
  // BF16, saturating as `saturate` says) before anything else: the output
  // is encoded to `out` as the kernel writes it, the bits of that rounding,
  // one pass instead of two. Only for an FP32-stored output with FP32
  // accumulation, no overflow count, capture or injected fault; false, and
  // nothing done, otherwise (then forward()).
  bool forward_codes(Backend& be, const Tensor& x, Tensor& y, Context& ctx, Format out, bool saturate);
  // backward() of a pre-norm block's norm whose dx meets the residual r
  // (FP32, dx's shape): dx = r + this norm's dx, and with `codes` (format
  // codes->format(): FP16 or BF16) that sum also encoded there, the
  // rounding the next Linear's backward would make. One pass
  // (Backend::layernorm_backward_add) where the gradient is FP32 with FP32
  // accumulation and no overflow count; false, and nothing done, otherwise.
  bool backward_add(Backend& be, const Tensor& dy, const Tensor& r, Tensor& dx, Tensor* codes, Context& ctx);
  std::vector<Parameter*> parameters() override { return {&m_gamma, &m_beta}; }

  Parameter& gamma() { return m_gamma; }
  Parameter& beta() { return m_beta; }

 private:
  std::int64_t m_dim;
  float m_eps;
  Parameter m_gamma, m_beta;
  // forward() with the output stored in `out`; false where the one-pass
  // kernel does not apply and `required` is false.
  bool forward_as(Backend& be, const Tensor& x, Tensor& y, Context& ctx, Format out, bool out_saturate,
                  bool required);
  Tensor m_x32, m_g32, m_b32, m_y32, m_dy32, m_dx32, m_dg32, m_db32;
  std::size_t workspace_bytes() const override {
    return tensors_bytes({&m_x32, &m_g32, &m_b32, &m_y32, &m_dy32, &m_dx32, &m_dg32, &m_db32});
  }
};

}  // namespace engine
