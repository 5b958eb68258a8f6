// GELU, exact erf form, in f32 lanes (gelu_parts below), and softmax's
// exponential on glibc's vector math (libmvec, double lanes). The GELU loops
// are compiled per ISA (gelu_avx512.cpp, gelu_avx2.cpp; they do the whole
// range, their scalar epilogue with the same fma instructions as the lanes)
// from the same inline code elementwise.cpp runs element by element on a
// CPU without them (where std::fma is libm's; one element in a million
// came out an ulp apart in a check). The exp kernels do whole vectors only
// and return how many elements they did. Call the kernels only after the
// run-time CPU check (mvec_isa).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "numeric/cast.h"

namespace engine::cpu {

std::int64_t gelu_forward_avx512(const float* x, float* y, std::int64_t n);
std::int64_t gelu_backward_avx512(const float* x, const float* dy, float* dx, std::int64_t n);
std::int64_t gelu_forward_avx2(const float* x, float* y, std::int64_t n);
std::int64_t gelu_backward_avx2(const float* x, const float* dy, float* dx, std::int64_t n);

// GELU forward cast to FP8 (E4M3 or E5M2) as scale_amax_encode casts it:
// q[i] = encode(GELU(x[i]) * scale) (RNE; saturating or not), and the
// return value the bits of max |GELU(x[i])|, for n <= kGeluCastBlock
// values (more: returns ~0u and does nothing). GELU is gelu_forward_avx512's wherever the
// cast could tell (a rounding boundary, an FP8 subnormal, a special, every
// element that may be the maximum), elsewhere an approximation within
// 2^-14.9 of it, so the codes and the amax have the exact GELU's bits.
// For CpuBackend::gelu_forward_encode: AVX-512 (gelu_cast_avx512.cpp) and
// AVX2 (gelu_cast_avx2.cpp) lanes, the same codes and amax.
inline constexpr std::int64_t kGeluCastBlock = 4096;
std::uint32_t gelu_cast_avx512(const float* x, std::uint8_t* q, std::int64_t n, float scale, bool e4m3,
                               bool saturate);
std::uint32_t gelu_cast_avx2(const float* x, std::uint8_t* q, std::int64_t n, float scale, bool e4m3,
                             bool saturate);
// Those kernels' approximation alone, y[i] ~ GELU(x[i]) (for its test).
void gelu_approx_avx512(const float* x, float* y, std::int64_t n);
void gelu_approx_avx2(const float* x, float* y, std::int64_t n);

// Softmax's exponential on the same lanes: y[i] = exp((double)x[i]) rounded
// to f32 (y may alias x), whole vectors only; returns how many were done.
// The scalar form is exp_one below (libm's double exp, rounded).
std::int64_t exp_avx512(const float* x, float* y, std::int64_t n);
std::int64_t exp_avx2(const float* x, float* y, std::int64_t n);

// Which lanes this CPU runs (checked once).
enum class MvecIsa { Avx512, Avx2, Scalar };
inline MvecIsa mvec_isa() {
  static const MvecIsa isa = engine::cpu_runs_avx512()                                          ? MvecIsa::Avx512
                             : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? MvecIsa::Avx2
                                                                                                  : MvecIsa::Scalar;
  return isa;
}

// Phi(x) = erfc(-x / sqrt 2) / 2 and the normal density phi(x) in f32,
// branch-free (the loops vectorize), after N. Juffa's erfcf: with
// a = |x| / sqrt 2,
//   erfc(a) = exp(-a^2) (1 + p(q)) / (1 + 2a),  q = (a - 2) / (a + 2),
// q in [-1, 0.67] for a in [0, 10.05], p of degree 10 (a Chebyshev
// interpolant of (1 + 2a) exp(a^2) erfc(a) - 1, coefficients rounded to
// f32). exp(-a^2) is exp(-x^2 / 2) with x^2 split exactly into hi + lo, so
// its argument carries no rounding; the exponential is Cephes' expf, scaled
// by two powers of two so that it underflows gradually. Against double
// erfc: within 4 ulp relative for a < 9 (erfc below 1e-36). For x < 0,
// Phi = erfc(a) / 2 keeps its relative accuracy (no 1 + erf cancellation);
// for x >= 0, Phi = 1 - erfc(a) / 2. Beyond a = 10.0546875 erfc underflows
// f32 and Phi is exactly 0 or 1. NaN in, NaN out.
struct GeluParts {
  float phi;  // Phi(x)
  float pdf;  // phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
};

[[gnu::always_inline]] inline float gelu_pow2(int k) { return std::bit_cast<float>(static_cast<std::uint32_t>(k + 127) << 23); }

[[gnu::always_inline]] inline GeluParts gelu_parts(float x) {
  const float a = std::fabs(x) * 0.70710678118654752f;
  // q = (a - 2) / (a + 2), refined by one residual step.
  const float r0 = 1.0f / (a + 2.0f);
  float q = (a - 2.0f) * r0;
  q = std::fma(r0, std::fma(q, -a, std::fma(q + 1.0f, -2.0f, a)), q);
  float p = 0x1.615188p-16f;
  p = std::fma(p, q, -0x1.888588p-12f);
  p = std::fma(p, q, -0x1.481834p-10f);
  p = std::fma(p, q, 0x1.5074cep-10f);
  p = std::fma(p, q, 0x1.1b1d26p-7f);
  p = std::fma(p, q, -0x1.07b978p-7f);
  p = std::fma(p, q, -0x1.bc0deep-5f);
  p = std::fma(p, q, 0x1.4ffb60p-3f);
  p = std::fma(p, q, -0x1.540836p-3f);
  p = std::fma(p, q, -0x1.7bf604p-4f);
  p = std::fma(p, q, 0x1.1ba03ap-2f);
  // (1 + p) / (1 + 2a), refined by one residual step: exp(a^2) erfc(a).
  const float d = std::fma(2.0f, a, 1.0f);
  const float rd = 1.0f / d;
  const float e0 = std::fma(p, rd, rd);
  const float ec = std::fma(std::fma(std::fma(e0, -a, 0.5f), 2.0f, p - e0), rd, e0);
  // exp(-(hi + lo) / 2), hi + lo = x^2 exactly.
  const float hi = x * x;
  const float lo = std::fma(x, x, -hi);
  float s = 0.5f * hi;
  s = s < 104.0f ? s : 104.0f;
  const float n = (s * -1.44269504088896341f + 0x1.8p23f) - 0x1.8p23f;  // round to nearest, |n| <= 151
  float r = std::fma(n, -0.693359375f, -s);
  r = std::fma(n, 2.12194440e-4f, r);
  float m = 1.9875691500e-4f;
  m = std::fma(m, r, 1.3981999507e-3f);
  m = std::fma(m, r, 8.3334519073e-3f);
  m = std::fma(m, r, 4.1665795894e-2f);
  m = std::fma(m, r, 1.6666665459e-1f);
  m = std::fma(m, r, 5.0000001201e-1f);
  const float em = std::fma(m * r, r, r) + 1.0f;  // exp(r), |r| <= ln2 / 2
  const int k = static_cast<int>(n);
  const int k1 = k >> 1;
  const float scaled = em * gelu_pow2(k1);            // normal: k1 >= -76
  const float ex = std::fma(scaled, -0.5f * lo, scaled);  // times exp(-lo / 2)
  const float last = gelu_pow2(k - k1);
  const bool tiny = a > 10.0546875f;
  const float erfc_a = tiny ? 0.0f : (ec * ex) * last;
  const float e = tiny ? 0.0f : ex * last;
  return {x < 0.0f ? 0.5f * erfc_a : 1.0f - 0.5f * erfc_a, 0.3989422804014327f * e};
}

// y = x Phi(x) and dx = dy (Phi(x) + x phi(x)), one element.
[[gnu::always_inline]] inline float gelu_value(float x) { return x * gelu_parts(x).phi; }
[[gnu::always_inline]] inline float gelu_grad(float x, float dy) {
  const GeluParts g = gelu_parts(x);
  return dy * std::fma(x, g.pdf, g.phi);
}

}  // namespace engine::cpu
