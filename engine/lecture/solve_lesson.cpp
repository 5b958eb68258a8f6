// Solver lessons: building the system, running its solves, the claims' values.
#include "lecture/solve_lesson.h"

#include <limits>
#include <stdexcept>

namespace engine {

void build_solve_system(const SolveProblem& s, Matrix& a, std::vector<double>& x_true, std::vector<double>& b) {
  a = random_matrix(s.n, s.cond, s.seed);
  // A scale that is a power of two changes no significand; any other
  // rounds each entry once, in FP64, before any low precision sees it.
  if (s.matrix_scale != 1.0)
    for (double& v : a.a) v *= s.matrix_scale;
  // The exact solution and b as the solve command draws them.
  x_true = random_vector(s.n, s.seed + 1);
  b.assign(static_cast<std::size_t>(s.n), 0.0);
  matvec(a, x_true.data(), b.data());
}

SolveLesson run_solve_lesson(const Preset& p, Backend* be, const std::function<void(const SolveRun&)>& on_run) {
  if (p.kind != PresetKind::Solve) throw std::invalid_argument(p.name + ": not a solver lesson");
  SolveLesson out;
  build_solve_system(p.problem, out.a, out.x_true, out.b);
  SolveWorkspace ws;  // the runs share one set of buffers
  for (const SolveRun& r : p.solve_runs) {
    SolveRun run = r;
    run.result = solve_refine(out.a, out.b, &out.x_true, r.config, be, &ws);
    out.runs.push_back(std::move(run));
    if (on_run) on_run(out.runs.back());
  }
  return out;
}

namespace {

double own_value(const std::string& m, const SolveResult& r) {
  if (m == "converged") return r.converged ? 1.0 : 0.0;
  if (m == "iterations") return static_cast<double>(r.iterations);
  if (m == "gmres_iterations") return static_cast<double>(r.gmres_iterations);
  if (m == "backward_error") return r.backward_error;
  if (m == "forward_error") return r.forward_error;
  if (m == "scale") return r.scale;
  return std::numeric_limits<double>::quiet_NaN();
}

const SolveRun* find_run(const std::vector<SolveRun>& runs, const std::string& name) {
  for (const SolveRun& r : runs)
    if (r.name == name) return &r;
  return nullptr;
}

}  // namespace

double solve_claim_value(const Claim& c, const std::vector<SolveRun>& runs) {
  const SolveRun* run = find_run(runs, c.run);
  if (!run) return std::numeric_limits<double>::quiet_NaN();
  const double v = own_value(c.metric, run->result);
  if (c.vs.empty()) return v;
  const SolveRun* vs = find_run(runs, c.vs);
  if (!vs) return std::numeric_limits<double>::quiet_NaN();
  const double w = own_value(c.metric, vs->result);
  return w != 0 ? v / w : (v == 0 ? 1.0 : std::numeric_limits<double>::infinity());
}

}  // namespace engine
