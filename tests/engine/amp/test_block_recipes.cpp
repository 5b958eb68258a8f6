// The block-scaled recipes (issue 14) end to end: the mxfp8, mxfp4 and
// nvfp4 presets and their parameter layouts, which precisions a layer may
// take (precision_problem) and how a run refuses the others, the config keys
// (layers, grad_rounding, spike), memory accounting of block weights and
// saved activations, and the gradient statistics of block grad formats.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/test_configs.h"
#include "amp/recipe.h"
#include "backend/backend.h"
#include "data/batch.h"
#include "data/sampler.h"
#include "data/dataset.h"
#include "nn/block_gemm.h"
#include "nn/layer.h"
#include "nn/linear.h"
#include "nn/model.h"
#include "numeric/block.h"
#include "engine/support/test_backend.h"
#include "train/run.h"
#include "train/run_config.h"

namespace {

using namespace engine;

// Every case here trains whole runs: on the CPU backend, or on the guarded
// one when ctest runs them again with PL_TEST_BACKEND=guarded
// (test_block_recipes_guarded).
Backend& backend() { return test::run_backend(); }

std::shared_ptr<const DatasetPair> spirals() {
  static auto data = std::make_shared<const DatasetPair>(load_dataset("spirals", 4));
  return data;
}

std::shared_ptr<const DatasetPair> fashion() {
  static auto data = std::make_shared<const DatasetPair>(load_dataset("fashion-mnist", 0));
  return data;
}

const char* kBlockRecipes[] = {"mxfp8", "mxfp4", "nvfp4"};

Format recipe_format(const std::string& r) {
  return r == "mxfp8" ? Format::MXFP8 : r == "mxfp4" ? Format::MXFP4 : Format::NVFP4;
}

RunConfig config(const char* recipe, const char* model = "mlp", const char* data = "spirals") {
  return test::small_run(recipe, model, data, 60, 32, 4);
}

std::shared_ptr<const DatasetPair> data_for(const RunConfig& c) {
  return c.dataset == "spirals" ? spirals() : fashion();
}

std::vector<double> losses(engine::Run& run, int steps) {
  std::vector<Record> out;
  std::vector<double> l;
  for (int i = 0; i < steps; ++i) {
    run.step(out);
    l.push_back(run.steps().back().loss);
  }
  return l;
}

Layer* leaf(Model& m, const std::string& name) {
  for (Layer* l : m.leaves())
    if (l->name() == name) return l;
  ADD_FAILURE() << "no leaf " << name;
  return nullptr;
}

// The message of the std::exception `f` throws ("" when it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// ---------------------------------------------------------------- presets

TEST(BlockRecipe, PresetsComputeAndDifferentiateInTheirBlockFormat) {
  const LayerPrecision fp32{};
  const LayerPrecision bf16_gemm{Format::BF16, Format::FP32, Format::FP32, Format::BF16};
  for (const char* name : kBlockRecipes) {
    SCOPED_TRACE(name);
    EXPECT_NE(std::find(recipe_names().begin(), recipe_names().end(), name), recipe_names().end());
    const Recipe r = make_recipe(name);
    const Format f = recipe_format(name);
    EXPECT_EQ(r.name, name);
    EXPECT_EQ(r.matmul, (LayerPrecision{f, Format::FP32, Format::FP32, f}));
    EXPECT_EQ(r.norm, fp32);
    EXPECT_EQ(r.elementwise, fp32);
    EXPECT_TRUE(r.master_weights);
    EXPECT_EQ(r.scaling.mode, ScalingMode::None);
    EXPECT_EQ(r.optimizer_state, Format::FP32);
    EXPECT_EQ(r.stochastic_grads, f == Format::NVFP4);
    ASSERT_EQ(r.overrides.size(), 2u);
    EXPECT_EQ(r.overrides.at("kind:attention_scores"), bf16_gemm);
    EXPECT_EQ(r.overrides.at("kind:attention_values"), bf16_gemm);
  }
}

TEST(BlockRecipe, TransformerLeavesTakeTheFormatsTheRecipeNames) {
  auto m = build_model("transformer", {1, 28, 28}, 10);
  for (const char* name : kBlockRecipes) {
    SCOPED_TRACE(name);
    const Recipe r = make_recipe(name);
    const Format f = recipe_format(name);
    int block = 0;
    for (Layer* l : m->leaves()) {
      const std::string kind = l->kind();
      const LayerPrecision p = r.precision_for(*l);
      EXPECT_EQ(precision_problem(*l, p), "") << l->name();
      if (kind == "linear" || kind == "patch_embed") {
        EXPECT_EQ(p.compute, f) << l->name();
        ++block;
      } else if (kind == "attention_scores" || kind == "attention_values") {
        EXPECT_EQ(p.compute, Format::BF16) << l->name();
      } else {
        EXPECT_TRUE(p.is_fp32()) << l->name();
      }
    }
    EXPECT_EQ(block, 2 * 4 + 2);
  }
}

TEST(BlockRecipe, WeightsStayFp32AndNameTheirBlockFormat) {
  for (const char* name : kBlockRecipes) {
    for (const char* model : {"mlp", "cnn", "transformer"}) {
      SCOPED_TRACE(std::string(name) + " " + model);
      const RunConfig c = config(name, model, std::string(model) == "mlp" ? "spirals" : "fashion-mnist");
      engine::Run run(0, c, data_for(c), backend());
      const Format f = recipe_format(name);
      int gemm_weights = 0;
      for (Layer* l : run.model().leaves()) {
        EXPECT_EQ(l->stochastic_grads, f == Format::NVFP4) << l->name();
        const bool block = takes_block_formats(l->kind());
        for (Parameter* p : l->parameters()) {
          EXPECT_TRUE(p->has_master()) << p->name;
          EXPECT_EQ(p->master.format(), Format::FP32) << p->name;
          EXPECT_EQ(p->weight.format(), Format::FP32) << p->name;
          EXPECT_EQ(p->grad.format(), Format::FP32) << p->name;
          EXPECT_EQ(p->weight_scale, 1.0f) << p->name;
          const bool gemm_weight = block && p->name.ends_with(".weight");
          EXPECT_EQ(p->quantized, gemm_weight ? f : Format::FP32) << p->name;
          EXPECT_EQ(p->weight.to_f32(), p->master.to_f32()) << p->name;
          gemm_weights += gemm_weight;
        }
      }
      const int expect = std::string(model) == "mlp" ? 3 : std::string(model) == "cnn" ? 4 : 10;
      EXPECT_EQ(gemm_weights, expect);
    }
  }
}

TEST(BlockRecipe, GradRoundingOverridesTheRecipe) {
  struct Case {
    const char* recipe;
    const char* rounding;
    bool stochastic;
  };
  for (const Case& k : {Case{"nvfp4", "recipe", true}, Case{"nvfp4", "nearest", false},
                        Case{"mxfp4", "recipe", false}, Case{"mxfp4", "stochastic", true},
                        Case{"mxfp8", "nearest", false}}) {
    SCOPED_TRACE(std::string(k.recipe) + " " + k.rounding);
    RunConfig c = config(k.recipe);
    c.grad_rounding = k.rounding;
    engine::Run run(0, c, spirals(), backend());
    for (Layer* l : run.model().leaves()) EXPECT_EQ(l->stochastic_grads, k.stochastic) << l->name();
  }
}

// ---------------------------------------------------------------- short runs

TEST(BlockTraining, MlpOnSpiralsLearnsInEveryBlockRecipe) {
  // Adam, as the trainer's spirals tests use: 300 steps take the fp32 mlp
  // well below its starting loss; every block recipe follows it.
  for (const char* name : {"fp32", "mxfp8", "mxfp4", "nvfp4"}) {
    SCOPED_TRACE(name);
    RunConfig c = config(name);
    c.optimizer = "adam";
    c.lr = 0.01;
    c.steps = 300;
    engine::Run run(0, c, spirals(), backend());
    const std::vector<double> l = losses(run, 300);
    for (std::size_t i = 0; i < l.size(); ++i) ASSERT_TRUE(std::isfinite(l[i])) << "step " << i + 1;
    double first = 0, last = 0;
    for (int i = 0; i < 20; ++i) first += l[i] / 20, last += l[l.size() - 1 - i] / 20;
    EXPECT_LT(last, 0.6 * first) << "first 20 steps " << first << ", last 20 " << last;
    for (const StepMetrics& m : run.steps()) {
      EXPECT_FALSE(m.overflow) << m.step;
      EXPECT_FALSE(m.skipped) << m.step;
      EXPECT_EQ(m.loss_scale, 1.0) << m.step;
    }
  }
}

TEST(BlockTraining, CnnAndTransformerStepFinitelyAndLearn) {
  for (const char* model : {"cnn", "transformer"}) {
    for (const char* name : kBlockRecipes) {
      SCOPED_TRACE(std::string(name) + " " + model);
      RunConfig c = config(name, model, "fashion-mnist");
      c.steps = 24;
      engine::Run run(0, c, fashion(), backend());
      const std::vector<double> l = losses(run, 24);
      for (std::size_t i = 0; i < l.size(); ++i) ASSERT_TRUE(std::isfinite(l[i])) << "step " << i + 1;
      double first = 0, last = 0;
      for (int i = 0; i < 4; ++i) first += l[i] / 4, last += l[l.size() - 1 - i] / 4;
      EXPECT_LT(last, first) << "first 4 steps " << first << ", last 4 " << last;
    }
  }
}

// ---------------------------------------------------------------- precision_problem

TEST(BlockPrecisionProblem, ElementFormatsAreNoLayerFormatAnywhere) {
  auto m = build_model("transformer", {1, 28, 28}, 10);
  Layer* fc = leaf(*m, "head");
  ASSERT_NE(fc, nullptr);
  for (Format e : {Format::E3M2, Format::E2M3, Format::E2M1, Format::E8M0}) {
    for (int slot = 0; slot < 4; ++slot) {
      LayerPrecision p;
      (slot == 0 ? p.compute : slot == 1 ? p.storage : slot == 2 ? p.accumulate : p.grad) = e;
      const std::string why = precision_problem(*fc, p);
      SCOPED_TRACE(std::string(format_name(e)) + " in slot " + std::to_string(slot));
      EXPECT_TRUE(contains(why, "head")) << why;
      EXPECT_TRUE(contains(why, format_name(e))) << why;
      EXPECT_TRUE(contains(why, "element format")) << why;
    }
  }
}

TEST(BlockPrecisionProblem, BlockFormatsOnlyComputeAndDifferentiateGemmLayers) {
  auto tr = build_model("transformer", {1, 28, 28}, 10);
  auto cnn = build_model("cnn", {1, 28, 28}, 10);
  std::vector<Layer*> leaves = tr->leaves();
  for (Layer* l : cnn->leaves()) leaves.push_back(l);
  const std::vector<std::string> gemm = {"linear", "patch_embed", "conv2d"};
  for (const std::string& k : leaf_kinds())
    EXPECT_EQ(takes_block_formats(k), std::find(gemm.begin(), gemm.end(), k) != gemm.end()) << k;
  for (Format f : kBlockFormats) {
    const LayerPrecision ok{f, Format::FP32, Format::FP32, f};
    for (Layer* l : leaves) {
      SCOPED_TRACE(std::string(format_name(f)) + " on " + l->name() + " (" + l->kind() + ")");
      const std::string why = precision_problem(*l, ok);
      if (takes_block_formats(l->kind())) {
        EXPECT_EQ(why, "");
        // Block compute with a plain grad format is fine too.
        EXPECT_EQ(precision_problem(*l, {f, Format::FP32, Format::FP32, Format::BF16}), "");
        // A block storage or accumulate format is not.
        for (const LayerPrecision& bad : {LayerPrecision{f, f, Format::FP32, f}, LayerPrecision{f, Format::FP32, f, f}}) {
          const std::string w = precision_problem(*l, bad);
          EXPECT_TRUE(contains(w, l->name()) && contains(w, format_name(f)) && contains(w, "block format")) << w;
        }
        // A block grad format needs a block compute format.
        const std::string w = precision_problem(*l, {Format::BF16, Format::FP32, Format::FP32, f});
        EXPECT_TRUE(contains(w, l->name()) && contains(w, format_name(f)) && contains(w, "compute")) << w;
      } else {
        EXPECT_TRUE(contains(why, l->name()) && contains(why, format_name(f)) && contains(why, l->kind())) << why;
        // A block grad format alone (plain compute) is refused as well.
        EXPECT_NE(precision_problem(*l, {Format::FP32, Format::FP32, Format::FP32, f}), "");
      }
    }
  }
  // The header's example.
  Layer* scores = leaf(*tr, "block0.attn.scores");
  ASSERT_NE(scores, nullptr);
  EXPECT_EQ(precision_problem(*scores, {Format::MXFP8, Format::FP32, Format::FP32, Format::MXFP8}),
            "block0.attn.scores: MXFP8 is a block format: only linear, patch_embed and conv2d layers compute in "
            "one (this is a attention_scores)");
}

TEST(BlockPrecisionProblem, RunsRefuseSuchLayersWithOneLineNamingTheLayer) {
  struct Case {
    const char* layers;
    const char* layer;
    const char* format;
  };
  for (const Case& k : {Case{R"({"relu1": "mxfp4"})", "relu1", "MXFP4"},
                        Case{R"({"fc1": {"compute": "bf16", "grad": "nvfp4"}})", "fc1", "NVFP4"},
                        Case{R"({"fc2": {"compute": "mxfp8", "storage": "mxfp8"}})", "fc2", "MXFP8"},
                        Case{R"({"fc2": "e2m1"})", "fc2", "FP4-E2M1"},
                        Case{R"({"kind:relu": "mxfp8"})", "relu", "MXFP8"}}) {
    SCOPED_TRACE(k.layers);
    RunConfig c = parse_run_config(std::string(R"({"recipe": "mxfp4", "model": "mlp", "dataset": "spirals", "layers": )") +
                                       k.layers + "}",
                                   "t.json");
    const std::string why = error_of([&] { engine::Run run(0, c, spirals(), backend()); });
    EXPECT_TRUE(contains(why, k.layer)) << why;
    EXPECT_TRUE(contains(why, k.format)) << why;
    EXPECT_FALSE(contains(why, "\n")) << why;
  }
  // The same check at a step boundary.
  engine::Run run(0, config("fp32"), spirals(), backend());
  EXPECT_THROW(run.set_layer_precision("relu1", {Format::MXFP4, Format::FP32, Format::FP32, Format::MXFP4}),
               std::invalid_argument);
}

TEST(BlockPrecisionProblem, ALayerSwitchedToMxfp4MidRunQuantizesItsWeight) {
  engine::Run run(0, config("mixed-bf16"), spirals(), backend());
  std::vector<Record> out;
  run.step(out);
  const std::int64_t before = run.memory().weights;
  run.set_layer_precision("fc2", {Format::MXFP4, Format::FP32, Format::FP32, Format::MXFP4});
  auto* fc2 = static_cast<Linear*>(leaf(run.model(), "fc2"));
  EXPECT_EQ(fc2->weight().quantized, Format::MXFP4);
  EXPECT_EQ(fc2->weight().weight.format(), Format::FP32);
  EXPECT_EQ(fc2->bias().quantized, Format::FP32);
  EXPECT_EQ(static_cast<Linear*>(leaf(run.model(), "fc1"))->weight().quantized, Format::FP32);
  for (int i = 0; i < 5; ++i) run.step(out);
  EXPECT_TRUE(std::isfinite(run.steps().back().loss));
  // fc2's BF16 weight and bias (2 bytes each) became its MXFP4 copies and an FP32 bias.
  EXPECT_EQ(run.memory().weights,
            before - 2 * (128 * 256 + 128) + block_weight_bytes(Format::MXFP4, 128, 256) + 4 * 128);
}

// ---------------------------------------------------------------- config

TEST(BlockConfig, LayerFormatsParseAsComputeAndGrad) {
  const RunConfig c = parse_run_config(
      R"({"recipe": "custom", "layers": {"fc1": "mxfp4", "fc2": "nvfp4", "fc3": {"compute": "mxfp8"},
          "relu1": "bf16"}})",
      "t.json");
  EXPECT_EQ(c.layers.at("fc1"), (LayerPrecision{Format::MXFP4, Format::FP32, Format::FP32, Format::MXFP4}));
  EXPECT_EQ(c.layers.at("fc2"), (LayerPrecision{Format::NVFP4, Format::FP32, Format::FP32, Format::NVFP4}));
  // An object without a grad format: grad follows compute.
  EXPECT_EQ(c.layers.at("fc3"), (LayerPrecision{Format::MXFP8, Format::FP32, Format::FP32, Format::MXFP8}));
  // A plain format keeps storing in itself.
  EXPECT_EQ(c.layers.at("relu1"), (LayerPrecision{Format::BF16, Format::BF16, Format::FP32, Format::BF16}));
  // Round trip through config.json.
  const RunConfig back = parse_run_config(to_json(c), "config.json");
  EXPECT_EQ(back.layers, c.layers);
  // And a run built from it computes fc1 in MXFP4.
  RunConfig r = c;
  r.model = "mlp";
  r.dataset = "spirals";
  r.batch = 32;
  r.threads = 1;
  r.steps = 2;
  r.stats_every = 0;
  engine::Run run(0, r, spirals(), backend());
  EXPECT_EQ(leaf(run.model(), "fc1")->precision(), c.layers.at("fc1"));
  EXPECT_EQ(static_cast<Linear*>(leaf(run.model(), "fc1"))->weight().quantized, Format::MXFP4);
}

