// The gpt trained by Run on token windows: it learns a repeating pattern, its causal mask
// holds under every recipe, statistics steps work, and a run repeats bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "amp/recipe.h"
#include "backend/backend.h"
#include "backend/fused.h"
#include "backend/guarded/guarded_backend.h"
#include "backend/registry.h"
#include "data/dataset.h"
#include "engine/test_configs.h"
#include "nn/layer.h"
#include "nn/model.h"
#include "train/run.h"
#include "train/sample.h"

namespace {

using namespace engine;

// A synthetic token set following the text contract (data/dataset.h):
// the split's stream of ids as floats, labels[j] = token j + 1, windows of
// T at pitch P (1 for train, T for validation). The stream repeats a
// pattern of `period` tokens with a seeded jitter: every fifth position
// draws from a small set, so the task is learnable but not trivial.
Dataset token_split(const std::string& split, std::size_t n, std::size_t T, std::size_t pitch, int vocab,
                    std::uint64_t seed) {
  Dataset d;
  d.name = "tokens";
  d.split = split;
  d.source = "generated";
  d.shape.features = T;
  d.classes = vocab;
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  std::vector<int> ids(n);
  for (std::size_t j = 0; j < n; ++j) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    ids[j] = static_cast<int>(j % 7) + (j % 5 == 4 ? static_cast<int>((s >> 60) % 2) * 7 : 0);
  }
  d.inputs.assign(ids.begin(), ids.end());
  for (std::size_t j = 0; j + 1 < n; ++j) d.labels.push_back(ids[j + 1]);
  d.row_pitch = pitch;
  d.labels_per_sample = T;
  d.label_pitch = pitch;
  d.count = (n - 1 - T) / pitch + 1;
  for (int v = 0; v < vocab; ++v) d.vocabulary.push_back(std::string(1, static_cast<char>('a' + v)));
  return d;
}

std::shared_ptr<const DatasetPair> tokens(std::size_t T) {
  auto p = std::make_shared<DatasetPair>();
  p->train = token_split("train", 4000, T, 1, 14, 1);
  p->test = token_split("test", 600, T, T, 14, 2);
  return p;
}

RunConfig gpt(const std::string& recipe, std::int64_t steps) {
  return test::small_gpt(recipe, "tokens", steps, 16, 5, 2);
}

Backend& backend() {
  static std::unique_ptr<Backend> be = make_cpu_backend(1);
  return *be;
}

TEST(Gpt, LearnsAPattern) {
  const auto data = tokens(16);
  engine::Run run(0, gpt("fp32", 300), data, backend());
  std::vector<Record> out;
  while (!run.finished()) run.step(out);
  const EvalMetrics e = run.evaluate(out);
  // log 14 = 2.64 nats at the start; the pattern leaves ~ (1/5) log 2 = 0.14.
  EXPECT_NEAR(run.steps().front().loss, std::log(14.0), 0.3);
  EXPECT_LT(e.val_loss, 0.4) << "validation loss after 300 steps";
  EXPECT_GT(e.val_accuracy, 0.85);
  EXPECT_LE(e.val_accuracy, 1.0);
}

// z_loss: the objective adds C * mean(log^2 Z); `loss` stays the
// cross-entropy (nats) and the z term is reported beside it. With C large
// enough log Z is pulled toward 0 while the model still learns.
TEST(Gpt, ZLossPullsLogZDownAndIsReportedApart) {
  const auto data = tokens(16);
  RunConfig c = gpt("fp32", 300);
  c.z_loss = 0.05;
  engine::Run run(0, c, data, backend());
  std::vector<Record> out;
  while (!run.finished()) run.step(out);
  const StepMetrics& first = run.steps().front();
  const StepMetrics& last = run.steps().back();
  // At the start the logits are ~0: log Z = log 14, the cross-entropy log 14.
  EXPECT_NEAR(first.z_term, std::log(14.0) * std::log(14.0), 0.5);
  EXPECT_NEAR(first.loss, std::log(14.0), 0.3);
  EXPECT_LT(last.z_term, 0.25 * first.z_term);
  EXPECT_LT(run.evaluate(out).val_loss, 0.6);
  // Without it, no z term is reported and log Z is left alone.
  engine::Run plain(0, gpt("fp32", 300), data, backend());
  while (!plain.finished()) plain.step(out);
  EXPECT_EQ(plain.steps().back().z_term, 0.0);
}

