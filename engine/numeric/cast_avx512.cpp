// AVX-512 path (compiled with -mavx512f/bw/vl/dq/bf16): every format in both
// directions with 512-bit integer bit manipulation (FP16 through the
// hardware VCVTPS2PH/VCVTPH2PS), optionally VCVTNE2PS2BF16 for FP32 -> BF16.
// Only called after the run-time CPU check in cast.cpp. Tails use masked
// loads and stores, so every element goes through the same vector code.
// GCC 12 warns "__Y is (may be) used uninitialized" inside its own
// _mm512_undefined_epi32() when intrinsics inline here (GCC bug 105593,
// fixed in GCC 13); the register is a don't-care operand by design.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cstdint>

#include "numeric/cast_kernels.h"
#include "numeric/convert.h"

namespace engine::cast_kernels {

namespace {

constexpr int kRne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

inline __m512i c32(std::uint32_t v) { return _mm512_set1_epi32(static_cast<int>(v)); }
inline __mmask16 tail_mask(std::size_t left) {
  return static_cast<__mmask16>((1u << left) - 1u);
}

// ---- FP32 -> FP8 ---------------------------------------------------------------
// Returns the magnitude code of a format with E exponent and M mantissa bits
// (possibly past the largest finite code: overflow) in 32-bit lanes.
// Target normals: the scalar round_magnitude of convert.cpp, rebias and
// drop bits with RNE by integer addition. Target subnormals: |x| + C with
// C = 2^(emin - M + 23), whose ulp is the smallest subnormal, rounds |x| to
// a whole number of subnormal units in one FP32 addition, and the low bits
// of the sum are that number (a carry into the smallest normal code comes
// out right too). The addition uses embedded rounding {rn-sae}: RNE whatever
// MXCSR.RC says, no exceptions. MXCSR.DAZ could only zero an FP32
// subnormal input, which rounds to zero in every FP8 format anyway; the sum
// is never subnormal, so FTZ cannot touch it. Two instructions instead of
// the dozen of a per-lane variable shift.
template <int E, int M>
inline __m512i fp8_magnitude(__m512i abs) {
  constexpr int kBias = (1 << (E - 1)) - 1;
  constexpr int kDrop = 23 - M;
  constexpr std::uint32_t kMinNormalExp32 = 127 - kBias + 1;
  constexpr int kEmin = 1 - kBias;
  static_assert(127 + kEmin - M + 23 > 0);
  // (abs - rebias + 2^(kDrop-1) - 1 + lsb) >> kDrop, the rebias folded into
  // the constant (it is a multiple of 2^23, so lsb can be read from abs).
  const __m512i lsb_n = _mm512_and_si512(_mm512_srli_epi32(abs, kDrop), c32(1));
  const std::uint32_t bias_const = ((1u << (kDrop - 1)) - 1u) - ((127u - kBias) << 23);
  const __m512i code_n = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(abs, c32(bias_const)), lsb_n), kDrop);

