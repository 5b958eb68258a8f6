// The CPU backend's block-quantized convolution and its per-channel ops
// (bias add, scale and bias, channel sums).
#include "backend/cpu/conv.h"
#include "backend/cpu/cast_pieces.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/parallel.h"

namespace engine {

using cpu::channel_blocks;

void CpuBackend::conv2d_block(const ConvBlockArgs& g) {
  const bool a_exact = g.a_block ? g.a_block->bf16_exact : g.a_exact;
  const bool b_exact = g.b_block ? g.b_block->bf16_exact : g.b_exact;
  const Format fmt = a_exact && b_exact ? Format::BF16 : Format::FP32;
  const float alpha = (g.a_block ? g.a_block->tensor_decode : 1.0f) * (g.b_block ? g.b_block->tensor_decode : 1.0f);
  const ConvShape& cs = g.shape;
  switch (g.kind) {
    case ConvBlockArgs::Kind::Forward:
      conv2d_forward(cs, fmt, g.a, g.b, alpha == 1.0f ? g.bias : nullptr, g.out);
      if (alpha != 1.0f) {
        scale(g.out, alpha, cs.n * cs.c_out * cs.out_h() * cs.out_w());
        if (g.bias) bias_add_channels(g.out, g.bias, cs.n, cs.c_out, cs.out_h() * cs.out_w());
      }
      break;
    case ConvBlockArgs::Kind::BackwardData:
      conv2d_backward_data(cs, fmt, g.a, g.b, g.out);
      if (alpha != 1.0f) scale(g.out, alpha, cs.n * cs.c_in * cs.h * cs.w);
      break;
    case ConvBlockArgs::Kind::BackwardWeights:
      conv2d_backward_weights(cs, fmt, g.a, g.b, g.out, nullptr);
      if (alpha != 1.0f) scale(g.out, alpha, cs.c_out * cs.c_in * cs.kh * cs.kw);
      break;
  }
}

void CpuBackend::bias_add_channels(float* y, const float* bias, std::int64_t n, std::int64_t c, std::int64_t hw) {
  use_threads();
  // One plane per iteration: the same additions for any thread count.
#pragma omp parallel for schedule(static) if (n * c * hw >= 65536)
  for (std::int64_t plane = 0; plane < n * c; ++plane) {
    float* p = y + plane * hw;
    const float b = bias[plane % c];
    for (std::int64_t k = 0; k < hw; ++k) p[k] += b;
  }
}

void CpuBackend::scale_bias_add_channels(float* y, float alpha, const float* bias, std::int64_t n, std::int64_t c,
                                         std::int64_t hw) {
  use_threads();
  // bias_add_channels' planes, each scaled as it is read: two roundings,
  // as the two passes (no FMA contraction: ISO C++ mode for baseline
  // x86-64).
#pragma omp parallel for schedule(static) if (n * c * hw >= 65536)
  for (std::int64_t plane = 0; plane < n * c; ++plane) {
    float* p = y + plane * hw;
    const float b = bias ? bias[plane % c] : 0.0f;
    if (bias)
      for (std::int64_t k = 0; k < hw; ++k) p[k] = p[k] * alpha + b;
    else
      for (std::int64_t k = 0; k < hw; ++k) p[k] = p[k] * alpha;
  }
}

void CpuBackend::channel_sums(const float* dy, float* db, std::int64_t n, std::int64_t c, std::int64_t hw) {
  use_threads();
  // Each channel summed in channel_blocks' fixed order: the result does
  // not depend on the thread count. (One double add after another ran at
  // the add's latency: the cnn's two bias gradients took 1.9 ms of its FP8
  // step.)
  channel_blocks(dy, n, c, hw, db, m_reduce_ws, [](std::int64_t, std::int64_t) { return std::uint32_t{0}; });
}

}  // namespace engine
