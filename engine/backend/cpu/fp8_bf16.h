// FP8 (E4M3, E5M2) -> BF16 bit patterns for the bf16 GEMM path: exact, since
// every FP8 value is a BF16 value. Scalar reference and an AVX-512 path
// chosen at run time.
#pragma once

#include <bit>
#include <cstdint>

#include "numeric/format.h"

namespace engine::cpu {

// The BF16 pattern of one FP8 code: equal to the top 16 bits of
// e4m3_to_fp32(v) / e5m2_to_fp32(v) (the conformance suite checks all 256).
//  normal:    rebias the exponent (E4M3: +120, E5M2: +112), fraction into place;
//  subnormal: m * 2^-9 (E4M3) or m * 2^-16 (E5M2), a normal float whose
//             top 16 bits are the BF16 pattern;
//  E5M2 inf -> BF16 inf; NaN -> quiet NaN (E5M2 keeps its payload bits).
inline std::uint16_t e4m3_to_bf16_bits(std::uint8_t v) {
  const std::uint32_t mag = v & 0x7Fu;
  const std::uint32_t sign = static_cast<std::uint32_t>(v & 0x80u) << 8;
  std::uint32_t r;
  if (mag == 0x7Fu) r = 0x7FC0u;
  else if (mag >= 8u) r = (mag << 4) + (120u << 7);
  else r = std::bit_cast<std::uint32_t>(static_cast<float>(mag) * 0x1p-9f) >> 16;
  return static_cast<std::uint16_t>(sign | r);
}

inline std::uint16_t e5m2_to_bf16_bits(std::uint8_t v) {
  const std::uint32_t mag = v & 0x7Fu;
  const std::uint32_t sign = static_cast<std::uint32_t>(v & 0x80u) << 8;
  std::uint32_t r;
  if (mag == 0x7Cu) r = 0x7F80u;
  else if (mag > 0x7Cu) r = 0x7FC0u | ((mag & 3u) << 5);
  else if (mag >= 4u) r = (mag << 5) + (112u << 7);
  else r = std::bit_cast<std::uint32_t>(static_cast<float>(mag) * 0x1p-16f) >> 16;
  return static_cast<std::uint16_t>(sign | r);
}

// dst[i] = BF16 pattern of src[i], f = E4M3 or E5M2. Any thread.
void fp8_to_bf16(Format f, const std::uint8_t* src, std::uint16_t* dst, std::int64_t n);

// fp8_bf16_avx512.cpp: `magnitudes` is the 128-entry table of the BF16
// patterns of codes 0..127; the sign bit is carried over. Requires AVX-512BW.
void fp8_to_bf16_avx512(const std::uint16_t* magnitudes, const std::uint8_t* src,
                        std::uint16_t* dst, std::int64_t n);

}  // namespace engine::cpu
