// precision-lab-cli sample: text from a run folder's final weights (a gpt trained on a text set).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/registry.h"
#include "cli/commands.h"
#include "cli/parse_args.h"
#include "data/dataset.h"
#include "data/text.h"
#include "journal/journal.h"
#include "journal/weights.h"
#include "tensor/tensor.h"
#include "train/run.h"
#include "train/sample.h"

namespace cli {

namespace {

namespace fs = std::filesystem;

constexpr const char* kUsage =
    "usage: precision-lab-cli sample RUN_DIR [--prompt S] [--tokens N] [--temperature T] [--seed N] [--run N]\n"
    "  continues the prompt with the final weights of a gpt trained on a text set (weights-<run>.bin)\n"
    "  --prompt S       UTF-8 text to continue, every character in the data set's vocabulary\n"
    "                   (default: the prompt the run's evaluations continued, the validation's first line)\n"
    "  --tokens N       characters to generate, 1..100000 (default 200)\n"
    "  --temperature T  0: the most likely character each time; > 0: drawn from softmax(logits / T)\n"
    "                   (default 0.8)\n"
    "  --seed N         the draws' seed: the same seed gives the same text (default 0)\n"
    "  --run N          which run of the folder (default 0)\n";

int fail(const std::string& what) {
  std::fprintf(stderr, "precision-lab-cli sample: %s\n", what.c_str());
  return 2;
}

}  // namespace

int cmd_sample(int argc, char** argv) {
  std::string dir, prompt;
  bool has_prompt = false;
  std::uint64_t tokens = 200, seed = 0, run = 0;
  double temperature = 0.8;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--prompt" || a == "--tokens" || a == "--temperature" || a == "--seed" || a == "--run") {
      if (i + 1 >= argc) return fail(a + " needs a value");
      const std::string v = argv[++i];
      if (a == "--prompt") {
        prompt = v;
        has_prompt = true;
      } else if (a == "--tokens") {
        if (!parse_count(v, 100000, tokens) || tokens == 0)
          return fail("--tokens must be a whole number in 1..100000 (got '" + v + "')");
      } else if (a == "--seed") {
        if (!parse_count(v, UINT64_MAX, seed)) return fail("--seed must be a whole number >= 0 (got '" + v + "')");
      } else if (a == "--run") {
        if (!parse_count(v, 4095, run)) return fail("--run must be a run number, 0 or more (got '" + v + "')");
      } else {
        char* end = nullptr;
        errno = 0;
        const double t = std::strtod(v.c_str(), &end);
        if (v.empty() || errno != 0 || *end != '\0' || !(t >= 0.0) || t > 1e6)
          return fail("--temperature must be a number in 0..1000000 (got '" + v + "')");
        temperature = t;
      }
    } else if (a.rfind("--", 0) == 0 || !dir.empty()) {
      return fail("unexpected argument '" + a + "' (try sample --help)");
    } else {
      dir = a;
    }
  }
  if (dir.empty()) return fail("which run folder? (usage: sample RUN_DIR [--prompt S] [--tokens N] ...)");
  if (!fs::is_directory(dir) || !fs::exists(fs::path(dir) / "runs.json")) return fail(dir + ": no such run folder");

  engine::JournalContents j;
  try {
    j = engine::read_journal_status(dir);
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  if (run >= j.runs.size())
    return fail(dir + ": no run " + std::to_string(run) + " (the folder has " + std::to_string(j.runs.size()) +
                (j.runs.size() == 1 ? " run)" : " runs)"));
  const engine::JournalEntry& e = j.runs[run];
  const engine::RunConfig& c = e.config;
  const std::string who = "run " + std::to_string(run) + " (" + e.name + ")";
  if (!engine::is_text_spec(c.dataset) || c.model != "gpt")
    return fail(dir + ": " + who + " trained model " + c.model + " on '" + c.dataset +
                "', not a gpt on a text set: it writes no text");
  const fs::path weights = fs::path(dir) / engine::weights_file_name(static_cast<int>(run));
  if (!fs::exists(weights))
    return fail(weights.string() + ": no weights file (" + who + " " + (e.status.empty() ? "unknown" : e.status) +
                (e.message.empty() ? std::string() : ": " + e.message) + ")");

  try {
    // The run as it was built (its recipe's layout), at its final weights;
    // on the CPU with one thread whatever it trained on, so a seed gives
    // the same text on every machine's CPU build.
    auto data = std::make_shared<const engine::DatasetPair>(
        engine::load_dataset(c.dataset, c.seed, static_cast<std::size_t>(c.context)));
    std::unique_ptr<engine::Backend> be = engine::make_backend("cpu", 1).backend;
    engine::Run r(static_cast<int>(run), c, data, *be);
    const std::vector<std::string>& vocab = data->test.vocabulary;
    const std::vector<std::int32_t> ids = has_prompt ? engine::encode_text(prompt, vocab)
                                                     : engine::evaluation_prompt(data->test, c.context);
    engine::restore_weights(*be, r.model(), weights.string());
    engine::BackendScope scope(*be);
    const engine::SampleOptions o{static_cast<std::size_t>(tokens), temperature, seed};
    const std::string text = engine::decode_tokens(engine::generate_tokens(*be, r.model(), c.context, ids, o), vocab);
    std::printf("%s%s\n", engine::decode_tokens(ids, vocab).c_str(), text.c_str());
    return 0;
  } catch (const std::exception& ex) {
    return fail(ex.what());
  }
}

}  // namespace cli
