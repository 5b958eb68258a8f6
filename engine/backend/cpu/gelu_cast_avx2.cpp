// GELU forward for an FP8 cast in AVX2 lanes: gelu_cast_avx512.cpp's
// kernel, 8 lanes at a time, for CPUs without AVX-512 (its comments say
// why each step gives the exact GELU's codes and amax). The 16-piece
// tables take two VPERMPS and a blend on the index's bit 3. Compiled with
// -mavx2 -mfma and without contraction (the exact lanes round as
// gelu_forward_avx2's); called after a run-time check.
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

inline __m256i i32(std::uint32_t v) { return _mm256_set1_epi32(static_cast<int>(v)); }

// Eight exact lanes: gelu_value as gelu_forward_avx2 computes it.
inline __m256 exact8(__m256 xv) {
  alignas(32) float in[8], e[8];
  _mm256_store_ps(in, xv);
#pragma omp simd
  for (int j = 0; j < 8; ++j) e[j] = gelu_value(in[j]);
  return _mm256_load_ps(e);
}

struct Approx {
  __m256 lo[5], hi[5];  // each table's entries 0-7 and 8-15
  __m256 zero = _mm256_setzero_ps(), below4 = _mm256_set1_ps(0x1.fffffep1f), four = _mm256_set1_ps(4.0f),
         minus_half = _mm256_set1_ps(-0.5f), magic = _mm256_set1_ps(0x1.8p23f);
  __m256 abs_mask = _mm256_castsi256_ps(i32(0x7FFFFFFFu));
  Approx() {
    for (int k = 0; k < 5; ++k) {
      lo[k] = _mm256_load_ps(kPoly.c[k]);
      hi[k] = _mm256_load_ps(kPoly.c[k] + 8);
    }
  }
  __m256 operator()(__m256 xv) const {
    const __m256 ax = _mm256_and_ps(xv, abs_mask);
    const __m256 u = _mm256_min_ps(ax, below4);
    const __m256 a = _mm256_fmadd_ps(u, four, minus_half);
    const __m256 r = _mm256_add_ps(a, magic);
    const __m256 w = _mm256_sub_ps(a, _mm256_sub_ps(r, magic));
    const __m256i idx = _mm256_castps_si256(r);
    const __m256 upper = _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28));  // bit 3 -> sign
    auto c = [&](int k) {
      return _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo[k], idx), _mm256_permutevar8x32_ps(hi[k], idx), upper);
    };
    __m256 g = c(4);
    g = _mm256_fmadd_ps(g, w, c(3));
    g = _mm256_fmadd_ps(g, w, c(2));
    g = _mm256_fmadd_ps(g, w, c(1));
    g = _mm256_fmadd_ps(g, w, c(0));
    return _mm256_fnmadd_ps(ax, g, _mm256_max_ps(xv, zero));
  }
};

// The first `left` of 8 lanes (all of them from 8 on), as a vector mask.
inline __m256i live_lanes(std::int64_t left) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(left < 8 ? left : 8)), lane);
}

inline std::uint32_t max_lane(__m256i v) {
  alignas(32) std::uint32_t l[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(l), v);
  std::uint32_t m = 0;
  for (std::uint32_t x : l) m = x > m ? x : m;
  return m;
}

// Unsigned a >= b, lane by lane.
inline __m256i ge_epu32(__m256i a, __m256i b) { return _mm256_cmpeq_epi32(_mm256_max_epu32(a, b), a); }

}  // namespace

