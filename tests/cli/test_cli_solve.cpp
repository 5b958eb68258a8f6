// precision-lab-cli solve: the files it writes, their numbers, and its errors.
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_runner.h"

namespace {

using cli_test::read_file;
using cli_test::run_cli;
using cli_test::temp_path;

// A CSV file as rows of name -> value (no quoted commas in these files).
std::vector<std::map<std::string, std::string>> read_csv(const std::string& path) {
  std::vector<std::map<std::string, std::string>> rows;
  std::stringstream in(read_file(path));
  std::string line;
  std::vector<std::string> head;
  auto cells = [](const std::string& l) {
    std::vector<std::string> c;
    std::string cur;
    bool quoted = false;
    for (char ch : l) {
      if (ch == '"') quoted = !quoted;
      else if (ch == ',' && !quoted) c.push_back(cur), cur.clear();
      else cur += ch;
    }
    c.push_back(cur);
    return c;
  };
  if (!std::getline(in, line)) return rows;
  head = cells(line);
  while (std::getline(in, line)) {
    const auto c = cells(line);
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < head.size() && i < c.size(); ++i) row[head[i]] = c[i];
    rows.push_back(row);
  }
  return rows;
}

TEST(CliSolve, Fp16LuIrAtCond1e2WritesEveryFileAndConverges) {
  const auto dir = temp_path("solve_ok");
  const auto r = run_cli("solve --n 128 --cond 1e2 --seed 3 --factor fp16 --out '" + dir.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* f : {"iterations.csv", "summary.csv", "solution.csv", "config.json"})
    EXPECT_TRUE(std::filesystem::exists(dir / f)) << f;
  const auto sum = read_csv((dir / "summary.csv").string());
  ASSERT_EQ(sum.size(), 1u);
  EXPECT_EQ(sum[0].at("run"), "fp16-lu-ir");
  EXPECT_EQ(sum[0].at("converged"), "true");
  EXPECT_EQ(sum[0].at("accumulate"), "fp32");
  EXPECT_LT(std::stod(sum[0].at("backward_error")), 1e-15);
  EXPECT_LT(std::stod(sum[0].at("forward_error")), 1e-12);
  EXPECT_GT(std::stod(sum[0].at("low_precision_flop_share")), 0.5);
  EXPECT_LE(std::stod(sum[0].at("low_precision_flop_share")), 1.0);
  EXPECT_GT(std::stod(sum[0].at("scale")), 1.0);
  const int iterations = std::stoi(sum[0].at("iterations"));
  const auto it = read_csv((dir / "iterations.csv").string());
  ASSERT_EQ(it.size(), static_cast<std::size_t>(iterations + 1));
  EXPECT_EQ(it[0].at("update"), "");  // no update before the first solve
  EXPECT_EQ(it.back().at("backward_error"), sum[0].at("backward_error"));
  // A small backward error is written as a number, not as 0.
  EXPECT_NE(it.back().at("backward_error").find('e'), std::string::npos);
  const auto sol = read_csv((dir / "solution.csv").string());
  ASSERT_EQ(sol.size(), 128u);
  for (const auto& row : sol)
    EXPECT_NEAR(std::stod(row.at("fp16-lu-ir")), std::stod(row.at("x_exact")), 1e-11);
  const std::string cfg = read_file((dir / "config.json").string());
  EXPECT_NE(cfg.find("\"cond\": 100"), std::string::npos) << cfg;
  EXPECT_NE(cfg.find("\"factors\": [\"fp16\"]"), std::string::npos) << cfg;
  std::filesystem::remove_all(dir);
}