// Every recipe: a few steps (the weights move in the recipe's formats), then
// the logits at position t must not change when tokens after t change.
TEST(Gpt, CausalUnderEveryRecipe) {
  const auto data = tokens(16);
  for (const bool qk_norm : {false, true})
  for (const std::string& recipe : recipe_names()) {
    SCOPED_TRACE(recipe + (qk_norm ? " qk_norm" : ""));
    // NVFP4 scales each activation tensor by its own amax (numeric/block.h,
    // the 4-byte tensor scale), taken over every token of the batch, future
    // ones included: its logits at t move with the tokens after t. An open
    // problem of the format on a decoder, not of the mask; held apart below.
    if (recipe == "nvfp4") continue;
    RunConfig c = gpt(recipe, 3);
    c.qk_norm = qk_norm;
    // SGD: Adam's FP16 state (the fp16 recipe) underflows v to 0 and
    // blows the weights up, a lesson of its own and not this test's.
    c.optimizer = "sgd";
    c.lr = 0.05;
    c.stats_every = 2;  // statistics steps and the FP32 shadow pass run too
    engine::Run run(0, c, data, backend());
    std::vector<Record> out;
    try {
      while (!run.finished()) run.step(out);
      if (qk_norm) {
        // The norms are leaves with their own precision: a norm's (FP32
        // under the mixed recipes), not the GEMMs'.
        const Layer* qn = run.model().find_leaf("blocks.1.attn.q_norm");
        EXPECT_TRUE(qn != nullptr);
        if (qn && recipe.rfind("mixed", 0) == 0) EXPECT_EQ(qn->precision().compute, Format::FP32);
      }
    } catch (const std::exception& e) {
      for (const Record& r : out)
        if (const auto* ev = std::get_if<Event>(&r)) ADD_FAILURE() << recipe << " " << ev->layer << " " << ev->tensor << " " << ev->count;
      ADD_FAILURE() << recipe << ": " << e.what();
      continue;
    }
    BackendScope scope(backend());
    std::vector<float> a(2 * 16);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 5 + 3) % 14);
    std::vector<float> b = a;
    for (int k = 0; k < 2; ++k) b[k * 16 + 10] = static_cast<float>((static_cast<int>(b[k * 16 + 10]) + 3) % 14);
    b[15] = 0.0f + (b[15] == 0.0f);
    Tensor ta = Tensor::from_values({2, 16}, Format::FP32, a), tb = Tensor::from_values({2, 16}, Format::FP32, b);
    const std::vector<float> la = run.model().forward(backend(), ta).to_f32();
    const std::vector<float> lb = run.model().forward(backend(), tb).to_f32();
    for (int k = 0; k < 2; ++k)
      for (int t = 0; t < 10; ++t)
        EXPECT_EQ(std::memcmp(&la[(k * 16 + t) * 14], &lb[(k * 16 + t) * 14], 14 * sizeof(float)), 0)
            << "sample " << k << " position " << t;
    EXPECT_NE(std::memcmp(&la[10 * 14], &lb[10 * 14], 14 * sizeof(float)), 0);
  }
}

// The leak above, pinned so that it is seen: under nvfp4 a change after t
// does reach position t, through the tensor scale only (the blocks of one
// token never mix tokens).
TEST(Gpt, Nvfp4TensorScaleSeesTheFuture) {
  const auto data = tokens(16);
  RunConfig c = gpt("nvfp4", 3);
  c.optimizer = "sgd";
  c.lr = 0.05;
  engine::Run run(0, c, data, backend());
  std::vector<Record> out;
  while (!run.finished()) run.step(out);
  BackendScope scope(backend());
  std::vector<float> a(16);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 5 + 3) % 14);
  std::vector<float> b = a;
  // (A change at the last position alone may move no tensor's amax: +7
  // there leaked nothing, while every change at position 8 leaks.)
  b[8] = static_cast<float>((static_cast<int>(b[8]) + 3) % 14);
  Tensor ta = Tensor::from_values({1, 16}, Format::FP32, a), tb = Tensor::from_values({1, 16}, Format::FP32, b);
  const std::vector<float> la = run.model().forward(backend(), ta).to_f32();
  const std::vector<float> lb = run.model().forward(backend(), tb).to_f32();
  double worst = 0.0;
  for (int t = 0; t < 8; ++t)
    for (int v = 0; v < 14; ++v) worst = std::max(worst, std::abs(static_cast<double>(la[t * 14 + v]) - lb[t * 14 + v]));
  // Small (a rescaled rounding), but not zero: the day it is zero, fold
  // nvfp4 back into CausalUnderEveryRecipe.
  EXPECT_LT(worst, 0.5);
  EXPECT_GT(worst, 0.0);
}

