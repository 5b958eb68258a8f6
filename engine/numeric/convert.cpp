// Scalar reference conversions FP32 <-> {TF32, BF16, FP16, E5M2, E4M3}:
// integer bit manipulation only, so the result never depends on the FPU's
// rounding mode or its FTZ/DAZ flags.
#include "numeric/convert.h"

#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>

namespace engine {

namespace {

constexpr std::uint32_t kSignMask = 0x80000000u;
constexpr std::uint32_t kAbsMask = 0x7FFFFFFFu;
constexpr std::uint32_t kF32Inf = 0x7F800000u;

inline std::uint32_t bits_of(float x) { return std::bit_cast<std::uint32_t>(x); }
inline float float_of(std::uint32_t u) { return std::bit_cast<float>(u); }

// Drops the low `shift` bits of v, rounding to nearest, ties to even
// (1 <= shift <= 31, v + 2^(shift-1) must fit in 32 bits). Adding
// 2^(shift-1) - 1 plus the lowest kept bit carries exactly when the dropped
// part is above one half, or equal to one half with an odd kept part.
inline std::uint32_t shift_rne(std::uint32_t v, int shift) {
  const std::uint32_t half_minus_one = (1u << (shift - 1)) - 1u;
  return (v + half_minus_one + ((v >> shift) & 1u)) >> shift;
}

// Stochastic version: rounds up with probability (dropped part) / 2^shift.
// For shift <= 32 the low `shift` bits of `random` are added to the dropped
// part, so the probability is exact. A shift beyond 32 only happens for
// values deep below the smallest subnormal (v < 2^24 here): then the
// dropped fraction is truncated to 32 bits and compared with all of random.
inline std::uint32_t shift_sr(std::uint32_t v, int shift, std::uint32_t random) {
  if (shift <= 31) {
    const std::uint64_t r = random & ((1u << shift) - 1u);
    return static_cast<std::uint32_t>((static_cast<std::uint64_t>(v) + r) >> shift);
  }
  if (shift == 32) return (static_cast<std::uint64_t>(v) + random) >> 32 ? 1u : 0u;
  if (shift >= 64) return 0u;
  const std::uint64_t frac32 = static_cast<std::uint64_t>(v) >> (shift - 32);  // < 2^32
  return random < frac32 ? 1u : 0u;
}

// Rounds a finite FP32 magnitude `a` (sign cleared, not inf/NaN) to a format
// with E exponent bits and M mantissa bits (IEEE-like bias 2^(E-1) - 1) and
// returns the encoding of the magnitude: (biased exponent << M) | fraction.
// The result may exceed the format's largest finite code when the value
// overflows: callers apply their overflow rule. A rounding carry out of the
// fraction moves into the exponent by plain integer addition, which is the
// right answer both for normals (1.11..1 -> 10.0) and for the largest
// subnormal becoming the smallest normal.
template <int E, int M, bool Stochastic>
inline std::uint32_t round_magnitude(std::uint32_t a, std::uint32_t random) {
  constexpr int kBias = (1 << (E - 1)) - 1;
  constexpr int kDrop = 23 - M;                         // FP32 fraction bits dropped
  constexpr std::uint32_t kMinNormalExp32 = 127 - kBias + 1;  // FP32 biased exp of 2^(1-bias)
  const std::uint32_t exp32 = a >> 23;
  if (exp32 >= kMinNormalExp32) {
    // Normal in the target: rebias the exponent field in place, then drop bits.
    const std::uint32_t v = a - (static_cast<std::uint32_t>(127 - kBias) << 23);
    if constexpr (Stochastic) return shift_sr(v, kDrop, random);
    else return shift_rne(v, kDrop);
  }
  // Subnormal (or zero) in the target. The significand with its implicit bit
  // (none for an FP32 subnormal, whose effective exponent is that of 2^-126)
  // is shifted so that one unit is the target's smallest subnormal.
  const std::uint32_t m = exp32 != 0 ? ((a & 0x7FFFFFu) | 0x800000u) : a;
  const int shift = kDrop + static_cast<int>(kMinNormalExp32 - (exp32 != 0 ? exp32 : 1u));
  if constexpr (Stochastic) {
    return shift_sr(m, shift, random);
  } else {
    // m < 2^24: from a shift of 25 on the value is below half the smallest
    // subnormal and rounds to zero; clamping keeps shift_rne in range.
    return shift_rne(m, shift < 25 ? shift : 25);
  }
}

// ---- FP16 -----------------------------------------------------------------
// NaN: quiet (bit 9 set), sign and the top 9 payload bits kept -- what the
// F16C/AVX-512 instruction VCVTPS2PH produces, so the vector paths agree
// with this reference on every input. numpy's float16 cast gives the same
// bits for quiet NaNs (it keeps the top payload bits); it differs only by
// leaving a signalling NaN signalling.
template <bool Stochastic>
inline std::uint16_t to_fp16(float x, std::uint32_t random) {
  const std::uint32_t u = bits_of(x);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t a = u & kAbsMask;
  if (a >= kF32Inf) {
    if (a == kF32Inf) return static_cast<std::uint16_t>(sign | 0x7C00u);
    return static_cast<std::uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  }
  std::uint32_t code = round_magnitude<5, 10, Stochastic>(a, random);
  if (code >= 0x7C00u) code = 0x7C00u;  // overflow: x >= 65520 (RNE) -> inf
  return static_cast<std::uint16_t>(sign | code);
}

// ---- BF16 -----------------------------------------------------------------
// BF16 keeps FP32's exponent range, so rounding is a plain 16-bit drop with
// RNE; FP32 subnormals become BF16 subnormals (torch's behaviour) and a
// carry out of the largest finite value lands exactly on inf.
// NaN: quiet (bit 6 set), sign and top payload bits kept, as VCVTNEPS2BF16
// does. Rounding is never applied to a NaN: adding the bias could carry its
// payload into the exponent and turn it into inf (0x7FFFFFFF would).
// torch.bfloat16 canonicalises every NaN to 0x7FC0; the only difference.
template <bool Stochastic>
inline std::uint16_t to_bf16(float x, std::uint32_t random) {
  const std::uint32_t u = bits_of(x);
  if ((u & kAbsMask) > kF32Inf) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  if constexpr (Stochastic) {
    const std::uint32_t sign = u & kSignMask;
    const std::uint32_t a = u & kAbsMask;
    if (a == kF32Inf) return static_cast<std::uint16_t>((u >> 16));
    return static_cast<std::uint16_t>((sign >> 16) | round_magnitude<8, 7, true>(a, random));
  } else {
    return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  }
}

// ---- FP8 E5M2 ---------------------------------------------------------------
// IEEE-like: overflow -> inf (x >= 61440 rounds past 57344); saturate clamps
// finite overflow to 57344 and leaves inf as inf. NaN -> S.11111.10 (quiet),
// as ml_dtypes does.
template <bool Stochastic>
inline std::uint8_t to_e5m2(float x, std::uint32_t random, bool saturate) {
  const std::uint32_t u = bits_of(x);
  const std::uint32_t sign = (u >> 24) & 0x80u;
  const std::uint32_t a = u & kAbsMask;
  if (a >= kF32Inf) return static_cast<std::uint8_t>(sign | (a == kF32Inf ? 0x7Cu : 0x7Eu));
  std::uint32_t code = round_magnitude<5, 2, Stochastic>(a, random);
  if (code >= 0x7Cu) code = saturate ? 0x7Bu : 0x7Cu;
  return static_cast<std::uint8_t>(sign | code);
}

// ---- FP8 E4M3 (OCP E4M3FN) ----------------------------------------------------
// No inf; exponent 1111 holds finite values up to S.1111.110 = 448 and only
// S.1111.111 is NaN. Overflow is decided after RNE, like ml_dtypes and
// torch: 464 (halfway between 448 and the missing 480) ties to the even
// 448; anything above 464 overflows to NaN, or to 448 with `saturate`
// (which also maps +-inf to +-448). NaN -> S.1111.111.
template <bool Stochastic>
inline std::uint8_t to_e4m3(float x, std::uint32_t random, bool saturate) {
  const std::uint32_t u = bits_of(x);
  const std::uint32_t sign = (u >> 24) & 0x80u;
  const std::uint32_t a = u & kAbsMask;
  if (a > kF32Inf) return static_cast<std::uint8_t>(sign | 0x7Fu);
  if (a == kF32Inf) return static_cast<std::uint8_t>(sign | (saturate ? 0x7Eu : 0x7Fu));
  std::uint32_t code = round_magnitude<4, 3, Stochastic>(a, random);
  if (code > 0x7Eu) code = saturate ? 0x7Eu : 0x7Fu;
  return static_cast<std::uint8_t>(sign | code);
}

// ---- OCP MX elements: FP6 E3M2, FP6 E2M3, FP4 E2M1 -----------------------------
// IEEE-like bias, no inf/NaN codes: the top exponent holds finite values, so
// the largest code is all ones and anything rounding past it saturates.
template <int E, int M, bool Stochastic>
inline std::uint8_t to_mx_element(float x, std::uint32_t random) {
  constexpr std::uint32_t kMaxCode = (1u << (E + M)) - 1u;
  constexpr std::uint32_t kSign = 1u << (E + M);
  const std::uint32_t u = bits_of(x);
  const std::uint32_t sign = (u & kSignMask) ? kSign : 0u;
  const std::uint32_t a = u & kAbsMask;
  if (a >= kF32Inf) return static_cast<std::uint8_t>(sign | kMaxCode);  // inf and NaN
  std::uint32_t code = round_magnitude<E, M, Stochastic>(a, random);
  if (code > kMaxCode) code = kMaxCode;
  return static_cast<std::uint8_t>(sign | code);
}

template <int E, int M>
inline float from_mx_element(std::uint8_t v) {
  constexpr int kBias = (1 << (E - 1)) - 1;
  const std::uint32_t sign = (v >> (E + M)) & 1u;
  const std::uint32_t exp = (v >> M) & ((1u << E) - 1u);
  const std::uint32_t man = v & ((1u << M) - 1u);
  std::uint32_t mag;
  if (exp == 0) {
    // man * 2^(1 - bias - M): exact, and a normal FP32 number.
    mag = bits_of(static_cast<float>(man) * float_of(static_cast<std::uint32_t>(127 + 1 - kBias - M) << 23));
  } else {
    mag = ((exp + static_cast<std::uint32_t>(127 - kBias)) << 23) | (man << (23 - M));
  }
  return float_of((sign << 31) | mag);
}

// ---- E8M0 ------------------------------------------------------------------
template <bool Stochastic>
inline std::uint8_t to_e8m0(float x, std::uint32_t random) {
  const std::uint32_t u = bits_of(x);
  const std::uint32_t a = u & kAbsMask;
  if (a > kF32Inf) return 0xFFu;             // NaN
  if (a == 0) return 0x00u;                  // +-0: below the smallest, saturates up to 2^-127
  if (u & kSignMask) return 0xFFu;           // no sign
  if (a == kF32Inf) return 0xFEu;            // no inf: saturates to 2^127
  std::uint32_t exp32 = a >> 23;             // x = 1.f * 2^(exp32 - 127) for normals
  std::uint32_t frac = a & 0x7FFFFFu;        // 23 fraction bits
  if (exp32 == 0) {
    // FP32 subnormal: x = a * 2^-149 lies in (0, 2^-126). Codes 0 (2^-127)
    // and 1 (2^-126) are the candidates; below 2^-127 saturates to code 0.
    // Written as 1.f * 2^-127 when a >= 2^22, with f on 23 bits.
    if (a < (1u << 22)) return 0x00u;
    exp32 = 0;  // code of 2^-127
    frac = (a - (1u << 22)) << 1;
  }
  std::uint32_t code = exp32;
  if constexpr (Stochastic) {
    if ((random & 0x7FFFFFu) < frac) ++code;
  } else {
    // Nearest power of two: round up from 1.5 (frac >= 2^22); the tie
    // 1.5 * 2^e goes to the even code.
    if (frac > (1u << 22) || (frac == (1u << 22) && (code & 1u))) ++code;
  }
  if (code > 0xFEu) code = 0xFEu;
  return static_cast<std::uint8_t>(code);
}

}  // namespace

std::uint8_t fp32_to_e3m2(float x) { return to_mx_element<3, 2, false>(x, 0); }
std::uint8_t fp32_to_e2m3(float x) { return to_mx_element<2, 3, false>(x, 0); }
std::uint8_t fp32_to_e2m1(float x) { return to_mx_element<2, 1, false>(x, 0); }
std::uint8_t fp32_to_e3m2_sr(float x, std::uint32_t random) { return to_mx_element<3, 2, true>(x, random); }
std::uint8_t fp32_to_e2m3_sr(float x, std::uint32_t random) { return to_mx_element<2, 3, true>(x, random); }
std::uint8_t fp32_to_e2m1_sr(float x, std::uint32_t random) { return to_mx_element<2, 1, true>(x, random); }
float e3m2_to_fp32(std::uint8_t v) { return from_mx_element<3, 2>(v); }
float e2m3_to_fp32(std::uint8_t v) { return from_mx_element<2, 3>(v); }
float e2m1_to_fp32(std::uint8_t v) { return from_mx_element<2, 1>(v); }

std::uint8_t fp32_to_e8m0(float x) { return to_e8m0<false>(x, 0); }
std::uint8_t fp32_to_e8m0_sr(float x, std::uint32_t random) { return to_e8m0<true>(x, random); }
float e8m0_to_fp32(std::uint8_t v) {
  if (v == 0xFFu) return float_of(0x7FC00000u);
  if (v == 0) return float_of(0x00400000u);  // 2^-127: an FP32 subnormal
  return float_of(static_cast<std::uint32_t>(v) << 23);
}

std::uint16_t fp32_to_fp16(float x) { return to_fp16<false>(x, 0); }
std::uint16_t fp32_to_bf16(float x) { return to_bf16<false>(x, 0); }
std::uint8_t fp32_to_e5m2(float x, bool saturate) { return to_e5m2<false>(x, 0, saturate); }
std::uint8_t fp32_to_e4m3(float x, bool saturate) { return to_e4m3<false>(x, 0, saturate); }

std::uint16_t fp32_to_fp16_sr(float x, std::uint32_t random) { return to_fp16<true>(x, random); }
std::uint16_t fp32_to_bf16_sr(float x, std::uint32_t random) { return to_bf16<true>(x, random); }
std::uint8_t fp32_to_e5m2_sr(float x, std::uint32_t random, bool saturate) {
  return to_e5m2<true>(x, random, saturate);
}
std::uint8_t fp32_to_e4m3_sr(float x, std::uint32_t random, bool saturate) {
  return to_e4m3<true>(x, random, saturate);
}

// TF32 keeps FP32's exponent, so only the low 13 fraction bits are dropped
// (RNE, carry into the exponent, overflow lands on inf). NaN: quiet bit set,
// low 13 payload bits cleared so the result is a TF32 value.
float round_to_tf32(float x) {
  const std::uint32_t u = bits_of(x);
  if ((u & kAbsMask) > kF32Inf) return float_of((u | 0x00400000u) & 0xFFFFE000u);
  return float_of((u + 0x0FFFu + ((u >> 13) & 1u)) & 0xFFFFE000u);
}

// FP16 decode. NaN decodes to a quiet FP32 NaN with the payload moved up,
// as VCVTPH2PS does (it quiets signalling NaNs).
float fp16_to_fp32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu;
  const std::uint32_t man = h & 0x3FFu;
  if (exp == 0x1Fu) {
    if (man == 0) return float_of(sign | kF32Inf);
    return float_of(sign | 0x7FC00000u | (man << 13));
  }
  if (exp == 0) {
    // Subnormal: man * 2^-24, exact in FP32 (and the product is a normal
    // FP32 number, so FTZ/DAZ cannot interfere).
    const float mag = static_cast<float>(man) * 0x1p-24f;
    return float_of(sign | bits_of(mag));
  }
  return float_of(sign | ((exp + (127 - 15)) << 23) | (man << 13));
}

