// GELU forward for an FP8 cast (CpuBackend::gelu_forward_encode): a cheap
// approximation of y = x Phi(x) in AVX-512 lanes wherever the cast cannot
// tell it from the exact value, and exact lanes (gelu_value, as
// gelu_forward_avx512 computes it) wherever it could. Compiled with
// -mavx512f and without contraction (the exact lanes); called after a
// run-time check.
#include <immintrin.h>

#include <bit>
#include <cstdint>

#include "backend/cpu/gelu_cast.h"
#include "backend/cpu/gelu_simd.h"
#include "numeric/convert.h"
#include "numeric/format.h"

namespace engine::cpu {

namespace {

using gelu_cast::kNear;
using gelu_cast::kPoly;

// Sixteen exact lanes: gelu_value in f32 lanes as gelu_forward_avx512
// computes them (this file is built without contraction too, and
// gelu_parts' fmas are explicit, so a lane gives the same bits).
inline __m512 exact16(__m512 xv) {
  alignas(64) float in[16], e[16];
  _mm512_store_ps(in, xv);
#pragma omp simd
  for (int j = 0; j < 16; ++j) e[j] = gelu_value(in[j]);
  return _mm512_load_ps(e);
}

// The approximation of x Phi(x), lane by lane (the tables in registers).
struct Approx {
  __m512 c0 = _mm512_load_ps(kPoly.c[0]), c1 = _mm512_load_ps(kPoly.c[1]), c2 = _mm512_load_ps(kPoly.c[2]),
         c3 = _mm512_load_ps(kPoly.c[3]), c4 = _mm512_load_ps(kPoly.c[4]);
  __m512 zero = _mm512_setzero_ps(), below4 = _mm512_set1_ps(0x1.fffffep1f), four = _mm512_set1_ps(4.0f),
         minus_half = _mm512_set1_ps(-0.5f), magic = _mm512_set1_ps(0x1.8p23f);
  __m512 operator()(__m512 xv) const {
    // u below 4 (from 4 on Phi(-u) is taken as Phi(-4)); a = 4u - 1/2
    // rounded to the nearest integer i (the magic number's low bits: the
    // piece, which the permutes read from the low 4 bits), w = a - i.
    const __m512 u = _mm512_min_ps(_mm512_abs_ps(xv), below4);
    const __m512 a = _mm512_fmadd_ps(u, four, minus_half);
    const __m512 r = _mm512_add_ps(a, magic);
    const __m512 w = _mm512_sub_ps(a, _mm512_sub_ps(r, magic));
    const __m512i idx = _mm512_castps_si512(r);
    __m512 g = _mm512_permutexvar_ps(idx, c4);
    g = _mm512_fmadd_ps(g, w, _mm512_permutexvar_ps(idx, c3));
    g = _mm512_fmadd_ps(g, w, _mm512_permutexvar_ps(idx, c2));
    g = _mm512_fmadd_ps(g, w, _mm512_permutexvar_ps(idx, c1));
    g = _mm512_fmadd_ps(g, w, _mm512_permutexvar_ps(idx, c0));
    // x Phi(x) = max(x, 0) - |x| Phi(-|x|) for either sign.
    return _mm512_fnmadd_ps(_mm512_abs_ps(xv), g, _mm512_max_ps(xv, zero));
  }
};

inline __mmask16 live_lanes(std::int64_t left) {
  return static_cast<__mmask16>(left >= 16 ? 0xFFFFu : (1u << left) - 1u);
}

}  // namespace

std::uint32_t gelu_cast_avx512(const float* x, std::uint8_t* q, std::int64_t n, float scale, bool e4m3,
                               bool saturate) {
  constexpr std::int64_t kBlock = kGeluCastBlock;
  if (n > kBlock) return ~0u;  // refuses: the caller splits
  const int mantissa_bits = e4m3 ? 3 : 2;
  const float min_normal = e4m3 ? 0x1p-6f : 0x1p-14f;
  const Approx approx;
  const __m512 vscale = _mm512_set1_ps(scale), zero = _mm512_setzero_ps(), neg4 = _mm512_set1_ps(-4.0f);
  // |y| outside [low, high) takes the exact lane: below, y * scale is an FP8
  // subnormal or zero (a finer grid than the midpoint test assumes) or
  // close to it; above, y * scale may overflow f32 (and NaN's bits lie
  // above too).
  const std::uint32_t low = std::bit_cast<std::uint32_t>(min_normal * 1.0078125f / scale);
  const std::uint32_t high = std::bit_cast<std::uint32_t>(0x1p127f / scale);
  const __m512i vlow = _mm512_set1_epi32(static_cast<int>(low));
  const __m512i span = _mm512_set1_epi32(static_cast<int>(high - low));
  const __m512i dropped = _mm512_set1_epi32((1 << (23 - mantissa_bits)) - 1);
  // (bits - midpoint + kNear) within the dropped field is below 2 kNear
  // exactly when the dropped bits are within kNear of the midpoint.
  const __m512i shift = _mm512_set1_epi32(kNear - (1 << (22 - mantissa_bits)));
  const __m512i window = _mm512_set1_epi32(2 * kNear);
  const __m512i abs_bits = _mm512_set1_epi32(0x7FFFFFFF);
  // The encode of a normal product far from every rounding boundary:
  // rounding is to the nearest code (no ties), the exponent rebiased; past
  // the largest finite code, the saturated one or the overflow code (E4M3
  // NaN, E5M2 inf), as the library's encode gives them.
  const __m128i count = _mm_cvtsi32_si128(23 - mantissa_bits);
  const __m512i round_half = _mm512_set1_epi32(1 << (22 - mantissa_bits));
  const __m512i rebias = _mm512_set1_epi32((127 - (e4m3 ? 7 : 15)) << mantissa_bits);
  const int max_finite = e4m3 ? 0x7E : 0x7B;
  const __m512i top_code = _mm512_set1_epi32(saturate ? max_finite : max_finite + 1);
  const __m512i sign_bit = _mm512_set1_epi32(0x80);
  __m512i vmax = _mm512_setzero_si512();  // max |value| bits of the approximate lanes
  // Which lanes take the exact value, a mask per vector; those lanes (a few
  // in a thousand, which a branch per vector would mispredict) are
  // computed 16 at a time after the pass. y keeps the approximate values
  // for the amax's second look.
  alignas(64) std::uint16_t masks[kBlock / 16];
  alignas(64) std::int32_t list[kBlock];
  alignas(64) float y[kBlock];
  for (std::int64_t i = 0; i < n; i += 16) {
    const __mmask16 live = live_lanes(n - i);
    // Whole vectors load and store unmasked (masked stores are slow on some
    // CPUs); the tail masks.
    const bool whole = live == 0xFFFF;
    const __m512 xv = whole ? _mm512_loadu_ps(x + i) : _mm512_maskz_loadu_ps(live, x + i);
    const __m512 yv = approx(xv);
    const __m512i tb = _mm512_castps_si512(_mm512_mul_ps(yv, vscale));
    const __m512i off = _mm512_and_si512(_mm512_add_epi32(tb, shift), dropped);
    const __m512i ab = _mm512_and_si512(_mm512_castps_si512(yv), abs_bits);
    // Exact lanes: near a rounding boundary, |y| outside [low, high) (NaN
    // and x = +inf included: their y is NaN), x < -4 (outside the fit).
    // Lanes past the tail hold x = 0, which only the range would flag.
    const __mmask16 exact =
        _kor_mask16(_kor_mask16(_mm512_cmp_epu32_mask(off, window, _MM_CMPINT_LT),
                                _mm512_mask_cmp_epu32_mask(live, _mm512_sub_epi32(ab, vlow), span, _MM_CMPINT_NLT)),
                    _mm512_cmp_ps_mask(xv, neg4, _CMP_LT_OQ));
    const __m512i mag = _mm512_min_epu32(
        _mm512_sub_epi32(_mm512_srl_epi32(_mm512_add_epi32(_mm512_and_si512(tb, abs_bits), round_half), count), rebias),
        top_code);
    const __m512i codes = _mm512_or_si512(mag, _mm512_and_si512(_mm512_srli_epi32(tb, 24), sign_bit));
    if (whole) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtepi32_epi8(codes));
      _mm512_store_ps(y + i, yv);
    } else {
      _mm512_mask_cvtepi32_storeu_epi8(q + i, live, codes);
      _mm512_mask_store_ps(y + i, live, yv);
    }
    vmax = _mm512_mask_max_epu32(vmax, _knot_mask16(exact), vmax, ab);
    masks[i >> 4] = exact;
  }
  // The exact lanes, 16 at a time: their values, codes (the library's
  // encode of y * scale) and amax.
  std::int64_t count_exact = 0;
  for (std::int64_t v = 0; v < (n + 15) / 16; ++v)
    for (unsigned bits = masks[v]; bits; bits &= bits - 1)
      list[count_exact++] = static_cast<std::int32_t>(v * 16 + __builtin_ctz(bits));
  const Format f = e4m3 ? Format::E4M3 : Format::E5M2;
  __m512i emax = _mm512_setzero_si512();  // max |exact value| bits
  auto exact_lanes = [&](const std::int32_t* at_list, std::int64_t count_lanes, bool encode) {
    for (std::int64_t j = 0; j < count_lanes; j += 16) {
      const __mmask16 live = live_lanes(count_lanes - j);
      const __m512i at = _mm512_maskz_loadu_epi32(live, at_list + j);
      const __m512 e = exact16(_mm512_mask_i32gather_ps(zero, live, at, x, 4));
      emax = _mm512_mask_max_epu32(emax, live, emax, _mm512_and_si512(_mm512_castps_si512(e), abs_bits));
      if (!encode) continue;
      alignas(64) float t[16];
      _mm512_store_ps(t, _mm512_mul_ps(e, vscale));
      for (int k = 0; k < 16 && j + k < count_lanes; ++k)
        q[at_list[j + k]] = static_cast<std::uint8_t>(engine::encode(f, t[k], saturate));
    }
  };
  exact_lanes(list, count_exact, true);
  // The amax is max |y|: every lane that may hold it takes its exact value.
  // With m the largest |value| of the approximate lanes, a lane's exact |y|
  // is within 2^-14.9 of its value, so an approximate lane holding the
  // exact maximum holds at least m (1 - 2^-12); it is then one of these,
  // and the maximum that of the exact lanes and these.
  const std::uint32_t m = _mm512_reduce_max_epu32(vmax);
  if (m > 0) {
    const __m512 threshold = _mm512_set1_ps(std::bit_cast<float>(m) * (1.0f - 0x1p-12f));
    std::int64_t count_top = 0;
    for (std::int64_t i = 0; i < n; i += 16) {
      const __mmask16 live = live_lanes(n - i);
      const __mmask16 top =
          _mm512_mask_cmp_ps_mask(live, _mm512_abs_ps(_mm512_maskz_load_ps(live, y + i)), threshold, _CMP_GE_OQ);
      for (unsigned bits = top & static_cast<unsigned>(~masks[i >> 4]); bits; bits &= bits - 1)
        list[count_top++] = static_cast<std::int32_t>(i + __builtin_ctz(bits));
    }
    exact_lanes(list, count_top, false);
  }
  return _mm512_reduce_max_epu32(emax);
}

void gelu_approx_avx512(const float* x, float* y, std::int64_t n) {
  const Approx approx;
  for (std::int64_t i = 0; i < n; i += 16) {
    const __mmask16 live = live_lanes(n - i);
    _mm512_mask_storeu_ps(y + i, live, approx(_mm512_maskz_loadu_ps(live, x + i)));
  }
}

}  // namespace engine::cpu
