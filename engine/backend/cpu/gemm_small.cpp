// Batched GEMMs of small products (attention's per-head T x T and T x d
// products: 512 products of 16 x 16 x 16 per call at batch 128). oneDNN's
// batched matmul spends its time on per-product overhead there (about
// 20 GFLOP/s); this kernel packs op(B) of one product into a contiguous
// k x n block on the stack and runs one vectorizable pass over a row of B
// per element of A, the products split over the threads.
//
// Every product is FP32 after the operands' exact decode (see gemm.cpp),
// and each output is the k-sequential sum s_{p+1} = fma(a(i,p), b(p,j), s_p)
// from s_0 = 0: std::fma rounds once, on every CPU and in every clone, so
// the bits do not depend on the machine or the thread count. Then
//   c = alpha * s_k (+ beta * c_old) (+ bias[j]),
// the order oneDNN's output scale, sum post-op and bias take.
#include <cmath>

#include "backend/cpu/gemm.h"
#include "backend/cpu/parallel.h"
#include "numeric/clones.h"

namespace engine::cpu {

namespace {

// R rows of C at once from op(B) packed as k rows of NW floats (columns
// beyond n are zero): acc[R][NW] has compile-time bounds, so it lives in
// vector registers across the k loop, and R independent sums hide the FMA
// latency.
template <int NW, int R>
__attribute__((always_inline)) inline void rows_block(std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row, std::int64_t a_col,
                       const float* bp, float* c, std::int64_t ldc, float alpha, float beta, const float* bias) {
  float acc[R][NW] = {};
  for (std::int64_t p = 0; p < k; ++p) {
    const float* br = bp + p * NW;
    for (int r = 0; r < R; ++r) {
      const float av = a[r * a_row + p * a_col];
#pragma omp simd
      for (int j = 0; j < NW; ++j) acc[r][j] = std::fma(av, br[j], acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r) {
    float* ci = c + r * ldc;
    if (beta == 0.0f) {
      for (std::int64_t j = 0; j < n; ++j) ci[j] = alpha * acc[r][j];
    } else if (beta == 1.0f) {
      for (std::int64_t j = 0; j < n; ++j) ci[j] = alpha * acc[r][j] + ci[j];
    } else {
      for (std::int64_t j = 0; j < n; ++j) ci[j] = alpha * acc[r][j] + beta * ci[j];
    }
    if (bias)
      for (std::int64_t j = 0; j < n; ++j) ci[j] += bias[j];
  }
}

template <int NW, int R>
__attribute__((always_inline)) inline void product(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, bool ta, std::int64_t lda,
                    const float* b, bool tb, std::int64_t ldb, float* c, std::int64_t ldc, float alpha, float beta,
                    const float* bias) {
  alignas(64) float bp[kSmallGemmMaxK * NW];
  for (std::int64_t p = 0; p < k; ++p) {
    float* row = bp + p * NW;
    if (tb)
      for (std::int64_t j = 0; j < n; ++j) row[j] = b[j * ldb + p];
    else
      for (std::int64_t j = 0; j < n; ++j) row[j] = b[p * ldb + j];
    for (std::int64_t j = n; j < NW; ++j) row[j] = 0.0f;
  }
  const std::int64_t a_row = ta ? 1 : lda, a_col = ta ? lda : 1;
  std::int64_t i = 0;
  for (; i + R <= m; i += R)
    rows_block<NW, R>(n, k, a + i * a_row, a_row, a_col, bp, c + i * ldc, ldc, alpha, beta, bias);
  for (; i < m; ++i) rows_block<NW, 1>(n, k, a + i * a_row, a_row, a_col, bp, c + i * ldc, ldc, alpha, beta, bias);
}

// One product: C (m x n, ldc) from op(A) (m x k) and op(B) (k x n).
PL_CPU_CLONES void small_product(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, bool ta,
                                 std::int64_t lda, const float* b, bool tb, std::int64_t ldb, float* c,
                                 std::int64_t ldc, float alpha, float beta, const float* bias) {
  if (n <= 16) product<16, 8>(m, n, k, a, ta, lda, b, tb, ldb, c, ldc, alpha, beta, bias);
  else if (n <= 32) product<32, 4>(m, n, k, a, ta, lda, b, tb, ldb, c, ldc, alpha, beta, bias);
  else product<64, 2>(m, n, k, a, ta, lda, b, tb, ldb, c, ldc, alpha, beta, bias);
}

}  // namespace

bool small_gemm_fits(std::int64_t m, std::int64_t n, std::int64_t k) {
  return m > 0 && n > 0 && k > 0 && n <= kSmallGemmMaxN && k <= kSmallGemmMaxK && m <= kSmallGemmMaxM;
}

void gemm_small_batched(const SmallBatch& s) {
  const std::int64_t count = s.batch0 * s.batch1;
  const std::int64_t work = count * s.m * s.n * s.k;
#pragma omp parallel for schedule(static) if (work >= 8 * kParallelMin)
  for (std::int64_t t = 0; t < count; ++t) {
    const std::int64_t i = t / s.batch1, j = t % s.batch1;
    small_product(s.m, s.n, s.k, s.a + i * s.sa[0] + j * s.sa[1], s.trans_a, s.lda,
                  s.b + i * s.sb[0] + j * s.sb[1], s.trans_b, s.ldb, s.c + i * s.sc[0] + j * s.sc[1], s.ldc,
                  s.alpha, s.beta, s.bias);
  }
}

}  // namespace engine::cpu