  const __m512i magic = c32(static_cast<std::uint32_t>(127 + kEmin - M + 23) << 23);
  const __m512 sum = _mm512_add_round_ps(_mm512_castsi512_ps(abs), _mm512_castsi512_ps(magic),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512i code_s = _mm512_sub_epi32(_mm512_castps_si512(sum), magic);

  const __mmask16 normal = _mm512_cmpge_epu32_mask(abs, c32(kMinNormalExp32 << 23));
  return _mm512_mask_blend_epi32(normal, code_s, code_n);
}

// Puts the sign of u (bit 31) on bit 7 of code: one shift and a ternary-logic
// "code | (shifted & 0x80)".
inline __m512i with_sign8(__m512i code, __m512i u) {
  return _mm512_ternarylogic_epi32(code, _mm512_srli_epi32(u, 24), c32(0x80u), 0xF8);  // A | (B & C)
}

// E5M2 code with sign (low 8 bits of each lane). Same rules as fp32_to_e5m2:
// the clamp to 0x7C sends overflow and inf (whose code is huge) to inf.
inline __m512i e5m2_encode(__m512i u, bool saturate) {
  const __m512i abs = _mm512_and_si512(u, c32(0x7FFFFFFFu));
  __m512i code = _mm512_min_epu32(fp8_magnitude<5, 2>(abs), c32(0x7Cu));
  if (saturate) {
    const __mmask16 finite = _mm512_cmplt_epu32_mask(abs, c32(0x7F800000u));
    code = _mm512_mask_min_epu32(code, finite, code, c32(0x7Bu));
  }
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(abs, c32(0x7F800000u));
  code = _mm512_mask_mov_epi32(code, nan, c32(0x7Eu));
  return with_sign8(code, u);
}

// E5M2 codes of 32 FP32 values (x0: elements 0-15, x1: 16-31), 32 bytes.
// E5M2 is FP16 without its low 8 fraction bits, in normals and subnormals
// alike (same exponent field and bias), so RNE to E5M2 is RNE of a wider
// FP16 intermediate if that one is rounded to odd: VCVTPS2PH toward zero
// (embedded rounding, whatever MXCSR.RC says), then its lowest bit set
// where that was inexact (the value converted back differs). With 8 extra
// bits the second rounding sees every tie and every sticky bit the first
// one kept. Toward zero never overflows to infinity: a finite |x| >= 65520
// becomes 65504 | 1, which rounds to infinity as RNE from FP32 does (or to
// the largest finite code, saturating). The rounding itself runs on 32
// 16-bit lanes at once: fewer instructions than the FP32 integer path
// (e5m2_encode above, kept for quantize), about 10% faster alone
// (bench_cast) and more inside the scaled cast below.
inline __m256i e5m2_encode32(__m512 x0, __m512 x1, bool saturate) {
  constexpr int kRz = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC;
  const __m256i h0 = _mm512_cvt_roundps_ph(x0, kRz);
  const __m256i h1 = _mm512_cvt_roundps_ph(x1, kRz);
  // NaN compares unequal too; its lowest bit does not matter (below).
  const __mmask16 i0 = _mm512_cmp_ps_mask(_mm512_cvtph_ps(h0), x0, _CMP_NEQ_UQ);
  const __mmask16 i1 = _mm512_cmp_ps_mask(_mm512_cvtph_ps(h1), x1, _CMP_NEQ_UQ);
  const __m512i one = _mm512_set1_epi16(1);
  __m512i h = _mm512_inserti64x4(_mm512_castsi256_si512(h0), h1, 1);
  h = _mm512_mask_mov_epi16(h, static_cast<__mmask32>(_mm512_kunpackw(i1, i0)), _mm512_or_si512(h, one));
  const __m512i mag = _mm512_and_si512(h, _mm512_set1_epi16(0x7FFF));
  // (mag + 0x7F + lsb) >> 8: RNE of the top byte; 0x7C00 (inf) stays 0x7C.
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi16(mag, 8), one);
  __m512i code = _mm512_srli_epi16(_mm512_add_epi16(_mm512_add_epi16(mag, _mm512_set1_epi16(0x7F)), lsb), 8);
  if (saturate) {
    const __mmask32 finite = _mm512_cmplt_epu16_mask(mag, _mm512_set1_epi16(0x7C00));
    code = _mm512_mask_min_epu16(code, finite, code, _mm512_set1_epi16(0x7B));
  }
  const __mmask32 nan = _mm512_cmpgt_epu16_mask(mag, _mm512_set1_epi16(0x7C00));
  code = _mm512_mask_mov_epi16(code, nan, _mm512_set1_epi16(0x7E));
  // code | (sign byte & 0x80).
  code = _mm512_ternarylogic_epi32(code, _mm512_srli_epi16(h, 8), _mm512_set1_epi16(0x80), 0xF8);
  return _mm512_cvtepi16_epi8(code);
}

// E4M3 code with sign: the clamp to 0x7F sends overflow, inf and NaN (all
// with huge codes) to NaN; saturation clamps to 0x7E except for NaN.
inline __m512i e4m3_encode(__m512i u, bool saturate) {
  const __m512i abs = _mm512_and_si512(u, c32(0x7FFFFFFFu));
  __m512i code = fp8_magnitude<4, 3>(abs);
  if (saturate) {
    const __mmask16 not_nan = _mm512_cmple_epu32_mask(abs, c32(0x7F800000u));
    code = _mm512_mask_min_epu32(c32(0x7Fu), not_nan, code, c32(0x7Eu));
  } else {
    code = _mm512_min_epu32(code, c32(0x7Fu));
  }
  return with_sign8(code, u);
}

