// describe_layers: the model's leaves, shapes, formats and bytes as a run of
// the config would build them, and the data set's shape without loading it.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "amp/apply.h"
#include "amp/recipe.h"
#include "backend/backend.h"
#include "backend/registry.h"
#include "nn/block_gemm.h"
#include "nn/model.h"
#include "train/build_model.h"
#include "train/layer_catalog.h"
#include "train/model_defaults.h"

using engine::Format;
using engine::RunConfig;

namespace {
RunConfig small_mlp(const std::string& recipe) {
  RunConfig c;
  c.model = "mlp";
  c.dataset = "spirals";
  c.widths = {16, 8};
  c.batch = 4;
  c.recipe = recipe;
  return c;
}
}  // namespace

TEST(LayerCatalog, DatasetShapesWithoutLoading) {
  EXPECT_EQ(engine::planned_data_shape("spirals").sample, (engine::Shape{2}));
  EXPECT_EQ(engine::planned_data_shape("spirals").outputs, 2);
  EXPECT_EQ(engine::planned_data_shape("fashion-mnist").sample, (engine::Shape{1, 28, 28}));
  EXPECT_EQ(engine::planned_data_shape("fashion-mnist").outputs, 10);
  EXPECT_EQ(engine::planned_data_shape("tiny-gradients").sample, (engine::Shape{4}));
  EXPECT_EQ(engine::planned_data_shape("tiny-gradients").outputs, 128);
}

TEST(LayerCatalog, MlpLeavesShapesAndParameters) {
  const engine::LayerCatalog cat = engine::describe_layers(small_mlp("fp32"));
  EXPECT_EQ(cat.data.sample, (engine::Shape{2}));
  ASSERT_EQ(cat.layers.size(), 5u);  // 2-D samples need no flatten
  const char* names[] = {"fc1", "relu1", "fc2", "relu2", "fc3"};
  const std::int64_t widths[] = {16, 16, 8, 8, 2};
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(cat.layers[i].name, names[i]);
    EXPECT_EQ(cat.layers[i].output, (engine::Shape{widths[i]})) << names[i];
  }
  EXPECT_EQ(cat.layers[0].kind, "linear");
  EXPECT_EQ(cat.layers[0].parameters, 2 * 16 + 16);
  EXPECT_EQ(cat.layers[2].parameters, 16 * 8 + 8);
  EXPECT_EQ(cat.layers[4].parameters, 8 * 2 + 2);
  EXPECT_EQ(cat.layers[1].parameters, 0);
  EXPECT_TRUE(cat.layers[1].weight.empty());
  EXPECT_EQ(cat.layers[0].weight.size(), 2u);
  // FP32: one batch of fc1's 16 outputs in 4-byte floats.
  EXPECT_EQ(cat.layers[0].activation_bytes, 4 * 16 * 4);
  EXPECT_GE(cat.layers[0].state_bytes, (2 * 16 + 16) * 4);
  EXPECT_TRUE(cat.layers[0].precision.is_fp32());
}

TEST(LayerCatalog, RecipeAndOverridesPerLayer) {
  RunConfig c = small_mlp("fp16");
  engine::LayerPrecision bf16;
  bf16.compute = bf16.storage = Format::BF16;
  c.layers["fc2"] = bf16;
  const engine::LayerCatalog cat = engine::describe_layers(c);
  const engine::LayerInfo& fc1 = cat.layers[0];
  const engine::LayerInfo& fc2 = cat.layers[2];
  EXPECT_EQ(fc1.precision.storage, Format::FP16);
  EXPECT_EQ(fc1.precision, fc1.recipe_precision);
  EXPECT_EQ(fc1.activation_bytes, 4 * 16 * 2);  // FP16: two bytes a value
  EXPECT_EQ(fc2.precision, bf16);
  EXPECT_EQ(fc2.recipe_precision.storage, Format::FP16);  // the recipe's own, before the override
}

TEST(LayerCatalog, ModelThatCannotTakeTheDataThrows) {
  RunConfig c = small_mlp("fp32");
  c.model = "cnn";
  c.widths.clear();
  EXPECT_THROW(engine::describe_layers(c), std::runtime_error);
  c.model = "cnn";
  c.dataset = "fashion-mnist";
  const engine::LayerCatalog cat = engine::describe_layers(c);
  EXPECT_EQ(cat.data.sample, (engine::Shape{1, 28, 28}));
  EXPECT_EQ(cat.layers.back().output, (engine::Shape{10}));
}

