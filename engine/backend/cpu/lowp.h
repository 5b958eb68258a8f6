// Rounding of FP32 values to FP16/BF16 values, kept in FP32: the inner step
// of the reduced-precision accumulation kernels (GEMM, LayerNorm, softmax).
#pragma once

#include <bit>
#include <cstdint>

#include "numeric/convert.h"
#include "numeric/format.h"

namespace engine::cpu {

// Equal to engine::quantize(Format::FP16, x) bit for bit (RNE, subnormals,
// overflow to inf, NaN kept quiet with the payload FP16 keeps), written
// without branches so loops over it vectorize.
inline float round_fp16_value(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t sign = u & 0x80000000u;
  const std::uint32_t a = u & 0x7FFFFFFFu;
  // FP16 normals (|x| >= 2^-14): keep 10 of FP32's 23 fraction bits, RNE on
  // the integer pattern; a carry moves into the exponent, as it should.
  std::uint32_t r = (a + 0x0FFFu + ((a >> 13) & 1u)) & 0xFFFFE000u;
  // Past 65504 after rounding (x >= 65520): overflow to inf. FP32 inf lands
  // here as well.
  r = r > 0x477FE000u ? 0x7F800000u : r;
  // FP16 subnormals (|x| < 2^-14) have the fixed quantum 2^-24, which is the
  // ulp of FP32 numbers in [0.5, 1): adding 0.5 makes the FPU round to that
  // quantum (RNE, the default mode), and subtracting it again is exact.
  const float sub = (std::bit_cast<float>(a) + 0.5f) - 0.5f;
  r = a < 0x38800000u ? std::bit_cast<std::uint32_t>(sub) : r;
  // NaN: quiet, with the 9 payload bits FP16 keeps (what the reference does).
  r = a > 0x7F800000u ? (0x7FC00000u | (a & 0x007FE000u)) : r;
  return std::bit_cast<float>(sign | r);
}

// Equal to engine::quantize(Format::BF16, x) bit for bit: BF16 shares FP32's
// exponent, so RNE on the integer pattern handles normals, subnormals and
// overflow (a carry out of the largest finite value lands on inf).
inline float round_bf16_value(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  std::uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  r = (u & 0x7FFFFFFFu) > 0x7F800000u ? ((u | 0x00400000u) & 0xFFFF0000u) : r;
  return std::bit_cast<float>(r);
}

// Rounds x to the accumulation format `f` (FP32: unchanged). The FP16/BF16
// cases are the fast paths; any other format goes through the reference.
inline float round_to(Format f, float x) {
  switch (f) {
    case Format::FP32: return x;
    case Format::FP16: return round_fp16_value(x);
    case Format::BF16: return round_bf16_value(x);
    default: return engine::quantize(f, x);
  }
}

}  // namespace engine::cpu