// ---- FP8 -> FP32 -----------------------------------------------------------------
// E5M2 is the top byte of an FP16 pattern: VCVTPH2PS decodes it exactly
// (subnormals included, NaN quieted as fp16_to_fp32 does).
inline __m512 e5m2_decode(__m512i code) {
  const __m256i h = _mm512_cvtepi32_epi16(_mm512_slli_epi32(code, 8));
  return _mm512_cvtph_ps(h);
}

inline __m512 e4m3_decode(__m512i code) {
  const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(code, c32(0x80u)), 24);
  const __m512i mag = _mm512_and_si512(code, c32(0x7Fu));
  // Normal: exponent field rebias 7 -> 127, fraction moved to the top.
  __m512i r = _mm512_add_epi32(_mm512_slli_epi32(mag, 20), c32(120u << 23));
  // Subnormal (mag < 8): m * 2^-9 from a table of the 8 FP32 patterns.
  const __m512i sub_table = _mm512_setr_epi32(
      0, 0x3B000000, 0x3B800000, 0x3BC00000, 0x3C000000, 0x3C200000, 0x3C400000, 0x3C600000,
      0, 0, 0, 0, 0, 0, 0, 0);
  const __mmask16 sub = _mm512_cmplt_epu32_mask(mag, c32(8));
  r = _mm512_mask_permutexvar_epi32(r, sub, mag, sub_table);
  const __mmask16 nan = _mm512_cmpeq_epu32_mask(mag, c32(0x7Fu));
  r = _mm512_mask_mov_epi32(r, nan, c32(0x7FC00000u));
  return _mm512_castsi512_ps(_mm512_or_si512(r, sign));
}

// 32 E4M3 codes -> 32 FP16 patterns of value / 256: the sign-extended byte
// shifted left 7 puts the sign at bit 15 (and a copy at bit 14, cleared),
// the exponent at bits 10..13 and the fraction at 7..9, so the pattern is
// the E4M3 value rebiased from 7 to 15, subnormals included. NaN (magnitude
// 0x7F, 0x3F80 here) becomes FP16's quiet NaN 0x7E00 with its sign, which
// VCVTPH2PS turns into 0x7FC00000 as e4m3_decode does; times 256 (exact,
// NaN unchanged) gives the value.
inline __m512i e4m3_to_fp16x32(__m256i codes) {
  const __m512i h = _mm512_and_si512(_mm512_slli_epi16(_mm512_cvtepi8_epi16(codes), 7), _mm512_set1_epi16(static_cast<short>(0xBF80)));
  const __mmask32 nan = _mm512_cmpeq_epi16_mask(_mm512_slli_epi16(h, 1), _mm512_set1_epi16(0x7F00));
  return _mm512_mask_add_epi16(h, nan, h, _mm512_set1_epi16(0x3E80));
}

// ---- BF16 / TF32 -------------------------------------------------------------
// RNE by adding 0x7FFF + lsb, NaN lanes replaced by the quiet NaN.
inline __m512i bf16_rne(__m512i u) {
  const __m512i abs = _mm512_and_si512(u, c32(0x7FFFFFFFu));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(abs, c32(0x7F800000u));
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), c32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, c32(0x7FFFu)), lsb), 16);
  return _mm512_mask_or_epi32(rounded, nan, _mm512_srli_epi32(u, 16), c32(0x40u));
}

inline __m512i tf32_rne(__m512i u) {
  const __m512i abs = _mm512_and_si512(u, c32(0x7FFFFFFFu));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(abs, c32(0x7F800000u));
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 13), c32(1));
  __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, c32(0x0FFFu)), lsb);
  r = _mm512_mask_or_epi32(r, nan, u, c32(0x00400000u));
  return _mm512_and_si512(r, c32(0xFFFFE000u));
}

// 32 BF16 results from two vectors of 32-bit lanes, in element order.
inline __m512i pack_bf16(__m512i lo, __m512i hi) {
  // packus interleaves per 128-bit lane: qwords lo0 hi0 lo1 hi1 ... -> reorder.
  const __m512i p = _mm512_packus_epi32(lo, hi);
  return _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7), p);
}

