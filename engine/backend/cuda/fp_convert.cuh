// FP32 <-> TF32/FP16/BF16/FP8 conversions for the CUDA kernels, in integer
// bit arithmetic so they mirror engine/numeric/convert.h's rules exactly,
// round-to-nearest-even and stochastic (with numeric/random_bits.h's
// counter-based random bits).
//
// __host__ __device__ and free of CUDA headers: the same functions compile
// with g++, so the tests hold them to the scalar reference on machines
// without a GPU, and the kernels differ from what was tested only in the
// compiler that built them. No float arithmetic is used (no FTZ/DAZ, no
// fast-math contraction can change a result), and no hardware cvt
// instruction (their NaN encodings differ from the reference's).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define PL_HD __host__ __device__ __forceinline__
#else
#define PL_HD inline
#endif

namespace pl_cuda {

PL_HD std::uint32_t f32_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

PL_HD float f32_from_bits(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// Rounds a finite, non-negative FP32 magnitude `a` (bits, a < 0x7f800000) to
// the format with E exponent bits, M fraction bits and bias 2^(E-1)-1,
// round-to-nearest-even, subnormals kept. Returns the magnitude code
// (exponent field << M | fraction); a code at or above the format's
// overflow code means the value rounded past the largest finite one (the
// caller decides inf, NaN or saturation). A carry out of the fraction
// moves into the exponent, which is exactly RNE's behaviour at a binade
// edge (largest subnormal -> smallest normal, 1.11..1 x 2^e -> 2^(e+1)).
template <int E, int M>
PL_HD std::uint32_t round_magnitude(std::uint32_t a) {
  constexpr int kBias = (1 << (E - 1)) - 1;
  const int exp32 = static_cast<int>(a >> 23);
  const std::uint32_t frac = a & 0x7fffffu;
  const int e_target = exp32 - 127 + kBias;  // exponent field in the target
  std::uint32_t r, rem, half;
  if (e_target >= 1) {
    // Normal in the target: drop 23 - M fraction bits.
    constexpr int kShift = 23 - M;
    r = (static_cast<std::uint32_t>(e_target) << M) | (frac >> kShift);
    rem = frac & ((1u << kShift) - 1u);
    half = 1u << (kShift - 1);
  } else {
    // Subnormal (or zero) in the target: the full significand, implicit
    // bit included (FP32 subnormals have none and exponent field 1),
    // shifted down to units of the target's smallest subnormal 2^(1-bias-M).
    const std::uint32_t sig = exp32 != 0 ? (frac | 0x800000u) : frac;
    const int e_eff = (exp32 != 0 ? exp32 : 1) - 127 + kBias;
    const int shift = 23 - M + 1 - e_eff;
    // sig < 2^24 <= half once shift >= 25: below half the smallest
    // subnormal, rounds to zero (also keeps the shifts defined).
    if (shift >= 25) return 0;
    r = sig >> shift;
    rem = sig & ((1u << shift) - 1u);
    half = 1u << (shift - 1);
  }
  if (rem > half || (rem == half && (r & 1u))) ++r;
  return r;
}

// ---- FP32 -> format -------------------------------------------------------
// NaN, as the reference: FP16 and BF16 keep the sign and the top payload
// bits and set the quiet bit (what VCVTPS2PH / VCVTNEPS2BF16 do); E5M2
// gives S.11111.10 (ml_dtypes); E4M3 has one NaN per sign, S.1111.111.

PL_HD std::uint16_t fp32_to_fp16(float x) {
  const std::uint32_t u = f32_bits(x);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((a & 0x7fffffu) >> 13));
  if (a == 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u);
  std::uint32_t r = round_magnitude<5, 10>(a);
  if (r >= 0x7c00u) r = 0x7c00u;  // past 65504 (from 65520 up): inf
  return static_cast<std::uint16_t>(sign | r);
}

PL_HD std::uint16_t fp32_to_bf16(float x) {
  const std::uint32_t u = f32_bits(x);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7fc0u | ((a & 0x7fffffu) >> 16));
  if (a == 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7f80u);
  std::uint32_t r = round_magnitude<8, 7>(a);
  if (r >= 0x7f80u) r = 0x7f80u;
  return static_cast<std::uint16_t>(sign | r);
}

PL_HD std::uint8_t fp32_to_e5m2(float x, bool saturate) {
  const std::uint32_t u = f32_bits(x);
  const std::uint32_t sign = (u >> 24) & 0x80u;
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint8_t>(sign | 0x7eu);
  if (a == 0x7f800000u) return static_cast<std::uint8_t>(sign | 0x7cu);  // inf stays inf
  std::uint32_t r = round_magnitude<5, 2>(a);
  if (r >= 0x7cu) r = saturate ? 0x7bu : 0x7cu;  // +-57344 or +-inf
  return static_cast<std::uint8_t>(sign | r);
}

