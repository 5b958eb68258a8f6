// LU-IR and GMRES-IR on a low-precision LU (the stopping rules are in refine.h).
#include "solve/refine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "solve/kernels.h"

namespace engine {

const char* method_key(Method m) { return m == Method::LuIr ? "lu-ir" : "gmres-ir"; }

const char* arith_key(Arith a) {
  switch (a) {
    case Arith::FP32: return "fp32";
    case Arith::FP64: return "fp64";
    case Arith::FP80: return "fp80";
  }
  return "?";
}

std::string refine_config_problem(const RefineConfig& c) {
  const std::string lu = lu_config_problem(c.lu);
  if (!lu.empty()) return lu;
  if (c.working == Arith::FP80) return "the working precision must be fp32 or fp64";
  if (c.max_iter < 0 || c.max_iter > 10000) return "--max-iter must be in 0..10000";
  if (!(c.tol >= 0.0) || !std::isfinite(c.tol)) return "the tolerance must be a finite number >= 0";
  if (c.gmres == Arith::FP80) return "the GMRES precision must be fp32 or fp64";
  if (c.gmres_max < 0) return "the GMRES step limit must be >= 0";
  if (!(c.gmres_tol > 0.0) || !(c.gmres_tol < 1.0)) return "the GMRES tolerance must be in (0, 1)";
  return "";
}

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// r = b - A x in the residual precision (the result in double).
void residual(const Matrix& a, const std::vector<double>& b, const std::vector<double>& x, Arith prec,
              std::vector<double>& r) {
  const std::int64_t n = a.n;
  switch (prec) {
    case Arith::FP64:
      // A x (each row's sum dot_dd's), then b minus it.
      solve_kernels::matvec_dd(a.a.data(), n, x.data(), r.data());
      for (std::int64_t i = 0; i < n; ++i)
        r[static_cast<std::size_t>(i)] = b[static_cast<std::size_t>(i)] - r[static_cast<std::size_t>(i)];
      break;
    case Arith::FP32: {
      std::vector<float> xf(x.begin(), x.end());
#pragma omp parallel for schedule(static) if (n >= 256)
      for (std::int64_t i = 0; i < n; ++i) {
        const double* row = a.a.data() + i * n;
        float s = 0.0f;
        for (std::int64_t j = 0; j < n; ++j) s += static_cast<float>(row[j]) * xf[static_cast<std::size_t>(j)];
        r[static_cast<std::size_t>(i)] = static_cast<double>(static_cast<float>(b[static_cast<std::size_t>(i)]) - s);
      }
      break;
    }
    case Arith::FP80:
#pragma omp parallel for schedule(static) if (n >= 256)
      for (std::int64_t i = 0; i < n; ++i) {
        const double* row = a.a.data() + i * n;
        long double s = 0.0L;
        for (std::int64_t j = 0; j < n; ++j)
          s += static_cast<long double>(row[j]) * static_cast<long double>(x[static_cast<std::size_t>(j)]);
        r[static_cast<std::size_t>(i)] = static_cast<double>(static_cast<long double>(b[static_cast<std::size_t>(i)]) - s);
      }
      break;
  }
}

float dot(const float* a, const float* b, std::int64_t n) { return solve_kernels::dot_ff(a, b, n); }
double dot(const double* a, const double* b, std::int64_t n) { return solve_kernels::dot_dd(a, b, n); }

// GMRES on M^-1 A d = M^-1 r from d = 0, its vectors in T (double: A and
// M^-1 in FP64; float: A's FP32 copy a32 and M^-1 in FP32). The Hessenberg
// matrix, its Givens rotations and the small solve are in double. Returns
// the steps taken.
template <class T>
int gmres(const Matrix& a, const std::vector<float>& a32, const LuFactors& lu, const std::vector<double>& r,
          int max_steps, double tol, std::vector<double>& d, double& flops) {
  const std::int64_t n = a.n;
  const std::size_t un = static_cast<std::size_t>(n);
  const double nn = static_cast<double>(n);
  constexpr bool kF64 = std::is_same_v<T, double>;
  // y = M^-1 x.
  auto precondition = [&](const T* x, T* y) {
    if constexpr (kF64) {
      lu_solve(lu, x, y, false);
    } else {
      lu_solve_f32(lu, x, y);
    }
  };
  auto product = [&](const T* x, T* y) {
    if constexpr (kF64) matvec(a, x, y);
    else solve_kernels::matvec_ff(a32.data(), n, x, y);
  };
  std::fill(d.begin(), d.end(), 0.0);
  std::vector<T> z(un), w(un);
  // z = M^-1 r, r first brought to about 1 (its scale comes back in d).
  double rmax = 0.0;
  for (double t : r) rmax = std::max(rmax, std::fabs(t));
  if (rmax == 0.0 || !std::isfinite(rmax)) return 0;
  const int e = std::ilogb(rmax);
  for (std::size_t i = 0; i < un; ++i) w[i] = static_cast<T>(std::ldexp(r[i], -e));
  precondition(w.data(), z.data());
  flops += 2.0 * nn * nn;
  const double beta = std::sqrt(static_cast<double>(dot(z.data(), z.data(), n)));
  if (beta == 0.0 || !std::isfinite(beta)) return 0;
  const int m = max_steps;
  // The Krylov basis and the Hessenberg matrix grow a column a step: room
  // for m steps is reserved, but only the steps taken touch memory.
  std::vector<T> v;
  v.reserve(static_cast<std::size_t>(m + 1) * un);
  v.resize(un);
  const std::size_t hm = static_cast<std::size_t>(m + 1);
  std::vector<double> hcols;  // column j of H at hcols[j * (m + 1)]
  hcols.reserve(hm * static_cast<std::size_t>(m));
  auto h = [&](int i, int j) -> double& { return hcols[static_cast<std::size_t>(j) * hm + static_cast<std::size_t>(i)]; };
  std::vector<double> cs(static_cast<std::size_t>(m)), sn(static_cast<std::size_t>(m)), g(static_cast<std::size_t>(m + 1), 0.0);
  for (std::size_t i = 0; i < un; ++i) v[i] = static_cast<T>(z[i] / beta);
  g[0] = beta;
  int k = 0;
  for (int j = 0; j < m; ++j) {
    hcols.resize(static_cast<std::size_t>(j + 1) * hm, 0.0);
    const T* vj = v.data() + static_cast<std::size_t>(j) * un;
    product(vj, z.data());
    precondition(z.data(), w.data());
    flops += 4.0 * nn * nn;
    for (int i = 0; i <= j; ++i) {
      const T* vi = v.data() + static_cast<std::size_t>(i) * un;
      const T hij = dot(w.data(), vi, n);
      h(i, j) = static_cast<double>(hij);
#pragma omp simd
      for (std::int64_t t = 0; t < n; ++t) w[static_cast<std::size_t>(t)] -= hij * vi[t];
    }
    flops += 4.0 * nn * (j + 1);
    const double hn = std::sqrt(static_cast<double>(dot(w.data(), w.data(), n)));
    h(j + 1, j) = hn;
    // The earlier rotations on the new column, then one to zero h[j+1][j].
    for (int i = 0; i < j; ++i) {
      const double a0 = h(i, j), a1 = h(i + 1, j);
      h(i, j) = cs[i] * a0 + sn[i] * a1;
      h(i + 1, j) = -sn[i] * a0 + cs[i] * a1;
    }
    const double hjj = h(j, j);
    const double rad = std::hypot(hjj, hn);
    cs[j] = rad == 0.0 ? 1.0 : hjj / rad;
    sn[j] = rad == 0.0 ? 0.0 : hn / rad;
    h(j, j) = rad;
    h(j + 1, j) = 0.0;
    g[j + 1] = -sn[j] * g[j];
    g[j] = cs[j] * g[j];
    k = j + 1;
    if (!std::isfinite(rad) || std::fabs(g[j + 1]) <= tol * beta || hn == 0.0) break;
    v.resize(static_cast<std::size_t>(j + 2) * un);
    T* vn = v.data() + static_cast<std::size_t>(j + 1) * un;
    for (std::size_t t = 0; t < un; ++t) vn[t] = static_cast<T>(static_cast<double>(w[t]) / hn);
  }
  // y = H^-1 g (upper triangular k x k), d = V y, in double; then r's scale.
  std::vector<double> y(static_cast<std::size_t>(k));
  for (int i = k - 1; i >= 0; --i) {
    double s = g[i];
    for (int t = i + 1; t < k; ++t) s -= h(i, t) * y[t];
    y[i] = s / h(i, i);
  }
  for (int i = 0; i < k; ++i) {
    const T* vi = v.data() + static_cast<std::size_t>(i) * un;
    const double yi = std::ldexp(y[i], e);
    for (std::size_t t = 0; t < un; ++t) d[t] += yi * static_cast<double>(vi[t]);
  }
  flops += 2.0 * nn * k;
  return k;
}

double forward_error(const std::vector<double>& x, const std::vector<double>* x_true) {
  if (!x_true) return std::numeric_limits<double>::quiet_NaN();
  double num = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) num = std::max(num, std::fabs(x[i] - (*x_true)[i]));
  const double den = norm_inf(*x_true);
  return den > 0.0 ? num / den : (num == 0.0 ? 0.0 : std::numeric_limits<double>::infinity());
}

}  // namespace

