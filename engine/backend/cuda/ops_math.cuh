// Per-element and per-row math of the CUDA backend's own kernels
// (elementwise.cu, rows.cu, pool.cu; the format helpers and the rounded
// operations also serve cast.cu, gemm.cu and step_math.cuh),
// __host__ __device__ so g++ compiles
// the same code and a host check can hold it to the CPU backend's kernels.
// Where the CPU result is bit-exact (reduced-precision LayerNorm and
// softmax, pooling, ReLU, quantize) the operations and their order are the
// CPU's, with every float operation written as an explicit round-to-
// nearest intrinsic on the device: nvcc would otherwise contract a * b + c
// into one FMA, which the CPU reference (no FMA) does not do.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/fp_convert.cuh"
#include "backend/cuda_module.h"

namespace pl_cuda {

// ---- float and double operations, each rounded once, never contracted ----
PL_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
PL_HD float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
PL_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
PL_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
PL_HD float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}
PL_HD double dadd_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
PL_HD double dmul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

PL_HD bool is_nan(float x) { return (f32_bits(x) & 0x7fffffffu) > 0x7f800000u; }
// inf or NaN: the all-ones exponent (an integer test, as the CPU's).
PL_HD bool is_nonfinite(float x) { return (f32_bits(x) & 0x7f800000u) == 0x7f800000u; }

// ---- rounding to a format's values --------------------------------------
// engine::quantize(f, x, saturate) (decode of the RNE encode); saturate
// matters for FP8 only. FP32: x.
PL_HD float quantize_value(PlCudaFormat f, float x, bool saturate) {
  switch (f) {
    case PL_CUDA_FP32: return x;
    case PL_CUDA_TF32: return fp32_round_tf32(x);
    case PL_CUDA_FP16: return fp16_to_fp32(fp32_to_fp16(x));
    case PL_CUDA_BF16: return bf16_to_fp32(fp32_to_bf16(x));
    case PL_CUDA_E4M3: return e4m3_to_fp32(fp32_to_e4m3(x, saturate));
    case PL_CUDA_E5M2: return e5m2_to_fp32(fp32_to_e5m2(x, saturate));
  }
  return x;
}

// Exact decode of element i of a buffer in format f (TF32: its container).
PL_HD float load_value(PlCudaFormat f, const void* p, std::size_t i) {
  switch (f) {
    case PL_CUDA_FP32:
    case PL_CUDA_TF32: return static_cast<const float*>(p)[i];
    case PL_CUDA_FP16: return fp16_to_fp32(static_cast<const std::uint16_t*>(p)[i]);
    case PL_CUDA_BF16: return bf16_to_fp32(static_cast<const std::uint16_t*>(p)[i]);
    case PL_CUDA_E4M3: return e4m3_to_fp32(static_cast<const std::uint8_t*>(p)[i]);
    case PL_CUDA_E5M2: return e5m2_to_fp32(static_cast<const std::uint8_t*>(p)[i]);
  }
  return 0.0f;
}

// f32 exp rounded from double: the correctly rounded expf except within
// ~2^-29 ulp of a tie, so after rounding to FP16/BF16 it agrees with the
// CPU's glibc expf (< 0.502 ulp) where CUDA's expf (2 ulp) would not.
PL_HD float exp_f32_accurate(float x) { return static_cast<float>(exp(static_cast<double>(x))); }

// ---- activations ----------------------------------------------------------
// x < 0 ? 0 : x lets NaN through (as torch.relu).
PL_HD float relu_value(float x) { return x < 0.0f ? 0.0f : x; }
PL_HD float relu_grad(float x, float dy) { return x > 0.0f ? dy : 0.0f; }

// ReLU on FP16/BF16 patterns; `inf_bits` is the format's +inf pattern.
// Negative non-zero non-NaN patterns are 0x8001 .. 0x8000 + inf (one
// unsigned compare after the subtraction), positive ones 0x0001 .. inf.
PL_HD std::uint16_t relu16_value(std::uint16_t v, std::uint32_t inf_bits) {
  return static_cast<std::uint32_t>(v) - 0x8001u < inf_bits ? std::uint16_t{0} : v;
}
PL_HD std::uint16_t relu16_grad(std::uint16_t x, std::uint16_t dy, std::uint32_t inf_bits) {
  return static_cast<std::uint32_t>(x) - 1u < inf_bits ? dy : std::uint16_t{0};
}

// GELU, exact form x * Phi(x), Phi(x) = erfc(-x / sqrt 2) / 2 in double
// (CUDA's erfc and exp; the CPU evaluates the same function in f32 lanes,
// backend/cpu/gelu_simd.h, within 4 ulp of double erfc: both within the
// conformance tolerance, a few ulps apart).
inline constexpr double kInvSqrt2 = 0.70710678118654752440;
inline constexpr double kInvSqrt2Pi = 0.39894228040143267794;
PL_HD float gelu_value(float x) {
  const double v = x;
  return static_cast<float>(v * (0.5 * erfc(v * -kInvSqrt2)));
}
PL_HD float gelu_grad(float x, float dy) {
  const double v = x;
  const double phi = 0.5 * erfc(v * -kInvSqrt2);
  const double pdf = kInvSqrt2Pi * exp(-0.5 * (v * v));
  return static_cast<float>(static_cast<double>(dy) * (phi + v * pdf));
}