float bf16_to_fp32(std::uint16_t b) { return float_of(static_cast<std::uint32_t>(b) << 16); }

// E5M2 is the top byte of an FP16 pattern.
float e5m2_to_fp32(std::uint8_t v) { return fp16_to_fp32(static_cast<std::uint16_t>(v << 8)); }

float e4m3_to_fp32(std::uint8_t v) {
  const std::uint32_t sign = static_cast<std::uint32_t>(v & 0x80u) << 24;
  const std::uint32_t mag = v & 0x7Fu;
  if (mag == 0x7Fu) return float_of(sign | 0x7FC00000u);
  const std::uint32_t exp = mag >> 3;
  const std::uint32_t man = mag & 7u;
  if (exp == 0) return float_of(sign | bits_of(static_cast<float>(man) * 0x1p-9f));
  return float_of(sign | ((exp + (127 - 7)) << 23) | (man << 20));
}

std::uint32_t encode(Format f, float x, bool saturate) {
  switch (f) {
    case Format::FP32: return bits_of(x);
    case Format::TF32: return bits_of(round_to_tf32(x));
    case Format::BF16: return fp32_to_bf16(x);
    case Format::FP16: return fp32_to_fp16(x);
    case Format::E5M2: return fp32_to_e5m2(x, saturate);
    case Format::E4M3: return fp32_to_e4m3(x, saturate);
    case Format::E3M2: return fp32_to_e3m2(x);
    case Format::E2M3: return fp32_to_e2m3(x);
    case Format::E2M1: return fp32_to_e2m1(x);
    case Format::E8M0: return fp32_to_e8m0(x);
    default: break;
  }
  throw std::invalid_argument(std::string(format_name(f)) + " is a block format: no single-value encoding");
}

