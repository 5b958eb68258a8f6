// Tests of engine/solve/refine.h: the targets at n = 512 (FP16
// LU-IR to FP64 accuracy at kappa = 1e2, the wall at 1e4 that GMRES-IR
// passes, no convergence at 1e8), the stopping rules and the counts.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/backend.h"
#include "backend/registry.h"
#include "solve/refine.h"

namespace {
using engine::Format;
using engine::Method;

engine::Backend& cpu() {
  static engine::BackendChoice be = engine::make_backend("cpu", 0);
  return *be.backend;
}

struct Problem {
  engine::Matrix a;
  std::vector<double> x, b;
};

Problem problem(std::int64_t n, double cond, std::uint64_t seed = 1) {
  Problem p;
  p.a = engine::random_matrix(n, cond, seed);
  p.x = engine::random_vector(n, seed + 1);
  p.b.resize(static_cast<std::size_t>(n));
  engine::matvec(p.a, p.x.data(), p.b.data());
  return p;
}

engine::RefineConfig config(const char* factor, Method m) {
  engine::RefineConfig c;
  c.method = m;
  c.lu.factor = *engine::parse_factor_format(factor);
  return c;
}

TEST(SolveRefine, Fp16LuIrReachesFp64AccuracyAtCond1e2) {
  const Problem p = problem(512, 1e2);
  const auto r = engine::solve_refine(p.a, p.b, &p.x, config("fp16", Method::LuIr), &cpu());
  EXPECT_TRUE(r.converged) << r.reason;
  EXPECT_LE(r.iterations, 10);
  EXPECT_LT(r.backward_error, 1e-15);
  EXPECT_LT(r.forward_error, 1e-12);
  // The first solve is only as good as FP16's LU; each update shrinks the error.
  ASSERT_EQ(r.history.size(), static_cast<std::size_t>(r.iterations + 1));
  EXPECT_GT(r.history[0].backward_error, 1e-6);
  for (std::size_t i = 2; i < r.history.size(); ++i) EXPECT_LT(r.history[i].update, r.history[i - 1].update);
  EXPECT_TRUE(std::isnan(r.history[0].update));
  // Almost all flops are the FP16 factorization's.
  EXPECT_GT(r.flops_low / r.flops_total, 0.9);
  EXPECT_LE(r.flops_low, r.flops_total);
  // FP16 is scaled into range by a power of two.
  EXPECT_GT(r.scale, 1.0);
  EXPECT_EQ(std::log2(r.scale), std::floor(std::log2(r.scale)));
}

TEST(SolveRefine, Bf16LuIrNeedsManyMoreUpdatesThanFp16) {
  // kappa u is 100 * 2^-9 for BF16, 100 * 2^-11 for FP16: BF16's updates
  // shrink about four times slower. Its last ones stop shrinking at FP64's
  // noise level, which counts as converged.
  const Problem p = problem(512, 1e2, 0);
  const auto bf = engine::solve_refine(p.a, p.b, &p.x, config("bf16", Method::LuIr), &cpu());
  const auto fp = engine::solve_refine(p.a, p.b, &p.x, config("fp16", Method::LuIr), &cpu());
  EXPECT_TRUE(bf.converged) << bf.reason;
  EXPECT_TRUE(fp.converged) << fp.reason;
  EXPECT_GT(bf.iterations, 2 * fp.iterations);
  EXPECT_LT(bf.backward_error, std::sqrt(512.0) * 0x1p-53);
}

TEST(SolveRefine, Fp16LuIrHitsTheWallAtCond1e4AndGmresIrPassesIt) {
  const Problem p = problem(512, 1e4);
  const auto lu = engine::solve_refine(p.a, p.b, &p.x, config("fp16", Method::LuIr), &cpu());
  EXPECT_FALSE(lu.converged);
  EXPECT_GT(lu.backward_error, 1e-10);
  const auto gm = engine::solve_refine(p.a, p.b, &p.x, config("fp16", Method::GmresIr), &cpu());
  EXPECT_TRUE(gm.converged) << gm.reason;
  EXPECT_LT(gm.backward_error, 1e-15);
  EXPECT_LT(gm.forward_error, 1e-10);
  EXPECT_GT(gm.gmres_iterations, 0);
  EXPECT_EQ(gm.gmres_iterations, [&] {
    int s = 0;
    for (const auto& h : gm.history) s += h.gmres_iterations;
    return s;
  }());
}

TEST(SolveRefine, Fp32GmresReachesFp64AccuracyInMoreOuterStepsOfCheaperInnerOnes) {
  // Five-precision GMRES-IR (u_g = u_p = FP32): each outer step gains only
  // about what FP32 can resolve (kappa u_fp32 = 1e4 * 2^-24, so 4-6 digits
  // a step), so it needs more outer steps than FP64 GMRES, but lands on the
  // same FP64 accuracy; its inner flops count as low precision.
  const Problem p = problem(512, 1e4);
  const auto g64 = engine::solve_refine(p.a, p.b, &p.x, config("fp16", Method::GmresIr), &cpu());
  auto c = config("fp16", Method::GmresIr);
  c.gmres = engine::Arith::FP32;
  const auto g32 = engine::solve_refine(p.a, p.b, &p.x, c, &cpu());
  ASSERT_TRUE(g64.converged) << g64.reason;
  ASSERT_TRUE(g32.converged) << g32.reason;
  EXPECT_LT(g32.backward_error, 1e-15);
  EXPECT_LT(g32.forward_error, 1e-10);
  EXPECT_GT(g32.iterations, g64.iterations);
  // Every outer step still shrinks the error by more than FP16 LU-IR could
  // (which stagnates here): by at least 10x.
  for (std::size_t i = 1; i < g32.history.size(); ++i)
    EXPECT_LT(g32.history[i].backward_error, 0.1 * g32.history[i - 1].backward_error) << "step " << i;
  // The share of low-precision flops rises: the inner products are FP32's.
  EXPECT_GT(g32.flops_low / g32.flops_total, g64.flops_low / g64.flops_total);
}

TEST(SolveRefine, Bf16TensorCoreLuIrStallsWhereGmresIrConverges) {
  // BF16's u = 2^-9 against kappa 1e2 and the LU's growth with n: the first
  // solve is off by tens of percent, LU-IR's updates stop shrinking, and
  // GMRES-IR preconditioned by the same factors (inner solve in FP64 or
  // FP32) still reaches FP64 accuracy.
  const Problem p = problem(1024, 1e2);
  auto lu = config("bf16", Method::LuIr);
  lu.lu.storage = engine::LuConfig::Storage::FP32;
  const auto r = engine::solve_refine(p.a, p.b, &p.x, lu, &cpu());
  EXPECT_GT(r.history[0].forward_error, 0.01);
  for (engine::Arith g : {engine::Arith::FP64, engine::Arith::FP32}) {
    auto c = lu;
    c.method = Method::GmresIr;
    c.gmres = g;
    const auto gm = engine::solve_refine(p.a, p.b, &p.x, c, &cpu());
    EXPECT_TRUE(gm.converged) << gm.reason;
    EXPECT_LT(gm.backward_error, 1e-15);
    EXPECT_LT(gm.forward_error, 1e-12);
  }
}

TEST(SolveRefine, Fp80GmresIsRefused) {
  auto c = config("fp16", Method::GmresIr);
  c.gmres = engine::Arith::FP80;
  EXPECT_EQ(engine::refine_config_problem(c), "the GMRES precision must be fp32 or fp64");
}

TEST(SolveRefine, Fp16LuIrDoesNotConvergeAtCond1e8) {
  const Problem p = problem(512, 1e8);
  const auto r = engine::solve_refine(p.a, p.b, &p.x, config("fp16", Method::LuIr), &cpu());
  EXPECT_FALSE(r.converged);
  EXPECT_FALSE(r.reason.empty());
  EXPECT_GT(r.backward_error, 1e-10);
}

TEST(SolveRefine, Fp64FactorNeedsNoUpdateAndAllFlopsAreHigh) {
  const Problem p = problem(128, 1e4);
  const auto r = engine::solve_refine(p.a, p.b, &p.x, config("fp64", Method::LuIr), &cpu());
  EXPECT_TRUE(r.converged);
  EXPECT_LE(r.iterations, 1);
  EXPECT_EQ(r.flops_low, 0.0);
  EXPECT_EQ(r.scale, 1.0);
}

TEST(SolveRefine, MaxIterationsStopsAndSays) {
  const Problem p = problem(128, 1e2);
  auto c = config("bf16", Method::LuIr);
  c.max_iter = 2;
  const auto r = engine::solve_refine(p.a, p.b, &p.x, c, &cpu());
  EXPECT_FALSE(r.converged);
  EXPECT_EQ(r.iterations, 2);
  EXPECT_EQ(r.reason, "max iterations reached");
}

TEST(SolveRefine, Fp32WorkingPrecisionStopsAtFp32Accuracy) {
  const Problem p = problem(128, 1e2);
  auto c = config("fp16", Method::LuIr);
  c.working = engine::Arith::FP32;
  c.residual = engine::Arith::FP32;
  const auto r = engine::solve_refine(p.a, p.b, &p.x, c, &cpu());
  EXPECT_GT(r.forward_error, 1e-10);  // x is held in FP32
  EXPECT_LT(r.forward_error, 1e-5);
  // An extended residual does no worse than FP64's.
  auto e = config("fp16", Method::LuIr);
  e.residual = engine::Arith::FP80;
  const auto r80 = engine::solve_refine(p.a, p.b, &p.x, e, &cpu());
  EXPECT_TRUE(r80.converged) << r80.reason;
  EXPECT_LT(r80.forward_error, 1e-13);
}

TEST(SolveRefine, Mxfp8OperandsStillRefineToFp64WithGmres) {
  const Problem p = problem(128, 1e2);
  auto c = config("mxfp8", Method::GmresIr);
  c.lu.storage = engine::LuConfig::Storage::FP32;
  const auto r = engine::solve_refine(p.a, p.b, &p.x, c, &cpu());
  EXPECT_TRUE(r.converged) << r.reason;
  EXPECT_LT(r.forward_error, 1e-12);
  EXPECT_GT(r.history[0].forward_error, 1e-4);  // the first solve is MXFP8's
}

TEST(SolveRefine, ZeroRightHandSideIsSolvedByZero) {
  const Problem p = problem(16, 10.0);
  const std::vector<double> zero(16, 0.0);
  for (Method m : {Method::LuIr, Method::GmresIr}) {
    const auto r = engine::solve_refine(p.a, zero, &zero, config("fp16", m), &cpu());
    EXPECT_TRUE(r.converged) << r.reason;
    EXPECT_EQ(r.backward_error, 0.0);
    EXPECT_EQ(r.forward_error, 0.0);
    EXPECT_EQ(r.iterations, 0);
    for (double v : r.x) EXPECT_EQ(v, 0.0);
  }
}

TEST(SolveRefine, BreakdownIsAResultNotAThrow) {
  engine::Matrix a;
  a.n = 2;
  a.a = {1, 2, 2, 4};
  const auto r = engine::solve_refine(a, {1, 2}, nullptr, config("fp32", Method::LuIr), &cpu());
  EXPECT_FALSE(r.converged);
  EXPECT_EQ(r.reason, "factorization failed: zero pivot in column 2 (fp32)");
  EXPECT_THROW(engine::solve_refine(a, {1}, nullptr, config("fp32", Method::LuIr), &cpu()), std::invalid_argument);
  auto bad = config("fp32", Method::LuIr);
  bad.working = engine::Arith::FP80;
  EXPECT_NE(engine::refine_config_problem(bad), "");
}

}  // namespace

