// The machine's FMA peak, measured in the benchmark's own run (the reference
// every GFLOP/s figure is compared with).
#pragma once

struct FmaPeak {
  const char* isa = "none";  // "avx512 fma", "avx2 fma", or "none"
  double one = 0.0;          // GFLOP/s, 1 thread
  double all = 0.0;          // GFLOP/s, all threads
  int threads = 1;
};

// Register-only FMA loops (fma_peak_avx512.cpp / fma_peak_avx2.cpp, each
// compiled for its ISA), best of 5 runs of ~50 ms on 1 thread and on all
// threads. The ISA is chosen at run time (AVX2 where PL_MAX_CPU_ISA=avx2
// holds the engine to it).
FmaPeak measure_fma_peak();
