// Recipes end to end: layouts, memory, FP8 delayed scaling, and the lessons each recipe teaches.
//
// Parameter layouts and memory per recipe; FP8 per-tensor delayed scaling in Linear and Conv2d;
// fp16's lost updates; the tiny-gradients loss-scaling lesson; overflow attribution; live
// precision changes.
#include <gtest/gtest.h>

#include <initializer_list>
#include <map>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "engine/test_configs.h"
#include "amp/apply.h"
#include "nn/fp8_scaling.h"
#include "amp/recipe.h"
#include "backend/backend.h"
#include "data/dataset.h"
#include "nn/conv2d.h"
#include "nn/gelu.h"
#include "nn/layer.h"
#include "nn/linear.h"
#include "nn/model.h"
#include "numeric/convert.h"
#include "train/run.h"
#include "engine/support/test_backend.h"

namespace {

using namespace engine;

// Layer-level cases hand the backend host tensors of their own: the CPU
// backend.
Backend& backend() {
  static std::unique_ptr<Backend> be = make_cpu_backend(1);
  return *be;
}

// Whole runs: the CPU backend, or the guarded one when ctest runs the Run
// cases again with PL_TEST_BACKEND=guarded (test_recipes_guarded).
Backend& run_backend() { return test::run_backend(); }

// Records a layer's pending FP8 amaxes, as a training step's one read does.
void settle(Layer& l) {
  for (DelayedScale* d : l.delayed_scales()) {
    if (!d->pending()) continue;
    float a = 0.0f;
    backend().download(&a, d->pending_slot(), sizeof a);
    d->take_pending(a);
  }
}

std::shared_ptr<const DatasetPair> dataset(const char* name, std::uint64_t seed) {
  return std::make_shared<const DatasetPair>(load_dataset(name, seed));
}

RunConfig spirals_config(const char* recipe) { return test::small_run(recipe, "mlp", "spirals", 50, 32, 4); }

// A tensor's stored bytes, read through its backend (a guarded run's tensors
// cannot be read directly).
std::vector<std::uint8_t> bytes_of(const Tensor& t) {
  std::vector<std::uint8_t> v(t.bytes());
  if (v.empty()) return v;
  if (Backend* be = t.backend()) be->download(v.data(), t.data(), v.size());
  else std::memcpy(v.data(), t.data(), v.size());
  return v;
}

const float kE4M3Max = 448.0f;
const float kE5M2Max = 57344.0f;

// ---------------------------------------------------------------- layouts

TEST(RecipeLayout, EachRecipeStoresWeightsMasterAndGradsAsDocumented) {
  auto data = dataset("spirals", 4);
  struct Expect {
    const char* recipe;
    Format weight, grad;
    bool master;
  };
  for (const Expect& e : {Expect{"fp32", Format::FP32, Format::FP32, false},
                          Expect{"fp16", Format::FP16, Format::FP16, false},
                          Expect{"mixed-fp16", Format::FP16, Format::FP32, true},
                          Expect{"mixed-bf16", Format::BF16, Format::FP32, true},
                          Expect{"fp8", Format::E4M3, Format::FP32, true}}) {
    SCOPED_TRACE(e.recipe);
    engine::Run run(0, spirals_config(e.recipe), data, run_backend());
    int weights = 0;
    for (Layer* l : run.model().leaves()) {
      for (Parameter* p : l->parameters()) {
        const bool gemm_weight = p->name.ends_with(".weight");
        EXPECT_EQ(p->has_master(), e.master) << p->name;
        if (e.master) {
          EXPECT_EQ(p->master.format(), Format::FP32) << p->name;
        }
        EXPECT_EQ(p->grad.format(), e.grad) << p->name;
        if (std::string(e.recipe) == "fp8" && !gemm_weight) {
          // Biases are no GEMM operands: FP32 in an FP8 layer.
          EXPECT_EQ(p->weight.format(), Format::FP32) << p->name;
        } else {
          EXPECT_EQ(p->weight.format(), e.weight) << p->name;
        }
        if (std::string(e.recipe) == "fp8" && gemm_weight) {
          ++weights;
          // Stored as saturate(w * scale), scale = 448 / amax(w) from the layout.
          const std::vector<float> m = p->master.to_f32();
          float amax = 0;
          for (float v : m) amax = std::max(amax, std::abs(v));
          EXPECT_EQ(p->weight_scale, kE4M3Max / amax) << p->name;
          EXPECT_TRUE(p->weight_history.active());
          const std::vector<float> w = p->weight.to_f32();
          for (std::size_t i = 0; i < w.size(); ++i)
            ASSERT_EQ(w[i], quantize(Format::E4M3, m[i] * p->weight_scale, true)) << p->name << " " << i;
        } else {
          EXPECT_EQ(p->weight_scale, 1.0f) << p->name;
        }
      }
    }
    if (std::string(e.recipe) == "fp8") {
      EXPECT_EQ(weights, 3);
    }
  }
}

TEST(RecipeLayout, MemoryAccountingFollowsTheStorageWidths) {
  auto data = dataset("spirals", 4);
  const MemoryBytes fp32 = engine::Run(0, spirals_config("fp32"), data, run_backend()).memory();
  const MemoryBytes fp16 = engine::Run(0, spirals_config("fp16"), data, run_backend()).memory();
  const MemoryBytes mixed = engine::Run(0, spirals_config("mixed-fp16"), data, run_backend()).memory();
  const MemoryBytes bf16 = engine::Run(0, spirals_config("mixed-bf16"), data, run_backend()).memory();
  engine::Run fp8run(0, spirals_config("fp8"), data, run_backend());
  const MemoryBytes fp8 = fp8run.memory();
  // mlp on spirals: 2-256-128-2.
  const std::int64_t weights = 2 * 256 + 256 * 128 + 128 * 2, biases = 256 + 128 + 2;
  EXPECT_EQ(fp32.weights, 4 * (weights + biases));
  EXPECT_EQ(fp32.master, 0);
  EXPECT_EQ(fp32.grads, fp32.weights);
  EXPECT_EQ(fp16.weights * 2, fp32.weights);
  EXPECT_EQ(fp16.master, 0);
  EXPECT_EQ(fp16.grads * 2, fp32.grads);
  EXPECT_EQ(mixed.weights * 2, fp32.weights);  // FP16 copies
  EXPECT_EQ(mixed.master, fp32.weights);       // FP32 masters
  EXPECT_EQ(mixed.grads, fp32.grads);          // FP32 gradients of the masters
  EXPECT_EQ(bf16.weights, mixed.weights);
  EXPECT_EQ(bf16.master, mixed.master);
  EXPECT_EQ(fp8.weights, weights + 4 * biases);  // E4M3 weights, FP32 biases
  EXPECT_EQ(fp8.master, fp32.weights);
  EXPECT_EQ(fp8.grads, fp32.grads);
}

TEST(RecipeLayout, Fp8KeepsTheAttentionGemmsInBf16AndNamesBeatKinds) {
  auto m = build_model("transformer", {1, 28, 28}, 10);
  Recipe r = make_recipe("fp8");
  const LayerPrecision e4m3{Format::E4M3, Format::FP32, Format::FP32, Format::E5M2};
  const LayerPrecision bf16{Format::BF16, Format::FP32, Format::FP32, Format::BF16};
  int scores = 0, linears = 0;
  for (Layer* l : m->leaves()) {
    const std::string kind = l->kind();
    if (kind == "attention_scores" || kind == "attention_values") {
      EXPECT_EQ(r.precision_for(*l), bf16) << l->name();
      ++scores;
    } else if (kind == "linear" || kind == "patch_embed") {
      EXPECT_EQ(r.precision_for(*l), e4m3) << l->name();
      ++linears;
    } else {
      EXPECT_TRUE(r.precision_for(*l).is_fp32()) << l->name();
    }
  }
  EXPECT_EQ(scores, 4);           // two blocks, scores and values each
  EXPECT_EQ(linears, 2 * 4 + 2);  // qkv, proj, fc1, fc2 per block; patch_embed, head
  // A kind key reaches every leaf of the kind; a leaf's own name wins.
  const LayerPrecision fp16{Format::FP16, Format::FP16, Format::FP16, Format::FP16};
  r.overrides["kind:layernorm"] = fp16;
  r.overrides["norm"] = bf16;
  for (Layer* l : m->leaves()) {
    if (std::string(l->kind()) != "layernorm") continue;
    EXPECT_EQ(r.precision_for(*l), l->name() == "norm" ? bf16 : fp16) << l->name();
  }
  EXPECT_TRUE(valid_override_key("kind:softmax"));
  EXPECT_TRUE(valid_override_key("block0.attn.softmax"));
  EXPECT_FALSE(valid_override_key("kind:softmaxx"));
}

TEST(RecipeLayout, ConfigKindKeysReachTheLayersAndTyposAreRejected) {
  const RunConfig c = parse_run_config(
      R"({"recipe": "mixed-fp16", "model": "transformer", "dataset": "spirals",
          "layers": {"kind:layernorm": {"compute": "fp16", "storage": "fp16", "accumulate": "fp16"}}})",
      "t.json");
  ASSERT_EQ(c.layers.count("kind:layernorm"), 1u);
  Recipe r = make_recipe(c.recipe);
  for (const auto& [k, p] : c.layers) r.overrides[k] = p;
  auto m = build_model("transformer", {1, 28, 28}, 10);
  int norms = 0;
  for (Layer* l : m->leaves()) {
    if (std::string(l->kind()) != "layernorm") continue;
    ++norms;
    EXPECT_EQ(r.precision_for(*l).accumulate, Format::FP16) << l->name();
  }
  EXPECT_EQ(norms, 5);  // two per block and the final one
  try {
    parse_run_config(R"({"layers": {"kind:layernrom": "fp16"}})", "t.json");
    FAIL() << "a misspelt kind was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("layers.kind:layernrom"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------- FP8 delayed scaling

TEST(DelayedScaling, ScaleIsFp8MaxOverTheHistoryMaxOverTwoToTheMargin) {
  DelayedScale s(Format::E4M3, {16, 0});
  EXPECT_EQ(s.scale(), 1.0f);  // nothing recorded yet
  s.record(0.37f);
  EXPECT_EQ(s.scale(), kE4M3Max / 0.37f);
  s.record(0.1f);  // the max over the history stays 0.37
  EXPECT_EQ(s.scale(), kE4M3Max / 0.37f);
  DelayedScale m(Format::E5M2, {16, 2});
  m.record(3.0f);
  EXPECT_EQ(m.scale(), kE5M2Max / 3.0f / 4.0f);
  // 0 and non-finite amaxes keep the scale (TE's _default_sf_compute).
  DelayedScale z(Format::E4M3, {2, 0});
  z.record(0.0f);
  EXPECT_EQ(z.scale(), 1.0f);
  z.record(2.0f);
  EXPECT_EQ(z.scale(), 224.0f);
  z.record(INFINITY);
  EXPECT_EQ(z.scale(), 224.0f);
  EXPECT_EQ(z.history_max(), INFINITY);
  z.record(1.0f);  // inf still in the history of 2
  EXPECT_EQ(z.scale(), 224.0f);
  z.record(1.0f);
  EXPECT_EQ(z.scale(), 448.0f);
  z.record(NAN);
  EXPECT_EQ(z.scale(), 448.0f);
  EXPECT_TRUE(std::isnan(z.history_max()));
  z.record(3.0f);  // NaN still in the history of 2, above any value
  EXPECT_TRUE(std::isnan(z.history_max()));
  z.record(0.5f);
  EXPECT_EQ(z.history_max(), 3.0f);
  EXPECT_EQ(z.scale(), 448.0f / 3.0f);
  EXPECT_THROW(DelayedScale(Format::FP16, {}), std::invalid_argument);
  EXPECT_THROW(DelayedScale(Format::E4M3, {0, 0}), std::invalid_argument);
  EXPECT_EQ(DelayedScaling{}.amax_history_len, 1024);  // Transformer Engine's default
}

TEST(DelayedScaling, ASpikeIsRememberedForHistoryLenSteps) {
  const int len = 5;
  DelayedScale s(Format::E4M3, {len, 0});
  for (int i = 0; i < 3; ++i) s.record(1.0f);
  s.record(64.0f);  // the spike
  // The scales of the len steps after the spike see it ...
  for (int step = 1; step <= len; ++step) {
    EXPECT_EQ(s.scale(), 7.0f) << step;  // 448 / 64
    s.record(1.0f);
  }
  // ... and then len later records have pushed it out.
  EXPECT_EQ(s.scale(), 448.0f);
}

TEST(DelayedScaling, LinearOnTinyInputsMatchesFp32WithinE4M3Precision) {
  // Inputs ~1e-3: plain E4M3 (smallest subnormal 2^-9 ~ 2e-3) flushes them.
  // After one step of history the input scale is 448 / amax and the FP8
  // GEMM is within E4M3's relative precision of FP32.
  const std::int64_t in = 64, out = 16, rows = 8;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> u(-1e-3f, 1e-3f);
  Model model("one", {in}, out);
  model.add(std::make_unique<Linear>("fc", in, out, false));
  model.init(3);
  auto* fc = static_cast<Linear*>(model.leaves()[0]);
  const std::vector<float> w = fc->weight().weight.to_f32();  // FP32 reference weights
  apply_recipe(backend(), model, make_recipe("fp8"));
  ASSERT_EQ(fc->weight().weight.format(), Format::E4M3);
  // Each operand is off by at most half an E4M3 ulp (2^-4 relative), a
  // product by about twice that: a bound relative to sum |x_k w_k|.
  const double bound = 2 * 0x1.0p-4 + 0x1.0p-8;
  for (int step = 0; step < 4; ++step) {
    std::vector<float> x(rows * in);
    for (auto& v : x) v = u(rng);
    Tensor xt = Tensor::from_values({rows, in}, Format::FP32, x);
    const float scale = fc->x_scale().scale();  // this step's: from the earlier steps
    const std::vector<float> y = model.forward(backend(), xt).to_f32();
    record_pending_amaxes(backend(), model);  // what the training step's one read does
    double err = 0, d2 = 0, r2 = 0;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t o = 0; o < out; ++o) {
        double ref = 0, mag = 0;
        for (std::int64_t k = 0; k < in; ++k) {
          ref += double(x[r * in + k]) * w[o * in + k];
          mag += std::abs(double(x[r * in + k]) * w[o * in + k]);
        }
        err = std::max(err, std::abs(y[r * out + o] - ref) / mag);
        d2 += (y[r * out + o] - ref) * (y[r * out + o] - ref);
        r2 += ref * ref;
      }
    EXPECT_EQ(fc->x_scale().records(), step + 1);
    if (step == 0) {
      EXPECT_EQ(scale, 1.0f);
      // Nearly every input flushed: the output is mostly gone.
      EXPECT_GT(std::sqrt(d2 / r2), 0.5) << "plain E4M3 was expected to flush inputs of 1e-3";
    } else {
      EXPECT_GT(scale, 4.0e5f);  // 448 / ~1e-3
      EXPECT_LT(err, bound) << "step " << step;
      EXPECT_LT(std::sqrt(d2 / r2), 0.1) << "step " << step;
    }
  }
  EXPECT_GT(fc->x_scale().scale(), 4.0e5f);  // 448 / ~1e-3
}