// The CPU's fast paths of the causal ops give their compositions' bits
// (the conformance rule, until test_backend_conformance holds them).
TEST(Gpt, CausalOpsMatchTheirCompositions) {
  Backend& be = backend();
  BackendScope scope(be);
  const std::int64_t T = 7, rows = 3 * T;
  std::vector<float> x(rows * T), dy(rows * T);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>((static_cast<int>(i * 37 % 23) - 11)) * 0.37f;
    dy[i] = static_cast<float>((static_cast<int>(i * 13 % 17) - 8)) * 0.11f;
  }
  x[2] = INFINITY;  // a future score of row 0
  Tensor tx = Tensor::from_values({rows, T}, Format::FP32, x), tdy = Tensor::from_values({rows, T}, Format::FP32, dy);
  for (Format acc : {Format::FP32, Format::FP16}) {
    Tensor fast({rows, T}, Format::FP32), slow({rows, T}, Format::FP32);
    fused::causal_softmax(be, Pass::Forward, tx.f32(), nullptr, fast.f32(), rows, T, acc);
    fused::compose(be, fused::CausalSoftmaxOp{Pass::Forward, tx.f32(), nullptr, slow.f32(), rows, T, acc});
    EXPECT_EQ(fast.to_f32(), slow.to_f32());
    Tensor gfast({rows, T}, Format::FP32), gslow({rows, T}, Format::FP32);
    fused::causal_softmax(be, Pass::Backward, fast.f32(), tdy.f32(), gfast.f32(), rows, T, Format::FP32);
    fused::compose(be, fused::CausalSoftmaxOp{Pass::Backward, fast.f32(), tdy.f32(), gslow.f32(), rows, T, Format::FP32});
    EXPECT_EQ(std::memcmp(gfast.to_f32().data(), gslow.to_f32().data(), x.size() * sizeof(float)), 0);
  }
  Tensor zf = Tensor::from_values({rows, T}, Format::FP32, x), zs = Tensor::from_values({rows, T}, Format::FP32, x);
  fused::causal_zero(be, zf.f32(), rows, T);
  fused::compose(be, fused::CausalZeroOp{zs.f32(), rows, T});
  EXPECT_EQ(std::memcmp(zf.to_f32().data(), zs.to_f32().data(), x.size() * sizeof(float)), 0);
  EXPECT_EQ(zf.to_f32()[2], 0.0f);
}

// nanoGPT's CPU "baby" shape (4 layers, 4 heads, width 128, context 64,
// batch 32): tokens per second of training steps, printed. Not a check
// (run with --gtest_also_run_disabled_tests; set PL_THREADS for threads).
TEST(Gpt, DISABLED_BabyShapeTokensPerSecond) {
  auto p = std::make_shared<DatasetPair>();
  p->train = token_split("train", 200000, 64, 1, 14, 1);
  p->test = token_split("test", 2000, 64, 64, 14, 2);
  const char* env = std::getenv("PL_THREADS");
  auto be = make_cpu_backend(env ? std::atoi(env) : 0);
  for (const std::string& recipe : {"fp32", "mixed-bf16"}) {
    RunConfig c = test::small_run(recipe, "gpt", "tokens", 30, 32, 1);
    c.optimizer = "adamw";
    c.lr = 1e-3;
    engine::Run run(0, c, p, *be);
    std::vector<Record> out;
    while (!run.finished()) run.step(out);
    double ms = 0;
    for (std::size_t i = 10; i < run.steps().size(); ++i) ms += run.steps()[i].wall_ms;
    const double tokens = 20.0 * 32 * 64;
    std::printf("gpt baby shape %s: %.0f tokens/s (%.1f ms a step, %d threads)\n", recipe.c_str(),
                tokens / (ms / 1000.0), ms / 20.0, be->info().threads);
  }
}

