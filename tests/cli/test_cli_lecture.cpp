// Runs `precision-lab-cli lecture` as a teacher would before class: every
// built-in preset with --check (their quick versions: the full-length ones
// take up to a minute each), a failing claim, a bad preset file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/cli_runner.h"
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
}

class EveryPreset : public testing::TestWithParam<std::string> {};

TEST_P(EveryPreset, ItsClaimsHold) {
  const fs::path dir = cli_test::temp_path("lecture_" + GetParam());
  const RunResult r = run_cli("lecture " + GetParam() + " --quick --check --out '" + dir.string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(" 0 failed"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  for (const char* f : {"steps.csv", "summary.csv", "grads.csv", "events.csv", "config.json"})
    EXPECT_TRUE(fs::exists(dir / f)) << f;
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
