// Patch embedding: image -> tokens, one linear map per patch plus a learned position embedding.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/block_gemm.h"
#include "nn/layer.h"
#include "nn/linear.h"

namespace engine {

// Free functions run on the thread that owns `be` (the trainer's).
// x [B, C, H, W] (f32) -> patches [B*T, C*p*p], T = (H/p)*(W/p) tokens in
// row-major order over the patch grid; within a patch the order is (c, i, j),
// which is a conv weight [dim, C, p, p] flattened (PyTorch's ViT layout).
void patchify(const float* x, float* patches, std::int64_t B, std::int64_t C, std::int64_t H, std::int64_t W,
              std::int64_t p);
// The inverse scatter (dx overwritten; patches do not overlap).
void unpatchify(const float* patches, float* x, std::int64_t B, std::int64_t C, std::int64_t H, std::int64_t W,
                std::int64_t p);

// y[b, t] = W patch[b, t] + bias + pos[t]. patches [B*T, P] and w [dim, P]
// are GEMM operands in their own formats, holding their values times s.x
// and s.w (FP8 scaling; see GemmScales in nn/linear.h); bias and pos are
// f32. y [B*T, dim] f32. pos_rep: scratch for B*T*dim floats (backend memory).
void patch_embed_forward(Backend& be, const Tensor& patches, const Tensor& w, const GemmScales& s,
                         const float* bias, const float* pos, float* y, std::int64_t B, std::int64_t T,
                         std::int64_t P, std::int64_t dim, Format accumulate, float* pos_rep);
// y[b, :] += pos for b < B (pos: n floats): the table repeated over the
// batch into pos_rep (B*n floats), then one add (B adds of n were B calls).
void add_positions(Backend& be, float* y, const float* pos, std::int64_t B, std::int64_t n, float* pos_rep);
// dy holds dy * s.dy; dy_f32 is the unscaled dy as floats (bias and position
// sums). dpatches (null: not needed) [B*T, P], dw [dim, P], db [dim], dpos
// [T, dim]: f32, overwritten.
void patch_embed_backward(Backend& be, const Tensor& dy, const float* dy_f32, const Tensor& patches,
                          const Tensor& w, const GemmScales& s, float* dpatches, float* dw, float* db, float* dpos,
                          std::int64_t B, std::int64_t T, std::int64_t P, std::int64_t dim, Format accumulate);

// What PatchEmbed saves: the patches in the compute format (always its own
// copy: patchifying is a gather), times patch_scale under FP8 delayed scaling.
// With a block compute format it saves the patches quantized down their
// columns (the wgrad operand) in patches_block instead.
struct PatchEmbedContext : Context {
  Shape x_shape;
  Tensor patches;
  float patch_scale = 1.0f;
  bool block = false;
  BlockOperand patches_block;
  std::size_t bytes() const override {
    return block ? static_cast<std::size_t>(patches_block.device_bytes) : patches.bytes();
  }
  std::size_t emulation_bytes() const override { return block ? patches_block.values.bytes() : 0; }
};

// [B, C, H, W] -> [B, T, dim]. Parameters "<name>.weight" [dim, C*p*p],
// "<name>.bias" [dim], "<name>.pos" [T, dim] (no weight decay on the last
// two). A matmul layer. Trainer thread only.
class PatchEmbed : public Layer {
 public:
  PatchEmbed(std::string name, std::int64_t channels, std::int64_t height, std::int64_t width, std::int64_t patch,
             std::int64_t dim);

  const char* kind() const override { return "patch_embed"; }
  Shape output_shape(const Shape& in) const override;
  std::unique_ptr<Context> make_context() const override;
  void forward(Backend& be, const Tensor& x, Tensor& y, Context& ctx) override;
  void backward(Backend& be, const Tensor& dy, Tensor* dx, Context& ctx) override;
  std::vector<Parameter*> parameters() override { return {&m_weight, &m_bias, &m_pos}; }
  bool is_matmul() const override { return true; }
  std::vector<DelayedScale*> delayed_scales() override { return {&m_x_scale, &m_dy_scale}; }
  void set_delayed_scaling(const DelayedScaling& c) override;

  std::int64_t tokens() const { return m_tokens; }
  Parameter& weight() { return m_weight; }
  Parameter& bias() { return m_bias; }
  Parameter& pos() { return m_pos; }

 private:
  std::int64_t m_c, m_h, m_w, m_patch, m_dim, m_tokens, m_patch_size;
  Parameter m_weight, m_bias, m_pos;
  // FP8 delayed scaling of the patches and of dy (the weight is scaled by
  // the AMP code, Parameter::weight_history).
  DelayedScaling m_scaling;
  DelayedScale m_x_scale, m_dy_scale;
  Tensor m_fp8_ws;
  Tensor m_pos_rep;  // the position table repeated over the batch
  Tensor m_x32, m_patch32, m_w_compute, m_b32, m_pos32, m_y32, m_dy_grad, m_dy32, m_dp32, m_dx32, m_dw32, m_db32,
      m_dpos32;
  BlockGemm m_block;
  std::size_t workspace_bytes() const override {
    return tensors_bytes({&m_fp8_ws, &m_x32, &m_patch32, &m_w_compute, &m_b32, &m_pos32, &m_y32, &m_dy_grad, &m_dy32,
                          &m_dp32, &m_dx32, &m_dw32, &m_db32, &m_dpos32, &m_pos_rep}) +
           m_block.workspace_bytes();
  }
  void forward_block(Backend& be, const Tensor& x, Tensor& y, PatchEmbedContext& ctx);
  void backward_block(Backend& be, const Tensor& dy, Tensor* dx, PatchEmbedContext& ctx);
};

}  // namespace engine