TEST(DelayedScaling, ForwardCastSaturatesAt448AndTheScaleAdapts) {
  Linear fc("fc", 4, 1, false);
  std::vector<float> ones(4, 1.0f);
  fc.weight().weight.from_f32(ones.data(), 4);
  fc.set_precision({Format::E4M3, Format::FP32, Format::FP32, Format::E5M2});
  fc.set_delayed_scaling({4, 0});
  auto ctx = fc.make_context();
  Tensor y;
  Tensor x1 = Tensor::from_values({1, 4}, Format::FP32, {1.0f, -0.5f, 0.25f, 0.125f});
  fc.forward(backend(), x1, y, *ctx);  // scale 1; records amax 1 (at the step's read)
  settle(fc);
  EXPECT_EQ(fc.x_scale().scale(), 448.0f);
  Tensor x2 = Tensor::from_values({1, 4}, Format::FP32, {4.0f, -0.5f, 0.25f, 0.125f});
  fc.forward(backend(), x2, y, *ctx);  // scale 448: 4 * 448 saturates to 448
  settle(fc);
  const std::vector<float> q = static_cast<LinearContext&>(*ctx).x_compute.to_f32();
  EXPECT_EQ(q[0], 448.0f);  // saturated, not NaN
  EXPECT_EQ(q[1], -224.0f);
  const float yv = y.to_f32()[0];
  EXPECT_TRUE(std::isfinite(yv));
  // (448 - 224 + 112 + 56) * (1/448): the first input clipped to 1; the
  // float reciprocal of the scale costs at most an ulp.
  EXPECT_NEAR(yv, 0.875f, 1e-6f);
  EXPECT_EQ(fc.x_scale().scale(), 112.0f);      // 448 / 4 for the next step
  // An FP32 layer has no scaling state and takes no extra pass.
  Linear plain("plain", 4, 1, false);
  auto pctx = plain.make_context();
  plain.forward(backend(), x2, y, *pctx);
  EXPECT_FALSE(plain.x_scale().active());
  EXPECT_EQ(static_cast<LinearContext&>(*pctx).x, &x2);  // the caller's tensor, no copy
}