// FP32 -> BF16 through VCVTNE2PS2BF16. Found on this project's Zen 5 and as
// the SDM specifies: the instruction rounds to nearest even regardless of
// MXCSR, quiets NaN keeping sign and payload ((u >> 16) | 0x40, as
// fp32_to_bf16 does), but treats FP32 subnormal inputs as zero (signed),
// whereas torch keeps them as BF16 subnormals. So a block containing a
// subnormal input (rare: |x| < 2^-126) is recomputed with the integer code;
// zeros go through the instruction (it gives the right signed zero).
inline bool has_subnormal(__m512i u) {
  const __mmask16 exp0 = _mm512_testn_epi32_mask(u, c32(0x7F800000u));
  const __mmask16 frac = _mm512_test_epi32_mask(u, c32(0x007FFFFFu));
  return (exp0 & frac) != 0;
}

// Splits [0, n) into a masked head that runs until dst is aligned to one
// full block (kBlock elements of dst_bytes each: 32 or 64 bytes), full
// blocks, and a masked tail. A 64-byte store that straddles two cache lines
// costs about twice as much: measured here, a TF32 cast one element off
// alignment ran at 26 GB/s against 41 GB/s aligned. part(i, k) handles up to
// 16 elements from i under mask k.
// Ops are passed as lambdas, never as function pointers, so that they inline.
template <std::size_t kBlock, typename Full, typename Part>
inline void for_each_block(std::size_t n, const void* dst, std::size_t dst_bytes, Full full, Part part) {
  const std::size_t align = kBlock * dst_bytes;
  const auto addr = reinterpret_cast<std::uintptr_t>(dst);
  std::size_t head = addr % dst_bytes == 0 ? ((align - addr % align) % align) / dst_bytes : 0;
  if (head > n) head = n;
  std::size_t i = 0;
  while (i < head) {
    const std::size_t c = head - i < 16 ? head - i : 16;
    part(i, tail_mask(c));
    i += c;
  }
  for (; i + kBlock <= n; i += kBlock) full(i);
  while (i < n) {
    const std::size_t c = n - i < 16 ? n - i : 16;
    part(i, tail_mask(c));
    i += c;
  }
}

void bf16_from_f32(const float* src, std::uint16_t* d, std::size_t n, bool use_bf16_insn) {
  auto part = [&](std::size_t i, __mmask16 k) {
    _mm512_mask_cvtepi32_storeu_epi16(d + i, k, bf16_rne(_mm512_maskz_loadu_epi32(k, src + i)));
  };
  if (use_bf16_insn) {
    for_each_block<32>(n, d, 2, [&](std::size_t i) {
      const __m512i lo = _mm512_loadu_si512(src + i);
      const __m512i hi = _mm512_loadu_si512(src + i + 16);
      __m512i out;
      if (has_subnormal(lo) || has_subnormal(hi)) {
        out = pack_bf16(bf16_rne(lo), bf16_rne(hi));
      } else {
        // Elements 0..15 come from the second operand, 16..31 from the first.
        out = (__m512i)_mm512_cvtne2ps_pbh(_mm512_castsi512_ps(hi), _mm512_castsi512_ps(lo));
      }
      _mm512_storeu_si512(d + i, out);
    }, part);
  } else {
    for_each_block<32>(n, d, 2, [&](std::size_t i) {
      const __m512i lo = bf16_rne(_mm512_loadu_si512(src + i));
      const __m512i hi = bf16_rne(_mm512_loadu_si512(src + i + 16));
      _mm512_storeu_si512(d + i, pack_bf16(lo, hi));
    }, part);
  }
}

// 32 FP32 values -> 32 E4M3 codes, the 16-lane encoder twice.
inline __m256i e4m3_encode32(__m512 x0, __m512 x1, bool saturate) {
  const __m128i b0 = _mm512_cvtepi32_epi8(e4m3_encode(_mm512_castps_si512(x0), saturate));
  const __m128i b1 = _mm512_cvtepi32_epi8(e4m3_encode(_mm512_castps_si512(x1), saturate));
  return _mm256_inserti128_si256(_mm256_castsi128_si256(b0), b1, 1);
}

// 16 source values from element i (FP32, or BF16/FP16 codes decoded: exact)
// as FP32 lanes, the lanes outside mask k zero.
template <Format From>
inline __m512 load_values(const void* src, std::size_t i, __mmask16 k) {
  if constexpr (From == Format::FP32) {
    return _mm512_maskz_loadu_ps(k, static_cast<const float*>(src) + i);
  } else {
    const __m256i c = _mm256_maskz_loadu_epi16(k, static_cast<const std::uint16_t*>(src) + i);
    if constexpr (From == Format::BF16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(c), 16));
    else return _mm512_cvtph_ps(c);
  }
}

