// GELU in f32 AVX2 lanes, and softmax's exp on libmvec's double lanes (see
// gelu_simd.h).
#include <immintrin.h>

#include "backend/cpu/gelu_simd.h"

extern "C" __m256d _ZGVdN4v_exp(__m256d);

namespace engine::cpu {

// The whole range, in AVX2 lanes (a scalar epilogue in this file's ISA
// gives the same bits as a lane).
std::int64_t gelu_forward_avx2(const float* x, float* y, std::int64_t n) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) y[i] = gelu_value(x[i]);
  return n;
}

std::int64_t gelu_backward_avx2(const float* x, const float* dy, float* dx, std::int64_t n) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) dx[i] = gelu_grad(x[i], dy[i]);
  return n;
}

std::int64_t exp_avx2(const float* x, float* y, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(y + i, _mm256_cvtpd_ps(_ZGVdN4v_exp(_mm256_cvtps_pd(_mm_loadu_ps(x + i)))));
  return i;
}

}  // namespace engine::cpu
