// GemmEngine's pieces around the matmul (gemm.cpp): bringing operands to
// the matmul's input type, and finishing C (beta, alpha, bias, the encode of
// gemm_encode) slice by slice.
#pragma once

#include <omp.h>

#include <cstdint>
#include <cstring>

#include <dnnl.hpp>

#include "backend/cpu/fp8_bf16.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/step_kernels.h"
#include "numeric/cast.h"
#include "numeric/convert.h"

namespace engine::cpu::gemm_parts {

using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;

// Formats whose every value is exactly a BF16 value.
inline bool is_bf16_exact(Format f) { return f == Format::BF16 || f == Format::E4M3 || f == Format::E5M2; }

// Applies row_fn(src, dst, count) to a stored rows x cols matrix (leading
// dimension ld, `esize` bytes per element), writing a compact rows x cols
// result; one flat pass when the source is contiguous. Parallel above the
// size threshold.
template <class DstT, class RowFn>
inline void convert_matrix(const void* src_v, std::size_t esize, std::int64_t rows, std::int64_t cols,
                    std::int64_t ld, DstT* dst, bool serial, RowFn&& row_fn) {
  const auto* src = static_cast<const std::uint8_t*>(src_v);
  const auto es = static_cast<std::int64_t>(esize);
  if (ld == cols) {
    if (serial) row_fn(src, dst, rows * cols);
    else for_chunks(rows * cols, [&](std::int64_t b, std::int64_t e) { row_fn(src + b * es, dst + b, e - b); });
    return;
  }
#pragma omp parallel for schedule(static) if (!serial && worth_parallel(rows * cols))
  for (std::int64_t r = 0; r < rows; ++r) row_fn(src + r * ld * es, dst + r * cols, cols);
}

// True when `prepare` must decode an operand of format f (it is not already
// the matmul's input type).
inline bool needs_decode(Format f, bool to_bf16) { return to_bf16 ? f != Format::BF16 : f != Format::FP32; }

// Brings one operand (stored rows x cols, leading dimension ld) to the
// matmul's input type: f32, or bf16 when `to_bf16`. FP32 and (on the bf16
// path) BF16 operands are used in place; the rest are decoded exactly (TF32:
// rounded, RNE) into `ws`.
inline Prepared prepare(const GemmOperand& op, std::int64_t rows, std::int64_t cols, bool to_bf16,
                 Workspace& ws, bool serial = false) {
  const std::int64_t ld = op.ld > 0 ? op.ld : cols;
  const Format f = op.format;
  if (!to_bf16) {
    if (f == Format::FP32) return {op.data, ld};
    float* dst = ws.get<float>(static_cast<std::size_t>(rows * cols));
    convert_matrix(op.data, storage_bytes(f), rows, cols, ld, dst, serial,
                   [f](const std::uint8_t* s, float* d, std::int64_t n) {
                     decode_operand(f, s, d, static_cast<std::size_t>(n));
                   });
    return {dst, cols};
  }
  if (f == Format::BF16) return {op.data, ld};
  std::uint16_t* dst = ws.get<std::uint16_t>(static_cast<std::size_t>(rows * cols));
  convert_matrix(op.data, 1, rows, cols, ld, dst, serial,
                 [f](const std::uint8_t* s, std::uint16_t* d, std::int64_t n) { fp8_to_bf16(f, s, d, n); });
  return {dst, cols};
}

// A batched operand brought to the matmul's input type as one span: every
// element from the first product's first value to the last product's last,
// so its leading dimension and batch strides stay as they are (attention's
// q, k and v are column slices of one qkv tensor: one decode of qkv instead
// of one per batch and head).
inline const void* prepare_span(const GemmOperand& op, std::int64_t batch0, std::int64_t batch1, std::int64_t rows,
                         std::int64_t cols, std::int64_t ld, bool to_bf16, Workspace& ws) {
  const Format f = op.format;
  if ((!to_bf16 && f == Format::FP32) || (to_bf16 && f == Format::BF16)) return op.data;
  const std::int64_t n =
      (batch0 - 1) * op.batch_stride[0] + (batch1 - 1) * op.batch_stride[1] + (rows - 1) * ld + cols;
  const auto* src = static_cast<const std::uint8_t*>(op.data);
  const auto es = static_cast<std::int64_t>(storage_bytes(f));
  if (to_bf16) {
    std::uint16_t* dst = ws.get<std::uint16_t>(static_cast<std::size_t>(n));
    for_chunks(n, [&](std::int64_t b, std::int64_t e) { fp8_to_bf16(f, src + b, dst + b, e - b); });
    return dst;
  }
  float* dst = ws.get<float>(static_cast<std::size_t>(n));
  for_chunks(n, [&](std::int64_t b, std::int64_t e) {
    decode_operand(f, src + b * es, dst + b, static_cast<std::size_t>(e - b));
  });
  return dst;
}

// c[i, j] = c[i, j] * beta for the m x n block (beta != 0, 1: the sum
// post-op of the cached primitive always adds 1 * c).
inline void scale_block(float* c, std::int64_t m, std::int64_t n, std::int64_t ldc, float beta) {
#pragma omp parallel for schedule(static) if (worth_parallel(m * n))
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) c[i * ldc + j] *= beta;
}

inline void add_bias_row(float* r, std::int64_t n, const float* bias) {
  for (std::int64_t j = 0; j < n; ++j) r[j] += bias[j];
}

