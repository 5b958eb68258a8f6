// Runs `precision-lab-cli compare` as a user would: the comparison rule the
// app shares (each recipe keeps its own loss scaling), the run column, and
// the memory and gradient figures of docs/numerics.md in the files it writes.
#include <gtest/gtest.h>

#include <cstdio>
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

namespace {

std::string read_text(const fs::path& p) {
  std::FILE* f = std::fopen(p.c_str(), "rb");
  std::string s;
  if (!f) return s;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
  std::fclose(f);
  return s;
}

}  // namespace

// --size gpu sizes the model named anywhere on the line, and the fields
// named beside it win (here the GPU cnn's stages made small enough for a
// CPU test, at a small batch); config.json holds the fields themselves.
// Bad sizes and shapes are one line naming the option, exit 2.
TEST(CliCompare, SizeGpuWithFieldsThatOverrideIt) {
  const fs::path dir = cli_test::temp_path("compare_size");
  const RunResult r = run_cli("compare --size gpu --recipes fp32,mixed-bf16 --model cnn --channels 4,8 --batch 8 "
                              "--steps 2 --stats-every 0 --eval-batches 1 --out '" + dir.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string config = read_text(dir / "config.json");
  EXPECT_NE(config.find("\"channels\""), std::string::npos) << config;
  EXPECT_NE(config.find("\"batch\": 8"), std::string::npos) << config;
  fs::remove_all(dir);

  const RunResult vit = run_cli("run --model transformer --size gpu --depth 1 --width 32 --heads 2 --batch 4 --steps 1 "
                                "--stats-every 0 --eval-batches 1 --out '" + dir.string() + "'");
  ASSERT_EQ(vit.exit_code, 0) << vit.out << vit.err;
  const std::string vit_config = read_text(dir / "config.json");
  for (const char* field : {"\"depth\": 1", "\"width\": 32", "\"heads\": 2", "\"batch\": 4"})
    EXPECT_NE(vit_config.find(field), std::string::npos) << field << "\n" << vit_config;
  fs::remove_all(dir);

  const RunResult huge = run_cli("run --size huge --steps 1 --out '" + dir.string() + "'");
  EXPECT_EQ(huge.exit_code, 2);
  EXPECT_NE(huge.err.find("--size: 'size' must be default or gpu (got 'huge')"), std::string::npos) << huge.err;
  const RunResult heads = run_cli("run --model transformer --width 48 --heads 5 --steps 1 --out '" + dir.string() + "'");
  EXPECT_EQ(heads.exit_code, 2);
  EXPECT_NE(heads.err.find("'heads' must divide width 48 (got 5)"), std::string::npos) << heads.err;
  const RunResult zero = run_cli("run --model cnn --channels 0,8 --steps 1 --out '" + dir.string() + "'");
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.err.find("'channels' entries must be in 1..4096 (got 0)"), std::string::npos) << zero.err;
  EXPECT_FALSE(fs::exists(dir / "steps.csv"));
}
