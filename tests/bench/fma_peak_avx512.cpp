// FMA peak probe, AVX-512: a register-only FMA loop. Compiled
// with -mavx512f -mfma (fma_peak.cmake); called only after a run-time
// check that the CPU has AVX-512F and FMA.
#include <immintrin.h>

#include <cstdint>

// Runs `iters` rounds of 16 independent 16-lane FMAs (16 accumulators cover
// an FMA latency of 4 cycles on 2 pipes with room to spare); returns the
// floating-point operations done (2 per lane per FMA). `sink` keeps the
// result alive so the loop is not optimized away.
double fma_peak_avx512(std::int64_t iters, float* sink) {
  __m512 acc[16];
  for (int j = 0; j < 16; ++j) acc[j] = _mm512_set1_ps(1.0f + 0.001f * static_cast<float>(j));
  const __m512 a = _mm512_set1_ps(0.9999999f), b = _mm512_set1_ps(1e-7f);
  for (std::int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
  }
  __m512 s = acc[0];
  for (int j = 1; j < 16; ++j) s = _mm512_add_ps(s, acc[j]);
  // (_mm512_reduce_add_ps trips GCC 12's -Wuninitialized in its header.)
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  for (float v : lanes) *sink += v;
  return static_cast<double>(iters) * 16.0 * 16.0 * 2.0;
}
