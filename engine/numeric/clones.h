// PL_CPU_CLONES: a function attribute that compiles one source for AVX-512,
// AVX2 and the x86-64 baseline and picks the clone at load time from the
// CPU (GCC's target_clones). For the engine's plain vectorizable loops: the
// binary never needs -march=native, and every clone computes the same bits
// (integer work, or float ops without contraction).
//
// Sanitizer builds get the baseline only: the ifunc resolver runs during
// relocation, before the sanitizer runtime is up, and its instrumented code
// crashes there.
#pragma once

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define PL_SANITIZED_BUILD 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__) || defined(PL_SANITIZED_BUILD) || !defined(__x86_64__)
#define PL_CPU_CLONES
#else
#define PL_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
