// 2x2 max pooling on AVX-512: 16 windows of a row pair per step, the same
// rule as pool.cpp's scalar loop (first maximum in window order; a NaN wins
// and stays), so the same values and argmax indices bit for bit. Compiled
// for AVX-512F; pool.cpp calls it only after a run-time CPU check.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "backend/cpu/kernels.h"

namespace engine::cpu {

namespace {

// One candidate of the window: v (flat index idx) replaces best when best
// is not NaN and v is larger (ordered) or NaN.
inline void take(__m512& best, __m512i& bi, __m512 v, __m512i idx) {
  const __mmask16 t = _mm512_cmp_ps_mask(best, best, _CMP_ORD_Q) &
                      (_mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q));
  best = _mm512_mask_blend_ps(t, best, v);
  bi = _mm512_mask_blend_epi32(t, bi, idx);
}

}  // namespace

void maxpool2x2_plane_avx512(const float* xp, float* yp, std::int32_t* ap, std::int64_t h, std::int64_t w) {
  const std::int64_t oh = h / 2, ow = w / 2;
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512i one = _mm512_set1_epi32(1), down = _mm512_set1_epi32(static_cast<std::int32_t>(w));
  for (std::int64_t oy = 0; oy < oh; ++oy) {
    const float* r0 = xp + 2 * oy * w;
    const float* r1 = r0 + w;
    for (std::int64_t ox0 = 0; ox0 < ow; ox0 += 16) {
      const int cnt = static_cast<int>(std::min<std::int64_t>(16, ow - ox0));
      const int in = 2 * cnt;  // inputs of each row: never past the row (2 * ow <= w)
      const auto lo = static_cast<__mmask16>(in >= 16 ? 0xFFFFu : (1u << in) - 1u);
      const auto hi = static_cast<__mmask16>(in > 16 ? (1u << (in - 16)) - 1u : 0u);
      const std::int64_t at = 2 * ox0;
      const __m512 a0 = _mm512_maskz_loadu_ps(lo, r0 + at), a1 = _mm512_maskz_loadu_ps(hi, r0 + at + 16);
      const __m512 b0 = _mm512_maskz_loadu_ps(lo, r1 + at), b1 = _mm512_maskz_loadu_ps(hi, r1 + at + 16);
      // Window (oy, ox0 + l) starts at flat index 2 oy w + 2 (ox0 + l).
      const __m512i i0 = _mm512_add_epi32(_mm512_set1_epi32(static_cast<std::int32_t>(2 * oy * w + at)), even);
      __m512 best = _mm512_permutex2var_ps(a0, even, a1);
      __m512i bi = i0;
      take(best, bi, _mm512_permutex2var_ps(a0, odd, a1), _mm512_add_epi32(i0, one));
      take(best, bi, _mm512_permutex2var_ps(b0, even, b1), _mm512_add_epi32(i0, down));
      take(best, bi, _mm512_permutex2var_ps(b0, odd, b1), _mm512_add_epi32(_mm512_add_epi32(i0, down), one));
      const auto out = static_cast<__mmask16>((1u << cnt) - 1u);
      _mm512_mask_storeu_ps(yp + oy * ow + ox0, out, best);
      _mm512_mask_storeu_epi32(ap + oy * ow + ox0, out, bi);
    }
  }
}

}  // namespace engine::cpu