TEST(DelayedScaling, BackwardScalesTinyOutputGradientsInE5M2) {
  // dy ~ 1e-6 is below E5M2's smallest subnormal 2^-16 ~ 1.5e-5: unscaled
  // it flushes; with its delayed scale dW matches FP32 to E5M2/E4M3 precision.
  const std::int64_t in = 8, out = 4, rows = 16;
  Model model("one", {in}, out);
  model.add(std::make_unique<Linear>("fc", in, out, false));
  model.init(5);
  auto* fc = static_cast<Linear*>(model.leaves()[0]);
  apply_recipe(backend(), model, make_recipe("fp8"));
  std::mt19937_64 rng(8);
  std::uniform_real_distribution<float> ux(0.5f, 1.0f), ud(0.5e-6f, 1e-6f);
  std::vector<float> x(rows * in), dy(rows * out);
  for (auto& v : x) v = ux(rng);
  Tensor xt = Tensor::from_values({rows, in}, Format::FP32, x);
  for (int step = 0; step < 3; ++step) {
    for (auto& v : dy) v = ud(rng);
    model.forward(backend(), xt);
    model.backward(backend(), Tensor::from_values({rows, out}, Format::FP32, dy));
    record_pending_amaxes(backend(), model);
    const std::vector<float> dw = fc->weight().grad.to_f32();
    double max_rel = 0;
    for (std::int64_t o = 0; o < out; ++o)
      for (std::int64_t k = 0; k < in; ++k) {
        double ref = 0;
        for (std::int64_t r = 0; r < rows; ++r) ref += double(dy[r * out + o]) * x[r * in + k];
        max_rel = std::max(max_rel, std::abs(dw[o * in + k] - ref) / ref);  // all terms positive
      }
    if (step == 0) {
      EXPECT_EQ(max_rel, 1.0) << "unscaled E5M2 was expected to flush dy ~ 1e-6";
    } else {
      // dy off by <= 2^-3 (E5M2), x by <= 2^-4 (E4M3); dW stays FP32.
      EXPECT_LT(max_rel, 0x1.0p-3 + 0x1.0p-4 + 0x1.0p-7) << "step " << step;
      EXPECT_EQ(fc->weight().grad.format(), Format::FP32);
    }
  }
  EXPECT_GT(fc->dy_scale().scale(), 5.0e10f);  // 57344 / ~1e-6
}

