// 2-D convolution layer: NCHW activations, OIHW weights, square kernel, zero padding.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "nn/layer.h"

namespace engine {

// Free functions run on the thread that owns `be` (the trainer's).
// The math on f32 values already rounded to their formats; `compute` tells
// the backend which exact path it may take (see Backend::conv2d_forward).
// bias may be null. y is overwritten.
void conv2d_forward(Backend& be, const ConvShape& s, Format compute, const float* x, const float* w,
                    const float* bias, float* y);

// What Conv2d saves: its input in the compute format (the caller's tensor
// when it already was, else an owned copy). Decoded again in backward, so
// low-precision inputs really cost 2 (or 1) bytes per element while saved.
// With FP8 delayed scaling the copy holds x * x_scale.
// With a block compute format it saves x block-quantized (x_block, f32
// values on the block grid, counted at the format's bytes per element).
struct Conv2dContext : Context {
  const Tensor* x = nullptr;
  Tensor x_compute;
  float x_scale = 1.0f;
  // FP8: the layer's f32 copy of x_compute's values (Conv2d::m_x32) that the
  // forward convolution read, for the backward's; null where there is none.
  const float* x32 = nullptr;
  bool block = false;
  Tensor x_block;
  Buffer x_info;  // x_block's BlockQuantized (backend memory)
  std::int64_t x_device_bytes = 0;
  std::size_t bytes() const override {
    if (block) return static_cast<std::size_t>(x_device_bytes);
    return x ? x->bytes() : 0;
  }
  std::size_t emulation_bytes() const override { return block ? x_block.bytes() : 0; }
};

// Input [N, C_in, H, W] -> [N, C_out, H', W'] with H' = (H + 2 pad - k) / stride + 1.
// The caller keeps x alive until backward. Trainer thread only.
class Conv2d : public Layer {
 public:
  Conv2d(std::string name, std::int64_t c_in, std::int64_t c_out, std::int64_t kernel,
         std::int64_t pad = 0, std::int64_t stride = 1, bool bias = true);

  const char* kind() const override { return "conv2d"; }
  Shape output_shape(const Shape& in) const override;
  std::unique_ptr<Context> make_context() const override;
  void forward(Backend& be, const Tensor& x, Tensor& y, Context& ctx) override;
  void backward(Backend& be, const Tensor& dy, Tensor* dx, Context& ctx) override;
  std::vector<Parameter*> parameters() override;
  bool is_matmul() const override { return true; }
  std::vector<DelayedScale*> delayed_scales() override { return {&m_x_scale, &m_dy_scale, &m_w_scale}; }
  void set_delayed_scaling(const DelayedScaling& c) override;

  Parameter& weight() { return m_weight; }
  Parameter& bias() { return m_bias; }
  // FP8 delayed scaling of the input, the output gradient and (when the AMP
  // code did not store it in FP8) the weight; see Linear.
  const DelayedScale& x_scale() const { return m_x_scale; }
  const DelayedScale& dy_scale() const { return m_dy_scale; }
  const DelayedScale& w_scale() const { return m_w_scale; }

 private:
  ConvShape conv_shape(const Shape& in) const;
  // The weight as the convolution multiplies it (f32 values on the compute
  // format's grid, holding weight * *scale), in m_w32 or the weight's own storage.
  const float* weight_values(Backend& be, bool record, float* scale);

  std::int64_t m_c_in, m_c_out, m_kernel, m_pad, m_stride;
  bool m_has_bias;
  Parameter m_weight, m_bias;
  DelayedScaling m_scaling;
  DelayedScale m_x_scale, m_dy_scale, m_w_scale;
  float m_w_used_scale = 1.0f;  // the weight scale of the last forward (backward reuses it)
  Tensor m_x32, m_w32, m_w8, m_b32, m_y32, m_dy32, m_dy8, m_dyu32, m_dx32, m_dw32, m_db32;
  // Block compute: the quantized weight of the last forward and its
  // decode scale and exactness (backward reuses them), and dy quantized.
  Tensor m_wq, m_dyq;
  Buffer m_wq_info, m_dyq_info;  // their BlockQuantized (backend memory)
  std::uint64_t m_sr_calls = 0;
  std::size_t workspace_bytes() const override {
    return tensors_bytes({&m_x32, &m_w32, &m_w8, &m_b32, &m_y32, &m_dy32, &m_dy8, &m_dyu32, &m_dx32, &m_dw32, &m_db32,
                          &m_wq, &m_dyq});
  }
  void forward_block(Backend& be, const Tensor& x, Tensor& y, Conv2dContext& ctx);
  void backward_block(Backend& be, const Tensor& dy, Tensor* dx, Conv2dContext& ctx);
};

}  // namespace engine