// ---- pooling ---------------------------------------------------------------
// The window rule: v replaces best when best is not NaN and v is larger or
// NaN (first maximum in window order; a NaN wins and stays).
PL_HD bool pool_takes(float v, float best) { return best == best && (v > best || v != v); }

// Output (oy, ox) of a k x k, stride-k window over one plane of width w:
// the maximum and its flat index in the plane (row-major window order).
PL_HD void maxpool_window(const float* plane, std::int64_t w, std::int64_t k, std::int64_t oy,
                          std::int64_t ox, float* best_out, std::int64_t* index_out) {
  std::int64_t best_i = oy * k * w + ox * k;
  float best = plane[best_i];
  for (std::int64_t ky = 0; ky < k; ++ky)
    for (std::int64_t kx = 0; kx < k; ++kx) {
      const std::int64_t i = (oy * k + ky) * w + ox * k + kx;
      const float v = plane[i];
      if (pool_takes(v, best)) {
        best = v;
        best_i = i;
      }
    }
  *best_out = best;
  *index_out = best_i;
}

// ---- rows in reduced precision (one thread per row, the CPU's order) -------
// LayerNorm computed in format f: every partial sum and intermediate (sum,
// mean, difference, square, variance sum, variance, var + eps, sqrt,
// reciprocal, normalized value) rounded to f, left to right; the output
// xhat * gamma + beta in f32. gamma/beta may be null (1 and 0).
PL_HD void layernorm_row_lowp(PlCudaFormat f, const float* x, const float* gamma, const float* beta,
                              float* y, std::int64_t cols, float eps, float* mean_out,
                              float* rstd_out) {
  const float n = static_cast<float>(cols);
  float s = 0.0f;
  for (std::int64_t j = 0; j < cols; ++j) s = quantize_value(f, add_rn(s, x[j]), false);
  const float mean = quantize_value(f, div_rn(s, n), false);
  float v = 0.0f;
  for (std::int64_t j = 0; j < cols; ++j) {
    const float d = quantize_value(f, sub_rn(x[j], mean), false);
    v = quantize_value(f, add_rn(v, quantize_value(f, mul_rn(d, d), false)), false);
  }
  const float var = quantize_value(f, div_rn(v, n), false);
  const float root = quantize_value(f, sqrt_rn(quantize_value(f, add_rn(var, eps), false)), false);
  const float rstd = quantize_value(f, div_rn(1.0f, root), false);
  for (std::int64_t j = 0; j < cols; ++j) {
    const float xhat = quantize_value(f, mul_rn(quantize_value(f, sub_rn(x[j], mean), false), rstd), false);
    y[j] = add_rn(mul_rn(xhat, gamma ? gamma[j] : 1.0f), beta ? beta[j] : 0.0f);
  }
  *mean_out = mean;
  *rstd_out = rstd;
}

// Softmax computed in format f: the max (NaN skipped) subtracted, the
// shifted logit, its exponential and every partial sum rounded to f; then
// y = e / sum in f32. y may alias x.
PL_HD void softmax_row_lowp(PlCudaFormat f, const float* x, float* y, std::int64_t cols) {
  float m = f32_from_bits(0xff800000u);  // -inf
  for (std::int64_t j = 0; j < cols; ++j) m = x[j] > m ? x[j] : m;
  float s = 0.0f;
  for (std::int64_t j = 0; j < cols; ++j) {
    const float e = quantize_value(f, exp_f32_accurate(quantize_value(f, sub_rn(x[j], m), false)), false);
    y[j] = e;
    s = quantize_value(f, add_rn(s, e), false);
  }
  for (std::int64_t j = 0; j < cols; ++j) y[j] = div_rn(y[j], s);
}

// ---- cross-entropy argmax ----------------------------------------------------
// The CPU scans m = z[0], then z[j] > m: the first index of the largest
// non-NaN value (-0 == +0), or index 0 with a NaN maximum when z[0] is NaN.
// In parallel: candidates (value, index) of non-NaN values, the larger
// value winning, the lower index on equal values; z[0] NaN overrides.
struct ArgMax {
  float value;
  std::int64_t index;  // -1: no non-NaN value seen
};
PL_HD ArgMax argmax_take(ArgMax a, ArgMax b) {
  if (b.index < 0) return a;
  if (a.index < 0) return b;
  if (b.value > a.value || (b.value == a.value && b.index < a.index)) return b;
  return a;
}

}  // namespace pl_cuda