std::uint32_t gelu_cast_avx2(const float* x, std::uint8_t* q, std::int64_t n, float scale, bool e4m3,
                             bool saturate) {
  constexpr std::int64_t kBlock = kGeluCastBlock;
  static_assert(kBlock % 8 == 0);
  if (n > kBlock) return ~0u;  // refuses: the caller splits
  const int mantissa_bits = e4m3 ? 3 : 2;
  const float min_normal = e4m3 ? 0x1p-6f : 0x1p-14f;
  const Approx approx;
  const __m256 vscale = _mm256_set1_ps(scale), neg4 = _mm256_set1_ps(-4.0f);
  const std::uint32_t low = std::bit_cast<std::uint32_t>(min_normal * 1.0078125f / scale);
  const std::uint32_t high = std::bit_cast<std::uint32_t>(0x1p127f / scale);
  const __m256i vlow = i32(low), span = i32(high - low);
  const __m256i dropped = i32((1u << (23 - mantissa_bits)) - 1u);
  const __m256i shift = _mm256_set1_epi32(kNear - (1 << (22 - mantissa_bits)));
  const __m256i window = _mm256_set1_epi32(2 * kNear);
  const __m256i abs_bits = i32(0x7FFFFFFFu);
  const __m128i count = _mm_cvtsi32_si128(23 - mantissa_bits);
  const __m256i round_half = i32(1u << (22 - mantissa_bits));
  const __m256i rebias = i32(static_cast<std::uint32_t>((127 - (e4m3 ? 7 : 15)) << mantissa_bits));
  const int max_finite = e4m3 ? 0x7E : 0x7B;
  const __m256i top_code = _mm256_set1_epi32(saturate ? max_finite : max_finite + 1);
  const __m256i sign_bit = i32(0x80u);
  __m256i vmax = _mm256_setzero_si256();
  alignas(32) std::uint8_t masks[kBlock / 8];
  alignas(32) std::int32_t list[kBlock];
  alignas(32) float y[kBlock];
  for (std::int64_t i = 0; i < n; i += 8) {
    const bool whole = n - i >= 8;
    const __m256i live = live_lanes(n - i);
    const __m256 xv = whole ? _mm256_loadu_ps(x + i) : _mm256_maskload_ps(x + i, live);
    const __m256 yv = approx(xv);
    const __m256i tb = _mm256_castps_si256(_mm256_mul_ps(yv, vscale));
    const __m256i off = _mm256_and_si256(_mm256_add_epi32(tb, shift), dropped);
    const __m256i ab = _mm256_and_si256(_mm256_castps_si256(yv), abs_bits);
    // off and window are below 2^31: a signed compare.
    const __m256i near = _mm256_cmpgt_epi32(window, off);
    const __m256i range = _mm256_and_si256(live, ge_epu32(_mm256_sub_epi32(ab, vlow), span));
    const __m256i below = _mm256_castps_si256(_mm256_cmp_ps(xv, neg4, _CMP_LT_OQ));
    const __m256i exact = _mm256_or_si256(_mm256_or_si256(near, range), below);
    const __m256i mag = _mm256_min_epu32(
        _mm256_sub_epi32(_mm256_srl_epi32(_mm256_add_epi32(_mm256_and_si256(tb, abs_bits), round_half), count), rebias),
        top_code);
    const __m256i codes = _mm256_or_si256(mag, _mm256_and_si256(_mm256_srli_epi32(tb, 24), sign_bit));
    const __m128i c16 = _mm_packus_epi32(_mm256_castsi256_si128(codes), _mm256_extracti128_si256(codes, 1));
    const __m128i c8 = _mm_packus_epi16(c16, c16);
    if (whole) {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(q + i), c8);
    } else {
      alignas(16) std::uint8_t t[16];
      _mm_store_si128(reinterpret_cast<__m128i*>(t), c8);
      for (std::int64_t k = 0; k < n - i; ++k) q[i + k] = t[k];
    }
    _mm256_store_ps(y + i, yv);  // i + 8 <= kBlock: y has room for a tail's dead lanes
    vmax = _mm256_max_epu32(vmax, _mm256_andnot_si256(exact, ab));  // dead lanes: x = 0, ab = 0
    masks[i >> 3] = static_cast<std::uint8_t>(_mm256_movemask_ps(_mm256_castsi256_ps(exact)));
  }
  std::int64_t count_exact = 0;
  for (std::int64_t v = 0; v < (n + 7) / 8; ++v)
    for (unsigned bits = masks[v]; bits; bits &= bits - 1)
      list[count_exact++] = static_cast<std::int32_t>(v * 8 + __builtin_ctz(bits));
  const Format f = e4m3 ? Format::E4M3 : Format::E5M2;
  __m256i emax = _mm256_setzero_si256();
  auto exact_lanes = [&](const std::int32_t* at_list, std::int64_t count_lanes, bool encode) {
    for (std::int64_t j = 0; j < count_lanes; j += 8) {
      const std::int64_t lanes = count_lanes - j < 8 ? count_lanes - j : 8;
      alignas(32) float in[8] = {};
      for (std::int64_t k = 0; k < lanes; ++k) in[k] = x[at_list[j + k]];
      const __m256 e = exact8(_mm256_load_ps(in));
      emax = _mm256_max_epu32(emax, _mm256_and_si256(live_lanes(lanes), _mm256_and_si256(_mm256_castps_si256(e), abs_bits)));
      if (!encode) continue;
      alignas(32) float t[8];
      _mm256_store_ps(t, _mm256_mul_ps(e, vscale));
      for (std::int64_t k = 0; k < lanes; ++k)
        q[at_list[j + k]] = static_cast<std::uint8_t>(engine::encode(f, t[k], saturate));
    }
  };
  exact_lanes(list, count_exact, true);
  // The amax: every lane that may hold it takes its exact value (see the
  // AVX-512 kernel).
  const std::uint32_t m = max_lane(vmax);
  if (m > 0) {
    const __m256 threshold = _mm256_set1_ps(std::bit_cast<float>(m) * (1.0f - 0x1p-12f));
    const __m256 abs_mask = _mm256_castsi256_ps(abs_bits);
    std::int64_t count_top = 0;
    for (std::int64_t i = 0; i < n; i += 8) {
      const __m256 top = _mm256_and_ps(_mm256_castsi256_ps(live_lanes(n - i)),
                                       _mm256_cmp_ps(_mm256_and_ps(_mm256_load_ps(y + i), abs_mask), threshold, _CMP_GE_OQ));
      for (unsigned bits = static_cast<unsigned>(_mm256_movemask_ps(top)) & ~static_cast<unsigned>(masks[i >> 3]);
           bits; bits &= bits - 1)
        list[count_top++] = static_cast<std::int32_t>(i + __builtin_ctz(bits));
    }
    exact_lanes(list, count_top, false);
  }
  return max_lane(emax);
}

void gelu_approx_avx2(const float* x, float* y, std::int64_t n) {
  const Approx approx;
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, approx(_mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i live = live_lanes(n - i);
    _mm256_maskstore_ps(y + i, live, approx(_mm256_maskload_ps(x + i, live)));
  }
}

}  // namespace engine::cpu