TEST(DelayedScaling, Conv2dOnTinyInputsMatchesFp32WithinE4M3Precision) {
  Model model("conv", {2, 6, 6}, 3 * 6 * 6);
  model.add(std::make_unique<Conv2d>("conv", 2, 3, 3, 1, 1, false));
  model.init(9);
  auto* conv = static_cast<Conv2d*>(model.leaves()[0]);
  Model ref("ref", {2, 6, 6}, 3 * 6 * 6);
  ref.add(std::make_unique<Conv2d>("conv", 2, 3, 3, 1, 1, false));
  ref.init(9);  // same weights, FP32
  apply_recipe(backend(), model, make_recipe("fp8"));
  ASSERT_EQ(conv->weight().weight.format(), Format::E4M3);
  std::mt19937_64 rng(10);
  std::uniform_real_distribution<float> u(0.2e-3f, 1e-3f);  // positive: no cancellation
  for (int step = 0; step < 3; ++step) {
    std::vector<float> x(2 * 2 * 6 * 6);
    for (auto& v : x) v = u(rng);
    Tensor xt = Tensor::from_values({2, 2, 6, 6}, Format::FP32, x);
    const std::vector<float> y = model.forward(backend(), xt).to_f32();
    record_pending_amaxes(backend(), model);
    const std::vector<float> yr = ref.forward(backend(), xt).to_f32();
    // |y - yr| against a bound on sum |x w| over one 2x3x3 window.
    double wmax = 0;
    for (float wv : ref.leaves()[0]->parameters()[0]->weight.to_f32()) wmax = std::max<double>(wmax, std::abs(wv));
    const double mag = wmax * 2 * 9 * 1e-3;
    double max_rel = 0;
    for (std::size_t i = 0; i < y.size(); ++i) max_rel = std::max(max_rel, std::abs(double(y[i]) - yr[i]) / mag);
    if (step > 0) EXPECT_LT(max_rel, 2 * 0x1.0p-4 + 0x1.0p-8) << "step " << step;
    else EXPECT_GT(max_rel, 0.05) << "plain E4M3 was expected to flush inputs of 1e-3";
  }
  EXPECT_GT(conv->x_scale().scale(), 4.0e5f);
}

// The leaf of m called `name` (null if none).
Layer* leaf(Model& m, const std::string& name) {
  for (Layer* l : m.leaves())
    if (l->name() == name) return l;
  return nullptr;
}

// The pending input amaxes of the named FP8 Linear layers: positive, and
// the same bits in both models.
void expect_same_pending_amaxes(Model& fused, Model& apart, std::initializer_list<const char*> names, int step) {
  for (const char* name : names) {
    float amax[2];
    backend().download(&amax[0], static_cast<Linear*>(leaf(fused, name))->x_scale().pending_slot(), sizeof(float));
    backend().download(&amax[1], static_cast<Linear*>(leaf(apart, name))->x_scale().pending_slot(), sizeof(float));
    EXPECT_GT(amax[0], 0.0f) << name;
    EXPECT_EQ(std::bit_cast<std::uint32_t>(amax[0]), std::bit_cast<std::uint32_t>(amax[1])) << name << " step " << step;
  }
}

// In the fp8 recipe a transformer block's GELU writes fc2's delayed-scaled
// E4M3 cast itself (GELU::forward_cast_for, fused::gelu_forward_encode):
// logits and fc2's amaxes keep the bits of the GELU's own FP32 output cast
// by fc2, step after step as the scales move (a GELU that counts
// non-finite outputs takes that path).
TEST(DelayedScaling, GeluWritesFc2sCastWithTheSameBits) {
  auto fused = build_model("transformer", {1, 28, 28}, 10);
  auto apart = build_model("transformer", {1, 28, 28}, 10);
  for (auto* m : {fused.get(), apart.get()}) {
    m->init(5);
    apply_recipe(backend(), *m, make_recipe("fp8"));
  }
  Layer* gelu = leaf(*apart, "block0.gelu");
  ASSERT_NE(gelu, nullptr);
  gelu->set_track_nonfinite(true);
  // The fused path applies where it should: an E4M3 cast with an amax.
  auto* fc2 = static_cast<Linear*>(leaf(*fused, "block0.fc2"));
  ASSERT_NE(fc2, nullptr);
  Layer::InputCast cast;
  ASSERT_TRUE(fc2->input_cast({4, 16, 128}, cast));
  EXPECT_EQ(cast.format, Format::E4M3);
  EXPECT_NE(cast.amax, nullptr);
  std::mt19937_64 rng(8);
  std::normal_distribution<float> d(0.0f, 1.0f);
  {
    std::vector<float> h(4 * 16 * 128);
    for (auto& v : h) v = d(rng);
    Tensor ht = Tensor::from_values({4, 16, 128}, Format::FP32, h), codes;
    auto* g = static_cast<GELU*>(leaf(*fused, "block0.gelu"));
    auto ctx = g->make_context();
    EXPECT_TRUE(g->forward_cast_for(backend(), ht, codes, *ctx, cast));
    EXPECT_EQ(codes.format(), Format::E4M3);
    EXPECT_FALSE(static_cast<GELU*>(gelu)->forward_cast_for(backend(), ht, codes, *ctx, cast));
  }
  for (int step = 0; step < 4; ++step) {
    std::vector<float> x(4 * 28 * 28);
    for (auto& v : x) v = d(rng) * static_cast<float>(step + 1);
    Tensor xt = Tensor::from_values({4, 1, 28, 28}, Format::FP32, x);
    const std::vector<float> a = fused->forward(backend(), xt).to_f32();
    const std::vector<float> b = apart->forward(backend(), xt).to_f32();
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "step " << step;
    expect_same_pending_amaxes(*fused, *apart, {"block0.fc2", "block1.fc2"}, step);
    EXPECT_EQ(fc2->x_scale().scale(), static_cast<Linear*>(leaf(*apart, "block0.fc2"))->x_scale().scale());
    record_pending_amaxes(backend(), *fused);
    record_pending_amaxes(backend(), *apart);
  }
  EXPECT_NE(fc2->x_scale().scale(), 1.0f);  // the scales moved
}