TEST(BlockConfig, GradRoundingTakesRecipeNearestOrStochastic) {
  for (const char* v : {"recipe", "nearest", "stochastic"}) {
    const RunConfig c = parse_run_config(std::string(R"({"grad_rounding": ")") + v + "\"}", "t.json");
    EXPECT_EQ(c.grad_rounding, v);
    EXPECT_EQ(parse_run_config(to_json(c), "config.json").grad_rounding, v);
    RunConfig s;
    set_config_value(s, "grad-rounding", v, "--grad-rounding");
    EXPECT_EQ(s.grad_rounding, v);
  }
  for (const char* v : {"rne", "Stochastic", ""}) {
    SCOPED_TRACE(v);
    const std::string why =
        error_of([&] { (void)parse_run_config(std::string(R"({"grad_rounding": ")") + v + "\"}", "t.json"); });
    EXPECT_TRUE(contains(why, "t.json")) << why;
    EXPECT_TRUE(contains(why, "grad_rounding")) << why;
    EXPECT_FALSE(contains(why, "\n")) << why;
  }
}

TEST(BlockConfig, SpikeIsStepLayerFiniteValue) {
  std::int64_t step = 0;
  std::string layer;
  float value = 0;
  ASSERT_TRUE(parse_spike("50:fc1:1e6", step, layer, value));
  EXPECT_EQ(step, 50);
  EXPECT_EQ(layer, "fc1");
  EXPECT_EQ(value, 1e6f);
  ASSERT_TRUE(parse_spike("3:block0.mlp.fc1:-2.5", step, layer, value));
  EXPECT_EQ(layer, "block0.mlp.fc1");
  EXPECT_EQ(value, -2.5f);
  const RunConfig c = parse_run_config(R"({"spike": "50:fc1:1e6"})", "t.json");
  EXPECT_EQ(c.spike, "50:fc1:1e6");
  EXPECT_EQ(parse_run_config(to_json(c), "config.json").spike, "50:fc1:1e6");
  for (const char* bad : {"x:fc1:1", "0:fc1:1", "5:fc1:inf", "5::1", "5:fc1", "-1:fc1:1", "5:fc1:nan", "5:fc1:1x",
                          "5:fc1:1e39"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(parse_spike(bad, step, layer, value));
    const std::string why =
        error_of([&] { (void)parse_run_config(std::string(R"({"spike": ")") + bad + "\"}", "t.json"); });
    EXPECT_TRUE(contains(why, "spike")) << why;
    EXPECT_TRUE(contains(why, "t.json")) << why;
    EXPECT_FALSE(contains(why, "\n")) << why;
  }
  // A layer the model lacks: refused when the run is built, by name.
  RunConfig r = config("mxfp4");
  r.spike = "5:fc9:1e6";
  const std::string why = error_of([&] { engine::Run run(0, r, spirals(), backend()); });
  EXPECT_TRUE(contains(why, "fc9")) << why;
  EXPECT_FALSE(contains(why, "\n")) << why;
}

TEST(BlockConfig, ASpikeChangesItsStepAndOnlyItsOwnBlock) {
  // mxfp4 mlp on spirals; fc1 and fc2 keep their outputs every step
  // (Layer::capture_output, set here: no statistics steps clear it). The
  // spike sets fc1's first output of step 3 to 1e6: steps 1 and 2 are the
  // baseline's bit for bit; at step 3 fc1's output differs in that one
  // value, the loss differs, and fc2 (which quantizes its input along `in`,
  // row by row) differs only in the first sample's row.
  RunConfig base = config("mxfp4");
  base.steps = 4;
  RunConfig spiked = base;
  spiked.spike = "3:fc1:1e6";
  engine::Run a(0, base, spirals(), backend()), b(1, spiked, spirals(), backend());
  for (engine::Run* r : {&a, &b})
    for (const char* name : {"fc1", "fc2"}) leaf(r->model(), name)->capture_output = true;
  std::vector<Record> out;
  const std::int64_t out2 = 128;  // fc2's width
  for (int step = 1; step <= 4; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    a.step(out);
    b.step(out);
    const std::vector<float> ya = leaf(a.model(), "fc1")->captured_output.to_f32();
    const std::vector<float> yb = leaf(b.model(), "fc1")->captured_output.to_f32();
    const std::vector<float> za = leaf(a.model(), "fc2")->captured_output.to_f32();
    const std::vector<float> zb = leaf(b.model(), "fc2")->captured_output.to_f32();
    ASSERT_EQ(ya.size(), static_cast<std::size_t>(32 * 256));
    ASSERT_EQ(yb.size(), ya.size());
    ASSERT_EQ(za.size(), static_cast<std::size_t>(32 * out2));
    ASSERT_EQ(zb.size(), za.size());
    if (step < 3) {
      EXPECT_EQ(a.steps().back().loss, b.steps().back().loss);
      EXPECT_EQ(ya, yb);
      EXPECT_EQ(za, zb);
    } else if (step == 3) {
      EXPECT_NE(a.steps().back().loss, b.steps().back().loss);
      EXPECT_NE(ya[0], 1e6f);
      EXPECT_EQ(yb[0], 1e6f);
      EXPECT_TRUE(std::equal(ya.begin() + 1, ya.end(), yb.begin() + 1));
      EXPECT_FALSE(std::equal(za.begin(), za.begin() + out2, zb.begin()));
      EXPECT_TRUE(std::equal(za.begin() + out2, za.end(), zb.begin() + out2));
    } else {
      // One step only: fc1's first value is its own again.
      EXPECT_NE(yb[0], 1e6f);
      EXPECT_LT(std::abs(yb[0]), 100.0f);
    }
  }
}

// ---------------------------------------------------------------- memory

TEST(BlockMemory, WeightsActivationsAndEmulationOfAnMlp) {
  EXPECT_EQ(block_weight_bytes(Format::MXFP4, 256, 784), 2 * (256 * 784 / 2) + 256 * 25 + 8 * 784);
  EXPECT_EQ(block_weight_bytes(Format::NVFP4, 256, 784), 2 * (256 * 784 / 2 + 16 * 49 + 4));
  EXPECT_EQ(block_weight_bytes(Format::MXFP8, 10, 128), 2 * 10 * 128 + 10 * 4 + 1 * 128);
  EXPECT_EQ(block_bytes(Format::MXFP4, 32, 784, BlockLayout::Columns), 32 * 784 / 2 + 784);
  const std::int64_t B = 32;
  struct Fc {
    std::int64_t in, out;
  };
  const Fc fcs[] = {{784, 256}, {256, 128}, {128, 10}};
  for (const char* name : kBlockRecipes) {
    SCOPED_TRACE(name);
    const Format f = recipe_format(name);
    RunConfig c = config(name, "mlp", "fashion-mnist");
    c.batch = B;
    c.steps = 2;
    engine::Run run(0, c, fashion(), backend());
    std::vector<Record> out;
    run.step(out);
    const MemoryBytes m = run.memory();
    EXPECT_EQ(m.weights, run.steps().back().mem.weights);
    std::int64_t weights = 0, weight_values = 0, biases = 0, saved = 0;
    for (const Fc& l : fcs) {
      weights += block_weight_bytes(f, l.out, l.in);
      weight_values += l.out * l.in;
      biases += l.out;
      // Each Linear saves its input quantized down its columns.
      saved += block_bytes(f, B, l.in, BlockLayout::Columns);
    }
    // relu1 and relu2 save their FP32 outputs.
    saved += 4 * B * 256 + 4 * B * 128;
    EXPECT_EQ(m.weights, weights + 4 * biases);
    EXPECT_EQ(m.master, 4 * (weight_values + biases));
    EXPECT_EQ(m.grads, 4 * (weight_values + biases));
    EXPECT_EQ(m.activations, saved);
    EXPECT_EQ(m.activations, static_cast<std::int64_t>(run.model().saved_activation_bytes()));
    // Emulation: the weights' FP32 copies, the layers' scratch and the f32
    // containers of the saved block operands; nothing else here (FP32
    // gradients and logits need no decoded views).
    EXPECT_GT(run.model().saved_emulation_bytes(), 0u);
    EXPECT_EQ(m.emulation, 4 * weight_values + static_cast<std::int64_t>(run.model().workspace_bytes()) +
                               static_cast<std::int64_t>(run.model().saved_emulation_bytes()));
    EXPECT_EQ(m.total(), m.weights + m.master + m.grads + m.optimizer + m.activations + m.workspace);
    // Four-bit weights: below a quarter of FP32's 4 bytes (plus scales).
    if (f != Format::MXFP8) {
      EXPECT_LT(m.weights, 4 * (weight_values + biases) * 3 / 10);
    }
  }
}

// ---------------------------------------------------------------- statistics

// The first step of an mlp on spirals with statistics; returns the run.
std::unique_ptr<engine::Run> first_stats_step(const char* recipe) {
  RunConfig c = config(recipe);
  c.stats_every = 1;
  c.steps = 3;
  auto run = std::make_unique<engine::Run>(0, c, spirals(), backend());
  std::vector<Record> out;
  run->step(out);
  return run;
}

const GradStats* stats_of(const engine::Run& run, const std::string& layer, std::int64_t step) {
  for (const GradStats& g : run.grad_stats())
    if (g.layer == layer && g.step == step) return &g;
  ADD_FAILURE() << "no statistics for " << layer << " at step " << step;
  return nullptr;
}

TEST(BlockStatistics, ShadowErrorsAndUnderflowOfBlockGradients) {
  auto fp32 = first_stats_step("fp32");
  auto mx4 = first_stats_step("mxfp4");
  auto mx8 = first_stats_step("mxfp8");
  auto nv4 = first_stats_step("nvfp4");
  double under4 = 0, under8 = 0;
  for (const char* layer : {"fc1", "fc2", "fc3"}) {
    SCOPED_TRACE(layer);
    const GradStats* g32 = stats_of(*fp32, layer, 1);
    ASSERT_NE(g32, nullptr);
    EXPECT_FALSE(g32->shadow);
    EXPECT_EQ(g32->output_error, 0.0);
    EXPECT_EQ(g32->grad_error, 0.0);
    EXPECT_EQ(g32->grad_bias, 0.0);
    for (engine::Run* r : {mx4.get(), mx8.get(), nv4.get()}) {
      SCOPED_TRACE(r->config().recipe);
      const GradStats* g = stats_of(*r, layer, 1);
      ASSERT_NE(g, nullptr);
      EXPECT_EQ(g->format, format_name(recipe_format(r->config().recipe)));
      EXPECT_TRUE(g->shadow);
      EXPECT_GT(g->output_error, 0.0);
      EXPECT_GT(g->grad_error, 0.0);
      EXPECT_TRUE(std::isfinite(g->grad_bias));
      for (double v : {g->underflow_scaled, g->underflow_unscaled}) {
        EXPECT_GE(v, 0.0);
        EXPECT_LE(v, 1.0);
      }
      // Block scales follow the values: no overflow, and a value either
      // survives or flushes (no subnormal band of a fixed range).
      EXPECT_EQ(g->overflow_scaled, 0.0);
      EXPECT_EQ(g->subnormal_scaled, 0.0);
      EXPECT_EQ(g->underflow_unscaled, g->underflow_scaled);
    }
    const GradStats* g4 = stats_of(*mx4, layer, 1);
    const GradStats* g8 = stats_of(*mx8, layer, 1);
    ASSERT_TRUE(g4 && g8);
    EXPECT_LE(g8->underflow_scaled, g4->underflow_scaled);
    EXPECT_LT(g8->output_error, g4->output_error);
    EXPECT_LT(g8->grad_error, g4->grad_error);
    under4 += g4->underflow_scaled;
    under8 += g8->underflow_scaled;
  }
  EXPECT_LT(under8, under4);
}

TEST(BlockStatistics, StatisticsAreTheShadowComparisonTheyDescribe) {
  // Step 1 of an fp32 run is what the mxfp4 run's FP32 shadow computes (same
  // weights, same batch): rebuild fc2's statistics from the two runs.
  auto fp32 = first_stats_step("fp32");
  auto mx4 = first_stats_step("mxfp4");
  const std::string layer = "fc2";
  const GradStats* g = stats_of(*mx4, layer, 1);
  ASSERT_NE(g, nullptr);
  auto* own = static_cast<Linear*>(leaf(mx4->model(), layer));
  auto* ref = static_cast<Linear*>(leaf(fp32->model(), layer));
  double diff = 0, norm = 0, along = 0;
  std::int64_t flushed = 0, total = 0;
  for (auto [po, pr] : {std::pair{&own->weight(), &ref->weight()}, std::pair{&own->bias(), &ref->bias()}}) {
    const std::vector<float> a = po->grad.to_f32(), e = pr->grad.to_f32();
    const std::int64_t rows = po->shape.size() < 2 ? 1 : po->shape.front();
    std::vector<float> q(e.size());
    block_quantize(Format::MXFP4, e.data(), q.data(), rows, static_cast<std::int64_t>(e.size()) / rows,
                   BlockLayout::Rows);
    for (std::size_t i = 0; i < e.size(); ++i) {
      const double d = double(a[i]) - e[i];
      diff += d * d;
      norm += double(e[i]) * e[i];
      along += d * e[i];
      ++total;
      if (e[i] != 0.0f && (q[i] == 0.0f || a[i] == 0.0f)) ++flushed;
    }
  }
  EXPECT_EQ(g->total, total);
  EXPECT_GT(flushed, 0);  // MXFP4 flushes some of fc2's gradient at step 1
  EXPECT_NEAR(g->grad_error, std::sqrt(diff / norm), 1e-9 * std::sqrt(diff / norm));
  EXPECT_NEAR(g->grad_bias, along / norm, 1e-9 * std::abs(along / norm) + 1e-15);
  EXPECT_DOUBLE_EQ(g->underflow_scaled, double(flushed) / double(total));
  // The output error: fc2's outputs on the same batch (batch 0 of epoch 0)
  // from fresh runs, whose weights are those of step 1.
  const RunConfig c = mx4->config();
  engine::Run fresh32(0, fp32->config(), spirals(), backend()), fresh4(1, c, spirals(), backend());
  const Dataset& train = spirals()->train;
  BatchSampler sampler(train.count, static_cast<std::size_t>(c.batch), c.seed);
  sampler.set_epoch(0);
  const auto idx = sampler.batch(0);
  std::vector<float> hx(idx.size() * 2);
  std::vector<std::int32_t> labels(idx.size());
  gather_batch(train, idx, hx.data(), labels.data(), nullptr);
  BackendScope scope(backend());  // x in the runs' backend memory
  Tensor x({static_cast<std::int64_t>(idx.size()), 2}, Format::FP32);
  x.from_f32(hx.data(), static_cast<std::int64_t>(hx.size()));
  fresh32.model().set_capture_outputs(true);
  fresh4.model().set_capture_outputs(true);
  fresh32.model().forward(backend(), x);
  fresh4.model().forward(backend(), x);
  const std::vector<float> y = leaf(fresh4.model(), layer)->captured_output.to_f32();
  const std::vector<float> y32 = leaf(fresh32.model(), layer)->captured_output.to_f32();
  ASSERT_EQ(y.size(), y32.size());
  ASSERT_FALSE(y.empty());
  double dy = 0, ny = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    dy += (double(y[i]) - y32[i]) * (double(y[i]) - y32[i]);
    ny += double(y32[i]) * y32[i];
  }
  EXPECT_NEAR(g->output_error, std::sqrt(dy / ny), 1e-9 * std::sqrt(dy / ny));
}

}  // namespace
