// GELU forward for an FP8 cast (CpuBackend::gelu_forward_encode): a cheap
// approximation of y = x Phi(x) in AVX-512 lanes wherever the cast cannot
// tell it from the exact value, and exact lanes (gelu_value, as
// gelu_forward_avx512 computes it) wherever it could. Compiled with
// -mavx512f and without contraction (the exact lanes); called after a
// run-time check.
#include <immintrin.h>

#include <bit>
#include <cstdint>

#include "backend/cpu/gelu_simd.h"

namespace engine::cpu {

namespace {

// Phi(-u) = erfc(u / sqrt 2) / 2 for u in [0, 4): 16 pieces of width 1/4,
// each a degree-5 polynomial in s = u - (i/4 + 1/8), |s| <= 1/8, that
// interpolates Phi(-u) at the piece's 6 Chebyshev nodes (40-digit
// arithmetic, coefficients then rounded to f32; kCoef[k][i] is piece i's
// s^k coefficient). Evaluated in f32 its relative error stays below
// 2^-21.
alignas(64) constexpr float kCoef[6][16] = {
    {0x1.cd116cp-2f, 0x1.6a527ap-2f, 0x1.105e82p-2f, 0x1.86bb5p-3f, 0x1.0ad7dap-3f, 0x1.5a6196p-4f, 0x1.aaa65cp-5f, 0x1.f20394p-6f, 0x1.13243cp-6f, 0x1.1f85a2p-7f, 0x1.1bee6cp-8f, 0x1.08c89p-9f, 0x1.d21af6p-11f, 0x1.8301cp-12f, 0x1.2eff82p-13f, 0x1.bf376ep-15f},
    {-0x1.95567ap-2f, -0x1.7cc794p-2f, -0x1.50096ep-2f, -0x1.169596p-2f, -0x1.b1ec62p-3f, -0x1.3d7712p-3f, -0x1.b46178p-4f, -0x1.19bfa4p-4f, -0x1.55c74p-5f, -0x1.857a94p-6f, -0x1.a0f22cp-7f, -0x1.a34ea6p-8f, -0x1.8c2226p-9f, -0x1.5f90f6p-10f, -0x1.251bf8p-11f, -0x1.cb2208p-13f},
    {0x1.9555e4p-6f, 0x1.1d954ep-4f, 0x1.a40b54p-4f, 0x1.e78566p-4f, 0x1.e829bep-4f, 0x1.b483bcp-4f, 0x1.628f5ap-4f, 0x1.0823dcp-4f, 0x1.6b240cp-5f, 0x1.ce81fep-6f, 0x1.119f18p-6f, 0x1.2d6082p-7f, 0x1.357a4cp-8f, 0x1.28a16cp-9f, 0x1.099fe2p-10f, 0x1.bcc50ap-12f},
    {0x1.0a0096p-4f, 0x1.b44f2ap-5f, 0x1.1107aap-5f, 0x1.5c3bacp-7f, -0x1.335bcep-7f, -0x1.78fcfcp-6f, -0x1.dd4a64p-6f, -0x1.d8840cp-6f, -0x1.90859ep-6f, -0x1.2d3cf8p-6f, -0x1.9958bp-7f, -0x1.fbc18ap-8f, -0x1.215d0cp-8f, -0x1.306a7cp-9f, -0x1.288b08p-10f, -0x1.0c1fd8p-11f},
    {-0x1.91a9c8p-8f, -0x1.0f3006p-6f, -0x1.6c1fe8p-6f, -0x1.6a18fp-6f, -0x1.19b7ep-6f, -0x1.42e99ap-7f, -0x1.570cf2p-9f, 0x1.66e8dp-9f, 0x1.6d13cp-8f, 0x1.95f258p-8f, 0x1.62649ap-8f, 0x1.0883b8p-8f, 0x1.5d7afap-9f, 0x1.a00372p-10f, 0x1.c2e35cp-11f, 0x1.bffb02p-12f},
    {-0x1.394d52p-7f, -0x1.b8e5dep-8f, -0x1.21fcd8p-9f, 0x1.299154p-9f, 0x1.58eb98p-8f, 0x1.92a8e2p-8f, 0x1.550464p-8f, 0x1.aec488p-9f, 0x1.52c7e8p-10f, -0x1.868a6cp-13f, -0x1.f9291cp-11f, -0x1.2ede68p-10f, -0x1.06518cp-10f, -0x1.797504p-11f, -0x1.d9bc0ap-12f, -0x1.096d7ap-12f},
};

// How far the approximation may be from the exact lane (relative): for
// x in [-4, 4) the fit's 2^-21 and a few f32 roundings, below 2^-20; for
// x >= 4 it takes Phi(x) = 1, off by Phi(-x) <= Phi(-4) < 2^-14.9 (and
// the exact lane's Phi rounds to 1 from x = 5.9 on). So within 2^-14.8.
//
// The cast rounds y * scale (f32) to the FP8 grid, whose rounding
// boundaries are the midpoints between neighbours. A value whose 23 - m
// dropped mantissa bits (m: the format's mantissa bits) lie within kNear
// f32 ulps of the midpoint pattern is within 2^-12 (relative, 2^-13 at
// its binade's top) of a boundary, and takes the exact lane; everywhere
// else the exact value rounds to the same code (2^-13 against 2^-14.8).
constexpr std::int32_t kNear = 2048;

// Sixteen exact lanes: gelu_value in f32 lanes as gelu_forward_avx512
// computes them (this file is built without contraction too, and
// gelu_parts' fmas are explicit, so a lane gives the same bits).
inline __m512 exact16(__m512 xv) {
  alignas(64) float in[16], e[16];
  _mm512_store_ps(in, xv);
#pragma omp simd aligned(in, e : 64)
  for (int j = 0; j < 16; ++j) e[j] = gelu_value(in[j]);
  return _mm512_load_ps(e);
}

inline __mmask16 live_lanes(std::int64_t left) {
  return static_cast<__mmask16>(left >= 16 ? 0xFFFFu : (1u << left) - 1u);
}

}  // namespace

void gelu_cast_values_avx512(const float* x, float* y, std::int64_t n, float scale, int mantissa_bits,
                             float min_normal) {
  const __m512 c0 = _mm512_load_ps(kCoef[0]), c1 = _mm512_load_ps(kCoef[1]), c2 = _mm512_load_ps(kCoef[2]),
               c3 = _mm512_load_ps(kCoef[3]), c4 = _mm512_load_ps(kCoef[4]), c5 = _mm512_load_ps(kCoef[5]);
  const __m512 vscale = _mm512_set1_ps(scale), one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
  const __m512 four = _mm512_set1_ps(4.0f), neg4 = _mm512_set1_ps(-4.0f);
  // |y| below this: y * scale is an FP8 subnormal or zero (a finer grid than
  // the midpoint test assumes), or close to it: exact lanes.
  const __m512 tiny = _mm512_set1_ps(min_normal * 1.0078125f / scale);
  const __m512i dropped = _mm512_set1_epi32((1 << (23 - mantissa_bits)) - 1);
  // (bits - midpoint + kNear) within the dropped field is below 2 kNear
  // exactly when the dropped bits are within kNear of the midpoint.
  const __m512i shift = _mm512_set1_epi32(kNear - (1 << (22 - mantissa_bits)));
  const __m512i window = _mm512_set1_epi32(2 * kNear);
  const __m512i abs_bits = _mm512_set1_epi32(0x7FFFFFFF);
  __m512i vmax = _mm512_setzero_si512();  // max |value| bits of the approximate lanes
  // Which lanes take the exact value, a mask per vector of a block of
  // kBlock values; those lanes (a few in a thousand, which a branch per
  // vector would mispredict) are computed 16 at a time after the block.
  constexpr std::int64_t kBlock = 4096;
  alignas(64) std::uint16_t masks[kBlock / 16];
  alignas(64) std::int32_t list[kBlock];
  for (std::int64_t b = 0; b < n; b += kBlock) {
    const std::int64_t len = n - b < kBlock ? n - b : kBlock;
    const float* xb = x + b;
    float* yb = y + b;
    for (std::int64_t i = 0; i < len; i += 16) {
      const __mmask16 live = live_lanes(len - i);
      // Whole vectors load and store unmasked (masked stores are slow on
      // some CPUs); the tail masks.
      const bool whole = live == 0xFFFF;
      const __m512 xv = whole ? _mm512_loadu_ps(xb + i) : _mm512_maskz_loadu_ps(live, xb + i);
      const __m512 u = _mm512_abs_ps(xv);
      // Piece index (NaN: min gives its second operand).
      const __m512i idx = _mm512_cvttps_epi32(_mm512_min_ps(_mm512_mul_ps(u, four), _mm512_set1_ps(15.5f)));
      const __m512 s =
          _mm512_sub_ps(u, _mm512_fmadd_ps(_mm512_cvtepi32_ps(idx), _mm512_set1_ps(0.25f), _mm512_set1_ps(0.125f)));
      __m512 g = _mm512_permutexvar_ps(idx, c5);
      g = _mm512_fmadd_ps(g, s, _mm512_permutexvar_ps(idx, c4));
      g = _mm512_fmadd_ps(g, s, _mm512_permutexvar_ps(idx, c3));
      g = _mm512_fmadd_ps(g, s, _mm512_permutexvar_ps(idx, c2));
      g = _mm512_fmadd_ps(g, s, _mm512_permutexvar_ps(idx, c1));
      g = _mm512_fmadd_ps(g, s, _mm512_permutexvar_ps(idx, c0));
      // Phi(x): G for x < 0, 1 - G below 4, 1 from 4 on (x = +inf included:
      // y = inf as the exact lane's).
      __m512 phi = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(xv, zero, _CMP_LT_OQ), _mm512_sub_ps(one, g), g);
      phi = _mm512_mask_mov_ps(phi, _mm512_cmp_ps_mask(xv, four, _CMP_GE_OQ), one);
      const __m512 yv = _mm512_mul_ps(xv, phi);
      const __m512i tb = _mm512_castps_si512(_mm512_mul_ps(yv, vscale));
      const __m512i off = _mm512_and_si512(_mm512_add_epi32(tb, shift), dropped);
      const __m512i ab = _mm512_and_si512(_mm512_castps_si512(yv), abs_bits);
      // Exact lanes: near a rounding boundary, y * scale an FP8 subnormal or
      // zero, x < -4 (outside the fit) or NaN. (Where x * scale overflows,
      // both values are x and their codes the same.)
      const __mmask16 exact = _kand_mask16(
          _kor_mask16(_kor_mask16(_mm512_cmp_epu32_mask(off, window, _MM_CMPINT_LT),
                                  _mm512_cmp_ps_mask(_mm512_castsi512_ps(ab), tiny, _CMP_LT_OQ)),
                      _mm512_cmp_ps_mask(xv, neg4, _CMP_NGE_UQ)),
          live);
      if (whole) _mm512_storeu_ps(yb + i, yv);
      else _mm512_mask_storeu_ps(yb + i, live, yv);
      vmax = _mm512_mask_max_epu32(vmax, _knot_mask16(exact), vmax, ab);
      masks[i >> 4] = exact;
    }
    // The exact lanes' indices, then their values 16 at a time.
    std::int64_t count = 0;
    const std::int64_t vectors = (len + 15) / 16;
    for (std::int64_t v = 0; v < vectors; ++v)
      for (unsigned bits = masks[v]; bits; bits &= bits - 1)
        list[count++] = static_cast<std::int32_t>(v * 16 + __builtin_ctz(bits));
    for (std::int64_t j = 0; j < count; j += 16) {
      const __mmask16 live = live_lanes(count - j);
      const __m512i at = _mm512_maskz_loadu_epi32(live, list + j);
      const __m512 e = exact16(_mm512_mask_i32gather_ps(zero, live, at, xb, 4));
      _mm512_mask_i32scatter_ps(yb, live, at, e, 4);
      vmax = _mm512_mask_max_epu32(vmax, live, vmax, _mm512_and_si512(_mm512_castps_si512(e), abs_bits));
    }
  }
  // The amax is the cast's max |y|: every lane that may hold the maximum
  // takes its exact value. With m the largest |value| now held, a lane's
  // exact |y| is within 2^-14.8 of its value, so the exact maximum sits in
  // a lane holding at least m (1 - 2^-12), and every lane left approximate
  // holds less than that maximum. (An infinite or NaN maximum is an exact
  // lane's.)
  const std::uint32_t m = _mm512_reduce_max_epu32(vmax);
  if (m == 0 || m >= 0x7F800000u) return;
  const __m512 threshold = _mm512_set1_ps(std::bit_cast<float>(m) * (1.0f - 0x1p-12f));
  for (std::int64_t i = 0; i < n; i += 16) {
    const __mmask16 live = live_lanes(n - i);
    const __mmask16 top =
        _mm512_mask_cmp_ps_mask(live, _mm512_abs_ps(_mm512_maskz_loadu_ps(live, y + i)), threshold, _CMP_GE_OQ);
    if (top) _mm512_mask_storeu_ps(y + i, top, exact16(_mm512_maskz_loadu_ps(live, x + i)));
  }
}

}  // namespace engine::cpu