// The same in the mlp: each ReLU writes the next layer's delayed-scaled
// E4M3 cast (PointwiseLayer::forward_cast_for, fused::relu_forward_encode),
// and logits, amaxes and weight gradients keep the bits of the ReLU's own
// FP32 output cast by fc2 and fc3 (ReLUs that count non-finite outputs).
TEST(DelayedScaling, ReluWritesTheNextLayersCastWithTheSameBits) {
  auto fused = build_model("mlp", {1, 28, 28}, 10);
  auto apart = build_model("mlp", {1, 28, 28}, 10);
  for (auto* m : {fused.get(), apart.get()}) {
    m->init(6);
    apply_recipe(backend(), *m, make_recipe("fp8"));
  }
  for (const char* name : {"relu1", "relu2"}) {
    Layer* r = leaf(*apart, name);
    ASSERT_NE(r, nullptr) << name;
    r->set_track_nonfinite(true);
  }
  {
    auto* fc2 = static_cast<Linear*>(leaf(*fused, "fc2"));
    ASSERT_NE(fc2, nullptr);
    Layer::InputCast cast;
    ASSERT_TRUE(fc2->input_cast({4, 256}, cast));
    ASSERT_NE(cast.amax, nullptr);
    Tensor h = Tensor::from_values({4, 256}, Format::FP32, std::vector<float>(4 * 256, -1.0f)), codes;
    Layer* relu = leaf(*fused, "relu1");
    auto ctx = relu->make_context();
    EXPECT_TRUE(relu->forward_cast_for(backend(), h, codes, *ctx, cast));
    EXPECT_EQ(codes.format(), Format::E4M3);
    EXPECT_FALSE(leaf(*apart, "relu1")->forward_cast_for(backend(), h, codes, *ctx, cast));
  }
  std::mt19937_64 rng(9);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (int step = 0; step < 4; ++step) {
    std::vector<float> x(8 * 28 * 28);
    for (auto& v : x) v = d(rng) * static_cast<float>(step + 1);
    Tensor xt = Tensor::from_values({8, 1, 28, 28}, Format::FP32, x);
    const std::vector<float> a = fused->forward(backend(), xt).to_f32();
    const std::vector<float> b = apart->forward(backend(), xt).to_f32();
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "step " << step;
    expect_same_pending_amaxes(*fused, *apart, {"fc2", "fc3"}, step);
    std::vector<float> g(8 * 10);
    for (auto& v : g) v = d(rng);
    const Tensor dl = Tensor::from_values({8, 10}, Format::FP32, g);
    fused->backward(backend(), dl);
    apart->backward(backend(), dl);
    for (const char* name : {"fc1", "fc2", "fc3"}) {
      const std::vector<float> ga = leaf(*fused, name)->parameters()[0]->grad.to_f32();
      const std::vector<float> gb = leaf(*apart, name)->parameters()[0]->grad.to_f32();
      ASSERT_EQ(ga.size(), gb.size());
      EXPECT_EQ(std::memcmp(ga.data(), gb.data(), ga.size() * sizeof(float)), 0) << name << " step " << step;
    }
    record_pending_amaxes(backend(), *fused);
    record_pending_amaxes(backend(), *apart);
  }
  EXPECT_NE(static_cast<Linear*>(leaf(*fused, "fc2"))->x_scale().scale(), 1.0f);  // the scales moved
}

TEST(DelayedScaling, RefreshEncodesWithThePreviousScaleThenRecords) {
  Model model("one", {4}, 2);
  model.add(std::make_unique<Linear>("fc", 4, 2));
  model.init(1);
  apply_recipe(backend(), model, make_recipe("fp8"));
  Parameter& w = static_cast<Linear*>(model.leaves()[0])->weight();
  std::vector<float> m = w.master.to_f32();
  float amax = 0;
  for (float v : m) amax = std::max(amax, std::abs(v));
  const float s0 = w.weight_scale;
  EXPECT_EQ(s0, 448.0f / amax);
  // The optimizer doubled every weight: this refresh still uses s0 (the
  // weights before), so the largest ones saturate at 448; the next uses 448/(2 amax).
  for (auto& v : m) v *= 2.0f;
  w.master.from_f32(m.data(), static_cast<std::int64_t>(m.size()));
  Tensor ws;
  refresh_weights(backend(), model, ws);
  EXPECT_EQ(w.weight_scale, s0);
  const std::vector<float> q = w.weight.to_f32();
  float qmax = 0;
  for (float v : q) qmax = std::max(qmax, std::abs(v));
  EXPECT_EQ(qmax, 448.0f);
  // The next step's read records this refresh's amax.
  record_pending_amaxes(backend(), model);
  refresh_weights(backend(), model, ws);
  EXPECT_EQ(w.weight_scale, 448.0f / (2.0f * amax));
  // The bias stays FP32 and is copied as is.
  Parameter& b = static_cast<Linear*>(model.leaves()[0])->bias();
  EXPECT_EQ(b.weight.format(), Format::FP32);
  EXPECT_EQ(b.weight.to_f32(), b.master.to_f32());
}

// ---------------------------------------------------------------- training lessons