// FP8 codes of x[i] * scale (scale == 1: no multiply), x the source values,
// through enc (32 floats -> 32 bytes), 32 at a time, and the max of the
// unscaled |x[i]| bit patterns in *amax_bits when it is given.
template <Format From, typename Enc>
void fp8_scaled_from(const void* src, std::uint8_t* d, std::size_t n, float scale, std::uint32_t* amax_bits,
                     Enc enc) {
  const __m512 vs = _mm512_set1_ps(scale);
  const bool scaled = scale != 1.0f;
  __m512i m = _mm512_setzero_si512();
  auto prep = [&](__m512 x) {
    if (amax_bits) m = _mm512_max_epu32(m, _mm512_and_si512(_mm512_castps_si512(x), c32(0x7FFFFFFFu)));
    return scaled ? _mm512_mul_ps(x, vs) : x;
  };
  constexpr __mmask16 kAll = 0xFFFF;
  for_each_block<32>(n, d, 1, [&](std::size_t i) {
    const __m512 x0 = prep(load_values<From>(src, i, kAll));
    const __m512 x1 = prep(load_values<From>(src, i + 16, kAll));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), enc(x0, x1));
  }, [&](std::size_t i, __mmask16 k) {
    // Masked-off lanes load 0, which changes no max.
    const __m512 x0 = prep(load_values<From>(src, i, k));
    _mm_mask_storeu_epi8(d + i, k, _mm256_castsi256_si128(enc(x0, _mm512_setzero_ps())));
  });
  if (amax_bits) *amax_bits = static_cast<std::uint32_t>(_mm512_reduce_max_epu32(m));
}

template <Format From>
bool fp8_scaled(Format to, const void* src, float scale, void* dst, std::size_t n, bool saturate,
                std::uint32_t* amax_bits) {
  auto* d = static_cast<std::uint8_t*>(dst);
  if (to == Format::E5M2) {
    fp8_scaled_from<From>(src, d, n, scale, amax_bits,
                          [saturate](__m512 x0, __m512 x1) { return e5m2_encode32(x0, x1, saturate); });
    return true;
  }
  if (to == Format::E4M3) {
    fp8_scaled_from<From>(src, d, n, scale, amax_bits,
                          [saturate](__m512 x0, __m512 x1) { return e4m3_encode32(x0, x1, saturate); });
    return true;
  }
  return false;
}

// Loads 16 codes (8 or 16 bits) into 32-bit lanes, decodes them with op
// (-> 16 floats) and stores them.
template <std::size_t kCodeBytes, typename Op>
void codes_to_f32(const void* src, float* dst, std::size_t n, Op op) {
  const auto* s = static_cast<const std::uint8_t*>(src);
  auto load = [&](std::size_t i, __mmask16 k) {
    if constexpr (kCodeBytes == 1) return _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(k, s + i));
    else return _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, s + 2 * i));
  };
  for_each_block<16>(n, dst, 4, [&](std::size_t i) {
    __m512i code;
    if constexpr (kCodeBytes == 1)
      code = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    else
      code = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 2 * i)));
    _mm512_storeu_ps(dst + i, op(code));
  }, [&](std::size_t i, __mmask16 k) { _mm512_mask_storeu_ps(dst + i, k, op(load(i, k))); });
}

// Applies op (16 x u32 FP32 patterns -> 16 x u32) from src to dst (may alias).
template <typename Op>
void map_f32(const float* src, float* dst, std::size_t n, Op op) {
  for_each_block<16>(n, dst, 4, [&](std::size_t i) {
    _mm512_storeu_si512(dst + i, op(_mm512_loadu_si512(src + i)));
  }, [&](std::size_t i, __mmask16 k) {
    _mm512_mask_storeu_epi32(dst + i, k, op(_mm512_maskz_loadu_epi32(k, src + i)));
  });
}

}  // namespace

bool avx512_covers(Format f, bool from_f32) {
  if (f == Format::FP32) return false;      // a copy
  if (f == Format::TF32) return from_f32;   // TF32 -> FP32 is a copy
  return is_tensor_format(f);
}

