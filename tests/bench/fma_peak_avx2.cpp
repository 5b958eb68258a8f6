// FMA peak probe, AVX2: a register-only FMA loop for CPUs
// without AVX-512. Compiled with -mavx2 -mfma (fma_peak.cmake); called
// only after a run-time check.
#include <immintrin.h>

#include <cstdint>

// 12 independent 8-lane FMA chains (16 ymm registers: 12 accumulators plus
// the two constants); returns the floating-point operations done.
double fma_peak_avx2(std::int64_t iters, float* sink) {
  __m256 acc[12];
  for (int j = 0; j < 12; ++j) acc[j] = _mm256_set1_ps(1.0f + 0.001f * static_cast<float>(j));
  const __m256 a = _mm256_set1_ps(0.9999999f), b = _mm256_set1_ps(1e-7f);
  for (std::int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < 12; ++j) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
  }
  __m256 s = acc[0];
  for (int j = 1; j < 12; ++j) s = _mm256_add_ps(s, acc[j]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  for (float v : lanes) *sink += v;
  return static_cast<double>(iters) * 12.0 * 8.0 * 2.0;
}