// c = alpha * c (+ bias[j]) over the m x n block.
inline void scale_and_bias(float* c, std::int64_t m, std::int64_t n, std::int64_t ldc, float alpha,
                    const float* bias) {
#pragma omp parallel for schedule(static) if (worth_parallel(m * n))
  for (std::int64_t i = 0; i < m; ++i) scale_bias_rows(c + i * ldc, 1, n, ldc, alpha, bias);
}

inline void add_bias_rows(float* c, std::int64_t m, std::int64_t n, std::int64_t ldc, const float* bias) {
#pragma omp parallel for schedule(static) if (worth_parallel(m * n))
  for (std::int64_t i = 0; i < m; ++i) add_bias_row(c + i * ldc, n, bias);
}

// The slices' rule for alpha as oneDNN's run-time output scale (see
// run_sliced): without a bias, and on the bf16 path only where C is large
// against the operands and the CPU has no AMX. oneDNN 2.6 takes a bf16
// matmul with a run-time scale from brgemm to gemm:jit, which does not use
// the tiles: on the H100 machine's Xeon (AMX) the mlp's fp8 weight
// gradient 256 x 784 x 128 took 728 us that way against mixed-bf16's 134
// us on brgemm, and fp8 trained at 0.64x fp32 on 2 threads.
inline bool runtime_alpha_pays(const GemmArgs& g, bool bf16, bool alpha_pass, bool amx) {
  return alpha_pass && !g.bias && (!bf16 || (!amx && g.m * g.n >= g.k * (g.m + g.n)));
}

// AMX in the ISA oneDNN runs (its ISA values are bit sets, as in
// detect_native_bf16).
inline bool cpu_has_amx() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto amx = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_amx);
  return (isa & amx) == amx;
}

// C's values [at, at + len) encoded into e.codes from `values` (where they
// were computed: C, or a thread's own buffer when C is scratch).
inline void encode_from(const GemmEncode& e, const float* values, std::int64_t at, std::int64_t len) {
  CastOptions o = e.opt;
  o.index_offset += static_cast<std::uint64_t>(at);
  const std::size_t es = storage_bytes(e.format);
  cast_from_f32(e.format, values, static_cast<std::byte*>(e.codes) + static_cast<std::size_t>(at) * es,
                static_cast<std::size_t>(len), o);
}

// C's values [at, at + len) (rows contiguous, ldc == n: flat indices)
// encoded as e says, stochastic rounding at their index offset (or rounded
// in place: e.codes null): element for element what one cast of all of C
// gives. A slice's rows are one span, a column slice's row part another.
inline void encode_span(const GemmEncode& e, float* c, std::int64_t at, std::int64_t len) {
  if (!e.codes) {
    // In place: quantize()'s rounding (no stochastic option there).
    CastOptions q;
    q.saturate = e.opt.saturate;
    quantize_inplace(e.format, c + at, static_cast<std::size_t>(len), q);
    return;
  }
  encode_from(e, c + at, at, len);
}

// Whether a product's slices may leave C unwritten and encode from their
// own buffers (GemmEncode::c_scratch).
inline bool scratch_c(const GemmEncode* e, const GemmArgs& g) { return e && e->codes && e->c_scratch && g.beta == 0.0f; }

// Rows [m0, m0 + rows) of C (ldc == n) encoded.
inline void encode_rows(const GemmEncode& e, float* c, std::int64_t m0, std::int64_t rows, std::int64_t n) {
  encode_span(e, c, m0 * n, rows * n);
}

// A slice's rows of C (or of its private product) finished as the
// unsliced path finishes all of C: alpha and the bias in one pass where
// the primitive took neither, else the bias where the primitive could not.
inline void finish_slice(bool alpha_pass, bool runtime_alpha, bool manual_bias, float* c,
                  std::int64_t rows, std::int64_t n, std::int64_t ldc, float alpha, const float* bias) {
  if (alpha_pass && !runtime_alpha) scale_bias_rows(c, rows, n, ldc, alpha, bias);
  else if (manual_bias) add_bias_rows(c, rows, n, ldc, bias);
}

// All of C encoded, over the threads in row blocks.
inline void encode_all(const GemmEncode& e, float* c, std::int64_t m, std::int64_t n) {
  const std::int64_t rows_per = std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(n, 1));
  const std::int64_t blocks = (m + rows_per - 1) / rows_per;
#pragma omp parallel for schedule(static) if (worth_parallel(m * n))
  for (std::int64_t b = 0; b < blocks; ++b) encode_rows(e, c, b * rows_per, std::min(rows_per, m - b * rows_per), n);
}

// sum[j] += p[j] (run_ksplit's partial products, in thread order).
inline void add_row(float* sum, const float* p, std::int64_t n) {
#pragma omp simd
  for (std::int64_t j = 0; j < n; ++j) sum[j] += p[j];
}

// c[j] = alpha * sum[j] (+ bias[j]) (+ beta * c[j]).
inline void finish_row(float* c, const float* sum, std::int64_t n, float alpha, const float* bias, float beta) {
  for (std::int64_t j = 0; j < n; ++j) {
    float r = alpha * sum[j];
    if (bias) r += bias[j];
    if (beta != 0.0f) r += beta * c[j];
    c[j] = r;
  }
}

}  // namespace engine::cpu::gemm_parts