namespace {

// The solution and the history in bits (NaNs, the first update's, compare equal).
bool same_solve(const engine::SolveResult& a, const engine::SolveResult& b) {
  if (a.x != b.x || a.converged != b.converged || a.reason != b.reason || a.iterations != b.iterations ||
      a.gmres_iterations != b.gmres_iterations || a.scale != b.scale || a.history.size() != b.history.size())
    return false;
  for (std::size_t i = 0; i < a.history.size(); ++i) {
    const auto &p = a.history[i], &q = b.history[i];
    auto eq = [](double u, double v) { return u == v || (std::isnan(u) && std::isnan(v)); };
    if (!eq(p.backward_error, q.backward_error) || !eq(p.update, q.update) || p.gmres_iterations != q.gmres_iterations)
      return false;
  }
  return true;
}

}  // namespace

TEST(SolveRefine, AKeptWorkspaceGivesTheSameAnswersAsFreshBuffers) {
  // One workspace through solves of two sizes, several formats, both
  // methods, FP32 GMRES on two matrices of one size (its FP32 copy of A
  // must be the current matrix's) and FP64 factors between FP32 ones:
  // every answer is the one a solve with its own buffers gives, bit for bit.
  const Problem big = problem(300, 1e3, 7), small = problem(200, 1e2, 8), other = problem(300, 1e2, 9);
  engine::SolveWorkspace ws;
  struct Step {
    const Problem* p;
    const char* factor;
    Method m;
    bool tc, fp32_gmres;
  };
  const Step steps[] = {{&big, "fp16", Method::LuIr, false, false},     {&big, "bf16", Method::GmresIr, true, true},
                        {&small, "fp64", Method::LuIr, false, false},   {&other, "bf16", Method::GmresIr, true, true},
                        {&small, "e4m3", Method::GmresIr, true, false}, {&big, "fp16", Method::LuIr, false, false}};
  for (const Step& s : steps) {
    engine::RefineConfig c = config(s.factor, s.m);
    if (s.tc) c.lu.storage = engine::LuConfig::Storage::FP32;
    if (s.fp32_gmres) c.gmres = engine::Arith::FP32;
    const auto kept = engine::solve_refine(s.p->a, s.p->b, &s.p->x, c, &cpu(), &ws);
    const auto fresh = engine::solve_refine(s.p->a, s.p->b, &s.p->x, c, &cpu());
    EXPECT_TRUE(same_solve(kept, fresh)) << s.factor << " n = " << s.p->a.n;
    EXPECT_EQ(ws.lu.factors.n, s.p->a.n);
  }
}
