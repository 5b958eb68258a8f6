// precision-lab-cli export-pytorch: what a run folder keeps for it, what it writes, what it lists and refuses.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "journal/npy.h"

namespace {

namespace fs = std::filesystem;
using cli_test::read_file;
using cli_test::run_cli;
using cli_test::temp_path;

int lines_of(const std::string& text) {
  int n = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) n += !line.empty() && line[0] != '#';
  return n;
}

std::string one_line(const std::string& s) {
  return s.find('\n') == s.size() - 1 ? "" : "not one line: " + s;
}

TEST(CliExportPytorch, RunFolderKeepsInitialWeightsAndBatchOrder) {
  const fs::path dir = temp_path("export_keep");
  const auto r = run_cli("run --model mlp --dataset spirals --steps 30 --batch 100 --stats-every 0 --out '" +
                         dir.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path init = dir / "initial-0";
  EXPECT_FALSE(fs::exists(dir / ".initial-0.tmp"));
  const std::string names = read_file((init / "parameters.txt").string());
  EXPECT_EQ(lines_of(names), 6) << names;  // fc1..fc3, weight and bias
  const engine::NpyArray w = engine::parse_npy(read_file((init / "fc1.weight.npy").string()), "fc1.weight.npy");
  EXPECT_EQ(w.type, engine::NpyType::F32);
  EXPECT_EQ(w.shape, (std::vector<std::int64_t>{256, 2}));
  // The batch order: 30 steps; spirals' 2000 training samples in batches of
  // 100 make 20 steps an epoch, each epoch a permutation.
  std::istringstream in(read_file((init / "batches.txt").string()));
  std::string line;
  std::vector<std::vector<int>> batches;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream l(line);
    std::vector<int> b;
    for (int i; l >> i;) b.push_back(i);
    batches.push_back(b);
  }
  ASSERT_EQ(batches.size(), 30u);
  std::set<int> epoch0;
  for (int s = 0; s < 20; ++s) {
    EXPECT_EQ(batches[static_cast<std::size_t>(s)].size(), 100u);
    epoch0.insert(batches[static_cast<std::size_t>(s)].begin(), batches[static_cast<std::size_t>(s)].end());
  }
  EXPECT_EQ(epoch0.size(), 2000u);
  EXPECT_EQ(*epoch0.rbegin(), 1999);
  EXPECT_NE(batches[20], batches[0]);  // the next epoch has its own order
  // A run that opts out keeps none.
  const fs::path off = temp_path("export_keep_off");
  ASSERT_EQ(run_cli("run --model mlp --dataset spirals --steps 3 --batch 50 --keep-initial off --out '" + off.string() +
                    "'").exit_code, 0);
  EXPECT_FALSE(fs::exists(off / "initial-0"));
  fs::remove_all(dir);
  fs::remove_all(off);
}

