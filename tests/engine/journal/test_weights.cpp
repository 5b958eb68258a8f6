// The run folder's weights files (journal/weights.h): a run's final weights restore its evaluation exactly, and
// every malformed file is refused with one line naming the file and the problem.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "data/dataset.h"
#include "engine/train/trainer_test_support.h"
#include "journal/journal.h"
#include "journal/weights.h"
#include "nn/model.h"
#include "train/build_model.h"
#include "train/run.h"

namespace {

using namespace trainer_test;
using namespace engine;
namespace fs = std::filesystem;

fs::path temp(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("pl_weights_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(p);
  return p;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The message of what `f` throws (std::runtime_error), or "" when it does not.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// Trains `c` in a trainer that writes the folder `dir`; returns the run's
// last evaluation (a run evaluates at its end when eval_every divides its steps).
EvalMetrics train_into(const fs::path& dir, const RunConfig& c, std::int64_t stop_at = 0) {
  Trainer t;
  t.add_run(c);
  if (stop_at > 0) t.stop_run_at(0, stop_at);
  attach_journal(t, dir.string(), {c.recipe});
  t.start();
  t.wait();
  if (!t.run(0) || t.run(0)->evals().empty()) {
    ADD_FAILURE() << "the run did not evaluate";
    return {};
  }
  return t.run(0)->evals().back();
}

class WeightsOfARun : public ::testing::TestWithParam<const char*> {};

// The recipes cover the three ways a parameter is kept: FP32 only (fp32),
// an FP32 master with a BF16 compute copy (mixed-bf16), and FP16 weights
// that are the only copy (fp16).
TEST_P(WeightsOfARun, RestoreTheFinalEvaluationExactly) {
  const fs::path dir = temp(std::string("restore_") + GetParam());
  RunConfig c = spirals(60);
  c.recipe = GetParam();
  c.optimizer = "sgd";  // (Adam's second moments underflow in the fp16 recipe: it diverges)
  c.lr = 0.1;
  const EvalMetrics last = train_into(dir, c);
  ASSERT_EQ(last.step, 60);
  ASSERT_TRUE(fs::exists(dir / "weights-0.bin"));
  EXPECT_FALSE(fs::exists(dir / ".weights-0.bin.tmp"));

  const WeightsFile w = read_weights((dir / "weights-0.bin").string());
  EXPECT_EQ(w.version, kWeightsVersion);
  EXPECT_EQ(w.model, "mlp");
  EXPECT_EQ(w.steps, 60);

  // A fresh run of the folder's config: the same model, laid out by the
  // same recipe, at its initial weights.
  const JournalContents j = read_journal(dir.string());
  ASSERT_EQ(j.runs.size(), 1u);
  const RunConfig& again = j.runs[0].config;
  auto backend = make_backend(again.backend, 1).backend;
  engine::Run fresh(0, again, std::make_shared<const DatasetPair>(load_dataset(again.dataset, again.seed)), *backend);
  std::vector<Record> out;
  // The test can fail: untrained, the evaluation is another.
  EXPECT_NE(fresh.evaluate(out).val_loss, last.val_loss);
  ASSERT_EQ(w.parameters.size(), fresh.model().parameters().size());
  restore_weights(*backend, fresh.model(), (dir / "weights-0.bin").string());
  const EvalMetrics restored = fresh.evaluate(out);
  EXPECT_EQ(restored.val_loss, last.val_loss);
  EXPECT_EQ(restored.val_accuracy, last.val_accuracy);
  // Every value bit for bit, and the file the same when written again.
  const WeightsFile back = capture_weights(fresh.model(), 60);
  for (std::size_t i = 0; i < w.parameters.size(); ++i) {
    const StoredParameter &a = w.parameters[i], &b = back.parameters[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.format, b.format) << a.name;
    ASSERT_EQ(a.values.size(), b.values.size()) << a.name;
    EXPECT_EQ(std::memcmp(a.values.data(), b.values.data(), a.values.size() * sizeof(float)), 0) << a.name;
  }
  EXPECT_EQ(serialize_weights(back), slurp(dir / "weights-0.bin"));
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Recipes, WeightsOfARun, ::testing::Values("fp32", "mixed-bf16", "fp16"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

TEST(Weights, TheStoredFormatIsTheCopyTheValuesCameFrom) {
  const fs::path dir = temp("formats");
  RunConfig c = spirals(5);
  c.optimizer = "sgd";
  c.recipe = "fp16";
  train_into(dir, c);
  const WeightsFile w = read_weights((dir / "weights-0.bin").string());
  ASSERT_FALSE(w.parameters.empty());
  EXPECT_EQ(w.parameters[0].name, "fc1.weight");
  EXPECT_EQ(w.parameters[0].format, Format::FP16);  // fp16 keeps no master
  EXPECT_EQ(w.parameters[0].scale, 1.0f);
  fs::remove_all(dir);
  c.recipe = "mixed-fp16";
  train_into(dir, c);
  EXPECT_EQ(read_weights((dir / "weights-0.bin").string()).parameters[0].format, Format::FP32);  // the master
  fs::remove_all(dir);
}

TEST(Weights, AFailedRunLeavesNoWeights) {
  const fs::path dir = temp("failed");
  RunConfig c = spirals(5);
  c.recipe = "fp16";  // with Adam: diverges at step 2
  Trainer t;
  t.add_run(c);
  attach_journal(t, dir.string(), {"fp16"});
  t.start();
  t.wait();
  ASSERT_EQ(read_journal(dir.string()).runs[0].status, "failed");
  EXPECT_FALSE(fs::exists(dir / "weights-0.bin"));
  fs::remove_all(dir);
}

TEST(Weights, AStoppedRunKeepsTheWeightsWhereItStopped) {
  const fs::path dir = temp("stopped");
  const EvalMetrics last = train_into(dir, spirals(60), 20);
  EXPECT_EQ(last.step, 20);
  EXPECT_EQ(read_weights((dir / "weights-0.bin").string()).steps, 20);
  EXPECT_EQ(read_journal(dir.string()).runs[0].status, "stopped");
  fs::remove_all(dir);
}

TEST(Weights, EveryRunOfAComparisonHasItsFileAndOldFilesGo) {
  const fs::path dir = temp("compare");
  fs::create_directories(dir);
  std::ofstream(dir / "weights-7.bin") << "left by an earlier comparison";
  Trainer t;
  RunConfig a = spirals(10), b = spirals(10);
  a.eval_every = b.eval_every = 10;
  a.threads = b.threads = 2;  // on the CPU: the runs step side by side on the round pool's workers
  b.recipe = "mixed-bf16";
  t.add_run(a);
  t.add_run(b);
  attach_journal(t, dir.string(), {"a", "b"});
  t.start();
  t.wait();
  EXPECT_EQ(read_weights((dir / "weights-0.bin").string()).steps, 10);
  EXPECT_EQ(read_weights((dir / "weights-1.bin").string()).steps, 10);
  EXPECT_FALSE(fs::exists(dir / "weights-7.bin"));
  fs::remove_all(dir);
}

// A small file of the spirals mlp (widths 32, 16) at its initial weights.
RunConfig small_mlp(std::vector<std::int64_t> widths) {
  RunConfig c = spirals(1);
  c.widths = std::move(widths);
  return c;
}
std::string small_file(const std::vector<std::int64_t>& widths) {
  std::unique_ptr<Model> m = build_model(small_mlp(widths));
  m->init(3);
  return serialize_weights(capture_weights(*m, 0));
}

// The layout as docs/numerics.md gives it, written by Python's struct and
// zlib.crc32 (not by serialize_weights): one BF16 parameter 'fc.bias' [2]
// = {1.5, -2} of an mlp after 42 steps.
TEST(Weights, TheDocumentedLayoutParses) {
  const std::string doc(
      "\x50\x4c\x57\x45\x49\x47\x48\x54\x01\x00\x00\x00\x01\x00\x00\x00\x2a\x00\x00\x00\x00\x00\x00\x00"
      "\x03\x00\x00\x00\x6d\x6c\x70\x07\x00\x00\x00\x66\x63\x2e\x62\x69\x61\x73\x01\x00\x00\x00\x02\x00"
      "\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00\x62\x66\x31\x36\x00\x00\x80\x3f\x00\x00\xc0\x3f\x00\x00"
      "\x00\xc0\x53\x84\xb8\x2e",
      78);
  const WeightsFile w = parse_weights(doc, "doc.bin");
  EXPECT_EQ(w.model, "mlp");
  EXPECT_EQ(w.steps, 42);
  ASSERT_EQ(w.parameters.size(), 1u);
  EXPECT_EQ(w.parameters[0].name, "fc.bias");
  EXPECT_EQ(w.parameters[0].shape, (Shape{2}));
  EXPECT_EQ(w.parameters[0].format, Format::BF16);
  EXPECT_EQ(w.parameters[0].values, (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(serialize_weights(w), doc);
}

TEST(Weights, ATruncatedFileNamesWhatIsMissing) {
  const std::string bytes = small_file({32, 16});
  EXPECT_NO_THROW(parse_weights(bytes, "w.bin"));
  EXPECT_EQ(error_of([&] { parse_weights(bytes.substr(0, 14), "run/weights-0.bin"); }),
            "run/weights-0.bin: truncated: the parameter count needs 4 bytes at offset 12, 2 left");
  // Cut inside the last parameter's values (fc3.bias: 2 values), 10 bytes
  // short: 6 of its 8 value bytes and the checksum are missing.
  const std::size_t values_at = bytes.size() - 4 - 8;
  EXPECT_EQ(error_of([&] { parse_weights(bytes.substr(0, bytes.size() - 10), "run/weights-0.bin"); }),
            "run/weights-0.bin: truncated: parameter 5 'fc3.bias''s 2 values needs 8 bytes at offset " +
                std::to_string(values_at) + ", 2 left");
  EXPECT_EQ(error_of([&] { parse_weights(bytes.substr(0, bytes.size() - 1), "w.bin"); }),
            "w.bin: truncated: the checksum needs 4 bytes at offset " + std::to_string(bytes.size() - 4) + ", 3 left");
  EXPECT_EQ(error_of([&] { parse_weights("", "w.bin"); }), "w.bin: not a Precision Lab weights file (no PLWEIGHT magic)");
  // Through the file: the path names it.
  const fs::path p = temp("truncated.bin");
  std::ofstream(p, std::ios::binary) << bytes.substr(0, 14);
  EXPECT_EQ(error_of([&] { read_weights(p.string()); }),
            p.string() + ": truncated: the parameter count needs 4 bytes at offset 12, 2 left");
  fs::remove(p);
  EXPECT_EQ(error_of([&] { read_weights(p.string()); }), p.string() + ": cannot open");
}

TEST(Weights, AWrongMagicVersionOrChecksumIsRefused) {
  const std::string bytes = small_file({32, 16});
  std::string b = bytes;
  b[0] = 'X';
  EXPECT_EQ(error_of([&] { parse_weights(b, "w.bin"); }), "w.bin: not a Precision Lab weights file (no PLWEIGHT magic)");
  b = bytes;
  b[8] = 2;
  EXPECT_EQ(error_of([&] { parse_weights(b, "w.bin"); }),
            "w.bin: version 2 is not supported (this build reads version 1)");
  b = bytes;
  // One bit of fc1.weight's first value (after the header, its name, rank,
  // dims, format and scale).
  b[8 + 4 + 4 + 8 + 4 + 3 + 4 + 10 + 4 + 16 + 4 + 4 + 4] ^= 0x01;
  const std::string msg = error_of([&] { parse_weights(b, "w.bin"); });
  EXPECT_EQ(msg.rfind("w.bin: checksum mismatch (file says ", 0), 0u) << msg;
  EXPECT_NE(msg.find("): the file is corrupt"), std::string::npos) << msg;
  EXPECT_EQ(error_of([&] { parse_weights(bytes + "x", "w.bin"); }), "w.bin: 1 bytes after the checksum");
}

TEST(Weights, AMismatchedShapeOrModelIsRefusedAndChangesNothing) {
  const WeightsFile w = parse_weights(small_file({32, 16}), "w.bin");
  std::unique_ptr<Model> wider = build_model(small_mlp({48, 16}));
  wider->init(5);
  const std::vector<float> before = wider->parameters().back()->weight.to_f32();
  EXPECT_EQ(error_of([&] { load_weights(test::cpu_backend(), *wider, w, "run/weights-0.bin"); }),
            "run/weights-0.bin: 'fc1.weight' has shape 32x2, the mlp's is 48x2");
  EXPECT_EQ(wider->parameters().back()->weight.to_f32(), before);  // the checks come first
  std::unique_ptr<Model> deeper = build_model(small_mlp({32, 16, 8}));
  EXPECT_EQ(error_of([&] { load_weights(test::cpu_backend(), *deeper, w, "w.bin"); }),
            "w.bin: holds 6 parameters, the mlp has 8");
  RunConfig cnn = spirals(1);
  cnn.model = "transformer";
  cnn.dataset = "fashion-mnist";
  std::unique_ptr<Model> other = build_model(cnn);
  EXPECT_EQ(error_of([&] { load_weights(test::cpu_backend(), *other, w, "w.bin"); }),
            "w.bin: holds the weights of model 'mlp', the run's model is 'transformer'");
  // The same shapes load.
  std::unique_ptr<Model> same = build_model(small_mlp({32, 16}));
  EXPECT_NO_THROW(load_weights(test::cpu_backend(), *same, w, "w.bin"));
  EXPECT_EQ(same->parameters()[0]->weight.to_f32(), w.parameters[0].values);
}

TEST(Weights, BadFieldsAreOneLineErrors) {
  WeightsFile w = parse_weights(small_file({32, 16}), "w.bin");
  WeightsFile bad = w;
  bad.parameters[1].name.clear();
  EXPECT_EQ(error_of([&] { parse_weights(serialize_weights(bad), "w.bin"); }), "w.bin: parameter 1 has an empty name");
  bad = w;
  bad.parameters[0].scale = 0.0f;
  EXPECT_EQ(error_of([&] { parse_weights(serialize_weights(bad), "w.bin"); }),
            "w.bin: parameter 0 'fc1.weight' has scale 0.000000 (must be > 0)");
  bad = w;
  bad.parameters[0].format = Format::MXFP4;
  EXPECT_EQ(error_of([&] { parse_weights(serialize_weights(bad), "w.bin"); }),
            "w.bin: parameter 0 'fc1.weight' has format 'mxfp4' (expected fp32, tf32, bf16, fp16, e4m3 or e5m2)");
  // A shape whose values the file cannot hold: refused before allocating.
  std::string b = serialize_weights(w);
  const std::size_t dims_at = 8 + 4 + 4 + 8 + 4 + 3 + 4 + std::string("fc1.weight").size() + 4;
  const std::int64_t huge = std::int64_t{1} << 40;
  std::memcpy(b.data() + dims_at, &huge, sizeof huge);
  const std::string msg = error_of([&] { parse_weights(b, "w.bin"); });
  EXPECT_EQ(msg.rfind("w.bin: truncated: parameter 0 'fc1.weight''s values cannot fit in the ", 0), 0u) << msg;
}

}  // namespace
