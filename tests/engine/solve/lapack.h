// LAPACK's drivers as the solver's peer (tests and benchmarks only: the
// product never links LAPACK). Column-major, Fortran calling convention.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "solve/matrix.h"

extern "C" {
void dgesv_(const int* n, const int* nrhs, double* a, const int* lda, int* ipiv, double* b, const int* ldb, int* info);
void openblas_set_num_threads(int);
void dsgesv_(const int* n, const int* nrhs, double* a, const int* lda, int* ipiv, double* b, const int* ldb, double* x,
             const int* ldx, double* work, float* swork, int* iter, int* info);
}

namespace solvetest {

// A in column-major order (LAPACK's), from the engine's row-major Matrix.
inline std::vector<double> column_major(const engine::Matrix& a) {
  std::vector<double> c(a.a.size());
  for (std::int64_t i = 0; i < a.n; ++i)
    for (std::int64_t j = 0; j < a.n; ++j) c[static_cast<std::size_t>(j * a.n + i)] = a.at(i, j);
  return c;
}

struct LapackSolution {
  std::vector<double> x;
  int info = 0;
  int iter = 0;  // dsgesv: refinement steps (< 0: it fell back to dgesv)
};

// dgesv on a copy of A (column-major, as column_major gives it).
inline LapackSolution lapack_dgesv(std::vector<double> a, const std::vector<double>& b, int n) {
  LapackSolution s;
  s.x = b;
  std::vector<int> ipiv(static_cast<std::size_t>(n));
  const int one = 1;
  dgesv_(&n, &one, a.data(), &n, ipiv.data(), s.x.data(), &n, &s.info);
  return s;
}

// dsgesv's workspace (WORK, n doubles; SWORK, n (n + 1) floats), which a
// caller may keep from one call to the next.
struct LapackWork {
  std::vector<double> work;
  std::vector<float> swork;
};

// dsgesv: FP32 LU, FP64 refinement (ITERMAX 30), FP64 fallback.
inline LapackSolution lapack_dsgesv(std::vector<double> a, std::vector<double> b, int n, LapackWork* kept = nullptr) {
  LapackSolution s;
  s.x.resize(static_cast<std::size_t>(n));
  std::vector<int> ipiv(static_cast<std::size_t>(n));
  LapackWork own;
  LapackWork& w = kept ? *kept : own;
  w.work.resize(static_cast<std::size_t>(n));
  w.swork.resize(static_cast<std::size_t>(n) * static_cast<std::size_t>(n + 1));
  const int one = 1;
  dsgesv_(&n, &one, a.data(), &n, ipiv.data(), b.data(), &n, s.x.data(), &n, w.work.data(), w.swork.data(), &s.iter,
          &s.info);
  return s;
}

inline double relative_difference(const std::vector<double>& x, const std::vector<double>& ref) {
  double num = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) num = std::max(num, std::fabs(x[i] - ref[i]));
  return num / engine::norm_inf(ref);
}

}  // namespace solvetest
