// Iterative refinement of Ax = b on a low-precision LU: LU-based (LU-IR)
// and GMRES-based (GMRES-IR) in Carson and Higham's three precisions (the
// factorization's, the working precision of x and its update, the
// residual's).
//
// LU-IR: x0 = A^-1 b through the factors (triangular solves in FP32, or
// FP64 for an FP64 factor); then r = b - A x in the residual precision,
// d = A^-1 r through the factors the same way, x = x + d in the working
// precision.
// GMRES-IR: the same, but d solves U^-1 L^-1 P A d = U^-1 L^-1 P r by GMRES
// (left-preconditioned, modified Gram-Schmidt, Givens rotations) in the
// GMRES precision: FP64 (Carson and Higham's GMRES-IR: the preconditioner
// applied in FP64 with the factors' values), or FP32 (Amestoy, Buttari,
// Higham, L'Excellent, Mary and Vieuble's five-precision GMRES-IR with
// u_g = u_p = FP32: A rounded to FP32 once for GMRES's products, the
// preconditioner's substitutions and GMRES's vectors in FP32; the
// Hessenberg matrix and its rotations stay in FP64). The inner solve stops
// when its preconditioned residual falls by gmres_tol (for FP32 GMRES at
// least 2^-20, about 16 u_fp32: below that FP32 cannot follow it), or after
// gmres_max steps. FP32 GMRES halves the bytes each inner step reads; the
// outer residual stays in the residual precision, so the answer is as
// accurate, reached in more outer steps while kappa(A) u_fp32 << 1.
//
// Stopping, after each x_i (i = 0 is the first solve): converged when the
// normwise backward error eta_i = ||b - A x_i|| / (||A|| ||x_i|| + ||b||)
// (infinity norms, residual in FP64) is at most tol, or when the update
// ||d_i|| / ||x_i|| is at most the working precision's unit roundoff (x no
// longer changes), or when the update shrank by less than half from the one
// before with eta_i already at FP64's noise level, sqrt(n) u (LAPACK
// dsgesv's test); not converged when the update is not finite (diverged),
// when it stopped shrinking above that level (stagnated: with
// kappa(A) u_factor >= 1 the updates stop shrinking), or after max_iter
// updates.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "solve/lu.h"
#include "solve/matrix.h"

namespace engine {

class Backend;

enum class Method : std::uint8_t { LuIr, GmresIr };
const char* method_key(Method m);  // "lu-ir", "gmres-ir"

// Precisions of the residual and of x and its update.
enum class Arith : std::uint8_t {
  FP32,
  FP64,
  FP80,  // x87 extended (long double, 64-bit significand): a residual more precise than FP64
};
const char* arith_key(Arith a);  // "fp32", "fp64", "fp80"

struct RefineConfig {
  Method method = Method::LuIr;
  LuConfig lu;
  Arith residual = Arith::FP64;
  Arith working = Arith::FP64;  // FP32 or FP64
  int max_iter = 30;            // updates at most (LAPACK dsgesv's ITERMAX)
  double tol = 0x1p-53;         // backward error that counts as converged
  Arith gmres = Arith::FP64;    // GMRES-IR's inner precision: FP64 or FP32
  int gmres_max = 0;            // inner steps per update; 0: min(n, 500)
  double gmres_tol = 1e-10;
};
// "" when usable, else the problem (in one line).
std::string refine_config_problem(const RefineConfig& c);

struct IterationRecord {
  int iteration = 0;              // 0: the first solve
  double backward_error = 0.0;    // eta_i, infinity norms, FP64 residual
  double forward_error = 0.0;     // ||x_i - x|| / ||x|| (NaN without the exact solution)
  double update = 0.0;            // ||d_i|| / ||x_i|| (NaN for i = 0)
  int gmres_iterations = 0;       // GMRES-IR: inner steps of this update
};

struct SolveResult {
  std::vector<IterationRecord> history;
  std::vector<double> x;
  bool converged = false;
  std::string reason;             // one line: why it stopped
  int iterations = 0;             // updates applied to the returned x
  int gmres_iterations = 0;       // all inner steps
  double backward_error = 0.0;    // of the returned x
  double forward_error = 0.0;     // NaN without the exact solution
  double scale = 1.0;             // the factorization's scale mu
  double factor_seconds = 0.0;
  double refine_seconds = 0.0;    // everything after the factorization
  double flops_total = 0.0;
  double flops_low = 0.0;         // done below FP64 (factorization, FP32 solves and residuals)
};

// One named run of the solver: its settings and, once run, its result (the
// `run` column of the CSV files; the CLI's solve and the solver lessons).
struct SolveRun {
  std::string name;
  RefineConfig config;
  SolveResult result;
};

// The buffers a caller solving one system after another keeps between
// calls (lu.h's LuWorkspace, and A's FP32 copy for FP32 GMRES): a solve
// then allocates only vectors of n.
struct SolveWorkspace {
  LuWorkspace lu;
  std::vector<float> a32;
};

// Solves A x = b (b.size() == A.n). x_true, when given, is the exact
// solution (forward errors). Throws std::invalid_argument for a bad config
// or size; a breakdown or no convergence is a result (converged false).
// `be`: as lu_factor. `ws`: buffers to reuse (null: the call's own).
SolveResult solve_refine(const Matrix& a, const std::vector<double>& b, const std::vector<double>* x_true,
                         const RefineConfig& config, Backend* be = nullptr, SolveWorkspace* ws = nullptr);

// The same with factors made earlier (their time is not counted); `ws`'s
// a32 is the only part used.
SolveResult refine_with(const Matrix& a, const LuFactors& lu, const std::vector<double>& b,
                        const std::vector<double>* x_true, const RefineConfig& config, SolveWorkspace* ws = nullptr);

}  // namespace engine
