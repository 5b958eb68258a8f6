// The GPU peer (tests/bench/pytorch_gpu_peer.py) run the way a machine
// without a GPU can: --device cpu, three timed steps, over run folders the
// CLI wrote and a saved bench_train output; its table's rows, figures,
// ratios, skipped cells and verdict are checked. Skips, saying why, where no
// Python imports torch.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <tuple>

#include "cli_runner.h"
#include "pytorch_runner.h"

#ifndef PL_GPU_PEER_PATH
#error "PL_GPU_PEER_PATH must name tests/bench/pytorch_gpu_peer.py"
#endif

namespace {

namespace fs = std::filesystem;

struct Row {
  std::string shape, batch, ours, eager, ratio, compiled;
};

// model, size, recipe -> the row's cells.
std::map<std::tuple<std::string, std::string, std::string>, Row> table(const std::string& out) {
  static const std::regex row(
      R"(^(\w+)\s+(\w+)\s+(.+?)\s+(\d+)\s+(fp32|mixed-bf16|mixed-fp16)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)$)");
  std::map<std::tuple<std::string, std::string, std::string>, Row> rows;
  std::istringstream in(out);
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_match(line, m, row)) rows[{m[1], m[2], m[5]}] = Row{m[3], m[4], m[6], m[7], m[8], m[9]};
  return rows;
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

TEST(PytorchGpuPeer, RunsOnTheCpuAndPrintsTheRatios) {
  const std::string python = cli_test::torch_python();
  if (python.empty())
    GTEST_SKIP() << "no Python here imports torch and numpy ($PL_TORCH_PYTHON, else /usr/bin/python3, python3): "
                    "install python3-torch python3-numpy to run the GPU peer's smoke test";
  if (!fs::exists("/usr/share/datasets/fashion-mnist"))
    GTEST_SKIP() << "Fashion-MNIST is not installed (dataset-fashion-mnist): the CLI runs below train on it";
  const fs::path dir = cli_test::temp_path("gpu_peer");
  // Two folders the CLI writes (one step each): an mlp of its own widths
  // and the default transformer, at batch 16.
  const auto mlp = cli_test::run_cli("run --model mlp --widths 64,32 --dataset fashion-mnist --steps 1 --batch 16 "
                                     "--backend cpu --out '" + (dir / "mlp").string() + "'");
  ASSERT_EQ(mlp.exit_code, 0) << mlp.err;
  const auto vit = cli_test::run_cli("run --model transformer --dataset fashion-mnist --steps 1 --batch 16 "
                                     "--backend cpu --out '" + (dir / "vit").string() + "'");
  ASSERT_EQ(vit.exit_code, 0) << vit.err;
  // A cnn with the size fields the GPU presets write ("channels", "size").
  write(dir / "cnn" / "config.json", R"({"model": "cnn", "channels": [8, 16], "batch": 16, "size": "gpu"})");
  // bench_train's summary lines (the CPU's rows: --device cpu): ours is 1
  // sample/s for the mlp in fp32 (below any PyTorch figure: the one miss)
  // and a billion elsewhere; no row for the cnn.
  write(dir / "custom.log",
        "samples/s (best repetition) and ratio to fp32 (same run; median repetition's ratio after):\n"
        "  mlp          fp32                 1 samples/s   1.00x fp32   median  1.00x\n"
        "  mlp          mixed-bf16  1000000000 samples/s   9.99x fp32   median  9.99x\n"
        "  mlp@cuda     fp32        2000000000 samples/s   1.00x fp32   median  1.00x\n");
  write(dir / "default.log",
        "  transformer  fp32        1000000000 samples/s   1.00x fp32   median  1.00x\n"
        "  transformer  mixed-bf16  1000000000 samples/s   1.00x fp32   median  1.00x\n");
  const std::string args = "'" PL_GPU_PEER_PATH "' --device cpu --steps 3 --rounds 1 --warmup 1 --run '" +
                           (dir / "mlp").string() + "' --run '" + (dir / "vit").string() + "' --run '" +
                           (dir / "cnn").string() + "' --bench-log custom='" + (dir / "custom.log").string() +
                           "' --bench-log default='" + (dir / "default.log").string() + "'";
  const cli_test::PyResult r = cli_test::run_python(python, args);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto rows = table(r.out);
  ASSERT_EQ(rows.size(), 9u) << r.out;  // three runs, three recipes each

  // The shapes and batches come from the config.json files.
  EXPECT_EQ(rows.at({"mlp", "custom", "fp32"}).shape, "784-64-32-10");
  EXPECT_EQ(rows.at({"mlp", "custom", "fp32"}).batch, "16");
  EXPECT_EQ(rows.at({"transformer", "default", "fp32"}).shape, "w64 h4 d2");
  EXPECT_EQ(rows.at({"cnn", "gpu", "fp32"}).shape, "conv 8/16, fc 128");

  // Ours from the log of the run's size (the CPU's rows, not @cuda), and
  // the ratio ours / PyTorch eager of the printed figures.
  EXPECT_EQ(rows.at({"mlp", "custom", "fp32"}).ours, "1");
  EXPECT_EQ(rows.at({"mlp", "custom", "mixed-bf16"}).ours, "1000000000");
  EXPECT_EQ(rows.at({"cnn", "gpu", "fp32"}).ours, "-");
  for (const auto& key : {std::tuple<std::string, std::string, std::string>{"mlp", "custom", "fp32"},
                          {"mlp", "custom", "mixed-bf16"}, {"transformer", "default", "fp32"},
                          {"transformer", "default", "mixed-bf16"}, {"cnn", "gpu", "mixed-bf16"}}) {
    const Row& row = rows.at(key);
    SCOPED_TRACE(std::get<0>(key) + " " + std::get<2>(key));
    const double eager = std::stod(row.eager);
    EXPECT_GT(eager, 0.0);
    if (row.ours == "-") {
      EXPECT_EQ(row.ratio, "-");
      continue;
    }
    ASSERT_EQ(row.ratio.back(), 'x');
    const double ratio = std::stod(row.ratio.substr(0, row.ratio.size() - 1));
    const double expected = std::stod(row.ours) / eager;
    // Two decimals of a ratio of a figure rounded to a whole sample/s.
    EXPECT_NEAR(ratio, expected, 0.005 + expected / eager) << r.out;
  }

  // Debian's torch 1.13 autocasts the CPU to bfloat16 only, and has no
  // torch.compile: those cells say skipped, with the exception's first line.
  const cli_test::PyResult compile = cli_test::run_python(python, "-c 'import torch; print(hasattr(torch, \"compile\"))'");
  if (compile.out.find("False") != std::string::npos) {
    EXPECT_EQ(rows.at({"mlp", "custom", "fp32"}).compiled, "skipped");
    EXPECT_NE(r.out.find("torch compiled mlp custom fp32: skipped: RuntimeError: torch "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("has no torch.compile"), std::string::npos) << r.out;
  }
  EXPECT_EQ(rows.at({"mlp", "custom", "mixed-fp16"}).compiled, "-");  // not asked for (--compile fp32,mixed-bf16)
  const std::string fp16 = rows.at({"mlp", "custom", "mixed-fp16"}).eager;
  if (fp16 == "skipped")
    EXPECT_NE(r.out.find("torch eager mlp custom mixed-fp16: skipped: "), std::string::npos) << r.out;
  else
    EXPECT_GT(std::stod(fp16), 0.0);

  // The verdict counts the four cells with both figures; the mlp's fp32 misses.
  EXPECT_NE(r.out.find("ours: bench_train has no row for cnn gpu fp32, cnn gpu mixed-bf16"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("verdict peer: ours >= 1.0x PyTorch eager (fp32, mixed-bf16) on every model and size: "
                       "missed in 1 of 4: mlp custom fp32 0.00x"),
            std::string::npos)
      << r.out;

  // A folder without a config.json: one line naming it, exit 1.
  const cli_test::PyResult bad =
      cli_test::run_python(python, "'" PL_GPU_PEER_PATH "' --device cpu --run '" + (dir / "none").string() + "'");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("pytorch_gpu_peer: " + (dir / "none" / "config.json").string() + ": cannot read"),
            std::string::npos)
      << bad.out;
  fs::remove_all(dir);
}

}  // namespace
