// The solver against LAPACK (OpenBLAS's): our FP32 LU-IR takes dsgesv's
// iteration count (+-1) wherever dsgesv converges, and both land on
// dgesv's solution; FP16 LU-IR at kappa = 1e2 matches dgesv to 1e-12.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "backend/backend.h"
#include "backend/registry.h"
#include "engine/solve/lapack.h"
#include "solve/refine.h"

namespace {
using engine::Method;

engine::Backend& cpu() {
  static engine::BackendChoice be = engine::make_backend("cpu", 0);
  return *be.backend;
}

// OpenBLAS on the calling thread: the answers do not depend on its
// threads, and a sanitizer build sees no threads it did not instrument.
const int kOneThread = [] {
  openblas_set_num_threads(1);
  return 1;
}();

engine::RefineConfig config(const char* factor) {
  engine::RefineConfig c;
  c.method = Method::LuIr;
  c.lu.factor = *engine::parse_factor_format(factor);
  return c;
}

TEST(SolveLapackPeer, Fp32LuIrTakesDsgesvsIterationsAndBothMatchDgesv) {
  const int n = 256;
  int compared = 0;
  for (double cond : {1e1, 1e2, 1e3, 1e4, 1e5, 1e6}) {
    for (std::uint64_t seed : {1u, 2u}) {
      const engine::Matrix a = engine::random_matrix(n, cond, seed);
      const auto x = engine::random_vector(n, seed + 100);
      std::vector<double> b(static_cast<std::size_t>(n));
      engine::matvec(a, x.data(), b.data());
      const auto col = solvetest::column_major(a);
      const auto ref = solvetest::lapack_dgesv(col, b, n);
      const auto mixed = solvetest::lapack_dsgesv(col, b, n);
      ASSERT_EQ(ref.info, 0);
      ASSERT_EQ(mixed.info, 0);
      const auto ours = engine::solve_refine(a, b, &x, config("fp32"), &cpu());
      // The solutions agree to what the conditioning allows of an FP64 solve.
      const double tol = std::max(1e-12, cond * 1e-14);
      EXPECT_LT(solvetest::relative_difference(ours.x, ref.x), tol) << "cond " << cond << " seed " << seed;
      EXPECT_LT(solvetest::relative_difference(mixed.x, ref.x), tol) << "cond " << cond << " seed " << seed;
      if (mixed.iter < 0) continue;  // dsgesv fell back to dgesv: no count to hold ours to
      ++compared;
      EXPECT_TRUE(ours.converged) << "cond " << cond << ": " << ours.reason;
      EXPECT_NEAR(ours.iterations, mixed.iter, 1) << "cond " << cond << " seed " << seed;
    }
  }
  EXPECT_GE(compared, 8);  // dsgesv converges up to about 1e6 at this size
}

TEST(SolveLapackPeer, Fp16LuIrMatchesDgesvAtCond1e2) {
  const int n = 512;
  const engine::Matrix a = engine::random_matrix(n, 1e2, 1);
  const auto x = engine::random_vector(n, 2);
  std::vector<double> b(static_cast<std::size_t>(n));
  engine::matvec(a, x.data(), b.data());
  const auto ref = solvetest::lapack_dgesv(solvetest::column_major(a), b, n);
  ASSERT_EQ(ref.info, 0);
  const auto ours = engine::solve_refine(a, b, &x, config("fp16"), &cpu());
  EXPECT_TRUE(ours.converged) << ours.reason;
  EXPECT_LT(ours.backward_error, 1e-15);
  EXPECT_LE(ours.iterations, 10);
  EXPECT_LT(solvetest::relative_difference(ours.x, ref.x), 1e-12);
}

}  // namespace
