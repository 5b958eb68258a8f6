// Linear-shaped GEMMs (y = x W^T and its two backward GEMMs) with
// block-scaled operands (numeric/block.h), for every GEMM layer whose
// compute format is MXFP8, MXFP6, MXFP4 or NVFP4.
//
// Each operand is quantized along its GEMM's reduction dimension, from the
// high-precision values, as Transformer Engine's MXFP8 and NVFP4 recipes
// do: forward x and W along `in`; dgrad dy along `out` and W down its
// columns (along `out`); wgrad dy and x down their columns (along the
// batch). NVFP4 weights use 16 x 16 tiles instead, so the forward and dgrad
// GEMMs see the same weight values. The quantized values are exact in BF16
// (see block.h): the GEMM runs on the backend's BF16 path where the CPU has
// native BF16, else on f32 operands, exact either way, with NVFP4's tensor
// scales in the f32 alpha.
#pragma once

#include <cstdint>
#include <string_view>

#include "numeric/precision.h"
#include "numeric/block.h"
#include "tensor/tensor.h"

namespace engine {

class Backend;
struct Parameter;

// One quantized GEMM operand: its values (BF16 or FP32 container) and the
// NVFP4 tensor decode scale (1 for MX).
struct BlockOperand {
  Tensor values;  // FP32 container of the quantized values (no tensor scale)
  Buffer info;    // one BlockQuantized in backend memory (tensor decode, bf16 exactness)
  std::int64_t device_bytes = 0;  // what a device holds: block_bytes()
  const BlockQuantized* quantized() const { return info.as<BlockQuantized>(); }
};

// A layer's block-GEMM state: the workspaces of its quantized operands and
// the stochastic-rounding stream of its gradients. Trainer thread only.
class BlockGemm {
 public:
  // `name` seeds the stochastic rounding stream (the same run rounds the
  // same way every time: runs replay bit for bit).
  explicit BlockGemm(std::string_view name);

  // Forward: y [rows, out] = x [rows, in] W^T (+ bias), x and w f32 values,
  // quantized to `compute`. x_saved receives x quantized down its columns
  // (the wgrad operand), for backward.
  void forward(Backend& be, Format compute, const float* x, const float* w, const float* bias, float* y,
               std::int64_t rows, std::int64_t in, std::int64_t out, Format accumulate, BlockOperand& x_saved);
  // Backward: dy [rows, out] f32 values. `grad` is the layer's grad format:
  // a block format quantizes dy in it (stochastically when `stochastic`),
  // anything else uses dy as given (already rounded by the caller). dx
  // [rows, in] (null: not needed) and dw [out, in] are f32, overwritten.
  void backward(Backend& be, Format compute, Format grad, bool stochastic, const float* dy, const BlockOperand& x_saved,
                const float* w, float* dx, float* dw, std::int64_t rows, std::int64_t in, std::int64_t out,
                Format accumulate);

  // Bytes of the f32 containers (the CPU's emulation of the format).
  std::size_t workspace_bytes() const;

 private:
  // Quantizes src [rows, cols] to f along `layout` into op.
  void quantize(Backend& be, Format f, const float* src, std::int64_t rows, std::int64_t cols, BlockLayout layout,
                bool stochastic, BlockOperand& op);

  std::uint64_t m_seed;
  std::uint64_t m_calls = 0;
  BlockOperand m_x, m_w, m_wt, m_dy, m_dyt;
};

// The device bytes of a weight [rows, cols] a block-compute layer keeps:
// its row-wise and column-wise quantized copies (NVFP4: two layouts of the
// same 16 x 16 tiles), as Transformer Engine stores both.
std::int64_t block_weight_bytes(Format f, std::int64_t rows, std::int64_t cols);

// The bytes of p's weight copy as a device holds the recipe: its storage,
// or for a weight a block-compute layer quantizes (Parameter::quantized)
// the quantized copies, plus the FP32 weight itself when it is the
// optimizer's only copy (no master). The memory chart and the precision
// table both count weights this way.
std::int64_t weight_device_bytes(const Parameter& p);

}  // namespace engine
