// Scalar reference conversions between FP32 and every format: the ground truth
// the vectorized casts, the CUDA kernels and the tests are held to. All are
// pure functions of their arguments (integer arithmetic, independent of the
// FPU's rounding mode and FTZ/DAZ): callable from any thread.
#pragma once

#include <cstdint>

#include "numeric/format.h"

namespace engine {

// Round-to-nearest-even, subnormals kept, signed zeros kept, NaN stays NaN
// (quiet). IEEE formats overflow to +-inf. E4M3 overflows to NaN unless
// `saturate`, which clamps finite overflow (and +-inf) to +-448; E5M2 with
// `saturate` clamps finite overflow to +-57344 (inf stays inf), as
// Transformer Engine's saturating casts do. Matches numpy float16,
// torch.bfloat16 and ml_dtypes float8_e4m3fn / float8_e5m2 casts bit for bit.
std::uint16_t fp32_to_fp16(float x);
std::uint16_t fp32_to_bf16(float x);
std::uint8_t fp32_to_e5m2(float x, bool saturate = false);
std::uint8_t fp32_to_e4m3(float x, bool saturate = false);
float round_to_tf32(float x);  // RNE to 10 mantissa bits, result in an FP32 container

// Exact decodes.
float fp16_to_fp32(std::uint16_t h);
// fp16_to_fp32 as selects on integers, inline: a loop of it vectorizes (the
// small batched GEMM decodes FP16 operands with it). The same bits for all
// 65536 patterns (test_numeric_convert holds it to fp16_to_fp32).
__attribute__((always_inline)) inline float fp16_to_fp32_inline(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t man = h & 0x3FFu, exp = (h >> 10) & 0x1Fu;
  const std::uint32_t normal = ((static_cast<std::uint32_t>(h) & 0x7FFFu) << 13) + (112u << 23);
  // inf, or a quiet NaN: bit 22 set when man != 0 (man + 0x3FF carries into bit 10).
  const std::uint32_t special = 0x7F800000u | (man << 13) | (((man + 0x3FFu) & 0x400u) << 12);
  const std::uint32_t sub = __builtin_bit_cast(std::uint32_t, static_cast<float>(static_cast<std::int32_t>(man)) * 0x1p-24f);
  const std::uint32_t is_sub = 0u - static_cast<std::uint32_t>(exp == 0), is_special = 0u - static_cast<std::uint32_t>(exp == 0x1Fu);
  const std::uint32_t bits = sign | (sub & is_sub) | (special & is_special) | (normal & ~(is_sub | is_special));
  return __builtin_bit_cast(float, bits);
}
float bf16_to_fp32(std::uint16_t b);
float e5m2_to_fp32(std::uint8_t v);
float e4m3_to_fp32(std::uint8_t v);

// Stochastic rounding: rounds up with probability equal to the discarded
// fraction of an ulp, using the low bits of `random` (uniform 32-bit). Same
// overflow/NaN rules as above. Reproducible: a function of (x, random) only.
std::uint16_t fp32_to_fp16_sr(float x, std::uint32_t random);
std::uint16_t fp32_to_bf16_sr(float x, std::uint32_t random);
std::uint8_t fp32_to_e5m2_sr(float x, std::uint32_t random, bool saturate = false);
std::uint8_t fp32_to_e4m3_sr(float x, std::uint32_t random, bool saturate = false);

// OCP Microscaling element formats FP6 E3M2, FP6 E2M3 and FP4 E2M1: codes
// right-aligned in a byte (sign at bit 5 for FP6, bit 3 for FP4). No inf, no
// NaN: every exponent holds finite values and conversion always saturates
// (the OCP MX v1.0 rule for these formats, and what microxcaling and PTX's
// cvt.satfinite do): a finite value past max after RNE, and +-inf, become
// +-max. NaN, which they cannot hold, encodes as +-max with the NaN's sign
// bit; inside a block (numeric/block.h) a NaN never reaches an element: the
// block's scale becomes NaN instead. Subnormals kept, signed zeros kept.
std::uint8_t fp32_to_e3m2(float x);
std::uint8_t fp32_to_e2m3(float x);
std::uint8_t fp32_to_e2m1(float x);
float e3m2_to_fp32(std::uint8_t v);
float e2m3_to_fp32(std::uint8_t v);
float e2m1_to_fp32(std::uint8_t v);
std::uint8_t fp32_to_e3m2_sr(float x, std::uint32_t random);
std::uint8_t fp32_to_e2m3_sr(float x, std::uint32_t random);
std::uint8_t fp32_to_e2m1_sr(float x, std::uint32_t random);

// E8M0, the MX block scale: an unsigned power of two, code c = 2^(c - 127)
// for c in 0..254, 0xFF = NaN; no zero, no sign, no inf. Encoding rounds the
// exponent to nearest (x from 1.5 * 2^e up goes to 2^(e+1); the tie 1.5 *
// 2^e goes to the even code), saturating: below 2^-127 (and +-0) -> 0x00,
// above 2^127 (and +inf) -> 0xFE; NaN and negative values -> 0xFF.
// Stochastic: rounds up from 2^e with probability (x - 2^e) / 2^e.
std::uint8_t fp32_to_e8m0(float x);
std::uint8_t fp32_to_e8m0_sr(float x, std::uint32_t random);
float e8m0_to_fp32(std::uint8_t v);

// Generic by format: the encoded bit pattern (FP32/TF32: the 32-bit pattern
// of the rounded float) and its decode.
// Tensor and element formats only; a block format throws std::invalid_argument.
std::uint32_t encode(Format f, float x, bool saturate = false);
// Stochastic rounding by format (FP32: x's bits).
std::uint32_t encode_sr(Format f, float x, std::uint32_t random, bool saturate = false);
float decode(Format f, std::uint32_t bits);
// Value of x after rounding to f (encode then decode).
float quantize(Format f, float x, bool saturate = false);

}  // namespace engine
