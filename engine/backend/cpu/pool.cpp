// Max pooling, k x k windows with stride k and no padding (the CNN's 2x2
// pools), forward with the argmax saved for backward.
#include <cmath>

#include "numeric/cast.h"

#include "backend/cpu/kernels.h"
#include "backend/cpu/parallel.h"

namespace engine::cpu {

namespace {

// The window rule, one candidate: v replaces best when best is not NaN and
// v is larger or NaN (first maximum in window order; a NaN wins and stays).
inline bool takes(float v, float best) { return best == best && (v > best || v != v); }

// 2x2 windows (the CNN's pools): the same rule, branch-free over a row pair.
void maxpool2x2_plane(const float* xp, float* yp, std::int32_t* ap, std::int64_t h, std::int64_t w) {
  const std::int64_t oh = h / 2, ow = w / 2;
  for (std::int64_t oy = 0; oy < oh; ++oy) {
    const float* r0 = xp + 2 * oy * w;
    const float* r1 = r0 + w;
    const auto base = static_cast<std::int32_t>(2 * oy * w);
    for (std::int64_t ox = 0; ox < ow; ++ox) {
      const auto i0 = base + static_cast<std::int32_t>(2 * ox);
      float best = r0[2 * ox];
      std::int32_t bi = i0;
      const float v1 = r0[2 * ox + 1], v2 = r1[2 * ox], v3 = r1[2 * ox + 1];
      bool t = takes(v1, best);
      best = t ? v1 : best;
      bi = t ? i0 + 1 : bi;
      t = takes(v2, best);
      best = t ? v2 : best;
      bi = t ? i0 + static_cast<std::int32_t>(w) : bi;
      t = takes(v3, best);
      best = t ? v3 : best;
      bi = t ? i0 + static_cast<std::int32_t>(w) + 1 : bi;
      yp[oy * ow + ox] = best;
      ap[oy * ow + ox] = bi;
    }
  }
}

// The 2x2 plane kernel for this CPU: 16 windows at a time where it has
// AVX-512 (pool_avx512.cpp), the same rule and the same bits.
using Plane2x2 = void (*)(const float*, float*, std::int32_t*, std::int64_t, std::int64_t);
Plane2x2 plane2x2() {
  static const Plane2x2 plane = cpu_runs_avx512() ? maxpool2x2_plane_avx512 : maxpool2x2_plane;
  return plane;
}

}  // namespace

void maxpool2d_forward(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                       const float* x, float* y, std::int32_t* argmax) {
  const std::int64_t oh = h / k, ow = w / k, planes = n * c;
  if (k == 2) {
    const Plane2x2 plane = plane2x2();
#pragma omp parallel for schedule(static) if (worth_parallel(planes * h * w))
    for (std::int64_t p = 0; p < planes; ++p) plane(x + p * h * w, y + p * oh * ow, argmax + p * oh * ow, h, w);
    return;
  }
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
            if (takes(v, best)) {
              best = v;
              best_i = i;
            }
          }
        yp[oy * ow + ox] = best;
        ap[oy * ow + ox] = static_cast<std::int32_t>(best_i);
      }
  }
}

bool maxpool2d_forward16(Format f, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                         const std::uint16_t* x, std::uint16_t* y, std::int32_t* argmax) {
  if (k != 2 || h * w > kPool16MaxPlane || !is_half_format(f)) return false;
  const std::int64_t oh = h / 2, ow = w / 2, planes = n * c;
  const Plane2x2 plane = plane2x2();
#pragma omp parallel for schedule(static) if (worth_parallel(planes * h * w))
  for (std::int64_t p = 0; p < planes; ++p) {
    // Decode, pool and encode one plane on the stack: the casts convert
    // runs and the f32 window kernel, so the bits of the three passes.
    alignas(64) float xf[kPool16MaxPlane];
    alignas(64) float yf[kPool16MaxPlane / 4];
    cast_to_f32(f, x + p * h * w, xf, static_cast<std::size_t>(h * w));
    plane(xf, yf, argmax + p * oh * ow, h, w);
    cast_from_f32(f, yf, y + p * oh * ow, static_cast<std::size_t>(oh * ow), {});
  }
  return true;
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
