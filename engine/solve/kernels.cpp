// The solver's inner products (kernels.h). Built, like the rest of the
// solver, without contraction into fused multiply-adds, so each clone does
// the same multiplications and additions in the same order.
#include "solve/kernels.h"

#include "numeric/clones.h"

namespace engine::solve_kernels {

namespace {
constexpr int kLanesF = 64;  // four AVX-512 registers of floats
constexpr int kLanesD = 32;  // four of doubles
}  // namespace

PL_CPU_CLONES float dot_ff(const float* a, const float* x, std::int64_t n) {
  float part[kLanesF] = {};
  std::int64_t j = 0;
  for (; j + kLanesF <= n; j += kLanesF)
    for (int l = 0; l < kLanesF; ++l) part[l] += a[j + l] * x[j + l];
  // What is left in steps of 16 (one AVX-512 register), then one at a time:
  // a short row (a triangle's) runs vectorized too.
  for (; j + 16 <= n; j += 16)
    for (int l = 0; l < 16; ++l) part[l] += a[j + l] * x[j + l];
  float s = 0.0f;
  for (; j < n; ++j) s += a[j] * x[j];
  for (int l = 0; l < kLanesF; ++l) s += part[l];
  return s;
}

PL_CPU_CLONES double dot_fd(const float* a, const double* x, std::int64_t n) {
  double part[kLanesD] = {};
  std::int64_t j = 0;
  for (; j + kLanesD <= n; j += kLanesD)
    for (int l = 0; l < kLanesD; ++l) part[l] += static_cast<double>(a[j + l]) * x[j + l];
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; ++l) part[l] += static_cast<double>(a[j + l]) * x[j + l];
  double s = 0.0;
  for (; j < n; ++j) s += static_cast<double>(a[j]) * x[j];
  for (int l = 0; l < kLanesD; ++l) s += part[l];
  return s;
}

PL_CPU_CLONES double dot_dd(const double* a, const double* x, std::int64_t n) {
  double part[kLanesD] = {};
  std::int64_t j = 0;
  for (; j + kLanesD <= n; j += kLanesD)
    for (int l = 0; l < kLanesD; ++l) part[l] += a[j + l] * x[j + l];
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; ++l) part[l] += a[j + l] * x[j + l];
  double s = 0.0;
  for (; j < n; ++j) s += a[j] * x[j];
  for (int l = 0; l < kLanesD; ++l) s += part[l];
  return s;
}

void matvec_ff(const float* a, std::int64_t n, const float* x, float* y) {
#pragma omp parallel for schedule(static) if (n >= 256)
  for (std::int64_t i = 0; i < n; ++i) y[i] = dot_ff(a + i * n, x, n);
}

void matvec_dd(const double* a, std::int64_t n, const double* x, double* y) {
#pragma omp parallel for schedule(static) if (n >= 256)
  for (std::int64_t i = 0; i < n; ++i) y[i] = dot_dd(a + i * n, x, n);
}

}  // namespace engine::solve_kernels
