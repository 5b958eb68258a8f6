// Max pooling, k x k windows with stride k and no padding (the CNN's 2x2
// pools), forward with the argmax saved for backward.
#include <cmath>

#include "backend/cpu/kernels.h"
#include "backend/cpu/parallel.h"

namespace engine::cpu {

void maxpool2d_forward(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                       const float* x, float* y, std::int32_t* argmax) {
  const std::int64_t oh = h / k, ow = w / k, planes = n * c;
#pragma omp parallel for schedule(static) if (worth_parallel(planes * h * w))
  for (std::int64_t p = 0; p < planes; ++p) {
    const float* xp = x + p * h * w;
    float* yp = y + p * oh * ow;
    std::int32_t* ap = argmax + p * oh * ow;
    for (std::int64_t oy = 0; oy < oh; ++oy)
      for (std::int64_t ox = 0; ox < ow; ++ox) {
        // First maximum in row-major window order; a NaN wins (and stays),
        // as in PyTorch, so a non-finite activation is not pooled away.
        std::int64_t best_i = oy * k * w + ox * k;
        float best = xp[best_i];
        for (std::int64_t ky = 0; ky < k; ++ky)
          for (std::int64_t kx = 0; kx < k; ++kx) {
            const std::int64_t i = (oy * k + ky) * w + ox * k + kx;
            const float v = xp[i];
            if (!std::isnan(best) && (v > best || std::isnan(v))) {
              best = v;
              best_i = i;
            }
          }
        yp[oy * ow + ox] = best;
        ap[oy * ow + ox] = static_cast<std::int32_t>(best_i);
      }
  }
}

void maxpool2d_backward(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                        std::int64_t k, const float* dy, const std::int32_t* argmax, float* dx) {
  const std::int64_t oh = h / k, ow = w / k, planes = n * c;
#pragma omp parallel for schedule(static) if (worth_parallel(planes * h * w))
  for (std::int64_t p = 0; p < planes; ++p) {
    float* dxp = dx + p * h * w;
    for (std::int64_t i = 0; i < h * w; ++i) dxp[i] = 0.0f;
    const float* dyp = dy + p * oh * ow;
    const std::int32_t* ap = argmax + p * oh * ow;
    // Windows do not overlap, but += keeps it right for any argmax.
    for (std::int64_t o = 0; o < oh * ow; ++o) dxp[ap[o]] += dyp[o];
  }
}

}  // namespace engine::cpu
