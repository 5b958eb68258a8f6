// The fp16 recipe's optimizer block in one pass (compiled with -mavx2
// -mf16c, no contraction; called after a run-time check): weights kept only
// as FP16 codes, an FP16 (or FP32) momentum buffer, round-to-nearest. The
// bits of the four passes it replaces (optimizer.cpp's sgd_encode_blocks:
// decode, sgd_buffer_run, round_state, sgd_step_run, encode).
#include <immintrin.h>

#include "backend/cpu/step_kernels.h"
#include "numeric/convert.h"

namespace engine::cpu {

void sgd_fp16_block(std::uint16_t* codes, float* value, const float* grad, float* buf, std::int64_t n,
                    const SgdCoeffs& c, bool first, bool fp16_state) {
  constexpr int kRne = _MM_FROUND_TO_NEAREST_INT;
  const __m256 wd = _mm256_set1_ps(c.weight_decay), mom = _mm256_set1_ps(c.momentum),
               keep = _mm256_set1_ps(c.keep), lr = _mm256_set1_ps(c.lr);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 p = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i)));
    // buf = g + wd p, or momentum buf + keep (g + wd p): each product and
    // sum rounded, as the plain expressions compile without contraction.
    const __m256 t = _mm256_add_ps(_mm256_loadu_ps(grad + i), _mm256_mul_ps(wd, p));
    __m256 b = first ? t : _mm256_add_ps(_mm256_mul_ps(mom, _mm256_loadu_ps(buf + i)), _mm256_mul_ps(keep, t));
    if (fp16_state) b = _mm256_cvtph_ps(_mm256_cvtps_ph(b, kRne));
    _mm256_storeu_ps(buf + i, b);
    p = _mm256_sub_ps(p, _mm256_mul_ps(lr, b));
    _mm256_storeu_ps(value + i, p);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + i), _mm256_cvtps_ph(p, kRne));
  }
  for (; i < n; ++i) {
    float p = fp16_to_fp32(codes[i]);
    const float t = grad[i] + c.weight_decay * p;
    float b = first ? t : c.momentum * buf[i] + c.keep * t;
    if (fp16_state) b = fp16_to_fp32(fp32_to_fp16(b));
    buf[i] = b;
    p -= c.lr * b;
    value[i] = p;
    codes[i] = fp32_to_fp16(p);
  }
}

}  // namespace engine::cpu