TEST(LayerCatalog, GptNamesEveryLeaf) {
  RunConfig c;
  c.model = "gpt";
  c.dataset = "spirals";  // outputs 2: a two-token vocabulary for the shapes
  c.depth = 2;
  c.width = 16;
  c.heads = 2;
  c.context = 8;
  c.qk_norm = true;
  c.batch = 4;
  c.recipe = "mixed-bf16";
  const engine::LayerCatalog cat = engine::describe_layers(c);
  EXPECT_EQ(cat.data.sample, (engine::Shape{8}));
  std::string names;
  for (const auto& l : cat.layers) names += (names.empty() ? "" : " ") + l.name;
  EXPECT_EQ(names,
            "embed.tok embed.pos blocks.0.ln1 blocks.0.attn.qkv blocks.0.attn.q_norm blocks.0.attn.k_norm "
            "blocks.0.attn.scores blocks.0.attn.softmax blocks.0.attn.values blocks.0.attn.proj blocks.0.ln2 "
            "blocks.0.fc1 blocks.0.gelu blocks.0.fc2 blocks.1.ln1 blocks.1.attn.qkv blocks.1.attn.q_norm "
            "blocks.1.attn.k_norm blocks.1.attn.scores blocks.1.attn.softmax blocks.1.attn.values blocks.1.attn.proj "
            "blocks.1.ln2 blocks.1.fc1 blocks.1.gelu blocks.1.fc2 ln_f head");
  EXPECT_EQ(cat.layers[0].kind, "embedding");
  EXPECT_EQ(cat.layers[0].output, (engine::Shape{8, 16}));
  EXPECT_EQ(cat.layers[0].parameters, 2 * 16);
  EXPECT_EQ(cat.layers[1].kind, "pos_embedding");
  EXPECT_EQ(cat.layers[1].parameters, 8 * 16);
  EXPECT_EQ(cat.layers[4].output, (engine::Shape{8 * 2, 8}));  // q_norm: T * H heads of d
  EXPECT_EQ(cat.layers[4].precision.compute, Format::FP32);     // a norm under mixed-bf16
  EXPECT_EQ(cat.layers[3].precision.compute, Format::BF16);
  EXPECT_EQ(cat.layers[6].output, (engine::Shape{2, 8, 8}));  // scores: heads x T x T
  EXPECT_EQ(cat.layers.back().output, (engine::Shape{8, 2}));  // logits per position
}

// The catalog is kept per model and recipe: asked again at another batch or
// seed it comes back with the activations of that batch, and a change that
// matters (the recipe, a layer's override, the widths) is never answered
// from a kept one.
TEST(LayerCatalog, KeptCatalogsAnswerOnlyTheConfigTheyDescribe) {
  RunConfig a = small_mlp("fp32");
  const engine::LayerCatalog first = engine::describe_layers(a);
  RunConfig b = a;
  b.batch = 3 * a.batch;
  b.seed = 17;
  const engine::LayerCatalog again = engine::describe_layers(b);
  ASSERT_EQ(again.layers.size(), first.layers.size());
  for (std::size_t i = 0; i < first.layers.size(); ++i) {
    EXPECT_EQ(again.layers[i].activation_bytes, 3 * first.layers[i].activation_bytes) << first.layers[i].name;
    EXPECT_EQ(again.layers[i].state_bytes, first.layers[i].state_bytes) << first.layers[i].name;
  }
  EXPECT_EQ(engine::describe_layers(a).layers[0].activation_bytes, 4 * 16 * 4);

  RunConfig fp16 = a;
  fp16.recipe = "fp16";
  EXPECT_EQ(engine::describe_layers(fp16).layers[0].precision.storage, Format::FP16);
  RunConfig overridden = a;
  engine::LayerPrecision bf16;
  bf16.compute = bf16.storage = Format::BF16;
  overridden.layers["fc1"] = bf16;
  EXPECT_EQ(engine::describe_layers(overridden).layers[0].precision, bf16);
  RunConfig wider = a;
  wider.widths = {32, 8};
  EXPECT_EQ(engine::describe_layers(wider).layers[0].output, (engine::Shape{32}));
  EXPECT_TRUE(engine::describe_layers(a).layers[0].precision.is_fp32());

  // Every shape field is part of the key: a kept catalog of one size never
  // answers for another, and the default size is answered again after.
  const auto leaf = [](const engine::LayerCatalog& c, const std::string& name) {
    for (const engine::LayerInfo& l : c.layers)
      if (l.name == name) return l;
    ADD_FAILURE() << "no leaf " << name;
    return engine::LayerInfo{};
  };
  RunConfig cnn;
  cnn.model = "cnn";
  EXPECT_EQ(leaf(engine::describe_layers(cnn), "conv2").output, (engine::Shape{64, 14, 14}));
  RunConfig cnn_wide = cnn;
  cnn_wide.channels = {8, 48};
  EXPECT_EQ(leaf(engine::describe_layers(cnn_wide), "conv2").output, (engine::Shape{48, 14, 14}));
  RunConfig cnn_one = cnn;
  cnn_one.channels = {8};
  EXPECT_EQ(engine::describe_layers(cnn_one).layers.size(), 7u);  // conv1 relu1 pool1 flatten fc1 relu2 fc2
  EXPECT_EQ(leaf(engine::describe_layers(cnn), "conv2").output, (engine::Shape{64, 14, 14}));

  RunConfig vit;
  vit.model = "transformer";
  const engine::LayerCatalog vit_default = engine::describe_layers(vit);
  EXPECT_EQ(leaf(vit_default, "norm").output, (engine::Shape{16, 64}));
  RunConfig vit_width = vit;
  vit_width.width = 96;
  EXPECT_EQ(leaf(engine::describe_layers(vit_width), "norm").output, (engine::Shape{16, 96}));
  RunConfig vit_deep = vit;
  vit_deep.depth = 3;
  EXPECT_EQ(engine::describe_layers(vit_deep).layers.size(), vit_default.layers.size() * 3 / 2 - 2);
  RunConfig vit_heads = vit;
  vit_heads.heads = 8;  // 8 heads of 8: the scores hold twice the values of 4 heads of 16
  EXPECT_EQ(leaf(engine::describe_layers(vit_heads), "block0.attn.scores").output,
            (engine::Shape{8, 16, 16}));
  EXPECT_EQ(leaf(engine::describe_layers(vit), "block0.attn.scores").output, (engine::Shape{4, 16, 16}));
  EXPECT_EQ(engine::describe_layers(vit).layers.size(), vit_default.layers.size());

  RunConfig gpt;
  gpt.model = "gpt";
  gpt.dataset = "spirals";  // no text file needed: the gpt reads windows of its context
  RunConfig gpt_long = gpt;
  gpt_long.context = 32;
  RunConfig gpt_wide = gpt;
  gpt_wide.width = 64;
  gpt_wide.heads = 2;
  EXPECT_EQ(leaf(engine::describe_layers(gpt), "ln_f").output, (engine::Shape{64, 128}));
  EXPECT_EQ(leaf(engine::describe_layers(gpt_long), "ln_f").output, (engine::Shape{32, 128}));
  EXPECT_EQ(leaf(engine::describe_layers(gpt_wide), "ln_f").output, (engine::Shape{64, 64}));
  EXPECT_EQ(leaf(engine::describe_layers(gpt), "ln_f").output, (engine::Shape{64, 128}));
}

