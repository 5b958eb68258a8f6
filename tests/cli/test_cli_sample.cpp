// precision-lab-cli sample: a tiny gpt trained through the CLI on a text file, then sampled: the same seed
// gives the same text, temperature 0 ignores the seed, and every bad input gets its one line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli/cli_runner.h"
#include "journal/journal.h"
#include "train/run_config.h"

namespace {

namespace fs = std::filesystem;
using cli_test::RunResult;
using cli_test::run_cli;

const std::string kPrompt = "the hacker";

// One folder for the whole suite: training is the slow part.
class CliSample : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = cli_test::temp_path("sample");
    fs::create_directories(root_);
    std::string text = "A title line\n\n";
    for (int i = 0; i < 60; ++i)
      text += "the hacker wrote " + std::to_string(i % 7) + " lines of code and the machine ran them.\n";
    std::ofstream(root_ / "prose.txt") << text;
    const RunResult r = run_cli("run --model gpt --dataset 'text:" + (root_ / "prose.txt").string() +
                                "' --layers 1 --width 32 --heads 2 --context 16 --steps 30 --batch 8"
                                " --optimizer adamw --lr 3e-3 --eval-every 10 --threads 1 --out '" +
                                (root_ / "gpt").string() + "'");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }
  static std::string gpt() { return "'" + (root_ / "gpt").string() + "'"; }
  static fs::path root_;
};
fs::path CliSample::root_;

TEST_F(CliSample, TheRunFolderKeepsASamplePerEvaluation) {
  const engine::JournalContents j = engine::read_journal((root_ / "gpt").string());
  ASSERT_EQ(j.exports.size(), 1u);
  const auto& texts = j.exports[0].history.texts;
  ASSERT_EQ(texts.size(), 3u);  // steps 10, 20, 30
  EXPECT_EQ(texts[2].step, 30);
  // The validation's first whole line, at most context - 1 = 15 tokens, cut after a word.
  EXPECT_EQ(texts[0].prompt, "the hacker ");
  EXPECT_FALSE(texts[2].text.empty());
  // Text runs' evaluations are per token: bits per token and perplexity fill.
  ASSERT_FALSE(j.exports[0].history.evals.empty());
  EXPECT_TRUE(j.exports[0].history.evals.back().per_token);
}

TEST_F(CliSample, SameSeedSameTextOtherSeedOtherText) {
  const std::string args = "sample " + gpt() + " --prompt '" + kPrompt + "' --tokens 80 --temperature 1";
  const RunResult a = run_cli(args + " --seed 1"), b = run_cli(args + " --seed 1"), c = run_cli(args + " --seed 2");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.err, "");
  EXPECT_EQ(a.out, b.out);
  // 80 draws at temperature 1 from a model 30 steps in: two seeds agreeing on all is vanishingly unlikely.
  EXPECT_NE(a.out, c.out);
  // The prompt, then the continuation, then a line break.
  EXPECT_EQ(a.out.rfind(kPrompt, 0), 0u) << a.out;
  EXPECT_EQ(a.out.back(), '\n');
  EXPECT_GT(a.out.size(), kPrompt.size() + 80);  // 80 characters (some may be multi-byte: none here)
}

TEST_F(CliSample, TemperatureZeroIgnoresTheSeed) {
  const std::string args = "sample " + gpt() + " --prompt '" + kPrompt + "' --tokens 40 --temperature 0";
  const RunResult a = run_cli(args + " --seed 1"), b = run_cli(args + " --seed 99");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.out.size(), kPrompt.size() + 40 + 1);
}

TEST_F(CliSample, WithoutAPromptItContinuesTheEvaluationsPrompt) {
  const RunResult a = run_cli("sample " + gpt() + " --tokens 5");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out.rfind("the hacker ", 0), 0u) << a.out;
}