PL_HD std::uint8_t fp32_to_e4m3(float x, bool saturate) {
  const std::uint32_t u = f32_bits(x);
  const std::uint32_t sign = (u >> 24) & 0x80u;
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint8_t>(sign | 0x7fu);
  // No inf in E4M3FN: inf and finite overflow (from 464 up, the tie at 464
  // goes to the even 448) become NaN, or +-448 when saturating.
  if (a == 0x7f800000u) return static_cast<std::uint8_t>(sign | (saturate ? 0x7eu : 0x7fu));
  std::uint32_t r = round_magnitude<4, 3>(a);
  if (r >= 0x7fu) r = saturate ? 0x7eu : 0x7fu;
  return static_cast<std::uint8_t>(sign | r);
}

// TF32 keeps FP32's exponent: only the low 13 fraction bits go (RNE, carry
// into the exponent, overflow lands on inf). NaN: quiet bit set, low 13
// payload bits cleared (convert.h's round_to_tf32).
PL_HD float fp32_round_tf32(float x) {
  const std::uint32_t u = f32_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return f32_from_bits((u | 0x00400000u) & 0xffffe000u);
  return f32_from_bits((u + 0x0fffu + ((u >> 13) & 1u)) & 0xffffe000u);
}

// ---- stochastic rounding --------------------------------------------------
// The random bits of element `index` of a stream `seed`:
// random_at(stream_key(seed), index), as engine::stochastic_bits.

// splitmix64's finaliser.
PL_HD std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
inline constexpr std::uint64_t kGamma = 0x9e3779b97f4a7c15ull;
PL_HD std::uint64_t stream_key(std::uint64_t seed) { return mix64(seed + kGamma); }
PL_HD std::uint32_t random_at(std::uint64_t key, std::uint64_t index) {
  return static_cast<std::uint32_t>(mix64(key + index * kGamma) >> 32);
}

// Drops the low `shift` bits of v, rounding up with probability (dropped
// part) / 2^shift: the low `shift` bits of `random` are added to the
// dropped part. Beyond 32 bits (values far below the smallest subnormal)
// the dropped fraction, truncated to 32 bits, is compared with `random`.
PL_HD std::uint32_t shift_sr(std::uint32_t v, int shift, std::uint32_t random) {
  if (shift <= 31) {
    const std::uint64_t r = random & ((1u << shift) - 1u);
    return static_cast<std::uint32_t>((static_cast<std::uint64_t>(v) + r) >> shift);
  }
  if (shift == 32) return ((static_cast<std::uint64_t>(v) + random) >> 32) ? 1u : 0u;
  if (shift >= 64) return 0u;
  const std::uint64_t frac32 = static_cast<std::uint64_t>(v) >> (shift - 32);
  return random < frac32 ? 1u : 0u;
}

// round_magnitude with stochastic rounding: the same magnitude code, the
// carry out of the fraction moving into the exponent alike.
template <int E, int M>
PL_HD std::uint32_t round_magnitude_sr(std::uint32_t a, std::uint32_t random) {
  constexpr int kBias = (1 << (E - 1)) - 1;
  constexpr int kDrop = 23 - M;
  constexpr std::uint32_t kMinNormalExp32 = 127 - kBias + 1;  // FP32 exponent field of 2^(1-bias)
  const std::uint32_t exp32 = a >> 23;
  if (exp32 >= kMinNormalExp32)
    return shift_sr(a - (static_cast<std::uint32_t>(127 - kBias) << 23), kDrop, random);
  const std::uint32_t m = exp32 != 0 ? ((a & 0x7fffffu) | 0x800000u) : a;
  const int shift = kDrop + static_cast<int>(kMinNormalExp32 - (exp32 != 0 ? exp32 : 1u));
  return shift_sr(m, shift, random);
}

PL_HD std::uint16_t fp32_to_fp16_sr(float x, std::uint32_t random) {
  const std::uint32_t u = f32_bits(x);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((a & 0x7fffffu) >> 13));
  if (a == 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u);
  std::uint32_t r = round_magnitude_sr<5, 10>(a, random);
  if (r >= 0x7c00u) r = 0x7c00u;
  return static_cast<std::uint16_t>(sign | r);
}

PL_HD std::uint16_t fp32_to_bf16_sr(float x, std::uint32_t random) {
  const std::uint32_t u = f32_bits(x);
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  if (a == 0x7f800000u) return static_cast<std::uint16_t>(u >> 16);
  return static_cast<std::uint16_t>(((u >> 16) & 0x8000u) | round_magnitude_sr<8, 7>(a, random));
}

