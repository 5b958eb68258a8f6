// Memory accounting (docs/numerics.md "What the numbers mean"): every category's bytes
// as the recipe would hold them on a device, computed here from parameter
// counts and activation shapes for the mlp and the cnn in every recipe, and
// compared with what a step reports (the steps.csv columns); the gpt's by
// its leaves' formats, AdamW's state and activations per sample.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/test_configs.h"
#include "backend/backend.h"
#include "data/dataset.h"
#include "data/text.h"
#include "nn/layer.h"
#include "nn/model.h"
#include "train/run.h"

namespace {

using namespace engine;

Backend& backend() {
  static std::unique_ptr<Backend> be = make_cpu_backend(1);
  return *be;
}

std::shared_ptr<const DatasetPair> fashion() {
  static auto data = std::make_shared<const DatasetPair>(load_dataset("fashion-mnist", 0));
  return data;
}

constexpr std::int64_t B = 32;

// A layer's parameters: weight elements (GEMM operands) and bias elements.
struct Params {
  std::int64_t weights = 0, biases = 0;
  std::int64_t all() const { return weights + biases; }
};

// Bytes a recipe holds for those parameters.
struct Expected {
  std::int64_t weights, master, grads, optimizer;
};

Expected parameter_bytes(const std::string& recipe, const Params& p) {
  const std::int64_t n = p.all();
  if (recipe == "fp32") return {4 * n, 0, 4 * n, 4 * n};
  // FP16 only: weights, gradients and momentum all in FP16 — half of FP32.
  if (recipe == "fp16") return {2 * n, 0, 2 * n, 2 * n};
  // Mixed: 16-bit weights beside FP32 masters; FP32 gradients and state.
  if (recipe == "mixed-fp16" || recipe == "mixed-bf16") return {2 * n, 4 * n, 4 * n, 4 * n};
  // fp8: E4M3 GEMM weights (1 byte), biases FP32; FP32 masters, grads, state.
  return {p.weights + 4 * p.biases, 4 * n, 4 * n, 4 * n};
}

// Bytes of a saved activation tensor of `values` elements for a layer of
// `role` in `recipe` (compute format for GEMM inputs, storage format else).
std::int64_t saved(const std::string& recipe, bool gemm_input, std::int64_t values) {
  if (recipe == "fp32") return 4 * values;
  if (recipe == "fp8") return gemm_input ? values : 4 * values;  // E4M3 operands; the rest FP32
  return 2 * values;                                              // FP16/BF16
}

const char* kRecipes[] = {"fp32", "fp16", "mixed-fp16", "mixed-bf16", "fp8"};

MemoryBytes first_step(const std::string& model, const std::string& recipe) {
  const RunConfig c = test::small_run(recipe, model, "fashion-mnist", 2, B, 0);
  Run run(0, c, fashion(), backend());
  std::vector<Record> out;
  run.step(out);
  return run.steps().back().mem;
}

void expect_parameter_bytes(const MemoryBytes& m, const Expected& e) {
  EXPECT_EQ(m.weights, e.weights);
  EXPECT_EQ(m.master, e.master);
  EXPECT_EQ(m.grads, e.grads);
  EXPECT_EQ(m.optimizer, e.optimizer);
}

// The step's own buffers: the batch (FP32 pixels and int32 labels) and the
// loss's probabilities and output gradient (FP32, 10 classes).
std::int64_t workspace_bytes() { return B * 784 * 4 + B * 4 + 2 * B * 10 * 4; }

TEST(MemoryAccounting, MlpEveryCategoryInEveryRecipe) {
  const Params p{784 * 256 + 256 * 128 + 128 * 10, 256 + 128 + 10};
  for (const char* recipe : kRecipes) {
    SCOPED_TRACE(recipe);
    const MemoryBytes m = first_step("mlp", recipe);
    expect_parameter_bytes(m, parameter_bytes(recipe, p));
    // fc1, fc2, fc3 save their inputs; relu1, relu2 their outputs.
    const std::string r = recipe;
    EXPECT_EQ(m.activations, saved(r, true, B * 784) + saved(r, false, B * 256) + saved(r, true, B * 256) +
                                 saved(r, false, B * 128) + saved(r, true, B * 128));
    EXPECT_EQ(m.workspace, workspace_bytes());
    EXPECT_EQ(m.total(), m.weights + m.master + m.grads + m.optimizer + m.activations + m.workspace);
    // The f32 copies of emulation exist exactly where values are not FP32.
    if (r == "fp32") EXPECT_EQ(m.emulation, 0);
    else EXPECT_GT(m.emulation, 0);
  }
}

TEST(MemoryAccounting, CnnEveryCategoryInEveryRecipe) {
  const Params p{1 * 32 * 25 + 32 * 64 * 25 + 64 * 7 * 7 * 128 + 128 * 10, 32 + 64 + 128 + 10};
  for (const char* recipe : kRecipes) {
    SCOPED_TRACE(recipe);
    const MemoryBytes m = first_step("cnn", recipe);
    expect_parameter_bytes(m, parameter_bytes(recipe, p));
    // conv1 and conv2 save their inputs, relu1/relu2 their outputs, each
    // pool its argmax (int32, whatever the format), fc1 and fc2 their
    // inputs, relu3 its output.
    const std::string r = recipe;
    const std::int64_t argmax = 4 * (B * 32 * 14 * 14 + B * 64 * 7 * 7);
    EXPECT_EQ(m.activations, saved(r, true, B * 784) + saved(r, false, B * 32 * 28 * 28) +
                                 saved(r, true, B * 32 * 14 * 14) + saved(r, false, B * 64 * 14 * 14) + argmax +
                                 saved(r, true, B * 64 * 7 * 7) + saved(r, false, B * 128) + saved(r, true, B * 128));
    EXPECT_EQ(m.workspace, workspace_bytes());
  }
}

TEST(MemoryAccounting, Fp16OnlyNeedsAboutHalfOfFp32AndMixedSavesActivations) {
  const MemoryBytes fp32 = first_step("mlp", "fp32");
  const MemoryBytes fp16 = first_step("mlp", "fp16");
  const MemoryBytes mixed = first_step("mlp", "mixed-fp16");
  // Emulation buffers would make fp16 look larger than fp32: they are not
  // part of the total.
  EXPECT_LT(double(fp16.total()), 0.6 * double(fp32.total()));
  EXPECT_GT(fp16.total() + fp16.emulation, fp16.total());
  EXPECT_LT(mixed.activations, fp32.activations);
  EXPECT_GT(mixed.master, 0);
}

// The gpt: every parameter's bytes by its leaf's storage format (the
// embeddings and GEMMs in the recipe's, the norms in FP32 under mixed
// precision, beside FP32 masters of all), AdamW's two state buffers per parameter
// in the recipe's state format, the step's token-sized buffers, and saved
// activations that are per sample (the attention's T x T probabilities
// included): twice the batch, exactly twice the bytes.
TEST(MemoryAccounting, GptCountsItsParametersStateAndActivations) {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the hacker wrote " + std::to_string(i % 7) + " lines of code.\n";
  const auto data =
      std::make_shared<const DatasetPair>(make_text_dataset(tokenize_text(text, "memory test"), 16));
  const std::int64_t V = static_cast<std::int64_t>(data->train.vocabulary.size()), T = 16;  // small_gpt's context
  auto first = [&](const std::string& recipe, std::int64_t batch, std::int64_t& low, std::int64_t& all) {
    RunConfig c = test::small_gpt(recipe, "text:memory", 1, batch, 0, 2);
    engine::Run run(0, c, data, backend());
    std::vector<Record> out;
    run.step(out);
    low = all = 0;
    for (Layer* l : run.model().leaves())
      for (Parameter* p : l->parameters()) {
        all += p->weight.numel();
        if (l->precision().storage != Format::FP32) low += p->weight.numel();
      }
    return run.steps().back().mem;
  };
  std::int64_t low = 0, n = 0;
  const MemoryBytes fp32 = first("fp32", 4, low, n);
  EXPECT_EQ(low, 0);
  expect_parameter_bytes(fp32, {4 * n, 0, 4 * n, 2 * 4 * n});
  // x (token ids as floats), int32 labels, then probabilities and their gradient per token.
  EXPECT_EQ(fp32.workspace, 4 * T * 4 + 4 * T * 4 + 2 * 4 * T * V * 4);
  const MemoryBytes fp16 = first("fp16", 4, low, n);
  EXPECT_EQ(low, n);
  expect_parameter_bytes(fp16, {2 * n, 0, 2 * n, 2 * 2 * n});
  const MemoryBytes bf16 = first("mixed-bf16", 4, low, n);
  EXPECT_GT(low, 0);
  EXPECT_LT(low, n);  // the norms stay FP32
  // An FP32 master of every parameter, the FP32 norms' included (as the
  // mlp's and the transformer's: a mixed recipe's optimizer steps masters).
  expect_parameter_bytes(bf16, {2 * low + 4 * (n - low), 4 * n, 4 * n, 2 * 4 * n});
  for (const char* recipe : {"fp32", "fp16", "mixed-bf16"}) {
    SCOPED_TRACE(recipe);
    const MemoryBytes small = first(recipe, 4, low, n), big = first(recipe, 8, low, n);
    EXPECT_GT(small.activations, 0);
    EXPECT_EQ(big.activations, 2 * small.activations);
    // At the least, each block's attention probabilities (2 heads x T x T a sample).
    EXPECT_GT(small.activations, 2 * 4 * 2 * T * T * (std::string(recipe) == "fp32" ? 4 : 2));
  }
  EXPECT_LT(bf16.activations, fp32.activations);
}

}  // namespace