TEST(CliExportPytorch, WritesTheScriptAndListsWhatDoesNotTranslate) {
  const fs::path dir = temp_path("export_custom");
  // A custom recipe: fc1 in FP16 with FP16 sums, and an activation spike.
  const fs::path config = temp_path("export_custom.json");
  std::ofstream(config) << R"({"recipe": "custom", "model": "mlp", "dataset": "spirals", "steps": 12, "batch": 64,
    "stats_every": 0, "spike": "5:fc2:100",
    "layers": {"fc1": {"compute": "fp16", "storage": "fp16", "accumulate": "fp16"}}})";
  ASSERT_EQ(run_cli("run --config '" + config.string() + "' --out '" + dir.string() + "'").exit_code, 0);
  const fs::path out = temp_path("export_custom_out");
  const auto r = run_cli("export-pytorch '" + dir.string() + "' --out '" + out.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("not translated"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("FP16 accumulation"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fc1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("spike"), std::string::npos) << r.out;
  const std::string script = read_file((out / "train.py").string());
  const std::string head = script.substr(0, script.find("\nimport "));
  EXPECT_NE(head.find("What PyTorch cannot express"), std::string::npos) << head;
  EXPECT_NE(head.find("FP16 accumulation"), std::string::npos) << head;
  EXPECT_NE(head.find("spike"), std::string::npos) << head;
  EXPECT_NE(script.find("AUTOCAST = \"float16\""), std::string::npos);
  EXPECT_NE(script.find("\"fc2\": \"fp32\""), std::string::npos) << "fc2 stays FP32 in this recipe";
  EXPECT_EQ(read_file((out / "batches.txt").string()), read_file((dir / "initial-0" / "batches.txt").string()));
  for (const char* f : {"initial/parameters.txt", "initial/fc1.weight.npy", "data/index.npy", "data/inputs.npy",
                        "data/labels.npy"})
    EXPECT_TRUE(fs::exists(out / f)) << f;
  EXPECT_FALSE(fs::exists(out.parent_path() / ("." + out.filename().string() + ".export-tmp")));
  // A second export replaces the first.
  EXPECT_EQ(run_cli("export-pytorch '" + dir.string() + "' --out '" + out.string() + "'").exit_code, 0);
  fs::remove_all(dir);
  fs::remove_all(out);
  fs::remove(config);
}

TEST(CliExportPytorch, BadRunFoldersGetOneLineNamingWhatIsMissing) {
  const fs::path dir = temp_path("export_bad");
  ASSERT_EQ(run_cli("run --model mlp --dataset spirals --steps 3 --batch 50 --keep-initial off --out '" +
                    dir.string() + "'").exit_code, 0);
  const fs::path out = temp_path("export_bad_out");
  auto r = run_cli("export-pytorch '" + dir.string() + "' --out '" + out.string() + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("initial-0"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("missing"), std::string::npos) << r.err;
  EXPECT_EQ(one_line(r.err), "");
  EXPECT_FALSE(fs::exists(out)) << "nothing written";

  // Weights that were cut short.
  const fs::path cut = temp_path("export_cut");
  ASSERT_EQ(run_cli("run --model mlp --dataset spirals --steps 3 --batch 50 --out '" + cut.string() + "'").exit_code, 0);
  const fs::path w = cut / "initial-0" / "fc2.weight.npy";
  const std::string bytes = read_file(w.string());
  std::ofstream(w, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() / 2);
  r = run_cli("export-pytorch '" + cut.string() + "' --out '" + out.string() + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("fc2.weight.npy"), std::string::npos) << r.err;
  EXPECT_EQ(one_line(r.err), "");
  EXPECT_FALSE(fs::exists(out));
  fs::remove(cut / "initial-0" / "parameters.txt");
  r = run_cli("export-pytorch '" + cut.string() + "' --out '" + out.string() + "'");
  EXPECT_NE(r.err.find("parameters.txt: missing"), std::string::npos) << r.err;

  // A recipe PyTorch cannot express.
  const fs::path fp8 = temp_path("export_fp8");
  ASSERT_EQ(run_cli("run --model mlp --dataset spirals --recipe fp8 --steps 2 --batch 50 --out '" + fp8.string() + "'")
                .exit_code, 0);
  r = run_cli("export-pytorch '" + fp8.string() + "' --out '" + out.string() + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("recipe 'fp8' cannot be expressed"), std::string::npos) << r.err;
  EXPECT_EQ(one_line(r.err), "");
  EXPECT_FALSE(fs::exists(out));

  // Not a run folder; a run it does not hold; an --out that holds something else.
  r = run_cli("export-pytorch '" + out.parent_path().string() + "' --out '" + out.string() + "'");
  EXPECT_NE(r.err.find("runs.json: missing"), std::string::npos) << r.err;
  r = run_cli("export-pytorch '" + cut.string() + "' --run 3 --out '" + out.string() + "'");
  EXPECT_NE(r.err.find("has no run 3"), std::string::npos) << r.err;
  fs::create_directories(out);
  std::ofstream(out / "notes.txt") << "mine";
  ASSERT_EQ(run_cli("run --model mlp --dataset spirals --steps 2 --batch 50 --out '" + fp8.string() + "2'").exit_code, 0);
  r = run_cli("export-pytorch '" + fp8.string() + "2' --out '" + out.string() + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("holds something other than an export"), std::string::npos) << r.err;
  EXPECT_EQ(read_file((out / "notes.txt").string()), "mine");
  r = run_cli("export-pytorch");
  EXPECT_EQ(r.exit_code, 2);
  for (const fs::path& p : {dir, cut, fp8, fs::path(fp8.string() + "2"), out}) fs::remove_all(p);
}

}  // namespace