TEST(RecipeTraining, Fp16LosesUpdatesBelowHalfAnUlpWhileMastersMove) {
  // Every weight set in [0.25, 0.5): FP16's spacing there is 2^-12, so an
  // update below 2^-13 ~ 1.2e-4 rounds back to the same FP16 value. At lr
  // 1e-5 (no momentum) the updates are ~1e-6: the fp16 recipe's weights do
  // not change at all, while mixed-fp16's FP32 masters (spacing 2^-25 there)
  // move.
  auto data = dataset("spirals", 4);
  auto configure = [](const char* recipe) {
    RunConfig c = spirals_config(recipe);
    c.lr = 1e-5;
    c.momentum = 0.0;
    c.schedule = "constant";
    c.widths = {16};
    return c;
  };
  auto set_weights = [](engine::Run& run) {
    int i = 0;
    for (Parameter* p : run.model().parameters()) {
      std::vector<float> v(static_cast<std::size_t>(p->numel()));
      for (auto& e : v) {
        e = (i % 2 ? -1.0f : 1.0f) * (0.25f + 0.03125f * static_cast<float>(i % 7));
        ++i;
      }
      if (p->has_master()) p->master.from_f32(v.data(), p->numel());
      else p->weight.from_f32(v.data(), p->numel());
    }
    BackendScope scope(run_backend());
    Tensor ws;
    refresh_weights(run_backend(), run.model(), ws);
  };
  engine::Run fp16(0, configure("fp16"), data, run_backend());
  engine::Run mixed(1, configure("mixed-fp16"), data, run_backend());
  set_weights(fp16);
  set_weights(mixed);
  std::vector<std::vector<std::uint8_t>> w16, wmixed;
  std::vector<std::vector<float>> masters;
  for (Parameter* p : fp16.model().parameters()) w16.push_back(bytes_of(p->weight));
  for (Parameter* p : mixed.model().parameters()) {
    wmixed.push_back(bytes_of(p->weight));
    masters.push_back(p->master.to_f32());
  }
  std::vector<Record> out;
  for (int i = 0; i < 10; ++i) {
    fp16.step(out);
    mixed.step(out);
  }
  for (const auto& m : fp16.steps()) {
    // Non-zero gradients, every update (lr |g| <= lr * norm) below half an ulp.
    ASSERT_FALSE(m.skipped);
    EXPECT_GT(m.grad_norm, 0.0);
    EXPECT_LT(m.grad_norm * 1e-5, 0x1.0p-13);
  }
  std::size_t i = 0, moved = 0, total = 0;
  for (Parameter* p : fp16.model().parameters()) {
    EXPECT_EQ(bytes_of(p->weight), w16[i]) << p->name << ": an FP16 weight changed";
    ++i;
  }
  i = 0;
  for (Parameter* p : mixed.model().parameters()) {
    const std::vector<float> now = p->master.to_f32();
    for (std::size_t k = 0; k < now.size(); ++k) moved += now[k] != masters[i][k];
    total += now.size();
    // The FP16 copies have not crossed a rounding boundary yet either.
    EXPECT_EQ(bytes_of(p->weight), wmixed[i]) << p->name;
    ++i;
  }
  // (Masters of dead ReLU units get no gradient and stay.)
  EXPECT_GT(double(moved) / double(total), 0.5) << moved << " of " << total << " masters moved";
}

