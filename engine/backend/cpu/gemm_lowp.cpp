// The reduced-precision accumulation GEMM: every partial sum rounded to FP16
// or BF16 after each addition (the demonstration of why GEMMs accumulate in
// FP32). Built with -ffp-contract=off: a fused multiply-add would round
// a*b + s once instead of twice and change the results the conformance
// suite holds bit-exact against the sequential reference.
#include <omp.h>

#include "backend/cpu/gemm.h"
#include "backend/cpu/lowp.h"
#include "backend/cpu/parallel.h"
#include "numeric/clones.h"

namespace engine::cpu {

namespace {

// One output row: acc[j] = s_k(i, j) of the k-sequential rounded sum. The
// loop over j is the inner one, so each step is one vectorizable pass over a
// contiguous row of B; the order of additions per (i, j) stays p = 0..k-1.
// target_clones: the same source compiled for AVX-512, AVX2 and the
// baseline, picked at load time from the CPU (the rounding is integer
// bit manipulation, so every clone gives the same bits; numeric/clones.h).

PL_CPU_CLONES void lowp_row_fp16(
    float* acc, const float* a, std::int64_t a_step, const float* b, std::int64_t n,
    std::int64_t k) {
  for (std::int64_t j = 0; j < n; ++j) acc[j] = 0.0f;
  for (std::int64_t p = 0; p < k; ++p) {
    const float av = a[p * a_step];
    const float* br = b + p * n;
#pragma omp simd
    for (std::int64_t j = 0; j < n; ++j) acc[j] = round_fp16_value(acc[j] + av * br[j]);
  }
}

PL_CPU_CLONES void lowp_row_bf16(
    float* acc, const float* a, std::int64_t a_step, const float* b, std::int64_t n,
    std::int64_t k) {
  for (std::int64_t j = 0; j < n; ++j) acc[j] = 0.0f;
  for (std::int64_t p = 0; p < k; ++p) {
    const float av = a[p * a_step];
    const float* br = b + p * n;
#pragma omp simd
    for (std::int64_t j = 0; j < n; ++j) acc[j] = round_bf16_value(acc[j] + av * br[j]);
  }
}

// Any other accumulation format (TF32, FP8): the scalar reference rounding.
void lowp_row_generic(Format f, float* acc, const float* a, std::int64_t a_step, const float* b,
                      std::int64_t n, std::int64_t k) {
  for (std::int64_t j = 0; j < n; ++j) acc[j] = 0.0f;
  for (std::int64_t p = 0; p < k; ++p) {
    const float av = a[p * a_step];
    const float* br = b + p * n;
    for (std::int64_t j = 0; j < n; ++j) acc[j] = round_to(f, acc[j] + av * br[j]);
  }
}

}  // namespace

void gemm_lowp_accumulate(Format accumulate, std::int64_t m, std::int64_t n, std::int64_t k,
                          const float* a, bool trans_a, std::int64_t lda, const float* b,
                          float* c, std::int64_t ldc, float alpha, float beta, const float* bias,
                          float* acc) {
  const std::int64_t a_step = trans_a ? lda : 1;
#pragma omp parallel for schedule(static) if (m > 1 && worth_parallel(m * n * k))
  for (std::int64_t i = 0; i < m; ++i) {
    float* row = acc + static_cast<std::int64_t>(omp_get_thread_num()) * n;
    const float* a_row = trans_a ? a + i : a + i * lda;
    switch (accumulate) {
      case Format::FP16: lowp_row_fp16(row, a_row, a_step, b, n, k); break;
      case Format::BF16: lowp_row_bf16(row, a_row, a_step, b, n, k); break;
      default: lowp_row_generic(accumulate, row, a_row, a_step, b, n, k); break;
    }
    float* c_row = c + i * ldc;
    for (std::int64_t j = 0; j < n; ++j) {
      float v = alpha * row[j];
      if (beta != 0.0f) v += beta * c_row[j];
      if (bias) v += bias[j];
      c_row[j] = v;
    }
  }
}

}  // namespace engine::cpu
