// Step-level loops of the CPU backend, one clone per ISA (step_kernels.h).
#include "backend/cpu/step_kernels.h"

#include <cstring>

#include "backend/cpu/lanes.h"
#include "numeric/clones.h"

namespace engine::cpu {
namespace {

// Partial sum j gets the squares of values j, j + 16, j + 32, ... of
// [0, n), in that order; `bad` counts inf/NaN. Scale: each value is x * inv
// first, written back (write == true).
template <bool write>
[[gnu::always_inline]] inline double squares(float* x, std::int64_t n, float inv, std::int64_t* nonfinite) {
  v8d lo = {}, hi = {};
  v16i bad = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    v16f v;
    std::memcpy(&v, x + i, sizeof v);
    if constexpr (write) {
      v = v * inv;
      std::memcpy(x + i, &v, sizeof v);
    }
    v16u u;
    std::memcpy(&u, &v, sizeof u);
    bad -= (u & 0x7F800000u) == 0x7F800000u;  // -1 where true
    v8f a, b;
    std::memcpy(&a, &v, sizeof a);
    std::memcpy(&b, reinterpret_cast<const char*>(&v) + sizeof a, sizeof b);
    const v8d da = __builtin_convertvector(a, v8d), db = __builtin_convertvector(b, v8d);
    lo += da * da;
    hi += db * db;
  }
  double acc[kLanes];
  std::memcpy(acc, &lo, sizeof lo);
  std::memcpy(acc + kLanes / 2, &hi, sizeof hi);
  std::int64_t count = 0;
  for (int j = 0; j < kLanes; ++j) count += bad[j];
  for (int j = 0; i + j < n; ++j) {
    float v = x[i + j];
    if constexpr (write) {
      v *= inv;
      x[i + j] = v;
    }
    count += nonfinite_bit(v);
    acc[j] += static_cast<double>(v) * static_cast<double>(v);
  }
  *nonfinite = count;
  return fold_lanes(acc);
}

}  // namespace

PL_CPU_CLONES void add_run(const float* a, const float* b, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

PL_CPU_CLONES void scale_run(float* x, float s, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x[i] *= s;
}

PL_CPU_CLONES void scale_bias_rows(float* c, std::int64_t rows, std::int64_t n, std::int64_t ldc, float alpha,
                                   const float* bias) {
  for (std::int64_t i = 0; i < rows; ++i) {
    float* r = c + i * ldc;
    if (bias)
      for (std::int64_t j = 0; j < n; ++j) r[j] = alpha * r[j] + bias[j];
    else
      for (std::int64_t j = 0; j < n; ++j) r[j] = alpha * r[j];
  }
}

PL_CPU_CLONES double sum_squares_run(const float* x, std::int64_t n, std::int64_t* nonfinite) {
  return squares<false>(const_cast<float*>(x), n, 1.0f, nonfinite);
}

PL_CPU_CLONES double unscale_run(float* x, std::int64_t n, float inv, std::int64_t* nonfinite) {
  return squares<true>(x, n, inv, nonfinite);
}

PL_CPU_CLONES void sgd_plain_run(float* __restrict p, const float* __restrict g, std::int64_t n,
                                 const SgdCoeffs& c) {
  const float lr = c.lr, wd = c.weight_decay;
  for (std::int64_t i = 0; i < n; ++i) p[i] -= lr * (g[i] + wd * p[i]);
}

PL_CPU_CLONES void sgd_buffer_run(float* __restrict buf, const float* __restrict p, const float* __restrict g,
                                  std::int64_t n, const SgdCoeffs& c, bool first) {
  const float wd = c.weight_decay, momentum = c.momentum, keep = c.keep;
  if (first)
    for (std::int64_t i = 0; i < n; ++i) buf[i] = g[i] + wd * p[i];
  else
    for (std::int64_t i = 0; i < n; ++i) buf[i] = momentum * buf[i] + keep * (g[i] + wd * p[i]);
}

PL_CPU_CLONES void sgd_step_run(float* __restrict p, const float* __restrict g, const float* __restrict buf,
                                std::int64_t n, const SgdCoeffs& c, bool nesterov) {
  const float lr = c.lr, wd = c.weight_decay, momentum = c.momentum;
  if (nesterov)
    for (std::int64_t i = 0; i < n; ++i) p[i] -= lr * ((g[i] + wd * p[i]) + momentum * buf[i]);
  else
    for (std::int64_t i = 0; i < n; ++i) p[i] -= lr * buf[i];
}

}  // namespace engine::cpu
