// Text generation (train/sample.h): prompts in and out of the vocabulary, the seeded draw, and a text run's
// samples at its evaluations, which leave its training numbers as they were.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/registry.h"
#include "data/dataset.h"
#include "data/text.h"
#include "engine/test_configs.h"
#include "nn/model.h"
#include "tensor/tensor.h"
#include "train/build_model.h"
#include "train/layer_catalog.h"
#include "train/run.h"
#include "train/sample.h"

namespace {

using namespace engine;

// A few lines of prose, repeated with a counter so the text is not one period.
std::string prose() {
  std::string t = "A title line\n\n";
  for (int i = 0; i < 60; ++i)
    t += "the hacker wrote " + std::to_string(i % 7) + " lines of code and the machine ran them.\n";
  return t;
}

std::shared_ptr<const DatasetPair> text_data(std::size_t context) {
  return std::make_shared<const DatasetPair>(make_text_dataset(tokenize_text(prose(), "prose.txt"), context));
}

RunConfig gpt(const std::string& recipe, std::int64_t steps) {
  return test::small_gpt(recipe, "text:prose.txt", steps, 8, 3, 1);
}

Backend& backend() {
  static std::unique_ptr<Backend> be = make_cpu_backend(1);
  return *be;
}

TEST(Sample, EncodeAndDecodeThroughTheVocabulary) {
  const std::vector<std::string> vocab = {"\n", " ", "a", "b", "\xC3\xA9"};  // é, U+00E9
  const std::vector<std::int32_t> ids = encode_text("ab \xC3\xA9\n", vocab);
  EXPECT_EQ(ids, (std::vector<std::int32_t>{2, 3, 1, 4, 0}));
  EXPECT_EQ(decode_tokens(ids, vocab), "ab \xC3\xA9\n");
  EXPECT_TRUE(encode_text("", vocab).empty());
  auto message = [&](const std::string& text) {
    try {
      encode_text(text, vocab);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("abZ"), "prompt: 'Z' (U+005A) is not in the data set's vocabulary");
  EXPECT_EQ(message("a\xE2\x82\xAC"), "prompt: '\xE2\x82\xAC' (U+20AC) is not in the data set's vocabulary");
  EXPECT_EQ(message("a\t"), "prompt: (U+0009) is not in the data set's vocabulary");  // not shown raw
  EXPECT_EQ(message("a\xC3"), "prompt: invalid UTF-8 at byte 1");
}

TEST(Sample, EvaluationPromptIsTheValidationsFirstWholeLine) {
  const auto data = text_data(16);
  const std::vector<std::int32_t> p = evaluation_prompt(data->test, 64);
  const std::string line = decode_tokens(p, data->test.vocabulary);
  // The split starts inside a line; the prompt is the next whole one, at
  // most 40 tokens, a longer line cut after its last space within them.
  EXPECT_EQ(line, "the hacker wrote 5 lines of code and ") << line;
  // Never longer than the context leaves room for (15 tokens: "the hacker wrot").
  EXPECT_EQ(decode_tokens(evaluation_prompt(data->test, 16), data->test.vocabulary), "the hacker ");
}

TEST(Sample, SameSeedSameTextTemperatureZeroIsArgmax) {
  const auto data = text_data(16);
  engine::Run run(0, gpt("fp32", 40), data, backend());
  std::vector<Record> out;
  while (!run.finished()) run.step(out);
  BackendScope scope(backend());
  const auto& vocab = data->test.vocabulary;
  auto text = [&](double temperature, std::uint64_t seed) {
    return sample_text(backend(), run.model(), 16, vocab, "the hacker", SampleOptions{60, temperature, seed});
  };
  const std::string a = text(1.0, 7), b = text(1.0, 7), c = text(1.0, 8);
  EXPECT_EQ(a.size(), b.size());
  EXPECT_EQ(a, b);
  // 60 draws from a barely trained model: two seeds agreeing on all is
  // (max p)^60-unlikely; they differ.
  EXPECT_NE(a, c);
  // Temperature 0 ignores the seed: the largest logit each time.
  EXPECT_EQ(text(0.0, 1), text(0.0, 2));
  // Argmax by hand for the first token: one forward over the padded window.
  const std::vector<std::int32_t> prompt = encode_text("the hacker", vocab);
  std::vector<float> window(16, 0.0f);
  for (std::size_t k = 0; k < prompt.size(); ++k) window[k] = static_cast<float>(prompt[k]);
  Tensor x({1, 16}, Format::FP32);
  x.from_f32(window.data(), 16);
  const std::vector<float> logits = run.model().forward(backend(), x).to_f32();
  const std::int64_t v = static_cast<std::int64_t>(vocab.size());
  const float* row = logits.data() + (prompt.size() - 1) * static_cast<std::size_t>(v);
  std::int64_t best = 0;
  for (std::int64_t i = 1; i < v; ++i)
    if (row[i] > row[best]) best = i;
  EXPECT_EQ(text(0.0, 1).substr(0, vocab[static_cast<std::size_t>(best)].size()), vocab[static_cast<std::size_t>(best)]);
  // Characters come from the vocabulary: the text is as long as asked.
  const std::vector<std::int32_t> ids = encode_text(a, vocab);
  EXPECT_EQ(ids.size(), 60u);
  // A prompt longer than the context keeps its last 16 tokens.
  const std::string long_prompt = "and the machine ran them. the hacker";
  EXPECT_EQ(sample_text(backend(), run.model(), 16, vocab, long_prompt, SampleOptions{20, 0.0, 0}),
            sample_text(backend(), run.model(), 16, vocab, long_prompt.substr(long_prompt.size() - 16),
                        SampleOptions{20, 0.0, 0}));
}

// Every evaluation of a text run writes a TextSample after its EvalMetrics
// (per token), and the training numbers are the same bits as without them.
TEST(Sample, EvaluationSamplesLeaveTrainingAsItWas) {
  const auto data = text_data(16);
  for (const std::string recipe : {"fp32", "mixed-fp16", "fp8", "mxfp4"}) {
    RunConfig c = gpt(recipe, 8);
    c.eval_every = 3;
    c.stats_every = 4;
    engine::Run with(0, c, data, backend()), without(0, c, data, backend());
    without.set_eval_samples(false);
    std::vector<Record> a, b;
    while (!with.finished()) {
      with.step(a);
      without.step(b);
      if (with.eval_due()) with.evaluate(a);
      if (without.eval_due()) without.evaluate(b);
    }
    ASSERT_EQ(with.steps().size(), without.steps().size());
    for (std::size_t k = 0; k < with.steps().size(); ++k) {
      EXPECT_EQ(std::memcmp(&with.steps()[k].loss, &without.steps()[k].loss, sizeof(double)), 0) << recipe << " " << k;
      EXPECT_EQ(std::memcmp(&with.steps()[k].grad_norm, &without.steps()[k].grad_norm, sizeof(double)), 0) << recipe;
    }
    ASSERT_EQ(with.evals().size(), without.evals().size());
    for (std::size_t k = 0; k < with.evals().size(); ++k) {
      EXPECT_EQ(with.evals()[k].val_loss, without.evals()[k].val_loss) << recipe;
      EXPECT_TRUE(with.evals()[k].per_token);
    }
    // Evaluations at steps 3, 6 and 8 (the end): a sample each, right after its EvalMetrics.
    ASSERT_EQ(with.history().texts.size(), 3u) << recipe;
    EXPECT_TRUE(without.history().texts.empty());
    const std::string prompt = decode_tokens(evaluation_prompt(data->test, 16), data->test.vocabulary);
    for (const TextSample& t : with.history().texts) {
      EXPECT_EQ(t.prompt, prompt);
      EXPECT_EQ(encode_text(t.text, data->test.vocabulary).size(), kEvalSampleTokens) << recipe;
    }
    EXPECT_EQ(with.history().texts[1].step, 6);
    for (std::size_t k = 0; k + 1 < a.size(); ++k)
      if (const auto* t = std::get_if<TextSample>(&a[k + 1])) {
        const auto* e = std::get_if<EvalMetrics>(&a[k]);
        ASSERT_NE(e, nullptr) << recipe;
        EXPECT_EQ(e->step, t->step);
      }
  }
}

// A text set's plan: windows of the run's context over its vocabulary,
// without building them; the model and the layer catalog follow it.
TEST(Sample, ATextSetsPlanGivesTheModelItsVocabulary) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("pl_plan_" + std::to_string(getpid()) + ".txt")).string();
  std::ofstream(path) << prose();
  const std::size_t vocab = tokenize_text(prose(), "prose").vocabulary.size();
  const DataShape d = planned_data_shape("text:" + path, 16);
  EXPECT_EQ(d.sample, (Shape{16}));
  EXPECT_EQ(d.outputs, static_cast<std::int64_t>(vocab));
  RunConfig c = gpt("fp32", 1);
  c.dataset = "text:" + path;
  EXPECT_EQ(build_model(c)->outputs(), static_cast<std::int64_t>(vocab));
  EXPECT_EQ(describe_layers(c).data.outputs, static_cast<std::int64_t>(vocab));
  // A changed file is planned again (its size and time differ).
  std::ofstream(path, std::ios::app) << "XYZ\n";
  EXPECT_EQ(planned_data_shape("text:" + path, 16).outputs, static_cast<std::int64_t>(vocab + 3));
  std::remove(path.c_str());
  // A missing file: the text set's own one-line error.
  EXPECT_THROW(planned_data_shape("text:" + path, 16), std::runtime_error);
}

}  // namespace