// On the guarded backend (a host touch of step memory crashes): every
// ordinary step reads once, and the losses are the CPU backend's bits.
TEST(Gpt, GuardedOneReadPerStepAndSameBits) {
  const auto data = tokens(16);
  for (const std::string& recipe : {"fp32", "mixed-fp16", "fp8", "mxfp4"}) {
    RunConfig c = gpt(recipe, 5);
    c.qk_norm = recipe == "mixed-fp16";
    c.stats_every = 4;  // step 1 and 4 measure; 2, 3, 5 are ordinary
    auto gb = make_backend("guarded", 1).backend;
    engine::Run g(0, c, data, *gb), cpu(0, c, data, backend());
    std::vector<Record> out;
    for (std::int64_t k = 1; k <= 5; ++k) {
      const std::int64_t before = guarded_counters(*gb)->downloads;
      g.step(out);
      cpu.step(out);
      if (k != 1 && k != 4) EXPECT_EQ(guarded_counters(*gb)->downloads - before, 1) << recipe << " step " << k;
      EXPECT_EQ(std::memcmp(&g.steps().back().loss, &cpu.steps().back().loss, sizeof(double)), 0) << recipe;
    }
    // An evaluation reads once, then once per character its sample writes
    // (each is drawn on the host from the last position's logits). One
    // recipe: each of the sample's forward passes protects and unprotects
    // every buffer on the guarded backend (tens of seconds for four).
    if (recipe != "mixed-fp16") continue;
    const std::int64_t before = guarded_counters(*gb)->downloads;
    const std::size_t texts = g.history().texts.size();
    const EvalMetrics eg = g.evaluate(out), ec = cpu.evaluate(out);
    EXPECT_EQ(eg.val_loss, ec.val_loss) << recipe;
    ASSERT_EQ(g.history().texts.size(), texts + 1) << recipe;
    EXPECT_EQ(guarded_counters(*gb)->downloads - before, 1 + static_cast<std::int64_t>(kEvalSampleTokens)) << recipe;
    EXPECT_EQ(g.history().texts.back().text, cpu.history().texts.back().text) << recipe;
  }
}

// The same config gives the same steps, bit for bit (what replay relies on).
TEST(Gpt, RepeatsBitForBit) {
  const auto data = tokens(16);
  for (const std::string& recipe : {"fp32", "mixed-bf16", "fp8"}) {
    RunConfig c = gpt(recipe, 6);
    c.stats_every = 3;
    std::vector<StepMetrics> first;
    for (int round = 0; round < 2; ++round) {
      engine::Run run(0, c, data, backend());
      std::vector<Record> out;
      while (!run.finished()) run.step(out);
      if (round == 0) {
        first = run.steps();
        continue;
      }
      ASSERT_EQ(run.steps().size(), first.size());
      for (std::size_t i = 0; i < first.size(); ++i) {
        EXPECT_EQ(std::memcmp(&run.steps()[i].loss, &first[i].loss, sizeof(double)), 0) << recipe << " step " << i;
        EXPECT_EQ(std::memcmp(&run.steps()[i].grad_norm, &first[i].grad_norm, sizeof(double)), 0) << recipe;
        EXPECT_EQ(run.steps()[i].train_accuracy, first[i].train_accuracy);
      }
    }
  }
}

