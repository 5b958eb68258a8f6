// Runs `precision-lab-cli lecture` as a teacher would before class: every
// built-in preset with --check (their quick versions: the full-length ones
// take up to a minute each), the solver lessons at full size too, a failing
// claim, a bad preset file.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_runner.h"
#include "backend/registry.h"
#include "lecture/preset.h"

namespace {

namespace fs = std::filesystem;
using cli_test::RunResult;
using cli_test::run_cli;

TEST(CliLecture, ListsAtLeastTenPresets) {
  const RunResult r = run_cli("lecture --list");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(r.out);
  int lines = 0;
  for (std::string l; std::getline(in, l);) lines += !l.empty();
  EXPECT_GE(lines, 10);
  EXPECT_NE(r.out.find("why-loss-scaling"), std::string::npos);
  // The solver lessons with their runs.
  EXPECT_NE(r.out.find("solve-the-wall"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[fp32-lu-ir,fp16-lu-ir,fp16-gmres-ir]"), std::string::npos) << r.out;
}

class EveryPreset : public testing::TestWithParam<std::string> {};

// Whether this machine lacks the backend every claim of `name` needs (a
// GPU lesson on a CPU: not trained, every claim skipped).
bool backend_missing(const std::string& name) {
  const std::string needed = engine::required_backend(engine::find_preset(name));
  if (needed.empty()) return false;
  for (const engine::BackendAvailability& b : engine::available_backends())
    if (b.name == needed) return !b.available;
  return true;
}

TEST_P(EveryPreset, ItsClaimsHold) {
  const fs::path dir = cli_test::temp_path("lecture_" + GetParam());
  const RunResult r = run_cli("lecture " + GetParam() + " --quick --check --out '" + dir.string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(" 0 failed"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  if (backend_missing(GetParam())) {
    EXPECT_NE(r.out.find("not trained: every claim of " + GetParam() + " needs the "), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("PASS"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(dir / "steps.csv"));
    fs::remove_all(dir);
    return;
  }
  if (engine::find_preset(GetParam()).kind == engine::PresetKind::Solve) {
    for (const char* f : {"iterations.csv", "summary.csv", "solution.csv", "config.json"})
      EXPECT_TRUE(fs::exists(dir / f)) << f;
    EXPECT_FALSE(fs::exists(dir / "steps.csv"));
  } else {
    for (const char* f : {"steps.csv", "summary.csv", "grads.csv", "events.csv", "config.json"})
      EXPECT_TRUE(fs::exists(dir / f)) << f;
  }
  fs::remove_all(dir);
}

std::vector<std::string> solve_lesson_names() {
  std::vector<std::string> names;
  for (const engine::Preset& p : engine::builtin_presets())
    if (p.kind == engine::PresetKind::Solve) names.push_back(p.name);
  return names;
}

// The solver lessons take a second or two at full size: their claims are
// checked there too, not only in the quick version.
class EverySolverLesson : public testing::TestWithParam<std::string> {};

TEST_P(EverySolverLesson, ItsClaimsHoldAtFullSize) {
  const fs::path dir = cli_test::temp_path("lecture_full_" + GetParam());
  const RunResult r = run_cli("lecture " + GetParam() + " --check --out '" + dir.string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(" 0 failed"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("solve: n = " + std::to_string(engine::find_preset(GetParam()).problem.n) + ", random"),
            std::string::npos)
      << r.out;
  fs::remove_all(dir);
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const engine::Preset& p : engine::builtin_presets()) names.push_back(p.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(BuiltIn, EveryPreset, testing::ValuesIn(preset_names()),
                         [](const testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

INSTANTIATE_TEST_SUITE_P(BuiltIn, EverySolverLesson, testing::ValuesIn(solve_lesson_names()),
                         [](const testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A solver lesson writes what `solve` writes for the same system and run:
// the same columns, and the same figures but for the times.
TEST(CliLecture, ASolverLessonWritesTheSolveCommandsFiles) {
  const fs::path dir = cli_test::temp_path("lecture_solve_files");
  fs::create_directories(dir);
  const fs::path file = dir / "one.json";
  std::ofstream(file) << R"({"kind": "solve", "title": "One", "explanation": "An FP16 LU refined in FP64, the same as the solve command runs it.",
    "n": 40, "cond": 100, "seed": 5, "runs": [{"name": "fp16-lu-ir", "factor": "fp16"}],
    "expect": [{"metric": "converged", "run": "fp16-lu-ir", "min": 1}]})";
  const RunResult l = run_cli("lecture '" + file.string() + "' --check --out '" + (dir / "lesson").string() + "'");
  ASSERT_EQ(l.exit_code, 0) << l.out << l.err;
  EXPECT_NE(l.out.find("PASS  converged fp16-lu-ir = 1  (>= 1)"), std::string::npos) << l.out;
  const RunResult s = run_cli("solve --n 40 --cond 100 --seed 5 --factor fp16 --out '" + (dir / "solve").string() + "'");
  ASSERT_EQ(s.exit_code, 0) << s.out << s.err;
  EXPECT_EQ(read_text(dir / "lesson" / "iterations.csv"), read_text(dir / "solve" / "iterations.csv"));
  EXPECT_EQ(read_text(dir / "lesson" / "solution.csv"), read_text(dir / "solve" / "solution.csv"));
  // summary.csv: equal up to the three time columns.
  auto without_times = [](const std::string& text) {
    std::istringstream in(text);
    std::string out;
    for (std::string line; std::getline(in, line);) {
      std::vector<std::string> cells;
      std::stringstream ls(line);
      for (std::string c; std::getline(ls, c, ',');) cells.push_back(c);
      EXPECT_EQ(cells.size(), 21u) << line;
      if (cells.size() == 21u) cells.erase(cells.begin() + 16, cells.begin() + 19);
      for (const auto& c : cells) out += c + ',';
      out += '\n';
    }
    return out;
  };
  const std::string lesson_summary = read_text(dir / "lesson" / "summary.csv");
  EXPECT_EQ(without_times(lesson_summary), without_times(read_text(dir / "solve" / "summary.csv")));
  EXPECT_NE(lesson_summary.find("fp16-lu-ir,fp16,fp16,fp32,fp64,fp64,lu-ir,40,100,"), std::string::npos) << lesson_summary;
  const std::string cfg = read_text(dir / "lesson" / "config.json");
  EXPECT_NE(cfg.find("\"lesson\": \"one\""), std::string::npos) << cfg;
  EXPECT_NE(cfg.find("\"n\": 40"), std::string::npos) << cfg;
  fs::remove_all(dir);
}

// A solver lesson's failed claim and bad field, as a training lesson's.
TEST(CliLecture, ASolverLessonsFailedClaimAndBadField) {
  const fs::path dir = cli_test::temp_path("lecture_solve_fail");
  fs::create_directories(dir);
  const fs::path file = dir / "wall.json";
  std::ofstream(file) << R"({"kind": "solve", "title": "Wall", "explanation": "At kappa 1e4 FP16 LU-IR cannot converge, and a claim that it does fails.",
    "n": 64, "cond": 1e4, "runs": [{"name": "fp16", "factor": "fp16"}, {"name": "fp64", "factor": "fp64"}],
    "expect": [{"metric": "converged", "run": "fp16", "min": 1}, {"metric": "converged", "run": "fp64", "min": 1}]})";
  const RunResult r = run_cli("lecture '" + file.string() + "' --check --out '" + (dir / "out").string() + "'");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("FAIL  converged fp16 = 0  (>= 1)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PASS  converged fp64 = 1  (>= 1)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 passed, 1 failed"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(dir / "out" / "summary.csv"));
  // Without --check, not converging is a result: exit 0.
  const RunResult unchecked = run_cli("lecture '" + file.string() + "' --out '" + (dir / "out2").string() + "'");
  EXPECT_EQ(unchecked.exit_code, 0) << unchecked.out << unchecked.err;
  std::ofstream(file) << R"({"kind": "solve", "title": "Bad", "explanation": "A run with a factor format that does not exist is refused by name.",
    "runs": [{"name": "a", "factor": "fp12"}], "expect": [{"metric": "converged", "run": "a", "min": 1}]})";
  const RunResult bad = run_cli("lecture '" + file.string() + "' --out '" + (dir / "out3").string() + "'");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find(file.string() + ": 'runs[0].factor' is not a factor format: 'fp12'"), std::string::npos) << bad.err;
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
  EXPECT_FALSE(fs::exists(dir / "out3"));
  fs::remove_all(dir);
}

TEST(CliLecture, AFailedClaimIsPrintedAndExitsOne) {
  const fs::path dir = cli_test::temp_path("lecture_fail");
  fs::create_directories(dir);
  const fs::path file = dir / "impossible.json";
  std::ofstream(file) << R"({"title": "Impossible", "explanation": "fp16 cannot be a hundred times better than fp32 here, and the check says so.",
    "dataset": "spirals", "steps": 5, "batch": 32, "recipes": ["fp32", "fp16"],
    "expect": [{"metric": "final_loss", "run": "fp16", "vs": "fp32", "max": 0.01}]})";
  const RunResult r = run_cli("lecture '" + file.string() + "' --check --out '" + (dir / "out").string() + "'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("FAIL  final_loss fp16 / fp32 = "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 passed, 1 failed"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

// A run that diverges is a lesson's result (lm-fp16-adam's fp16 run): with
// --check its claims judge it; without, the lecture fails as `run` does.
TEST(CliLecture, ADivergedRunIsJudgedByTheClaims) {
  const fs::path dir = cli_test::temp_path("lecture_diverged");
  fs::create_directories(dir);
  const fs::path file = dir / "diverges.json";
  std::ofstream(file) << R"({"title": "Divergence", "explanation": "FP16 Adam's second moment underflows and its first update sends the weights off: the run diverges at step 2.",
    "dataset": "spirals", "steps": 20, "batch": 32, "optimizer": "sgd",
    "runs": [{"name": "calm", "recipe": "fp32"}, {"name": "wild", "recipe": "fp16", "optimizer": "adam", "lr": 0.01}],
    "expect": [{"metric": "overflow_steps", "run": "wild", "min": 1}, {"metric": "overflow_steps", "run": "calm", "max": 0}]})";
  const RunResult r = run_cli("lecture '" + file.string() + "' --check --out '" + (dir / "out").string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("run 1 (wild) failed: diverged at step 2"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("PASS  overflow_steps wild = 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 passed, 0 failed"), std::string::npos) << r.out;
  // The claims still decide: one the divergence breaks fails.
  std::ofstream(file) << R"({"title": "Divergence", "explanation": "A claim that the diverged run ends with a finite loss cannot hold, and the check says so.",
    "dataset": "spirals", "steps": 20, "batch": 32, "optimizer": "sgd",
    "runs": [{"name": "calm", "recipe": "fp32"}, {"name": "wild", "recipe": "fp16", "optimizer": "adam", "lr": 0.01}],
    "expect": [{"metric": "final_loss", "run": "wild", "max": 100}]})";
  const RunResult judged = run_cli("lecture '" + file.string() + "' --check --out '" + (dir / "out2").string() + "'");
  EXPECT_EQ(judged.exit_code, 1) << judged.out << judged.err;
  EXPECT_NE(judged.out.find("FAIL  final_loss wild = n/a"), std::string::npos) << judged.out;
  const RunResult unchecked = run_cli("lecture '" + file.string() + "' --out '" + (dir / "out3").string() + "'");
  EXPECT_EQ(unchecked.exit_code, 1) << unchecked.out << unchecked.err;
  fs::remove_all(dir);
}

// The GPU lesson on this machine: without a CUDA device it trains nothing
// (a GPU-sized transformer would take minutes a step on a CPU), every claim
// is skipped with the reason and the check exits 0 at once; with one, the
// claims are judged on the run's own figures.
TEST(CliLecture, TheGpuLessonSkipsItsClaimsWithTheReasonWithoutAGpu) {
  if (!backend_missing("gpu-mixed-precision-pays")) GTEST_SKIP() << "a CUDA device is here: the lesson trains";
  const fs::path dir = cli_test::temp_path("lecture_gpu");
  const auto t0 = std::chrono::steady_clock::now();
  const RunResult r = run_cli("lecture gpu-mixed-precision-pays --check --out '" + dir.string() + "'");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_LT(seconds, 60.0);
  EXPECT_NE(r.out.find("SKIP  samples_per_second mixed-bf16 / fp32: needs the cuda backend; this machine ran cpu ("),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("SKIP  device_memory mixed-bf16 / fp32: needs the cuda backend"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 passed, 0 failed, 2 skipped"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "steps.csv"));
  fs::remove_all(dir);
}

// A lesson with a claim that needs the GPU beside one that does not trains
// on the CPU, judges the one and skips the other; "requires": "cpu" is
// judged here.
TEST(CliLecture, AClaimNeedingAnotherBackendIsSkippedBesideJudgedOnes) {
  const fs::path dir = cli_test::temp_path("lecture_requires");
  fs::create_directories(dir);
  const fs::path file = dir / "mixed.json";
  std::ofstream(file) << R"({"title": "Both", "explanation": "One claim holds on any machine, one only on a GPU, and one only on the CPU.",
    "dataset": "spirals", "steps": 5, "batch": 32, "backend": "cpu", "recipes": ["fp32", "fp16"],
    "expect": [{"metric": "samples_per_second", "run": "fp16", "vs": "fp32", "min": 100, "requires": "cuda"},
               {"metric": "peak_memory", "run": "fp16", "vs": "fp32", "max": 0.9, "requires": "cpu"},
               {"metric": "final_loss", "run": "fp16", "max": 100}]})";
  const RunResult r = run_cli("lecture '" + file.string() + "' --check --out '" + (dir / "out").string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("SKIP  samples_per_second fp16 / fp32: needs the cuda backend; this machine ran cpu\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("PASS  peak_memory fp16 / fp32"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 passed, 0 failed, 1 skipped"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(dir / "out" / "steps.csv"));
  fs::remove_all(dir);
}

TEST(CliLecture, ABadPresetIsOneLineAndExitTwo) {
  const fs::path dir = cli_test::temp_path("lecture_bad");
  fs::create_directories(dir);
  const fs::path file = dir / "bad.json";
  std::ofstream(file) << R"({"title": "Bad", "explanation": "A claim on a metric that does not exist is refused by name.",
    "recipes": ["fp32"], "expect": [{"metric": "speed", "run": "fp32", "min": 1}]})";
  const RunResult r = run_cli("lecture '" + file.string() + "' --out '" + (dir / "out").string() + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(file.string() + ": 'expect[0].metric' is not a metric: 'speed'"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(dir / "out"));
  const RunResult unknown = run_cli("lecture no-such-lesson --out '" + (dir / "out").string() + "'");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("no preset named 'no-such-lesson'"), std::string::npos) << unknown.err;
  fs::remove_all(dir);
}

}  // namespace
