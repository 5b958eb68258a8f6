// FP8 -> BF16 decode with AVX-512BW: the 128 magnitude patterns live in four
// zmm registers and two VPERMI2W lookups per 32 codes replace 32 scalar table
// loads. Compiled with -mavx512f -mavx512bw; called only after a run-time check.
#include <immintrin.h>

#include "backend/cpu/fp8_bf16.h"

namespace engine::cpu {

void fp8_to_bf16_avx512(const std::uint16_t* magnitudes, const std::uint8_t* src,
                        std::uint16_t* dst, std::int64_t n) {
  const __m512i t0 = _mm512_loadu_si512(magnitudes);
  const __m512i t1 = _mm512_loadu_si512(magnitudes + 32);
  const __m512i t2 = _mm512_loadu_si512(magnitudes + 64);
  const __m512i t3 = _mm512_loadu_si512(magnitudes + 96);
  const __m512i bit6 = _mm512_set1_epi16(0x40);
  const __m512i bit7 = _mm512_set1_epi16(0x80);
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512i code = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    // Index bits 0-5 pick one of 64 entries of a register pair; bit 6 picks
    // the pair; bit 7 (the sign) moves to bit 15.
    const __m512i lo = _mm512_permutex2var_epi16(t0, code, t1);
    const __m512i hi = _mm512_permutex2var_epi16(t2, code, t3);
    const __m512i mag = _mm512_mask_blend_epi16(_mm512_test_epi16_mask(code, bit6), lo, hi);
    const __m512i sign = _mm512_slli_epi16(_mm512_and_si512(code, bit7), 8);
    _mm512_storeu_si512(dst + i, _mm512_or_si512(mag, sign));
  }
  for (; i < n; ++i)
    dst[i] = static_cast<std::uint16_t>(magnitudes[src[i] & 0x7Fu] | ((src[i] & 0x80u) << 8));
}

}  // namespace engine::cpu
