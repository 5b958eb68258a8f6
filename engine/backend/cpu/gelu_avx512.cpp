// GELU, AVX-512 lanes of libmvec's double erfc and exp (see gelu_simd.h).
#include <immintrin.h>

#include "backend/cpu/gelu_simd.h"

extern "C" __m512d _ZGVeN8v_erfc(__m512d);
extern "C" __m512d _ZGVeN8v_exp(__m512d);

namespace engine::cpu {

std::int64_t gelu_forward_avx512(const float* x, float* y, std::int64_t n) {
  const __m512d k = _mm512_set1_pd(-kGeluInvSqrt2), half = _mm512_set1_pd(0.5);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m512d v = _mm512_cvtps_pd(_mm256_loadu_ps(x + i));
    const __m512d phi = _mm512_mul_pd(half, _ZGVeN8v_erfc(_mm512_mul_pd(v, k)));
    _mm256_storeu_ps(y + i, _mm512_cvtpd_ps(_mm512_mul_pd(v, phi)));
  }
  return i;
}

std::int64_t gelu_backward_avx512(const float* x, const float* dy, float* dx, std::int64_t n) {
  const __m512d k = _mm512_set1_pd(-kGeluInvSqrt2), half = _mm512_set1_pd(0.5),
                mhalf = _mm512_set1_pd(-0.5), c = _mm512_set1_pd(kGeluInvSqrt2Pi);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m512d v = _mm512_cvtps_pd(_mm256_loadu_ps(x + i));
    const __m512d g = _mm512_cvtps_pd(_mm256_loadu_ps(dy + i));
    const __m512d phi = _mm512_mul_pd(half, _ZGVeN8v_erfc(_mm512_mul_pd(v, k)));
    const __m512d pdf = _mm512_mul_pd(c, _ZGVeN8v_exp(_mm512_mul_pd(mhalf, _mm512_mul_pd(v, v))));
    const __m512d d = _mm512_add_pd(phi, _mm512_mul_pd(v, pdf));
    _mm256_storeu_ps(dx + i, _mm512_cvtpd_ps(_mm512_mul_pd(g, d)));
  }
  return i;
}

std::int64_t exp_avx512(const float* x, float* y, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm512_cvtpd_ps(_ZGVeN8v_exp(_mm512_cvtps_pd(_mm256_loadu_ps(x + i)))));
  return i;
}

}  // namespace engine::cpu