PL_HD std::uint8_t fp32_to_e5m2_sr(float x, std::uint32_t random, bool saturate) {
  const std::uint32_t u = f32_bits(x);
  const std::uint32_t sign = (u >> 24) & 0x80u;
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint8_t>(sign | 0x7eu);
  if (a == 0x7f800000u) return static_cast<std::uint8_t>(sign | 0x7cu);
  std::uint32_t r = round_magnitude_sr<5, 2>(a, random);
  if (r >= 0x7cu) r = saturate ? 0x7bu : 0x7cu;
  return static_cast<std::uint8_t>(sign | r);
}

PL_HD std::uint8_t fp32_to_e4m3_sr(float x, std::uint32_t random, bool saturate) {
  const std::uint32_t u = f32_bits(x);
  const std::uint32_t sign = (u >> 24) & 0x80u;
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint8_t>(sign | 0x7fu);
  if (a == 0x7f800000u) return static_cast<std::uint8_t>(sign | (saturate ? 0x7eu : 0x7fu));
  std::uint32_t r = round_magnitude_sr<4, 3>(a, random);
  if (r >= 0x7fu) r = saturate ? 0x7eu : 0x7fu;
  return static_cast<std::uint8_t>(sign | r);
}

// TF32 stochastic rounding: 13 random bits added to the dropped ones; NaN
// as the RNE path, inf stays inf (numeric/cast.cpp's tf32_sr).
PL_HD float fp32_round_tf32_sr(float x, std::uint32_t random) {
  const std::uint32_t u = f32_bits(x);
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return fp32_round_tf32(x);
  if (a == 0x7f800000u) return x;
  return f32_from_bits((u & 0x80000000u) | ((a + (random & 0x1fffu)) & 0xffffe000u));
}

// ---- format -> FP32 (exact) ---------------------------------------------

// Decodes a finite magnitude code of an E/M format with E < 8 (every value
// is a normal FP32 number, subnormals included).
template <int E, int M>
PL_HD std::uint32_t decode_magnitude(std::uint32_t code) {
  constexpr int kBias = (1 << (E - 1)) - 1;
  std::uint32_t exp = code >> M;
  std::uint32_t man = code & ((1u << M) - 1u);
  if (exp == 0) {
    if (man == 0) return 0;
    // Subnormal: normalise so the leading one becomes the implicit bit.
    int e = 1 - kBias;
    while ((man & (1u << M)) == 0) {
      man <<= 1;
      --e;
    }
    man &= (1u << M) - 1u;
    return (static_cast<std::uint32_t>(e + 127) << 23) | (man << (23 - M));
  }
  return (static_cast<std::uint32_t>(static_cast<int>(exp) - kBias + 127) << 23) | (man << (23 - M));
}

PL_HD float fp16_to_fp32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t a = h & 0x7fffu;
  if (a >= 0x7c00u) {
    // inf, or a NaN made quiet with its payload moved up (VCVTPH2PS).
    const std::uint32_t man = a & 0x3ffu;
    return f32_from_bits(man == 0 ? (sign | 0x7f800000u) : (sign | 0x7fc00000u | (man << 13)));
  }
  return f32_from_bits(sign | decode_magnitude<5, 10>(a));
}

// BF16 is the top half of an FP32: every pattern, subnormals and NaN
// payloads included, decodes by a shift (the reference does not quiet).
PL_HD float bf16_to_fp32(std::uint16_t b) { return f32_from_bits(static_cast<std::uint32_t>(b) << 16); }

PL_HD float e5m2_to_fp32(std::uint8_t v) {
  const std::uint32_t sign = static_cast<std::uint32_t>(v & 0x80u) << 24;
  const std::uint32_t a = v & 0x7fu;
  if (a >= 0x7cu) {
    const std::uint32_t man = a & 0x3u;
    return f32_from_bits(man == 0 ? (sign | 0x7f800000u) : (sign | 0x7fc00000u | (man << 21)));
  }
  return f32_from_bits(sign | decode_magnitude<5, 2>(a));
}

PL_HD float e4m3_to_fp32(std::uint8_t v) {
  const std::uint32_t sign = static_cast<std::uint32_t>(v & 0x80u) << 24;
  const std::uint32_t a = v & 0x7fu;
  if (a == 0x7fu) return f32_from_bits(sign | 0x7fc00000u);
  return f32_from_bits(sign | decode_magnitude<4, 3>(a));
}

}  // namespace pl_cuda