// Gradient statistics and the FP32 shadow pass on the gpt: at a statistics
// step every leaf with weights is measured (the embeddings, the norms, the
// attention's qkv and proj, the MLP, the head); under a low-precision
// recipe the fractions come from the shadow, and the bf16 GEMMs' outputs
// and gradients differ from FP32's by a bf16 rounding's worth.
TEST(Gpt, StatisticsAndTheShadowPassCoverEveryLeafWithWeights) {
  const auto data = tokens(16);
  for (const char* name : {"fp32", "mixed-bf16"}) {
    const std::string recipe = name;
    SCOPED_TRACE(recipe);
    RunConfig c = gpt(recipe, 1);
    c.qk_norm = true;
    c.stats_every = 1;
    engine::Run run(0, c, data, backend());
    std::vector<Record> out;
    run.step(out);
    std::vector<std::string> want, got;
    for (Layer* l : run.model().leaves())
      if (!l->parameters().empty()) want.push_back(l->name());
    for (const GradStats& g : run.grad_stats()) got.push_back(g.layer);
    EXPECT_EQ(got, want);
    // The parameterised leaves: tok, pos, per block ln1 qkv q_norm k_norm proj ln2 fc1 fc2, ln_f, head.
    EXPECT_EQ(want.size(), 2u + 2 * 8 + 2);
    for (const GradStats& g : run.grad_stats()) {
      SCOPED_TRACE(g.layer);
      EXPECT_EQ(g.step, 1);
      EXPECT_GT(g.total, 0);
      const bool gemm = g.layer.find("qkv") != std::string::npos || g.layer.find("proj") != std::string::npos ||
                        g.layer.find("fc") != std::string::npos || g.layer == "head";
      if (recipe == "fp32") {
        EXPECT_FALSE(g.shadow);
        EXPECT_EQ(g.output_error, 0.0);
        EXPECT_EQ(g.grad_error, 0.0);
      } else {
        EXPECT_TRUE(g.shadow);
        if (gemm) {
          EXPECT_GT(g.output_error, 1e-4);
          EXPECT_LT(g.output_error, 0.05);
          EXPECT_GT(g.grad_error, 1e-4);
          EXPECT_LT(g.grad_error, 0.5);
        }
      }
    }
  }
}

// Pure FP16 with Adam diverges, and says why: Adam's second moment, kept in
// FP16 as a .half() model's is, underflows (g^2 / 1000 below FP16's
// smallest subnormal) while the first moment does not, so the update is
// lr * m / eps. The same model with FP32 state (mixed-fp16) trains.
TEST(Gpt, Fp16AdamDivergesAndTheReasonNamesTheFlushedSecondMoment) {
  const auto data = tokens(16);
  RunConfig c = gpt("fp16", 30);
  engine::Run run(0, c, data, backend());
  std::vector<Record> out;
  std::string why;
  try {
    while (!run.finished()) run.step(out);
  } catch (const std::exception& e) {
    why = e.what();
  }
  EXPECT_EQ(why.rfind("diverged at step ", 0), 0u) << why;
  EXPECT_NE(why.find(". Why: at step "), std::string::npos) << why;
  EXPECT_NE(why.find("second moments"), std::string::npos) << why;
  EXPECT_NE(why.find("kept in fp16, had underflowed to 0"), std::string::npos) << why;
  RunConfig mixed = gpt("mixed-fp16", 30);
  engine::Run ok(0, mixed, data, backend());
  while (!ok.finished()) ok.step(out);
  EXPECT_TRUE(std::isfinite(ok.steps().back().loss));
}

}  // namespace

// eval_batches: an evaluation reads the first N batches of the validation
// split and nothing else: the same loss as the whole of a split cut to
// those windows, and not the whole split's.
TEST(Gpt, AnEvaluationReadsOnlyItsFirstBatchesWhenEvalBatchesIsSet) {
  const auto data = tokens(16);
  RunConfig limited = gpt("fp32", 3);
  limited.eval_batches = 1;
  RunConfig whole = limited;
  whole.eval_batches = 0;
  auto cut = std::make_shared<DatasetPair>(*data);
  ASSERT_GT(cut->test.count, static_cast<std::size_t>(limited.batch));
  cut->test.count = static_cast<std::size_t>(limited.batch);
  engine::Run a(0, limited, data, backend()), b(0, whole, cut, backend()), c(0, whole, data, backend());
  std::vector<Record> out;
  for (int k = 0; k < 3; ++k) {
    a.step(out);
    b.step(out);
    c.step(out);
  }
  const double la = a.evaluate(out).val_loss, lb = b.evaluate(out).val_loss, lc = c.evaluate(out).val_loss;
  EXPECT_EQ(la, lb);
  EXPECT_NE(la, lc);
}
