// Runs `precision-lab-cli compare` as a user would: the comparison rule the
// app shares (each recipe keeps its own loss scaling), the run column, and
// the memory and gradient figures of docs/numerics.md in the files it writes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "cli/cli_runner.h"
#include "report/csv.h"

namespace {

namespace fs = std::filesystem;
using cli_test::RunResult;
using cli_test::run_cli;

std::string cell(const engine::CsvTable& t, std::size_t row, const char* column) {
  const int c = t.column(column);
  EXPECT_GE(c, 0) << column;
  return c < 0 ? std::string() : t.rows[row][static_cast<std::size_t>(c)];
}

double number(const engine::CsvTable& t, std::size_t row, const char* column) {
  return std::strtod(cell(t, row, column).c_str(), nullptr);
}

TEST(CliCompare, LossScaleOptionsApplyOnlyToRecipesThatScale) {
  const fs::path dir = cli_test::temp_path("compare_scale");
  const RunResult r = run_cli("compare --recipes fp32,fp16,mixed-fp16 --dataset spirals --steps 5 --batch 32 "
                              "--loss-scale-init 1024 --out '" + dir.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const engine::CsvTable steps = engine::read_csv((dir / "steps.csv").string());
  ASSERT_EQ(steps.rows.size(), 15u);
  std::map<std::string, double> first_scale;
  for (std::size_t i = 0; i < steps.rows.size(); ++i)
    if (cell(steps, i, "step") == "1") first_scale[cell(steps, i, "run")] = number(steps, i, "loss_scale");
  EXPECT_EQ(first_scale["fp32"], 1.0);
  EXPECT_EQ(first_scale["fp16"], 1.0) << "fp16 stays unscaled, as in the app";
  EXPECT_EQ(first_scale["mixed-fp16"], 1024.0);
  fs::remove_all(dir);
}

TEST(CliCompare, Fp16NeedsAboutHalfOfFp32sMemoryAndFlushedGradientsReadAsUnderflow) {
  const fs::path dir = cli_test::temp_path("compare_truth");
  const RunResult r = run_cli("compare --recipes fp32,fp16,mixed-fp16 --dataset tiny-gradients --steps 100 "
                              "--stats-every 100 --out '" + dir.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const engine::CsvTable summary = engine::read_csv((dir / "summary.csv").string());
  ASSERT_EQ(summary.rows.size(), 3u);
  std::map<std::string, std::size_t> row;
  for (std::size_t i = 0; i < 3; ++i) row[cell(summary, i, "run")] = i;
  const double fp32 = number(summary, row["fp32"], "peak_memory_bytes");
  const double fp16 = number(summary, row["fp16"], "peak_memory_bytes");
  EXPECT_LE(fp16, 0.6 * fp32);
  const engine::CsvTable grads = engine::read_csv((dir / "grads.csv").string());
  bool seen = false;
  for (std::size_t i = 0; i < grads.rows.size(); ++i) {
    if (cell(grads, i, "run") != "fp16" || cell(grads, i, "layer") != "fc3" || cell(grads, i, "step") != "100")
      continue;
    seen = true;
    EXPECT_GT(number(grads, i, "underflow_unscaled"), 0.9);
    EXPECT_EQ(cell(grads, i, "shadow"), "1");
  }
  EXPECT_TRUE(seen);
  fs::remove_all(dir);
}

}  // namespace
