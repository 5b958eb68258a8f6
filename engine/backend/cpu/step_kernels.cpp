// Step-level loops of the CPU backend, one clone per ISA (step_kernels.h).
#include "backend/cpu/step_kernels.h"

#include <algorithm>
#include <bit>
#include <cmath>
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

PL_CPU_CLONES void error_sums_run(const float* a, const float* b, std::int64_t n, double* out) {
  v8d dlo = {}, dhi = {}, rlo = {}, rhi = {}, xlo = {}, xhi = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    v8f a0, a1, b0, b1;
    std::memcpy(&a0, a + i, sizeof a0);
    std::memcpy(&a1, a + i + kLanes / 2, sizeof a1);
    std::memcpy(&b0, b + i, sizeof b0);
    std::memcpy(&b1, b + i + kLanes / 2, sizeof b1);
    const v8d db0 = __builtin_convertvector(b0, v8d), db1 = __builtin_convertvector(b1, v8d);
    const v8d d0 = __builtin_convertvector(a0, v8d) - db0, d1 = __builtin_convertvector(a1, v8d) - db1;
    dlo += d0 * d0;
    dhi += d1 * d1;
    rlo += db0 * db0;
    rhi += db1 * db1;
    xlo += d0 * db0;
    xhi += d1 * db1;
  }
  double acc[3][kLanes];
  std::memcpy(acc[0], &dlo, sizeof dlo);
  std::memcpy(acc[0] + kLanes / 2, &dhi, sizeof dhi);
  std::memcpy(acc[1], &rlo, sizeof rlo);
  std::memcpy(acc[1] + kLanes / 2, &rhi, sizeof rhi);
  std::memcpy(acc[2], &xlo, sizeof xlo);
  std::memcpy(acc[2] + kLanes / 2, &xhi, sizeof xhi);
  for (int j = 0; i + j < n; ++j) {
    const double bj = static_cast<double>(b[i + j]), d = static_cast<double>(a[i + j]) - bj;
    acc[0][j] += d * d;
    acc[1][j] += bj * bj;
    acc[2][j] += d * bj;
  }
  for (int k = 0; k < 3; ++k) out[k] += fold_lanes(acc[k]);
}

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

namespace {

// census_class_sums's loop; kOwn: own is set (its zeros force Underflow).
template <bool kOwn>
[[gnu::always_inline]] inline void class_sums(const float* __restrict v, const float* __restrict own, std::int64_t n,
                                              double scale, double underflow, double subnormal_hi, double overflow,
                                              double tie_at, std::int64_t* out) {
  std::int64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double a = std::fabs(static_cast<double>(v[i]));
    const double w = a * scale;
    const bool nan = w != w, z = a != 0.0;
    bool forced = false;
    if constexpr (kOwn) forced = own[i] == 0.0f;
    const bool keep = z & !forced;
    s0 += z;
    s1 += z & ((w != 0.0) | forced);
    s2 += keep & ((w > underflow) | nan);
    s3 += keep & ((w >= subnormal_hi) | nan);
    s4 += keep & ((w > overflow) | (w == tie_at) | nan);
  }
  out[0] += s0;
  out[1] += s1;
  out[2] += s2;
  out[3] += s3;
  out[4] += s4;
}

}  // namespace

// Each count a sum of comparisons (vectorized; the classes are nested, so
// the caller takes differences). tie_at: the overflow threshold where a tie
// overflows, else -1, which no |v| equals.
PL_CPU_CLONES void census_class_sums(const float* v, const float* own, std::int64_t n, double scale,
                                     double underflow, double subnormal_hi, double overflow, bool tie,
                                     std::int64_t* out) {
  const double tie_at = tie ? overflow : -1.0;
  if (own) class_sums<true>(v, own, n, scale, underflow, subnormal_hi, overflow, tie_at, out);
  else class_sums<false>(v, nullptr, n, scale, underflow, subnormal_hi, overflow, tie_at, out);
}

PL_CPU_CLONES std::uint32_t amax_bits(const float* x, std::int64_t n) {
  std::uint32_t m = 0;
  for (std::int64_t i = 0; i < n; ++i) m = std::max(m, std::bit_cast<std::uint32_t>(x[i]) & 0x7FFFFFFFu);
  return m;
}

}  // namespace engine::cpu
