// Block-scaled GEMM operands for Linear and PatchEmbed (see block_gemm.h).
#include "nn/block_gemm.h"

#include <algorithm>
#include <functional>
#include <utility>
#include <string>

#include "backend/backend.h"
#include "nn/layer_io.h"
#include "nn/parameter.h"
#include "numeric/cast.h"

namespace engine {

BlockGemm::BlockGemm(std::string_view name) : m_seed(std::hash<std::string_view>{}(name)) {}

void BlockGemm::quantize(Backend& be, Format f, const float* src, std::int64_t rows, std::int64_t cols,
                         BlockLayout layout, bool stochastic, BlockOperand& op) {
  BlockRounding r;
  r.stochastic = stochastic;
  // A fresh stream per quantization: step after step, and the two copies of
  // one dy, round independently.
  r.seed = m_seed + m_calls++;
  op.values.resize({rows, cols}, Format::FP32);
  op.info.reserve(sizeof(BlockQuantized));
  // The values are exact in BF16 once their power-of-two scale is applied;
  // the backend's GEMM runs them on its bf16 path when they are normal BF16
  // values and applies NVFP4's tensor scale in its f32 alpha.
  be.block_quantize(f, src, op.values.f32(), rows, cols, layout, r, op.info.as<BlockQuantized>());
  op.device_bytes = block_bytes(f, rows, cols, layout);
}

namespace {

// A GEMM operand over a block operand's values.
GemmOperand block_operand(const BlockOperand& op, std::int64_t ld, bool trans) {
  GemmOperand g = gemm_operand(op.values, 0, ld, trans);
  g.block = op.quantized();
  return g;
}

// C [m, n] = op(A) op(B) (+ bias), C's leading dimension n.
void gemm(Backend& be, std::int64_t m, std::int64_t n, std::int64_t k, const GemmOperand& a, const GemmOperand& b,
          float* c, const float* bias, Format accumulate) {
  GemmArgs g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a;
  g.b = b;
  g.c = c;
  g.ldc = n;
  g.bias = bias;
  g.accumulate = accumulate;
  be.gemm(g);
}

}  // namespace

void BlockGemm::forward(Backend& be, Format compute, const float* x, const float* w, const float* bias, float* y,
                        std::int64_t rows, std::int64_t in, std::int64_t out, Format accumulate,
                        BlockOperand& x_saved) {
  const bool nv = block_info(compute).tensor_scale;
  quantize(be, compute, x, rows, in, BlockLayout::Rows, false, m_x);
  quantize(be, compute, w, out, in, nv ? BlockLayout::Tiles : BlockLayout::Rows, false, m_w);
  quantize(be, compute, x, rows, in, BlockLayout::Columns, false, x_saved);
  // y [rows, out] = x [rows, in] W^T
  gemm(be, rows, out, in, block_operand(m_x, in, false), block_operand(m_w, in, true), y, bias, accumulate);
}

void BlockGemm::backward(Backend& be, Format compute, Format grad, bool stochastic, const float* dy,
                         const BlockOperand& x_saved, const float* w, float* dx, float* dw, std::int64_t rows,
                         std::int64_t in, std::int64_t out, Format accumulate) {
  // dy as a GEMM operand: quantized along `layout` into op when the grad
  // format is a block format, else the f32 values as given.
  auto dy_operand = [&](BlockLayout layout, bool trans, BlockOperand& op) -> GemmOperand {
    if (!is_block_format(grad)) return GemmOperand{dy, Format::FP32, trans, out};
    quantize(be, grad, dy, rows, out, layout, stochastic, op);
    return block_operand(op, out, trans);
  };
  if (dx) {
    // dx [rows, in] = dy [rows, out] W [out, in]: reduction over out. NVFP4's
    // 16 x 16 tiles: the forward's weight values serve dgrad as they are.
    const BlockOperand* wt = &m_w;
    if (!block_info(compute).tensor_scale) {
      quantize(be, compute, w, out, in, BlockLayout::Columns, false, m_wt);
      wt = &m_wt;
    }
    gemm(be, rows, in, out, dy_operand(BlockLayout::Rows, false, m_dy), block_operand(*wt, in, false), dx, nullptr,
         accumulate);
  }
  // dW [out, in] = dy^T [out, rows] x [rows, in]: reduction over rows.
  gemm(be, out, in, rows, dy_operand(BlockLayout::Columns, true, m_dyt), block_operand(x_saved, in, false), dw,
       nullptr, accumulate);
}

std::size_t BlockGemm::workspace_bytes() const {
  return tensors_bytes({&m_x.values, &m_w.values, &m_wt.values, &m_dy.values, &m_dyt.values});
}

std::int64_t weight_device_bytes(const Parameter& p) {
  const auto stored = static_cast<std::int64_t>(p.weight.bytes());
  if (!is_block_format(p.quantized)) return stored;
  const std::int64_t rows = p.shape.empty() ? 1 : std::max<std::int64_t>(p.shape.front(), 1);
  return block_weight_bytes(p.quantized, rows, p.numel() / rows) + (p.has_master() ? 0 : stored);
}

std::int64_t block_weight_bytes(Format f, std::int64_t rows, std::int64_t cols) {
  if (block_info(f).tensor_scale) return 2 * block_bytes(f, rows, cols, BlockLayout::Tiles);
  return block_bytes(f, rows, cols, BlockLayout::Rows) + block_bytes(f, rows, cols, BlockLayout::Columns);
}

}  // namespace engine
