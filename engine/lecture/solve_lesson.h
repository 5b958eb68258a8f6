// Solver lessons: the system a preset describes, its runs solved, and the
// claims' values (converged, iterations, errors, the scale) read from them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lecture/preset.h"
#include "solve/matrix.h"
#include "solve/refine.h"

namespace engine {

class Backend;

struct SolveLesson {
  Matrix a;
  std::vector<double> b, x_true;  // b = A x_true
  std::vector<SolveRun> runs;     // the preset's solve_runs with their results
};

// The system a SolveProblem describes: A = random_matrix(n, cond, seed)
// times matrix_scale (each entry rounded once, in FP64), x_true =
// random_vector(n, seed + 1), b = A x_true (as the CLI's solve draws them).
void build_solve_system(const SolveProblem& s, Matrix& a, std::vector<double>& x_true, std::vector<double>& b);

// Builds the preset's system (SolveProblem) and solves it with every run,
// in order, on `be` (as solve_refine: null makes a CPU backend per call),
// calling on_run (when given) with each run as it finishes. Throws
// std::invalid_argument for a preset that is not a solver lesson. Any
// thread; the runs take the engine's threads.
SolveLesson run_solve_lesson(const Preset& p, Backend* be = nullptr,
                             const std::function<void(const SolveRun&)>& on_run = {});

// The value of a solver lesson's claim over `runs` (matched by name):
//   converged          1 when the run converged, else 0
//   iterations         updates applied to the returned x (0: the first solve was enough)
//   gmres_iterations   GMRES-IR's inner steps, all updates together
//   backward_error     the normwise backward error of the returned x
//   forward_error      ||x - x_true|| / ||x_true|| (infinity norms)
//   scale              the power of two the factorization multiplied A by
// with vs: the ratio run / vs (1 when both are 0). NaN when a run is missing.
double solve_claim_value(const Claim& c, const std::vector<SolveRun>& runs);

}  // namespace engine
