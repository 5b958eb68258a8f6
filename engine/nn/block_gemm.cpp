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

bool BlockGemm::native_bf16(Backend& be) {
  if (m_native_bf16 < 0) m_native_bf16 = be.info().native_bf16 ? 1 : 0;
  return m_native_bf16 == 1;
}

void BlockGemm::quantize(Backend& be, Format f, const float* src, std::int64_t rows, std::int64_t cols,
                         BlockLayout layout, bool stochastic, BlockOperand& op) {
  BlockRounding r;
  r.stochastic = stochastic;
  // A fresh stream per quantization: step after step, and the two copies of
  // one dy, round independently.
  r.seed = m_seed + m_calls++;
  const bool bf16 = native_bf16(be);
  const auto n = static_cast<std::size_t>(rows * cols);
  BlockQuantized q;
  if (bf16) {
    m_ws.resize({rows, cols}, Format::FP32);
    q = block_quantize(f, src, m_ws.f32(), rows, cols, layout, r);
  } else {
    op.values.resize({rows, cols}, Format::FP32);
    q = block_quantize(f, src, op.values.f32(), rows, cols, layout, r);
  }
  if (bf16) {
    if (q.bf16_exact) {
      op.values.resize({rows, cols}, Format::BF16);
      cast_from_f32(Format::BF16, m_ws.f32(), op.values.data(), n);
    } else {
      // A block scale below BF16's range: keep the exact f32 values.
      op.values.resize({rows, cols}, Format::FP32);
      std::copy(m_ws.f32(), m_ws.f32() + n, op.values.f32());
    }
  }
  op.decode = q.tensor_decode;
  op.device_bytes = block_bytes(f, rows, cols, layout);
}

namespace {

// C [m, n] = alpha * op(A) op(B) (+ bias), C's leading dimension n.
void gemm(Backend& be, std::int64_t m, std::int64_t n, std::int64_t k, const GemmOperand& a, const GemmOperand& b,
          float* c, float alpha, const float* bias, Format accumulate) {
  GemmArgs g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a;
  g.b = b;
  g.c = c;
  g.ldc = n;
  g.alpha = alpha;
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
  gemm(be, rows, out, in, gemm_operand(m_x.values, 0, in, false), gemm_operand(m_w.values, 0, in, true), y,
       m_x.decode * m_w.decode, bias, accumulate);
}

void BlockGemm::backward(Backend& be, Format compute, Format grad, bool stochastic, const float* dy,
                         const BlockOperand& x_saved, const float* w, float* dx, float* dw, std::int64_t rows,
                         std::int64_t in, std::int64_t out, Format accumulate) {
  // dy as a GEMM operand: quantized along `layout` into op when the grad
  // format is a block format, else the f32 values as given.
  auto dy_operand = [&](BlockLayout layout, bool trans, BlockOperand& op) -> std::pair<GemmOperand, float> {
    if (!is_block_format(grad)) return {GemmOperand{dy, Format::FP32, trans, out}, 1.0f};
    quantize(be, grad, dy, rows, out, layout, stochastic, op);
    return {gemm_operand(op.values, 0, out, trans), op.decode};
  };
  if (dx) {
    // dx [rows, in] = dy [rows, out] W [out, in]: reduction over out. NVFP4's
    // 16 x 16 tiles: the forward's weight values serve dgrad as they are.
    const BlockOperand* wt = &m_w;
    if (!block_info(compute).tensor_scale) {
      quantize(be, compute, w, out, in, BlockLayout::Columns, false, m_wt);
      wt = &m_wt;
    }
    const auto [a, decode] = dy_operand(BlockLayout::Rows, false, m_dy);
    gemm(be, rows, in, out, a, gemm_operand(wt->values, 0, in, false), dx, decode * wt->decode, nullptr, accumulate);
  }
  // dW [out, in] = dy^T [out, rows] x [rows, in]: reduction over rows.
  const auto [a, decode] = dy_operand(BlockLayout::Columns, true, m_dyt);
  gemm(be, out, in, rows, a, gemm_operand(x_saved.values, 0, in, false), dw, decode * x_saved.decode, nullptr,
       accumulate);
}

std::size_t BlockGemm::workspace_bytes() const {
  return tensors_bytes({&m_x.values, &m_w.values, &m_wt.values, &m_dy.values, &m_dyt.values, &m_ws});
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