SolveResult refine_with(const Matrix& a, const LuFactors& lu, const std::vector<double>& b,
                        const std::vector<double>* x_true, const RefineConfig& config, SolveWorkspace* ws) {
  const auto t0 = Clock::now();
  const std::int64_t n = a.n;
  const double nn = static_cast<double>(n);
  const bool low_factor = !lu.factor.fp64;
  SolveResult res;
  res.scale = lu.scale;
  res.flops_total = lu.flops;
  res.flops_low = low_factor ? lu.flops : 0.0;
  if (!lu.ok) {
    res.reason = "factorization failed: " + lu.failure;
    res.backward_error = res.forward_error = std::numeric_limits<double>::quiet_NaN();
    return res;
  }
  const double norm_a = norm_inf(a), norm_b = norm_inf(b);
  const double u_work = config.working == Arith::FP32 ? 0x1p-24 : 0x1p-53;
  const int gmres_max = config.gmres_max > 0 ? config.gmres_max : static_cast<int>(std::min<std::int64_t>(n, 500));
  // The solves with the factors: FP32 arithmetic for a low-precision factor.
  const bool fp32_solve = low_factor;
  auto count = [&](double flops, bool low) {
    res.flops_total += flops;
    if (low) res.flops_low += flops;
  };
  auto to_working = [&](std::vector<double>& v) {
    if (config.working == Arith::FP32)
      for (double& t : v) t = static_cast<double>(static_cast<float>(t));
  };

  std::vector<double> x(static_cast<std::size_t>(n)), r(static_cast<std::size_t>(n)), d(static_cast<std::size_t>(n));
  std::vector<float> own_a32;
  std::vector<float>& a32 = ws ? ws->a32 : own_a32;  // A in FP32 for FP32 GMRES, made at its first use
  bool a32_made = false;
  lu_solve(lu, b.data(), x.data(), fp32_solve);
  count(2.0 * nn * nn, fp32_solve);
  to_working(x);
  double update = std::numeric_limits<double>::quiet_NaN(), previous = update;
  int inner = 0;
  for (int i = 0;; ++i) {
    residual(a, b, x, Arith::FP64, r);
    const double norm_x = norm_inf(x);
    IterationRecord rec;
    rec.iteration = i;
    const double norm_r = norm_inf(r), denom = norm_a * norm_x + norm_b;
    // b = 0 solved by x = 0: no residual, no error (0 / 0 otherwise).
    rec.backward_error = denom > 0.0 ? norm_r / denom : (norm_r == 0.0 ? 0.0 : norm_r / denom);
    rec.forward_error = forward_error(x, x_true);
    rec.update = update;
    rec.gmres_iterations = inner;
    res.history.push_back(rec);
    res.iterations = i;
    res.backward_error = rec.backward_error;
    res.forward_error = rec.forward_error;
    if (!std::isfinite(rec.backward_error) || (i > 0 && !std::isfinite(update))) {
      res.reason = "diverged: the solution is no longer finite";
      break;
    }
    if (rec.backward_error <= config.tol) {
      res.converged = true;
      res.reason = "backward error <= tolerance";
      break;
    }
    if (i > 0 && update <= u_work) {
      res.converged = true;
      res.reason = std::string("update below the ") + arith_key(config.working) + " unit roundoff";
      break;
    }
    if (i > 1 && update > 0.5 * previous) {
      // Stopped shrinking: at FP64's noise level (LAPACK dsgesv's test,
      // ||r|| <= sqrt(n) u ||A|| ||x||) that is convergence, else not.
      if (rec.backward_error <= std::sqrt(nn) * 0x1p-53) {
        res.converged = true;
        res.reason = "backward error at the FP64 noise level (sqrt(n) u)";
      } else {
        res.reason = update > previous ? "diverged: the update grew" : "stagnated: the update shrank by less than half";
      }
      break;
    }
    if (i >= config.max_iter) {
      res.reason = "max iterations reached";
      break;
    }
    if (config.residual != Arith::FP64) residual(a, b, x, config.residual, r);
    count(2.0 * nn * nn, config.residual == Arith::FP32);
    if (config.method == Method::LuIr) {
      lu_solve(lu, r.data(), d.data(), fp32_solve);
      count(2.0 * nn * nn, fp32_solve);
      inner = 0;
    } else {
      double flops = 0.0;
      // No need to solve for more than this update can still win: a tenth
      // of tol / eta_i, where that is looser than gmres_tol (near the end),
      // so the last update takes a few inner steps instead of a full solve.
      const double inner_tol =
          std::max(config.gmres_tol, std::min(0.5, 0.1 * config.tol / std::max(rec.backward_error, 1e-300)));
      if (config.gmres == Arith::FP32) {
        if (!a32_made) {
          solve_kernels::resize_huge(a32, a.a.size());  // A in FP32, once (round to nearest)
          const double* src = a.a.data();
          float* dst = a32.data();
#pragma omp parallel for schedule(static) if (n >= 256)
          for (std::int64_t i = 0; i < n * n; ++i) dst[i] = static_cast<float>(src[i]);
          count(nn * nn, true);
          a32_made = true;
        }
        inner = gmres<float>(a, a32, lu, r, gmres_max, std::max(inner_tol, 0x1p-20), d, flops);
      } else {
        inner = gmres<double>(a, a32, lu, r, gmres_max, inner_tol, d, flops);
      }
      count(flops, config.gmres == Arith::FP32);
      res.gmres_iterations += inner;
    }
    for (std::int64_t t = 0; t < n; ++t) x[static_cast<std::size_t>(t)] += d[static_cast<std::size_t>(t)];
    to_working(x);
    count(nn, config.working == Arith::FP32);
    previous = update;
    const double norm_d = norm_inf(d), norm_xn = norm_inf(x);
    update = norm_xn > 0.0 ? norm_d / norm_xn : (norm_d == 0.0 ? 0.0 : norm_d / norm_xn);
  }
  res.x = std::move(x);
  res.refine_seconds = seconds_since(t0);
  return res;
}

SolveResult solve_refine(const Matrix& a, const std::vector<double>& b, const std::vector<double>* x_true,
                         const RefineConfig& config, Backend* be, SolveWorkspace* ws) {
  const std::string problem = refine_config_problem(config);
  if (!problem.empty()) throw std::invalid_argument(problem);
  if (static_cast<std::int64_t>(b.size()) != a.n)
    throw std::invalid_argument("the right-hand side has " + std::to_string(b.size()) + " values, the matrix " +
                                std::to_string(a.n) + " rows");
  if (x_true && static_cast<std::int64_t>(x_true->size()) != a.n)
    throw std::invalid_argument("the exact solution has the wrong length");
  const auto t0 = Clock::now();
  SolveWorkspace own;
  SolveWorkspace& w = ws ? *ws : own;
  const LuFactors& lu = lu_factor_into(a, config.lu, w.lu, be);
  const double factor_seconds = seconds_since(t0);
  SolveResult res = refine_with(a, lu, b, x_true, config, &w);
  res.factor_seconds = factor_seconds;
  return res;
}

}  // namespace engine