bool avx512_from_f32(Format to, const float* src, void* dst, std::size_t n, bool saturate,
                     bool use_bf16_insn) {
  switch (to) {
    case Format::FP32: return false;
    case Format::TF32:
      map_f32(src, static_cast<float*>(dst), n, [](__m512i u) { return tf32_rne(u); });
      return true;
    case Format::BF16:
      bf16_from_f32(src, static_cast<std::uint16_t*>(dst), n, use_bf16_insn);
      return true;
    case Format::FP16: {
      // VCVTPS2PH with an immediate rounding mode: RNE whatever MXCSR.RC
      // says; its NaN result is the one fp32_to_fp16 is defined to give.
      auto* d = static_cast<std::uint16_t*>(dst);
      for_each_block<16>(n, d, 2, [&](std::size_t i) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm512_cvtps_ph(_mm512_loadu_ps(src + i), kRne));
      }, [&](std::size_t i, __mmask16 k) {
        _mm256_mask_storeu_epi16(d + i, k, _mm512_cvtps_ph(_mm512_maskz_loadu_ps(k, src + i), kRne));
      });
      return true;
    }
    case Format::E5M2:
    case Format::E4M3: return fp8_scaled<Format::FP32>(to, src, 1.0f, dst, n, saturate, nullptr);
    default: return false;  // FP6/FP4/E8M0: the scalar loop
  }
  return false;
}

bool avx512_scale_amax_cast(Format from, const void* src, float scale, Format to, void* dst, std::size_t n,
                            bool saturate, std::uint32_t* amax_bits) {
  switch (from) {
    case Format::FP32: return fp8_scaled<Format::FP32>(to, src, scale, dst, n, saturate, amax_bits);
    case Format::BF16: return fp8_scaled<Format::BF16>(to, src, scale, dst, n, saturate, amax_bits);
    case Format::FP16: return fp8_scaled<Format::FP16>(to, src, scale, dst, n, saturate, amax_bits);
    default: return false;
  }
}

bool avx512_to_f32(Format from, const void* src, float* dst, std::size_t n) {
  switch (from) {
    case Format::FP32:
    case Format::TF32: return false;
    case Format::BF16:
      codes_to_f32<2>(src, dst, n, [](__m512i code) { return _mm512_castsi512_ps(_mm512_slli_epi32(code, 16)); });
      return true;
    case Format::FP16: {
      const auto* s = static_cast<const std::uint16_t*>(src);
      for_each_block<16>(n, dst, 4, [&](std::size_t i) {
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i))));
      }, [&](std::size_t i, __mmask16 k) {
        _mm512_mask_storeu_ps(dst + i, k, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, s + i)));
      });
      return true;
    }
    case Format::E5M2:
      codes_to_f32<1>(src, dst, n, [](__m512i code) { return e5m2_decode(code); });
      return true;
    case Format::E4M3: {
      // 32 codes at a time through FP16 (e4m3_to_fp16x32); the tails and
      // the unaligned head 16 at a time through e4m3_decode.
      const auto* s = static_cast<const std::uint8_t*>(src);
      for_each_block<32>(n, dst, 4, [&](std::size_t i) {
        const __m512i h = e4m3_to_fp16x32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
        const __m512 k256 = _mm512_set1_ps(256.0f);
        _mm512_storeu_ps(dst + i, _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(h)), k256));
        _mm512_storeu_ps(dst + i + 16, _mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1)), k256));
      }, [&](std::size_t i, __mmask16 k) {
        _mm512_mask_storeu_ps(dst + i, k, e4m3_decode(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(k, s + i))));
      });
      return true;
    }
    default: return false;
  }
  return false;
}

bool avx512_quantize(Format f, float* x, std::size_t n, bool saturate) {
  switch (f) {
    case Format::FP32: return false;
    case Format::TF32:
      map_f32(x, x, n, [](__m512i u) { return tf32_rne(u); });
      return true;
    case Format::BF16:
      map_f32(x, x, n, [](__m512i u) { return _mm512_slli_epi32(bf16_rne(u), 16); });
      return true;
    case Format::FP16:
      map_f32(x, x, n, [](__m512i u) {
        return _mm512_castps_si512(_mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_castsi512_ps(u), kRne)));
      });
      return true;
    case Format::E5M2:
      map_f32(x, x, n, [saturate](__m512i u) { return _mm512_castps_si512(e5m2_decode(e5m2_encode(u, saturate))); });
      return true;
    case Format::E4M3:
      map_f32(x, x, n, [saturate](__m512i u) { return _mm512_castps_si512(e4m3_decode(e4m3_encode(u, saturate))); });
      return true;
    default: return false;
  }
  return false;
}

}  // namespace engine::cast_kernels