std::uint32_t encode_sr(Format f, float x, std::uint32_t random, bool saturate) {
  switch (f) {
    case Format::FP32: return bits_of(x);
    case Format::TF32: {
      // As the bulk cast's tf32_sr: add random low 13 bits, truncate.
      const std::uint32_t u = bits_of(x);
      if ((u & kAbsMask) >= kF32Inf) return bits_of(round_to_tf32(x));
      const std::uint32_t sign = u & kSignMask;
      return sign | (shift_sr(u & kAbsMask, 13, random) << 13);
    }
    case Format::BF16: return fp32_to_bf16_sr(x, random);
    case Format::FP16: return fp32_to_fp16_sr(x, random);
    case Format::E5M2: return fp32_to_e5m2_sr(x, random, saturate);
    case Format::E4M3: return fp32_to_e4m3_sr(x, random, saturate);
    case Format::E3M2: return fp32_to_e3m2_sr(x, random);
    case Format::E2M3: return fp32_to_e2m3_sr(x, random);
    case Format::E2M1: return fp32_to_e2m1_sr(x, random);
    case Format::E8M0: return fp32_to_e8m0_sr(x, random);
    default: break;
  }
  throw std::invalid_argument(std::string(format_name(f)) + " is a block format: no single-value encoding");
}

float decode(Format f, std::uint32_t bits) {
  switch (f) {
    case Format::FP32:
    case Format::TF32: return float_of(bits);
    case Format::BF16: return bf16_to_fp32(static_cast<std::uint16_t>(bits));
    case Format::FP16: return fp16_to_fp32(static_cast<std::uint16_t>(bits));
    case Format::E5M2: return e5m2_to_fp32(static_cast<std::uint8_t>(bits));
    case Format::E4M3: return e4m3_to_fp32(static_cast<std::uint8_t>(bits));
    case Format::E3M2: return e3m2_to_fp32(static_cast<std::uint8_t>(bits));
    case Format::E2M3: return e2m3_to_fp32(static_cast<std::uint8_t>(bits));
    case Format::E2M1: return e2m1_to_fp32(static_cast<std::uint8_t>(bits));
    case Format::E8M0: return e8m0_to_fp32(static_cast<std::uint8_t>(bits));
    default: break;
  }
  throw std::invalid_argument(std::string(format_name(f)) + " is a block format: no single-value decoding");
}

float quantize(Format f, float x, bool saturate) { return decode(f, encode(f, x, saturate)); }

}  // namespace engine
