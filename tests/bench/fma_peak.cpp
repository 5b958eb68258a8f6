// FMA peak measurement shared by the benchmarks.
#include "fma_peak.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "numeric/cast.h"

// fma_peak_avx512.cpp / fma_peak_avx2.cpp (compiled for their ISA).
double fma_peak_avx512(std::int64_t iters, float* sink);
double fma_peak_avx2(std::int64_t iters, float* sink);

namespace {

using Clock = std::chrono::steady_clock;
// Written through volatile so the peak loops' results stay observable.
volatile float g_sink = 0.0f;

double peak_flops(bool avx512, std::int64_t iters, float* sink) {
  return avx512 ? fma_peak_avx512(iters, sink) : fma_peak_avx2(iters, sink);
}

// Best of 5 runs of about 50 ms each, on `threads` threads at once.
double measure_peak(bool avx512, int threads) {
  std::int64_t iters = 1 << 16;
  for (;;) {  // calibrate on one thread
    float sink = 0.0f;
    const auto t0 = Clock::now();
    peak_flops(avx512, iters, &sink);
    g_sink = g_sink + sink;
    if (std::chrono::duration<double>(Clock::now() - t0).count() > 0.05) break;
    iters *= 2;
  }
  double best = 0.0;
  for (int rep = 0; rep < 5; ++rep) {
    double flops = 0.0;
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : flops)
    {
      float sink = 0.0f;
      flops += peak_flops(avx512, iters, &sink);
#pragma omp critical
      g_sink = g_sink + sink;
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, flops / s / 1e9);
  }
  return best;
}

}  // namespace

FmaPeak measure_fma_peak() {
  FmaPeak p;
  __builtin_cpu_init();
  // The engine's answer, so that PL_MAX_CPU_ISA=avx2 (an AVX2 machine run
  // here) measures the AVX2 peak, half the AVX-512 one at full width.
  const bool avx512 = engine::cpu_runs_avx512() && __builtin_cpu_supports("fma");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (!avx512 && !avx2) return p;
  p.isa = avx512 ? "avx512 fma" : "avx2 fma";
  p.threads = omp_get_num_procs();
  p.one = measure_peak(avx512, 1);
  p.all = measure_peak(avx512, p.threads);
  return p;
}
