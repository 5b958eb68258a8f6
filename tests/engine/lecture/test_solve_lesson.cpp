// Solver lessons: parsing with one-line errors naming the field, the quick
// version, running a small system, and every claim metric's value.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "lecture/claims.h"
#include "lecture/preset.h"
#include "lecture/solve_lesson.h"

namespace {

using namespace engine;

const char* kHead =
    R"({"kind": "solve", "title": "T", "explanation": "Watch the backward error fall as refinement corrects the FP16 answer.", )";

std::string lesson(const std::string& body) { return std::string(kHead) + body + "}"; }

const char* kClaim = R"("expect": [{"metric": "converged", "run": "a", "min": 1}])";

std::string error_of(const std::string& text) {
  try {
    parse_preset(text, "s.json", "s");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(SolveLesson, ParsesTheSystemRunsAndQuickSettings) {
  const Preset p = parse_preset(
      lesson(R"("n": 64, "cond": 1e3, "seed": 7, "matrix_scale": 1024, "max_iter": 12,
               "runs": [{"name": "a", "factor": "fp16"},
                        {"name": "b", "factor": "bf16", "method": "gmres-ir", "storage": "fp32", "scale": false,
                         "max_iter": 3, "residual": "fp80", "working": "fp32", "tol": 1e-10},
                        {"name": "c", "factor": "fp16", "accumulate": "factor"}],
               "expect": [{"metric": "iterations", "run": "b", "vs": "a", "max": 2}],
               "quick": {"n": 16}, "quick_note": "small")"),
      "s.json", "s");
  EXPECT_EQ(p.kind, PresetKind::Solve);
  EXPECT_TRUE(p.runs.empty());
  EXPECT_EQ(p.problem.n, 64);
  EXPECT_EQ(p.problem.cond, 1e3);
  EXPECT_EQ(p.problem.seed, 7u);
  EXPECT_EQ(p.problem.matrix_scale, 1024);
  ASSERT_EQ(p.solve_runs.size(), 3u);
  const RefineConfig& a = p.solve_runs[0].config;
  EXPECT_EQ(a.lu.factor, SolveFormat::of(Format::FP16));
  EXPECT_EQ(a.method, Method::LuIr);
  EXPECT_EQ(a.lu.storage, LuConfig::Storage::Factor);
  EXPECT_EQ(a.lu.accumulate, Format::FP32);
  EXPECT_TRUE(a.lu.scale);
  EXPECT_EQ(a.max_iter, 12);  // the lesson's
  EXPECT_EQ(a.residual, Arith::FP64);
  const RefineConfig& b = p.solve_runs[1].config;
  EXPECT_EQ(b.lu.factor, SolveFormat::of(Format::BF16));
  EXPECT_EQ(b.method, Method::GmresIr);
  EXPECT_EQ(b.lu.storage, LuConfig::Storage::FP32);
  EXPECT_FALSE(b.lu.scale);
  EXPECT_EQ(b.max_iter, 3);  // its own
  EXPECT_EQ(b.residual, Arith::FP80);
  EXPECT_EQ(b.working, Arith::FP32);
  EXPECT_EQ(b.tol, 1e-10);
  EXPECT_EQ(p.solve_runs[2].config.lu.accumulate, Format::FP16);
  ASSERT_EQ(p.expect.size(), 1u);
  EXPECT_EQ(p.expect[0].vs, "a");
  const Preset q = quick_version(p);
  EXPECT_EQ(q.problem.n, 16);
  EXPECT_EQ(q.problem.cond, 1e3);
  EXPECT_EQ(q.solve_runs.size(), 3u);
  // Defaults: n 256, cond 100, seed 0, scale 1, 30 updates at most.
  const Preset d = parse_preset(lesson(std::string(R"("runs": [{"name": "a", "factor": "fp32"}], )") + kClaim), "s.json", "s");
  EXPECT_EQ(d.problem.n, 256);
  EXPECT_EQ(d.problem.cond, 100);
  EXPECT_EQ(d.problem.seed, 0u);
  EXPECT_EQ(d.problem.matrix_scale, 1);
  EXPECT_EQ(d.solve_runs[0].config.max_iter, 30);
  EXPECT_EQ(quick_version(d).problem.n, 256);
  // "kind": "train" is a training preset, as one without a kind.
  const Preset t = parse_preset(R"({"kind": "train", "title": "T", "explanation": "Watch the loss chart: the runs differ only in their formats.",
      "dataset": "spirals", "recipes": ["fp32"], "expect": [{"metric": "final_loss", "run": "fp32", "max": 1}]})", "t.json", "t");
  EXPECT_EQ(t.kind, PresetKind::Train);
  EXPECT_EQ(t.runs.size(), 1u);
}

TEST(SolveLesson, BadInputGetsOneLineNamingTheField) {
  const std::string run_a = R"("runs": [{"name": "a", "factor": "fp16"}], )";
  EXPECT_EQ(error_of(R"({"kind": "sovle"})"), "s.json: 'kind' must be \"train\" or \"solve\" (got 'sovle')");
  EXPECT_EQ(error_of(R"({"kind": 3})"), "s.json: 'kind' must be a string");
  EXPECT_EQ(error_of(lesson(run_a + R"("steps": 5, )" + kClaim)),
            "s.json: 'steps' is not a key of a solver lesson (title, explanation, n, cond, seed, matrix_scale, "
            "max_iter, runs, expect, quick, quick_note)");
  EXPECT_EQ(error_of(lesson(run_a + R"("n": 0, )" + kClaim)), "s.json: 'n' must be a whole number in 1..16384 (got 0)");
  EXPECT_EQ(error_of(lesson(run_a + R"("n": 12.5, )" + kClaim)), "s.json: 'n' must be a whole number in 1..16384");
  EXPECT_EQ(error_of(lesson(run_a + R"("cond": 0.5, )" + kClaim)),
            "s.json: 'cond' must be >= 1 (a 2-norm condition number)");
  EXPECT_EQ(error_of(lesson(run_a + R"("matrix_scale": 0, )" + kClaim)), "s.json: 'matrix_scale' must be > 0");
  EXPECT_EQ(error_of(lesson(run_a + R"("seed": -1, )" + kClaim)),
            "s.json: 'seed' must be a whole number in 0..18446744073709551615 (got -1)");
  EXPECT_EQ(error_of(lesson(kClaim)), "s.json: 'runs' must be a non-empty array of {name, factor, method?, ...}");
  EXPECT_EQ(error_of(lesson(std::string(R"("runs": [{"name": "a"}], )") + kClaim)), "s.json: 'runs[0].factor' is missing");
  EXPECT_EQ(error_of(lesson(std::string(R"("runs": [{"factor": "fp16"}], )") + kClaim)), "s.json: 'runs[0].name' is missing");
  EXPECT_EQ(error_of(lesson(std::string(R"("runs": [{"name": "a", "factor": "fp12"}], )") + kClaim)),
            "s.json: 'runs[0].factor' is not a factor format: 'fp12' (fp64 fp32 tf32 bf16 fp16 fp8-e4m3 fp8-e5m2; "
            "mxfp8 mxfp6 mxfp4 nvfp4 with storage fp32)");
  EXPECT_EQ(error_of(lesson(std::string(R"("runs": [{"name": "a", "factor": "fp16", "method": "cg"}], )") + kClaim)),
            "s.json: 'runs[0].method' must be lu-ir or gmres-ir (got 'cg')");
  EXPECT_EQ(error_of(lesson(std::string(R"("runs": [{"name": "a", "factor": "fp16", "scale": 1}], )") + kClaim)),
            "s.json: 'runs[0].scale' must be true or false");
  EXPECT_EQ(error_of(lesson(std::string(R"("runs": [{"name": "a", "factor": "fp16", "residual": "fp16"}], )") + kClaim)),
            "s.json: 'runs[0].residual' must be fp32, fp64 or fp80 (got 'fp16')");
  EXPECT_EQ(error_of(lesson(std::string(R"("runs": [{"name": "a", "factor": "fp16", "working": "fp80"}], )") + kClaim)),
            "s.json: 'runs[0].working' must be fp32 or fp64 (got 'fp80')");
  EXPECT_EQ(error_of(lesson(std::string(R"("runs": [{"name": "a", "factor": "fp16", "steps": 3}], )") + kClaim)),
            "s.json: 'runs[0].steps' is not a run setting of a solver lesson (name, factor, method, storage, "
            "accumulate, residual, working, scale, max_iter, tol)");
  // A combination the engine refuses, named by the run.
  EXPECT_EQ(error_of(lesson(std::string(R"("runs": [{"name": "a", "factor": "mxfp8"}], )") + kClaim))
                .rfind("s.json: 'runs[0]' a block format (", 0),
            0u);
  EXPECT_EQ(error_of(lesson(R"("runs": [{"name": "a", "factor": "fp16"}, {"name": "a", "factor": "bf16"}], )" +
                            std::string(kClaim))),
            "s.json: two runs are named 'a'");
  EXPECT_EQ(error_of(lesson(run_a + R"("expect": [{"metric": "final_loss", "run": "a", "max": 1}])")),
            "s.json: 'expect[0].metric' is not a metric: 'final_loss' (expected one of converged, iterations, "
            "gmres_iterations, backward_error, forward_error, scale)");
  EXPECT_EQ(error_of(lesson(run_a + R"("expect": [{"metric": "converged", "run": "a", "layer": "fc1", "max": 1}])")),
            "s.json: 'expect[0].layer' is not a claim key of a solver lesson (metric, run, vs, min, max)");
  EXPECT_EQ(error_of(lesson(run_a + R"("expect": [{"metric": "converged", "run": "b", "max": 1}])")),
            "s.json: 'expect[0].run' names no run of the preset: 'b' (runs: a)");
  EXPECT_EQ(error_of(lesson(run_a + R"("expect": [])")),
            "s.json: 'expect' must be a non-empty array of claims: a preset proves its point");
  EXPECT_EQ(error_of(lesson(run_a + R"("quick": {"steps": 5}, "quick_note": "x", )" + kClaim)),
            "s.json: 'quick.steps' is not a setting of the system (n, cond, seed, matrix_scale)");
  EXPECT_EQ(error_of(lesson(run_a + R"("quick": {"n": 16}, )" + kClaim)),
            "s.json: 'quick_note' must say why the claims survive the quick settings");
  EXPECT_EQ(error_of(R"({"kind": "solve", "title": "T"})"), "s.json: 'explanation' is missing");
  for (const std::string& e : {error_of(lesson(run_a + R"("n": "big", )" + kClaim)), error_of(lesson(kClaim))})
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

// A small system solved by three runs; each metric read from its result.
TEST(SolveLesson, RunsTheSystemAndMeasuresEveryMetric) {
  const Preset p = parse_preset(
      lesson(R"("n": 48, "cond": 10, "seed": 3, "matrix_scale": 65536,
               "runs": [{"name": "fp64", "factor": "fp64"}, {"name": "fp16", "factor": "fp16"},
                        {"name": "once", "factor": "fp16", "max_iter": 0}],
               "expect": [{"metric": "converged", "run": "fp16", "min": 1},
                          {"metric": "backward_error", "run": "once", "vs": "fp16", "max": 1}])"),
      "s.json", "s");
  int seen = 0;
  const SolveLesson l = run_solve_lesson(p, nullptr, [&](const SolveRun& r) { EXPECT_EQ(r.name, p.solve_runs[seen++].name); });
  EXPECT_EQ(seen, 3);
  // The system: random_matrix times the scale (a power of two: exact), b = A x for x of seed + 1.
  const Matrix a = random_matrix(48, 10, 3);
  ASSERT_EQ(l.a.n, 48);
  for (std::size_t i = 0; i < a.a.size(); ++i) ASSERT_EQ(l.a.a[i], 65536 * a.a[i]) << i;
  EXPECT_EQ(l.x_true, random_vector(48, 4));
  ASSERT_EQ(l.runs.size(), 3u);
  const SolveResult& f = l.runs[1].result;
  ASSERT_TRUE(f.converged) << f.reason;
  auto value = [&](const std::string& metric, const std::string& run, const std::string& vs = "") {
    Claim c;
    c.metric = metric;
    c.run = run;
    c.vs = vs;
    return solve_claim_value(c, l.runs);
  };
  EXPECT_EQ(value("converged", "fp16"), 1.0);
  EXPECT_EQ(value("converged", "once"), 0.0);  // max_iter 0 at cond 10 and FP16: not yet at FP64 accuracy
  EXPECT_EQ(value("iterations", "fp16"), f.iterations);
  EXPECT_GE(f.iterations, 1);
  EXPECT_EQ(value("iterations", "once"), 0.0);
  EXPECT_EQ(value("gmres_iterations", "fp16"), 0.0);
  EXPECT_EQ(value("backward_error", "fp16"), f.backward_error);
  EXPECT_EQ(value("forward_error", "fp16"), f.forward_error);
  EXPECT_EQ(value("scale", "fp16"), f.scale);
  EXPECT_EQ(value("scale", "fp64"), 1.0);
  EXPECT_LT(f.scale, 1.0);  // entries times 2^16: FP16's scale brings them down
  EXPECT_EQ(value("backward_error", "once", "fp16"), l.runs[2].result.backward_error / f.backward_error);
  EXPECT_EQ(value("iterations", "once", "once"), 1.0);  // 0 / 0
  EXPECT_TRUE(std::isinf(value("iterations", "fp16", "once")));
  EXPECT_TRUE(std::isnan(value("converged", "fp32")));
  EXPECT_TRUE(std::isnan(value("converged", "fp16", "fp32")));
  const auto results = check_claims(p, l.runs);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0].pass);
  EXPECT_EQ(results[0].text, "PASS  converged fp16 = 1  (>= 1)");
  EXPECT_FALSE(results[1].pass);  // one FP16 solve is far worse than the refined one
  EXPECT_EQ(results[1].text.rfind("FAIL  backward_error once / fp16 = ", 0), 0u) << results[1].text;
  // A training preset is not a solver lesson.
  Preset train;
  train.name = "t";
  EXPECT_THROW(run_solve_lesson(train), std::invalid_argument);
}

TEST(SolveLesson, TheBuiltInSolverLessonsCompareAndHaveAQuickVersion) {
  int lessons = 0;
  for (const Preset& p : builtin_presets()) {
    if (p.kind != PresetKind::Solve) continue;
    SCOPED_TRACE(p.name);
    ++lessons;
    EXPECT_EQ(p.name.rfind("solve-", 0), 0u) << "solver lessons sort together";
    EXPECT_GE(p.solve_runs.size(), 2u) << "a lesson compares";
    EXPECT_TRUE(p.runs.empty());
    EXPECT_FALSE(p.quick_note.empty());
    EXPECT_LT(quick_version(p).problem.n, p.problem.n);
    bool converged_claim = false;
    for (const Claim& c : p.expect) converged_claim = converged_claim || c.metric == "converged";
    EXPECT_TRUE(converged_claim) << "a solver lesson says which run converges";
  }
  EXPECT_GE(lessons, 4);
}

}  // namespace
