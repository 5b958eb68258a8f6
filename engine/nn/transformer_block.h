// Pre-LayerNorm transformer block: x + attn(ln1(x)), then h + mlp(ln2(h)).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/attention.h"
#include "nn/composite.h"
#include "nn/gelu.h"
#include "nn/layernorm.h"
#include "nn/linear.h"

namespace engine {

// The residual stream's format when adding a branch's output (format
// `branch`) to the stream (format `stream`): FP32 if either is a 32-bit
// container (autocast's type promotion keeps an FP32 stream FP32), else the
// branch's format (a model cast to FP16 keeps everything FP16).
Format residual_format(Format stream, Format branch);

// y = a + b with y in residual_format(a, b) (resized to a's shape). When the
// formats are all FP32 the add reads and writes the tensors directly.
// `saturate`: FP8 forward rule. *nonfinite (when non-null) gets y's inf/NaN count.
void residual_add(Backend& be, const Tensor& a, const Tensor& b, Tensor& y, Tensor& ws_a, Tensor& ws_b,
                  Tensor& ws_y, bool saturate, std::int64_t* nonfinite);

// Everything a block keeps between forward and backward.
struct TransformerBlockContext : Context {
  std::unique_ptr<Context> ln1_ctx, attn_ctx, ln2_ctx, fc1_ctx, gelu_ctx, fc2_ctx;
  Tensor ln1_out, attn_out, h, ln2_out, fc1_out, gelu_out, fc2_out;  // forward
  Tensor d_gelu_out, d_fc1_out, d_ln2_out, d_h_mlp, dh, d_ln1_out, d_x_attn;  // backward
  Tensor dh_codes;  // dh rounded for the attention's projection (LayerNorm::backward_add)
  std::size_t bytes() const override;
  std::size_t emulation_bytes() const override;
};

// x [B, T, C] -> [B, T, C]. Leaves, in forward order: "<name>.ln1", the
// attention's five, seven with qk_norm ("<name>.attn.qkv" ...), "<name>.ln2", "<name>.fc1"
// (C -> ratio*C), "<name>.gelu", "<name>.fc2" (ratio*C -> C). The residual
// adds belong to no leaf; their non-finite values are attributed to the
// branch's last leaf (attn.proj, fc2) forward and to the LayerNorm the
// gradient flows out of (ln2, ln1) backward. The caller keeps x alive until
// backward. Trainer thread only.
class TransformerBlock : public CompositeLayer {
 public:
  // causal and qk_norm: the attention's (nn/attention.h).
  TransformerBlock(std::string name, std::int64_t dim, std::int64_t heads, std::int64_t mlp_ratio = 2,
                   bool causal = false, bool qk_norm = false);

  const char* kind() const override { return "transformer_block"; }
  Shape output_shape(const Shape& in) const override;
  std::unique_ptr<Context> make_context() const override;
  void forward(Backend& be, const Tensor& x, Tensor& y, Context& ctx) override;
  void backward(Backend& be, const Tensor& dy, Tensor* dx, Context& ctx) override;
  std::vector<Parameter*> parameters() override;
  std::vector<Layer*> leaves() override;
  void leaf_shapes(const Shape& in, std::vector<std::pair<Layer*, Shape>>& out) override;

  LayerNorm& ln1() { return m_ln1; }
  Attention& attn() { return m_attn; }
  LayerNorm& ln2() { return m_ln2; }
  Linear& fc1() { return m_fc1; }
  GELU& gelu() { return m_gelu; }
  Linear& fc2() { return m_fc2; }

 private:
  std::int64_t m_dim;
  LayerNorm m_ln1;
  Attention m_attn;
  LayerNorm m_ln2;
  Linear m_fc1;
  GELU m_gelu;
  Linear m_fc2;
  Tensor m_ws_a, m_ws_b, m_ws_y;
  std::size_t workspace_bytes() const override {
    return tensors_bytes({&m_ws_a, &m_ws_b, &m_ws_y});
  }
};

}  // namespace engine
