// Test-only reference of the LU defined in engine/solve/lu.h: one scalar
// at a time, every rounding through convert.h's scalar quantize, the
// trailing update's sums in order (p = 0, 1, ...), no GEMM, no bulk casts.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "numeric/convert.h"
#include "solve/lu.h"

namespace solvetest {

struct RefLu {
  std::vector<float> lu;
  std::vector<std::int64_t> pivots;
  double scale = 1.0;
  bool ok = true;
};

// The factor format F with the given accumulation and panel width nb;
// tensor_core: held in FP32, the trailing update's operands rounded to F.
inline RefLu reference_lu(const engine::Matrix& a, engine::Format F, engine::Format acc, std::int64_t nb,
                          bool tensor_core = false) {
  using engine::Format;
  const std::int64_t n = a.n;
  const bool sat = F == Format::E4M3;
  auto qo = [&](float x) { return F == Format::FP32 ? x : engine::quantize(F, x, sat); };
  auto q = [&](float x) { return tensor_core ? x : qo(x); };
  auto qa = [&](float x) { return acc == Format::FP32 ? x : engine::quantize(acc, x, false); };
  RefLu r;
  double amax = 0.0;
  for (double v : a.a) amax = std::max(amax, std::fabs(v));
  if ((F == Format::FP16 || F == Format::E4M3 || F == Format::E5M2) && amax > 0.0)
    r.scale = std::ldexp(1.0, static_cast<int>(std::floor(
                                   std::log2((F == Format::E4M3 ? 0.5 : 1.0 / 64) * engine::format_info(F).max / amax))));
  r.lu.resize(a.a.size());
  r.pivots.resize(static_cast<std::size_t>(n));
  auto w = [&](std::int64_t i, std::int64_t j) -> float& { return r.lu[static_cast<std::size_t>(i * n + j)]; };
  for (std::size_t i = 0; i < a.a.size(); ++i) r.lu[i] = q(static_cast<float>(a.a[i] * r.scale));
  for (std::int64_t k0 = 0; k0 < n; k0 += nb) {
    const std::int64_t k1 = std::min(n, k0 + nb);
    for (std::int64_t k = k0; k < k1; ++k) {
      std::int64_t p = k;
      for (std::int64_t i = k + 1; i < n; ++i)
        if (std::fabs(w(i, k)) > std::fabs(w(p, k))) p = i;
      r.pivots[static_cast<std::size_t>(k)] = p;
      for (std::int64_t j = 0; j < n; ++j) std::swap(w(k, j), w(p, j));
      if (w(k, k) == 0.0f) {
        r.ok = false;
        return r;
      }
      for (std::int64_t i = k + 1; i < n; ++i) {
        w(i, k) = q(w(i, k) / w(k, k));
        for (std::int64_t j = k + 1; j < k1; ++j) w(i, j) = q(w(i, j) - qa(w(i, k) * w(k, j)));
      }
    }
    // Step 2, once the panel's rows are final: each row of the panel right
    // of it gets the rank-1 updates of the rows above it, in order.
    for (std::int64_t i = k0 + 1; i < k1; ++i)
      for (std::int64_t p = k0; p < i; ++p)
        for (std::int64_t j = k1; j < n; ++j) w(i, j) = q(w(i, j) - qa(w(i, p) * w(p, j)));
    for (std::int64_t i = k1; i < n; ++i)
      for (std::int64_t j = k1; j < n; ++j) {
        float s = 0.0f;
        for (std::int64_t p = k0; p < k1; ++p) s = qa(s + qo(w(i, p)) * qo(w(p, j)));
        w(i, j) = q(w(i, j) - s);
      }
  }
  return r;
}

}  // namespace solvetest