TEST(RecipeTraining, TinyGradientsStallInFp16AndLearnWithLossScaling) {
  // The loss-scaling lesson in short (300 steps; the full one is
  // precision-lab-cli compare --recipes fp32,fp16,mixed-fp16 --dataset tiny-gradients).
  auto data = dataset("tiny-gradients", 0);
  auto config = [](const char* recipe) {
    RunConfig c;
    c.recipe = recipe;
    c.dataset = "tiny-gradients";
    c.model = "mlp";
    c.steps = 300;
    c.seed = 0;
    c.stats_every = 100;
    c.threads = 1;
    return c;
  };
  auto tail_mean = [](const engine::Run& r) {
    double s = 0;
    const auto& st = r.steps();
    for (std::size_t i = st.size() - 20; i < st.size(); ++i) s += st[i].loss;
    return s / 20.0;
  };
  std::vector<Record> out;
  engine::Run fp32(0, config("fp32"), data, run_backend());
  engine::Run fp16(1, config("fp16"), data, run_backend());
  engine::Run mixed(2, config("mixed-fp16"), data, run_backend());
  for (engine::Run* r : {&fp32, &fp16, &mixed})
    while (!r->finished()) r->step(out);
  const double start = fp32.steps().front().loss;
  EXPECT_EQ(fp16.steps().front().loss, start);  // same data, same (zero-headed) model
  EXPECT_EQ(mixed.steps().front().loss, start);
  EXPECT_NEAR(start, std::ldexp(1.0, -28), 0.3 * std::ldexp(1.0, -28));  // E[y^2] = 2^-28
  const double l32 = tail_mean(fp32), l16 = tail_mean(fp16), lmixed = tail_mean(mixed);
  EXPECT_LT(l32, 0.05 * start);     // FP32 learns
  EXPECT_GT(l16, 0.8 * start);      // fp16 stays near its start
  EXPECT_LT(std::abs(lmixed - l32), 0.1 * l32);  // mixed-fp16 learns as FP32 does
  // Why: in the fp16 run the weight gradients are zero (dL/dyhat flushed
  // to zero in the output layer's backward; only the far tail, |z| > 4,
  // survives). The statistics measure the exact gradient (the FP32 shadow
  // pass), so what FP16 wiped out reads as underflow, not as exact zeros ...
  int checked = 0;
  for (const GradStats& g : fp16.grad_stats()) {
    EXPECT_TRUE(g.shadow) << g.layer;
    std::int64_t drawn = 0;
    for (std::int64_t n : g.histogram) drawn += n;
    EXPECT_EQ(drawn, g.total - g.zeros) << "the histogram shows the exact gradient: " << g.layer;
    EXPECT_EQ(g.underflow_scaled, g.underflow_unscaled) << "an unscaled run saw its unscaled fate";
    if (g.layer == "fc3") {
      EXPECT_GT(g.underflow_unscaled, 0.9) << "step " << g.step;
      EXPECT_LT(double(g.zeros), 0.05 * double(g.total)) << "few exact zeros, step " << g.step;
      EXPECT_GT(g.grad_error, 0.99) << "nearly every exact gradient came out zero, step " << g.step;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 4 * 3);  // steps 1, 100, 200, 300; fc1..fc3
  // ... while mixed-fp16's output-layer gradients, unscaled, would mostly
  // flush to zero in FP16 too; scaled by 2^16 they do not.
  for (const GradStats& g : mixed.grad_stats()) {
    if (g.layer != "fc3" || g.step != 100) continue;
    EXPECT_EQ(g.format, "FP16");
    EXPECT_GT(g.underflow_unscaled, 0.5);
    EXPECT_LT(g.underflow_scaled, 0.5 * g.underflow_unscaled);
    ++checked;
  }
  EXPECT_EQ(checked, 4 * 3 + 1);
  EXPECT_EQ(mixed.summary().skipped_steps, 0);
}

TEST(RecipeTraining, DynamicScalingOverflowIsAttributedSkippedAndBacksOff) {
  auto data = dataset("spirals", 4);
  RunConfig c = spirals_config("mixed-fp16");
  c.loss_scale.mode = ScalingMode::Dynamic;
  c.loss_scale.init_scale = std::ldexp(1.0, 40);  // dlogits * 2^40 overflows FP16
  c.loss_scale_set = true;
  engine::Run run(0, c, data, run_backend());
  std::vector<std::vector<float>> before;
  for (Parameter* p : run.model().parameters()) before.push_back(p->master.to_f32());
  std::vector<Record> out;
  run.step(out);
  // The skipped step left the masters alone.
  std::size_t i = 0;
  for (Parameter* p : run.model().parameters()) {
    EXPECT_EQ(p->master.to_f32(), before[i]) << p->name;
    ++i;
  }
  run.step(out);
  const StepMetrics& s1 = run.steps()[0];
  const StepMetrics& s2 = run.steps()[1];
  EXPECT_TRUE(s1.overflow);
  EXPECT_TRUE(s1.skipped);
  EXPECT_EQ(s1.loss_scale, std::ldexp(1.0, 40));
  EXPECT_EQ(s2.loss_scale, std::ldexp(1.0, 39));  // backoff 0.5
  EXPECT_TRUE(std::isfinite(s1.loss));            // the true loss is unaffected
  bool attributed = false, skipped = false, backoff = false;
  for (const Event& e : run.events()) {
    if (e.step != 1) continue;
    if (e.kind == EventKind::Overflow) {
      EXPECT_FALSE(e.layer.empty());
      EXPECT_TRUE(e.tensor == "activation_grad" || e.tensor == "weight_grad" || e.tensor == "activation") << e.tensor;
      EXPECT_GT(e.count, 0);
      attributed |= e.layer == "fc3";  // the output layer's backward is where FP16 overflows first
    }
    skipped |= e.kind == EventKind::Skipped;
    backoff |= e.kind == EventKind::ScaleChange && e.tensor == "backoff";
  }
  EXPECT_TRUE(attributed);
  EXPECT_TRUE(skipped);
  EXPECT_TRUE(backoff);
}

TEST(RecipeTraining, LivePrecisionChangesKeepTrainingFinite) {
  auto data = dataset("spirals", 4);
  RunConfig c = spirals_config("mixed-fp16");
  c.steps = 90;
  c.optimizer = "adam";
  c.lr = 0.01;
  engine::Run run(0, c, data, run_backend());
  std::vector<Record> out;
  for (int i = 0; i < 30; ++i) run.step(out);
  const LayerPrecision fp8{Format::E4M3, Format::FP32, Format::FP32, Format::E5M2};
  const LayerPrecision bf16{Format::BF16, Format::BF16, Format::FP32, Format::BF16};
  const std::vector<float> fc1_master = run.model().leaves()[0]->parameters()[0]->master.to_f32();
  run.set_layer_precision("fc1", fp8);
  run.set_layer_precision("fc2", bf16);
  // The masters carry the values across the change.
  Parameter& w1 = *run.model().leaves()[0]->parameters()[0];
  EXPECT_EQ(w1.master.to_f32(), fc1_master);
  EXPECT_EQ(w1.weight.format(), Format::E4M3);
  EXPECT_NE(w1.weight_scale, 1.0f);
  for (int i = 0; i < 30; ++i) run.step(out);
  run.set_layer_precision("fc1", {});  // back to FP32
  EXPECT_EQ(w1.weight.format(), Format::FP32);
  EXPECT_EQ(w1.weight_scale, 1.0f);
  while (!run.finished()) run.step(out);
  for (const StepMetrics& m : run.steps()) ASSERT_TRUE(std::isfinite(m.loss)) << "step " << m.step;
  int changes = 0;
  for (const Event& e : run.events()) changes += e.kind == EventKind::PrecisionChange;
  EXPECT_EQ(changes, 3);
  double first = 0, last = 0;
  for (int i = 0; i < 10; ++i) {
    first += run.steps()[static_cast<std::size_t>(i)].loss;
    last += run.steps()[run.steps().size() - 1 - static_cast<std::size_t>(i)].loss;
  }
  EXPECT_LT(last, first);  // still learning
}

}  // namespace

namespace {

// The statistics of the last statistics step of `run`, by layer.
std::map<std::string, GradStats> last_stats(const engine::Run& run) {
  std::map<std::string, GradStats> by_layer;
  for (const GradStats& g : run.grad_stats()) by_layer[g.layer] = g;
  return by_layer;
}

}  // namespace

TEST(ShadowPass, MeasuresOutputAndGradientErrorAgainstFp32) {
  // docs/numerics.md: an FP32 shadow pass on statistics steps gives, per layer, the
  // relative L2 error of the output and of the weight gradient.
  auto data = dataset("spirals", 4);
  auto run_with = [&](const char* recipe, bool fp16_accumulate) {
    RunConfig c = spirals_config(recipe);
    c.steps = 20;
    c.stats_every = 10;
    c.model = "mlp";
    c.widths = {256, 256};
    if (fp16_accumulate)
      c.layers["fc2"] = LayerPrecision{Format::FP16, Format::FP16, Format::FP16, Format::FP16};
    auto run = std::make_unique<engine::Run>(0, c, data, run_backend());
    std::vector<Record> out;
    while (!run->finished()) run->step(out);
    return run;
  };
  auto fp32 = run_with("fp32", false);
  for (const auto& [layer, g] : last_stats(*fp32)) {
    EXPECT_FALSE(g.shadow) << layer;  // FP32 is its own reference
    EXPECT_EQ(g.output_error, 0.0) << layer;
    EXPECT_EQ(g.grad_error, 0.0) << layer;
  }
  auto mixed = run_with("mixed-fp16", false);
  auto acc16 = run_with("mixed-fp16", true);
  const auto m = last_stats(*mixed), a = last_stats(*acc16);
  ASSERT_TRUE(m.count("fc2") && a.count("fc2"));
  EXPECT_TRUE(m.at("fc2").shadow);
  // FP16 operands cost about FP16's precision (2^-11 relative)...
  EXPECT_GT(m.at("fc2").output_error, 1e-5);
  EXPECT_LT(m.at("fc2").output_error, 1e-2);
  EXPECT_GT(m.at("fc2").grad_error, 0.0);
  // ... and summing 256 products in FP16 costs several times more.
  EXPECT_GT(a.at("fc2").output_error, 2.0 * m.at("fc2").output_error);
}

