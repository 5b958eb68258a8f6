// Linear layer: y = x W^T + b over the last dimension (PyTorch layout, W [out, in]).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/block_gemm.h"
#include "nn/layer.h"

namespace engine {

struct GemmEncode;

// FP8 per-tensor scales of a Linear's GEMM operands: each operand holds
// value * scale (1 for every non-FP8 operand); the GEMMs fold the scales
// back out through alpha = 1/(scale_a * scale_b).
struct GemmScales {
  float x = 1.0f;
  float w = 1.0f;
  float dy = 1.0f;
};

// Free functions run on the thread that owns `be` (the trainer's).
// The math, on operands already in their formats. x [rows, in] and w
// [out, in] are GEMM operands read in their own formats, holding their
// values times s.x and s.w. bias (f32, length out, unscaled) may be null.
// y [rows, out] is f32, overwritten; with y_codes it is also encoded there
// (Backend::gemm_encode). x_keep, w_keep: x's and w's GemmOperand::keep
// tags (0: none).
void linear_forward(Backend& be, const Tensor& x, const Tensor& w, const GemmScales& s, const float* bias,
                    float* y, std::int64_t rows, std::int64_t in, std::int64_t out, Format accumulate,
                    const GemmEncode* y_codes = nullptr, std::uint64_t x_keep = 0, std::uint64_t w_keep = 0);
// dy [rows, out] is the GEMM operand (holding dy * s.dy), dy_f32 the
// unscaled values as floats (for the bias sums; may be null when db is).
// dx [rows, in] (null: not needed), dw [out, in] and db [out] (null: no
// bias) are f32, overwritten; with dx_codes dx is also encoded there, and
// with dw_codes dw is encoded (or rounded in place, codes null) as it says.
// x_keep, w_keep: the tags x and w had in linear_forward (GemmOperand::keep;
// the last use of each: x's in dW, w's in dx).
void linear_backward(Backend& be, const Tensor& dy, const float* dy_f32, const Tensor& x,
                     const Tensor& w, const GemmScales& s, float* dx, float* dw, float* db,
                     std::int64_t rows, std::int64_t in, std::int64_t out, Format accumulate,
                     const GemmEncode* dx_codes = nullptr, const GemmEncode* dw_codes = nullptr,
                     std::uint64_t x_keep = 0, std::uint64_t w_keep = 0);

// What Linear saves: its input as multiplied (the caller's tensor when it
// already was in the compute format, else an owned copy in that format;
// with FP8 delayed scaling the copy holds x * x_scale).
// The weight as multiplied is the layer's own (w, w_scale): not counted.
// With a block compute format (MXFP8, MXFP6, MXFP4, NVFP4) it saves x
// quantized down its columns (the wgrad operand) in x_block, counted at the
// format's bytes per element; ctx.x is then the caller's tensor (shape only).
struct LinearContext : Context {
  const Tensor* x = nullptr;
  Tensor x_compute;
  float x_scale = 1.0f;
  std::uint64_t x_keep = 0;  // x's GemmOperand::keep tag, from forward to the weight gradient
  std::uint64_t w_keep = 0;  // w's, from forward to the input gradient (0: none)
  const Tensor* w = nullptr;
  float w_scale = 1.0f;
  bool block = false;
  BlockOperand x_block;
  std::size_t bytes() const override {
    if (block) return static_cast<std::size_t>(x_block.device_bytes);
    return x ? x->bytes() : 0;
  }
  std::size_t emulation_bytes() const override { return block ? x_block.values.bytes() : 0; }
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
  // forward() of an FP32-stored output that also leaves `copy` holding it
  // encoded to `f` (FP16/BF16, saturating as `saturate` says), the GEMM
  // encoding its rows as it finishes them: what round_to(y, f) would give,
  // without the pass over y. True when `copy` was made; false where it does
  // not apply (another storage format, an overflow count, block formats),
  // and then forward() ran as usual.
  bool forward_copy(Backend& be, const Tensor& x, Tensor& y, Context& ctx, Format f, bool saturate, Tensor& copy);
  void backward(Backend& be, const Tensor& dy, Tensor* dx, Context& ctx) override;
  // The FP16/BF16 format backward() rounds dy to (its grad format), which
  // the layer computing dy may encode itself in the same pass; FP32 when
  // there is none such (FP32, FP8 and block grad formats).
  Format dy_codes_format() const;
  bool input_cast(const Shape& x, InputCast& c) override;
  void forward_cast(Backend& be, const Tensor& codes, float scale, Tensor& y, Context& ctx) override;
  // backward() with that rounding already made: `rounded` holds dy's codes
  // in dy_codes_format(), the bits round_to would give.
  void backward_rounded(Backend& be, const Tensor& dy, const Tensor& rounded, Tensor* dx, Context& ctx);
  std::vector<Parameter*> parameters() override;
  bool is_matmul() const override { return true; }
  std::vector<DelayedScale*> delayed_scales() override { return {&m_x_scale, &m_dy_scale, &m_w_scale}; }
  void set_delayed_scaling(const DelayedScaling& c) override;

  std::int64_t in_features() const { return m_in; }
  std::int64_t out_features() const { return m_out; }
  Parameter& weight() { return m_weight; }
  Parameter& bias() { return m_bias; }
  // FP8 delayed scaling of the input (compute E4M3/E5M2), of the output
  // gradient (grad E4M3/E5M2) and of the weight when it is not already
  // stored in the FP8 compute format (the AMP code normally stores it so,
  // scaled: Parameter::weight_history); inactive otherwise.
  const DelayedScale& x_scale() const { return m_x_scale; }
  const DelayedScale& dy_scale() const { return m_dy_scale; }
  const DelayedScale& w_scale() const { return m_w_scale; }

 private:
  std::int64_t m_in, m_out;
  bool m_has_bias;
  bool m_dgrad = false;  // the last backward computed dx (forward then tags w for it)
  Parameter m_weight, m_bias;
  DelayedScaling m_scaling;
  DelayedScale m_x_scale, m_dy_scale, m_w_scale;
  // Reused workspaces (grow once, then steady state allocates nothing).
  Tensor m_w_compute, m_b32, m_y32, m_dy_grad, m_dy32, m_dx32, m_dw32, m_db32, m_fp8_ws, m_x32;
  BlockGemm m_block;
  std::size_t workspace_bytes() const override {
    return tensors_bytes({&m_w_compute, &m_b32, &m_y32, &m_dy_grad, &m_dy32, &m_dx32, &m_dw32, &m_db32, &m_fp8_ws,
                          &m_x32}) +
           m_block.workspace_bytes();
  }
  void forward_block(Backend& be, const Tensor& x, Tensor& y, LinearContext& ctx);
  // backward(), with dy's rounding to the grad format given (not null).
  void backward_from(Backend& be, const Tensor& dy, const Tensor* rounded, Tensor* dx, LinearContext& ctx);
  // forward(), with `copy` (when not null) filled as forward_copy says;
  // x_scale > 0: x is already cast (forward_cast) with that scale.
  bool forward_into(Backend& be, const Tensor& x, Tensor& y, LinearContext& ctx, const GemmEncode* copy,
                    float x_scale = 0.0f);
  void backward_block(Backend& be, const Tensor& dy, Tensor* dx, LinearContext& ctx);
};

}  // namespace engine