TEST_F(CliSample, BadInputGetsOneLine) {
  const std::string dir = (root_ / "gpt").string();
  auto err = [](const std::string& args) {
    const RunResult r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(r.out, "") << args;
    return r.err;
  };
  const std::string p = "precision-lab-cli sample: ";
  EXPECT_EQ(err("sample '" + (root_ / "nothing").string() + "'"),
            p + (root_ / "nothing").string() + ": no such run folder\n");
  EXPECT_EQ(err("sample"), p + "which run folder? (usage: sample RUN_DIR [--prompt S] [--tokens N] ...)\n");
  EXPECT_EQ(err("sample " + gpt() + " --prompt 'the HACKER'"),
            p + "prompt: 'H' (U+0048) is not in the data set's vocabulary\n");
  EXPECT_EQ(err("sample " + gpt() + " --tokens abc"), p + "--tokens must be a whole number in 1..100000 (got 'abc')\n");
  EXPECT_EQ(err("sample " + gpt() + " --tokens 0"), p + "--tokens must be a whole number in 1..100000 (got '0')\n");
  EXPECT_EQ(err("sample " + gpt() + " --tokens 12x"), p + "--tokens must be a whole number in 1..100000 (got '12x')\n");
  EXPECT_EQ(err("sample " + gpt() + " --temperature -1"),
            p + "--temperature must be a number in 0..1000000 (got '-1')\n");
  EXPECT_EQ(err("sample " + gpt() + " --temperature nan"),
            p + "--temperature must be a number in 0..1000000 (got 'nan')\n");
  EXPECT_EQ(err("sample " + gpt() + " --seed -3"), p + "--seed must be a whole number >= 0 (got '-3')\n");
  EXPECT_EQ(err("sample " + gpt() + " --run 1"), p + dir + ": no run 1 (the folder has 1 run)\n");
  EXPECT_EQ(err("sample " + gpt() + " --tokens"), p + "--tokens needs a value\n");
  EXPECT_EQ(err("sample " + gpt() + " --top-k 3"), p + "unexpected argument '--top-k' (try sample --help)\n");

  // A run on a set that is not text.
  const std::string spirals = (root_ / "spirals").string();
  ASSERT_EQ(run_cli("run --dataset spirals --steps 3 --batch 16 --threads 1 --out '" + spirals + "'").exit_code, 0);
  EXPECT_EQ(err("sample '" + spirals + "'"),
            p + spirals + ": run 0 (fp32) trained model mlp on 'spirals', not a gpt on a text set: it writes no text\n");

  // A failed run leaves no weights: a text shorter than its context.
  std::ofstream(root_ / "short.txt") << "too short a text\n";
  const std::string failed = (root_ / "failed").string();
  run_cli("run --model gpt --dataset 'text:" + (root_ / "short.txt").string() +
          "' --layers 1 --width 32 --heads 2 --context 64 --steps 3 --threads 1 --out '" + failed + "'");
  const engine::JournalContents j = engine::read_journal_status(failed);
  ASSERT_EQ(j.runs.size(), 1u);
  ASSERT_EQ(j.runs[0].status, "failed");
  ASSERT_FALSE(j.runs[0].message.empty());
  EXPECT_EQ(err("sample '" + failed + "'"),
            p + failed + "/weights-0.bin: no weights file (run 0 (fp32) failed: " + j.runs[0].message + ")\n");
}

// --model gpt alone trains with AdamW at the gpt's learning rate, as the
// app's setup panel starts it; what the options name stays, and a config
// file is taken as written.
TEST_F(CliSample, AGptNamedOnTheCommandLineStartsFromAdamW) {
  const std::string base = "run --model gpt --dataset 'text:" + (root_ / "prose.txt").string() +
                           "' --layers 1 --width 16 --heads 2 --context 8 --steps 1 --batch 2 --threads 1";
  const auto config = [&](const std::string& options, const char* name) {
    const fs::path out = root_ / name;
    const RunResult r = run_cli(base + options + " --out '" + out.string() + "'");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return engine::load_run_config((out / "config.json").string());
  };
  engine::RunConfig c = config("", "defaults");
  EXPECT_EQ(c.optimizer, "adamw");
  EXPECT_EQ(c.lr, 1e-3);
  c = config(" --lr 0.01", "lr");
  EXPECT_EQ(c.optimizer, "adamw");
  EXPECT_EQ(c.lr, 0.01);
  c = config(" --optimizer sgd", "sgd");
  EXPECT_EQ(c.optimizer, "sgd");
  EXPECT_EQ(c.lr, 0.05);
  // A config file says what it says (its missing keys: RunConfig's).
  std::ofstream(root_ / "gpt.json") << "{\"model\": \"gpt\", \"dataset\": \"text:" << (root_ / "prose.txt").string()
                                     << "\", \"layers\": 1, \"width\": 16, \"heads\": 2, \"context\": 8, "
                                        "\"steps\": 1, \"batch\": 2, \"threads\": 1}";
  const fs::path file = root_ / "file";
  ASSERT_EQ(run_cli("run --config '" + (root_ / "gpt.json").string() + "' --out '" + file.string() + "'").exit_code, 0);
  c = engine::load_run_config((file / "config.json").string());
  EXPECT_EQ(c.optimizer, "sgd");
}

}  // namespace
