// GELU on glibc's vector math (libmvec): Phi(x) = erfc(-x / sqrt 2) / 2 and
// the normal density, evaluated in double, 8 (AVX-512) or 4 (AVX2) lanes at
// a time, then rounded to f32. Through erfc, Phi keeps its relative accuracy
// for negative x (1 + erf(x) cancels there). Each kernel handles whole
// vectors only and returns how many elements it did; the caller finishes the
// rest with gelu_scalar_* (the same formulas with libm's double erfc/exp).
// Compiled for their ISA (gelu_avx512.cpp, gelu_avx2.cpp); call only after
// the run-time CPU check in elementwise.cpp.
#pragma once

#include <cstdint>

namespace engine::cpu {

std::int64_t gelu_forward_avx512(const float* x, float* y, std::int64_t n);
std::int64_t gelu_backward_avx512(const float* x, const float* dy, float* dx, std::int64_t n);
std::int64_t gelu_forward_avx2(const float* x, float* y, std::int64_t n);
std::int64_t gelu_backward_avx2(const float* x, const float* dy, float* dx, std::int64_t n);

// Softmax's exponential on the same lanes: y[i] = exp((double)x[i]) rounded
// to f32 (y may alias x), whole vectors only; returns how many were done.
// The scalar form is exp_one below (libm's double exp, rounded).
std::int64_t exp_avx512(const float* x, float* y, std::int64_t n);
std::int64_t exp_avx2(const float* x, float* y, std::int64_t n);

// Which lanes this CPU runs (checked once).
enum class MvecIsa { Avx512, Avx2, Scalar };
inline MvecIsa mvec_isa() {
  static const MvecIsa isa = __builtin_cpu_supports("avx512f")                                    ? MvecIsa::Avx512
                             : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? MvecIsa::Avx2
                                                                                                  : MvecIsa::Scalar;
  return isa;
}

// 1/sqrt(2) and 1/sqrt(2 pi) in double.
inline constexpr double kGeluInvSqrt2 = 0.70710678118654752440;
inline constexpr double kGeluInvSqrt2Pi = 0.39894228040143267794;

}  // namespace engine::cpu