// The catalog describes the model without building its tensors (shape-only
// layouts): every leaf's precision and bytes equal what the recipe's real
// layout on a CPU backend holds, for every model and recipe.
TEST(LayerCatalog, ShapeOnlyLayoutsEqualTheRealOnes) {
  const engine::BackendChoice cpu = engine::make_backend("cpu", 1);
  for (const char* model : {"mlp", "cnn", "transformer", "gpt"}) {
    for (const char* recipe : {"fp32", "fp16", "mixed-fp16", "mixed-bf16", "fp8", "mxfp8", "nvfp4"}) {
      RunConfig c;
      c.model = model;
      c.dataset = std::string(model) == "gpt" ? "jargon" : "fashion-mnist";
      c.recipe = recipe;
      c.batch = 4;
      const engine::LayerCatalog cat = engine::describe_layers(c);
      const engine::BackendScope scope(*cpu.backend);
      std::unique_ptr<engine::Model> m = engine::build_model(c, cat.data.sample, cat.data.outputs);
      engine::apply_recipe(*cpu.backend, *m, engine::make_recipe(recipe));
      const std::vector<engine::Layer*> leaves = m->leaves();
      ASSERT_EQ(leaves.size(), cat.layers.size()) << model << " " << recipe;
      for (std::size_t i = 0; i < leaves.size(); ++i) {
        std::int64_t state = 0;
        for (engine::Parameter* p : leaves[i]->parameters())
          state += engine::weight_device_bytes(*p) + static_cast<std::int64_t>(p->master.bytes());
        EXPECT_EQ(cat.layers[i].state_bytes, state) << model << " " << recipe << " " << cat.layers[i].name;
        EXPECT_EQ(cat.layers[i].precision.compute, leaves[i]->precision().compute) << model << " " << recipe;
        EXPECT_EQ(cat.layers[i].precision.storage, leaves[i]->precision().storage) << model << " " << recipe;
      }
    }
  }
}

// A GPU-sized transformer is described without a gigabyte of tensors.
TEST(LayerCatalog, AGpuSizedModelIsDescribedWithoutItsMemory) {
  RunConfig c;
  c.model = "transformer";
  c.dataset = "fashion-mnist";
  c.recipe = "mixed-bf16";
  engine::apply_size(c, "gpu");
  auto peak_mib = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss / 1024;  // KiB on Linux
  };
  const long before = peak_mib();
  const engine::LayerCatalog cat = engine::describe_layers(c);
  std::int64_t params = 0;
  for (const auto& l : cat.layers) params += l.parameters;
  EXPECT_GT(params, 50'000'000);  // over 200 MB of FP32 weights alone
  // Building it would touch weights, gradients and master copies (over
  // 600 MB); the process's peak grows by far less.
  EXPECT_LT(peak_mib() - before, 64) << "MiB";
}
