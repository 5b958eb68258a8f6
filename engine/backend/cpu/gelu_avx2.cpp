// GELU, AVX2 lanes of libmvec's double erfc and exp (see gelu_simd.h).
#include <immintrin.h>

#include "backend/cpu/gelu_simd.h"

extern "C" __m256d _ZGVdN4v_erfc(__m256d);
extern "C" __m256d _ZGVdN4v_exp(__m256d);

namespace engine::cpu {

std::int64_t gelu_forward_avx2(const float* x, float* y, std::int64_t n) {
  const __m256d k = _mm256_set1_pd(-kGeluInvSqrt2), half = _mm256_set1_pd(0.5);
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(x + i));
    const __m256d phi = _mm256_mul_pd(half, _ZGVdN4v_erfc(_mm256_mul_pd(v, k)));
    _mm_storeu_ps(y + i, _mm256_cvtpd_ps(_mm256_mul_pd(v, phi)));
  }
  return i;
}

std::int64_t gelu_backward_avx2(const float* x, const float* dy, float* dx, std::int64_t n) {
  const __m256d k = _mm256_set1_pd(-kGeluInvSqrt2), half = _mm256_set1_pd(0.5),
                mhalf = _mm256_set1_pd(-0.5), c = _mm256_set1_pd(kGeluInvSqrt2Pi);
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(x + i));
    const __m256d g = _mm256_cvtps_pd(_mm_loadu_ps(dy + i));
    const __m256d phi = _mm256_mul_pd(half, _ZGVdN4v_erfc(_mm256_mul_pd(v, k)));
    const __m256d pdf = _mm256_mul_pd(c, _ZGVdN4v_exp(_mm256_mul_pd(mhalf, _mm256_mul_pd(v, v))));
    const __m256d d = _mm256_add_pd(phi, _mm256_mul_pd(v, pdf));
    _mm_storeu_ps(dx + i, _mm256_cvtpd_ps(_mm256_mul_pd(g, d)));
  }
  return i;
}

std::int64_t exp_avx2(const float* x, float* y, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(y + i, _mm256_cvtpd_ps(_ZGVdN4v_exp(_mm256_cvtps_pd(_mm_loadu_ps(x + i)))));
  return i;
}

}  // namespace engine::cpu
