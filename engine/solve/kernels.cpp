// The solver's inner products (kernels.h). Built, like the rest of the
// solver, without contraction into fused multiply-adds, so each clone does
// the same multiplications and additions in the same order.
#include "solve/kernels.h"

#include "numeric/clones.h"

// The vector helpers below are always inlined: no vector crosses a call,
// so GCC's note that their ABI depends on the target does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace engine::solve_kernels {

namespace {

// A vector from memory at any alignment (a template argument loses the
// typedef's alignment, so the templates below load through this).
template <class V, class T>
inline __attribute__((always_inline)) V load_any(const T* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof(V));
  return v;
}

// One row's sum, whatever R: four vectors of partial sums over j in steps
// of four vectors' worth (32 doubles, 64 floats), then steps of one vector
// into the first, the four added as (s0 + s1) + (s2 + s3), that vector's
// lanes added in order, then the last j one at a time onto that.
// Vec: the partial sums' vector; load(row, j): a row's values at j as Vec.
template <int R, class Vec, class T, class A, class X, class Load>
inline __attribute__((always_inline)) void rows_dot(const A* a, std::int64_t lda, const X* x, std::int64_t n, T* out,
                                                   Load load) {
  constexpr int kL = sizeof(Vec) / sizeof(T);
  Vec s[R][4] = {};
  std::int64_t j = 0;
  for (; j + 4 * kL <= n; j += 4 * kL) {
    Vec xv[4];
    for (int q = 0; q < 4; ++q) xv[q] = load_any<Vec>(x + j + q * kL);
    for (int r = 0; r < R; ++r)
      for (int q = 0; q < 4; ++q) s[r][q] = s[r][q] + load(a + r * lda, j + q * kL) * xv[q];
  }
  for (; j + kL <= n; j += kL) {
    const Vec xv = load_any<Vec>(x + j);
    for (int r = 0; r < R; ++r) s[r][0] = s[r][0] + load(a + r * lda, j) * xv;
  }
  for (int r = 0; r < R; ++r) {
    const Vec v = (s[r][0] + s[r][1]) + (s[r][2] + s[r][3]);
    T t = 0;
    for (int l = 0; l < kL; ++l) t += v[l];
    const A* row = a + r * lda;
    for (std::int64_t k = j; k < n; ++k) t += static_cast<T>(row[k]) * x[k];
    out[r] = t;
  }
}

template <int R>
inline __attribute__((always_inline)) void rows_ff(const float* a, std::int64_t lda, const float* x, std::int64_t n,
                                                  float* out) {
  rows_dot<R, F16, float>(a, lda, x, n, out,
                          [](const float* row, std::int64_t j) { return load_any<F16>(row + j); });
}
template <int R>
inline __attribute__((always_inline)) void rows_fd(const float* a, std::int64_t lda, const double* x, std::int64_t n,
                                                  double* out) {
  rows_dot<R, D8, double>(a, lda, x, n, out, [](const float* row, std::int64_t j) {
    return __builtin_convertvector(load_any<F8>(row + j), D8);
  });
}
template <int R>
inline __attribute__((always_inline)) void rows_dd(const double* a, std::int64_t lda, const double* x, std::int64_t n,
                                                  double* out) {
  rows_dot<R, D8, double>(a, lda, x, n, out,
                          [](const double* row, std::int64_t j) { return load_any<D8>(row + j); });
}

}  // namespace

PL_CPU_CLONES float dot_ff(const float* a, const float* x, std::int64_t n) {
  float s;
  rows_ff<1>(a, 0, x, n, &s);
  return s;
}
PL_CPU_CLONES double dot_fd(const float* a, const double* x, std::int64_t n) {
  double s;
  rows_fd<1>(a, 0, x, n, &s);
  return s;
}
PL_CPU_CLONES double dot_dd(const double* a, const double* x, std::int64_t n) {
  double s;
  rows_dd<1>(a, 0, x, n, &s);
  return s;
}
PL_CPU_CLONES void dot4_ff(const float* a, std::int64_t lda, const float* x, std::int64_t n, float* out) {
  rows_ff<4>(a, lda, x, n, out);
}
PL_CPU_CLONES void dot4_fd(const float* a, std::int64_t lda, const double* x, std::int64_t n, double* out) {
  rows_fd<4>(a, lda, x, n, out);
}
PL_CPU_CLONES void dot4_dd(const double* a, std::int64_t lda, const double* x, std::int64_t n, double* out) {
  rows_dd<4>(a, lda, x, n, out);
}

namespace {
// Rows in fours, each thread a contiguous range (a multiple of four).
template <class T, class Dot4, class Dot1>
void matvec(const T* a, std::int64_t n, const T* x, T* y, Dot4 dot4, Dot1 dot1) {
  const std::int64_t quads = n / 4;
#pragma omp parallel for schedule(static) if (n >= 256)
  for (std::int64_t q = 0; q < quads; ++q) dot4(a + 4 * q * n, n, x, n, y + 4 * q);
  for (std::int64_t i = 4 * quads; i < n; ++i) y[i] = dot1(a + i * n, x, n);
}
}  // namespace

void matvec_ff(const float* a, std::int64_t n, const float* x, float* y) { matvec(a, n, x, y, dot4_ff, dot_ff); }

void matvec_dd(const double* a, std::int64_t n, const double* x, double* y) { matvec(a, n, x, y, dot4_dd, dot_dd); }

}  // namespace engine::solve_kernels