namespace {
// The StepInspection among a step's records, or null.
const StepInspection* inspection_in(const std::vector<Record>& out) {
  const StepInspection* in = nullptr;
  for (const Record& r : out)
    if (const auto* i = std::get_if<StepInspection>(&r)) in = i;
  return in;
}
}  // namespace

TEST(StepInspector, OneStepLayerByLayerWithTheOverflowAttributed) {
  // The step inspector's record: mixed-fp16 with a scale of 2^40 overflows
  // FP16 in backward; the inspection says where, and that the step was
  // skipped and the scale halved.
  auto data = dataset("spirals", 4);
  RunConfig c = spirals_config("mixed-fp16");
  c.loss_scale.mode = ScalingMode::Dynamic;
  c.loss_scale.init_scale = std::ldexp(1.0, 40);
  c.loss_scale_set = true;
  engine::Run run(0, c, data, run_backend());
  std::vector<Record> out;
  run.step(out);  // an ordinary step: no inspection
  EXPECT_EQ(inspection_in(out), nullptr);
  out.clear();
  run.request_inspection();
  run.step(out);
  const StepInspection* in = inspection_in(out);
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(in->step, 2);
  EXPECT_TRUE(in->overflow);
  EXPECT_TRUE(in->skipped);
  EXPECT_EQ(in->scale_after, in->scale_before / 2);
  EXPECT_EQ(in->layers.size(), run.model().leaves().size());
  std::int64_t nonfinite = 0;
  bool weights = false;
  for (const LayerInspection& l : in->layers) {
    nonfinite += l.nonfinite_activation_grad + l.nonfinite_weight_grad;
    weights = weights || l.has_weights;
  }
  EXPECT_GT(nonfinite, 0);
  EXPECT_TRUE(weights);
  // The next step is ordinary again.
  out.clear();
  run.step(out);
  EXPECT_EQ(inspection_in(out), nullptr);
}

TEST(StepInspector, CleanStepShowsGradientsAndNoNonFinite) {
  auto data = dataset("spirals", 4);
  engine::Run run(0, spirals_config("fp16"), data, run_backend());
  std::vector<Record> out;
  run.request_inspection();
  run.step(out);
  const StepInspection* in = inspection_in(out);
  ASSERT_NE(in, nullptr);
  EXPECT_FALSE(in->skipped);
  for (const LayerInspection& l : in->layers) {
    EXPECT_EQ(l.nonfinite_activation + l.nonfinite_activation_grad + l.nonfinite_weight_grad, 0) << l.layer;
    EXPECT_EQ(l.grad_format, "FP16") << l.layer;
    if (l.has_weights) {
      EXPECT_GT(l.max_abs_grad, 0.0) << l.layer;
    }
  }
}

TEST(RunSettings, StochasticRoundingKeepsUpdatesThatNearestRoundingLoses) {
  // BF16 weights without a master copy and a learning rate whose updates
  // are far below half a BF16 ulp of the weights: round-to-nearest drops
  // nearly every one; stochastic rounding moves the weights.
  auto data = dataset("spirals", 4);
  auto moved = [&](const char* rounding) {
    RunConfig c = spirals_config("custom");
    c.layers["kind:linear"] = LayerPrecision{Format::BF16, Format::BF16, Format::FP32, Format::BF16};
    c.optimizer = "sgd";
    c.momentum = 0.0;
    c.lr = 1e-4;
    c.schedule = "constant";
    c.weight_rounding = rounding;
    engine::Run run(0, c, data, run_backend());
    std::vector<std::vector<float>> before;
    for (Parameter* p : run.model().parameters()) before.push_back(p->weight.to_f32());
    std::vector<Record> out;
    for (int i = 0; i < 20; ++i) run.step(out);
    std::int64_t changed = 0, total = 0;
    std::size_t k = 0;
    for (Parameter* p : run.model().parameters()) {
      EXPECT_EQ(p->weight.format(), Format::BF16);
      EXPECT_FALSE(p->has_master());
      const auto after = p->weight.to_f32();
      for (std::size_t j = 0; j < after.size(); ++j) changed += after[j] != before[k][j];
      total += static_cast<std::int64_t>(after.size());
      ++k;
    }
    return double(changed) / double(total);
  };
  const double nearest = moved("nearest"), stochastic = moved("stochastic");
  EXPECT_LT(nearest, 0.1);
  EXPECT_GT(stochastic, 5.0 * nearest);
  EXPECT_GT(stochastic, 0.005);
}

TEST(RunSettings, MasterWeightsCanBeTakenAwayAndFp8ScalingTurnedOff) {
  auto data = dataset("spirals", 4);
  RunConfig c = spirals_config("mixed-fp16");
  c.master_weights = 0;
  engine::Run no_master(0, c, data, run_backend());
  for (Parameter* p : no_master.model().parameters()) {
    EXPECT_FALSE(p->has_master()) << p->name;
    EXPECT_EQ(p->weight.format(), Format::FP16) << p->name;
  }
  RunConfig f = spirals_config("fp8");
  f.fp8_scaling = "none";
  engine::Run unscaled(0, f, data, run_backend());
  std::vector<Record> out;
  for (int i = 0; i < 5; ++i) unscaled.step(out);
  for (Parameter* p : unscaled.model().parameters()) {
    if (p->weight.format() == Format::E4M3) {
      EXPECT_EQ(p->weight_scale, 1.0f) << p->name;
    }
  }
  RunConfig d = spirals_config("fp8");
  engine::Run delayed(0, d, data, run_backend());
  for (int i = 0; i < 5; ++i) delayed.step(out);
  bool scaled = false;
  for (Parameter* p : delayed.model().parameters())
    scaled = scaled || (p->weight.format() == Format::E4M3 && p->weight_scale != 1.0f);
  EXPECT_TRUE(scaled) << "delayed scaling moves the weight scales";
}