TEST(CliSolve, TheWallAtCond1e4IsAResultNotAnError) {
  const auto dir = temp_path("solve_wall");
  const auto r =
      run_cli("solve --n 256 --cond 1e4 --factor fp16 --method lu-ir,gmres-ir --compare fp32 --out '" + dir.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, std::map<std::string, std::string>> by_run;
  for (const auto& row : read_csv((dir / "summary.csv").string())) by_run[row.at("run")] = row;
  ASSERT_EQ(by_run.size(), 4u);
  EXPECT_EQ(by_run.at("fp16-lu-ir").at("converged"), "false");
  EXPECT_FALSE(by_run.at("fp16-lu-ir").at("reason").empty());
  EXPECT_EQ(by_run.at("fp16-gmres-ir").at("converged"), "true");
  EXPECT_GT(std::stoi(by_run.at("fp16-gmres-ir").at("gmres_iterations")), 0);
  EXPECT_EQ(by_run.at("fp32-lu-ir").at("converged"), "true");
  EXPECT_NE(r.out.find("fp16-lu-ir"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(CliSolve, TensorCoreStorageIsNamedInTheRunAndTheSummary) {
  const auto dir = temp_path("solve_tc");
  const auto r = run_cli("solve --n 64 --factor bf16 --compare fp64 --storage fp32 --out '" + dir.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto sum = read_csv((dir / "summary.csv").string());
  ASSERT_EQ(sum.size(), 2u);
  EXPECT_EQ(sum[0].at("run"), "bf16-tc-lu-ir");
  EXPECT_EQ(sum[0].at("storage"), "fp32");
  EXPECT_EQ(sum[1].at("run"), "fp64-lu-ir");  // FP64 has no Tensor Core mode
  EXPECT_EQ(sum[1].at("storage"), "fp64");
  EXPECT_EQ(sum[0].at("converged"), "true");
  EXPECT_NE(read_file((dir / "config.json").string()).find("\"storage\": \"fp32\""), std::string::npos);
  EXPECT_EQ(run_cli("solve --n 8 --factor bf16 --storage fp8 --out '" + dir.string() + "'").exit_code, 2);
  // Block formats are operand formats: Tensor Core mode only.
  const auto held = run_cli("solve --n 8 --factor mxfp8 --out '" + dir.string() + "'");
  EXPECT_EQ(held.exit_code, 2);
  EXPECT_NE(held.err.find("needs --storage fp32"), std::string::npos) << held.err;
  std::filesystem::remove_all(dir);
}

TEST(CliSolve, Fp32GmresIsNamedInTheRunTheSummaryAndTheConfig) {
  const auto dir = temp_path("solve_gmres32");
  const auto r = run_cli("solve --n 96 --cond 1e3 --factor fp16 --method lu-ir,gmres-ir --gmres fp32 --out '" +
                         dir.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto sum = read_csv((dir / "summary.csv").string());
  ASSERT_EQ(sum.size(), 2u);
  EXPECT_EQ(sum[0].at("run"), "fp16-lu-ir");  // LU-IR has no inner solve
  EXPECT_EQ(sum[0].at("gmres"), "none");
  EXPECT_EQ(sum[1].at("run"), "fp16-gmres-ir-fp32");
  EXPECT_EQ(sum[1].at("gmres"), "fp32");
  EXPECT_EQ(sum[1].at("converged"), "true");
  EXPECT_LT(std::stod(sum[1].at("backward_error")), 1e-15);
  EXPECT_NE(read_file((dir / "config.json").string()).find("\"gmres\": \"fp32\""), std::string::npos);
  const auto bad = run_cli("solve --n 8 --factor fp16 --gmres fp80 --out '" + dir.string() + "'");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err, "precision-lab-cli solve: --gmres must be fp32 or fp64 (got 'fp80')\n");
  std::filesystem::remove_all(dir);
}

TEST(CliSolve, MatrixMarketFileAndRightHandSide) {
  const auto dir = temp_path("solve_mtx");
  std::filesystem::create_directories(dir);
  // A = [4 1 0; 1 3 1; 0 1 2] (symmetric, lower triangle), x = (1, 2, 3): b = (6, 10, 8).
  std::ofstream(dir / "a.mtx") << "%%MatrixMarket matrix coordinate real symmetric\n3 3 5\n1 1 4\n2 1 1\n2 2 3\n"
                                  "3 2 1\n3 3 2\n";
  std::ofstream(dir / "b.txt") << "6\n10\n8\n";
  const auto out = dir / "out";
  const auto r = run_cli("solve --matrix '" + (dir / "a.mtx").string() + "' --rhs '" + (dir / "b.txt").string() +
                         "' --factor bf16 --accumulate factor --out '" + out.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto sum = read_csv((out / "summary.csv").string());
  ASSERT_EQ(sum.size(), 1u);
  EXPECT_EQ(sum[0].at("accumulate"), "bf16");
  EXPECT_EQ(sum[0].at("converged"), "true");
  EXPECT_EQ(sum[0].at("forward_error"), "");  // no exact solution to compare with
  EXPECT_EQ(sum[0].at("cond"), "");
  const auto sol = read_csv((out / "solution.csv").string());
  ASSERT_EQ(sol.size(), 3u);
  EXPECT_EQ(sol[0].count("x_exact"), 0u);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(std::stod(sol[i].at("bf16-lu-ir")), i + 1.0, 1e-14);
  std::filesystem::remove_all(dir);
}

TEST(CliSolve, BadInputNamesTheFileOrOptionAndWritesNothing) {
  const auto dir = temp_path("solve_bad");
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "bad.mtx") << "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n5 1 2\n";
  const auto out = dir / "out";
  const std::string o = " --out '" + out.string() + "'";
  auto r = run_cli("solve --matrix '" + (dir / "bad.mtx").string() + "' --factor fp16" + o);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "precision-lab-cli solve: " + (dir / "bad.mtx").string() + ":4: row '5' is not in 1..2\n");
  EXPECT_FALSE(std::filesystem::exists(out));
  r = run_cli("solve --n 8 --factor fp99" + o);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown factor format 'fp99'"), std::string::npos) << r.err;
  r = run_cli("solve --n 8 --factor fp16 --compare bf16 --accumulate fp16" + o);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("accumulation in FP16 does not go with the BF16 factor"), std::string::npos) << r.err;
  r = run_cli("solve --n 8 --matrix x.mtx --factor fp16" + o);
  EXPECT_EQ(r.exit_code, 2);
  r = run_cli("solve --n 8 --cond 0.5 --factor fp16" + o);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--cond must be a number >= 1"), std::string::npos) << r.err;
  r = run_cli("solve --n 8 --factor fp16 --method cg" + o);
  EXPECT_EQ(r.exit_code, 2);
  r = run_cli("solve --n 8 --factor fp16");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--out DIR is required"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(out));
  std::filesystem::remove_all(dir);
}

}  // namespace
