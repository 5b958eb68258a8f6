// The device-readiness proof (docs/ARCHITECTURE.md "The backend contract"): training on the
// guarded backend, whose memory is inaccessible outside its own calls, for
// every recipe and model, with exactly one host read per ordinary step and
// the CPU backend's results bit for bit; plus the registry.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "engine/test_configs.h"
#include "amp/recipe.h"
#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda_backend.h"
#include "backend/fused.h"
#include "backend/guarded/guarded_backend.h"
#include "backend/registry.h"
#include "data/dataset.h"
#include "nn/model.h"
#include "tensor/tensor.h"
#include "records/metrics.h"
#include "train/run.h"
#include "train/run_config.h"

namespace {

using namespace engine;

std::unique_ptr<Backend> guarded() { return make_backend("guarded", 1).backend; }

std::shared_ptr<const DatasetPair> spirals() {
  static const auto data = std::make_shared<const DatasetPair>(load_dataset("spirals", 5));
  return data;
}

// The first samples of Fashion-MNIST, for the image models: a few training
// batches and a two-batch test split keep 90 runs quick.
Dataset head(const Dataset& d, std::size_t n) {
  Dataset h = d;
  h.count = std::min(n, d.count);
  h.inputs.resize(h.count * d.shape.features);
  h.labels.resize(h.count);
  return h;
}
std::shared_ptr<const DatasetPair> images() {
  static const auto data = [] {
    const DatasetPair full = load_dataset("fashion-mnist", 0);
    return std::make_shared<const DatasetPair>(DatasetPair{head(full.train, 1024), head(full.test, 64)});
  }();
  return data;
}
std::shared_ptr<const DatasetPair> data_for(const std::string& model) { return model == "mlp" ? spirals() : images(); }

RunConfig config(const std::string& recipe, const std::string& model) {
  // Every guarded call opens and closes the arena (two mprotect calls), and
  // the transformer's attention makes a call per sample and head: small
  // image batches keep the 39 runs quick.
  RunConfig c = test::small_run(recipe, model, model == "mlp" ? "spirals" : "fashion-mnist", 6,
                                model == "mlp" ? 32 : 8, 5);
  c.lr = 0.05;
  return c;
}

// ------------------------------------------------------------- the backend

TEST(GuardedBackend, HostAccessOutsideItsCallsCrashes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto be = guarded();
  Tensor t;
  {
    BackendScope scope(*be);
    t = Tensor({16}, Format::FP32);
  }
  EXPECT_EQ(t.backend(), be.get());
  EXPECT_DEATH({ t.f32()[3] = 1.0f; }, "");
  EXPECT_DEATH({ volatile float v = t.f32()[0]; (void)v; }, "");
  // Through the backend it works.
  const float v = 2.5f;
  be->upload(t.f32() + 3, &v, sizeof v);
  EXPECT_EQ(t.to_f32()[3], 2.5f);
}

TEST(GuardedBackend, RefusesMemoryItDidNotAllocate) {
  auto be = guarded();
  std::vector<float> host(8, 1.0f);
  EXPECT_THROW(be->scale(host.data(), 2.0f, 8), std::logic_error);
  Tensor t({8}, Format::FP32);  // no scope: the host heap
  EXPECT_EQ(t.backend(), nullptr);
  EXPECT_THROW(be->relu_forward(t.f32(), t.f32(), 8), std::logic_error);
}

TEST(GuardedBackend, CountsReadsAndComputesAsTheCpuBackend) {
  auto be = guarded();
  BackendScope scope(*be);
  Tensor x = Tensor::from_values({4}, Format::FP32, {-1.0f, 2.0f, -3.0f, 4.0f});
  const GuardedCounters before = *guarded_counters(*be);
  be->relu_forward(x.f32(), x.f32(), 4);
  EXPECT_EQ(guarded_counters(*be)->downloads, before.downloads);
  EXPECT_EQ(x.to_f32(), (std::vector<float>{0.0f, 2.0f, 0.0f, 4.0f}));
  EXPECT_EQ(guarded_counters(*be)->downloads, before.downloads + 1);
  EXPECT_EQ(guarded_counters(*make_cpu_backend(1)), nullptr);
  EXPECT_EQ(be->info().name, "guarded-cpu");
}

// A fused op reaches the inner backend's fast path through the one generic
// forwarder, its buffers checked: one call. Where the inner backend declines
// (the CPU backend told to), the composition runs on the guarded core ops,
// each checked and counted, with the same bits.
TEST(GuardedBackend, ForwardsFusedOpsToTheFastPathOrComposesThem) {
  std::vector<std::vector<float>> results;
  for (const bool fast : {true, false}) {
    CpuBackendOptions o;
    o.threads = 1;
    o.fast_fused = fast;
    auto be = make_guarded_backend(std::make_unique<CpuBackend>(o));
    BackendScope scope(*be);
    Tensor x = Tensor::from_values({4}, Format::FP32, {-1.0f, 2.0f, -3.0f, 4.0f});
    Tensor scratch({4}, Format::FP32), q({4}, Format::E4M3), amax({1}, Format::FP32), back({4}, Format::FP32);
    const std::int64_t before = guarded_counters(*be)->calls;
    fused::scale_amax_encode(*be, x.f32(), 2.0f, Format::E4M3, q.data(), 4, CastOptions{}, amax.f32(), scratch.f32());
    // The fast path: the op itself. Declined: the offer, scale_amax, convert.
    EXPECT_EQ(guarded_counters(*be)->calls - before, fast ? 1 : 3);
    EXPECT_EQ(amax.to_f32(), std::vector<float>{4.0f});
    be->convert(Format::E4M3, q.data(), Format::FP32, back.f32(), 4, {});
    results.push_back(back.to_f32());
    std::vector<float> host(4);
    EXPECT_THROW(fused::scale_amax_encode(*be, host.data(), 2.0f, Format::E4M3, q.data(), 4, CastOptions{}, amax.f32(),
                                          scratch.f32()),
                 std::logic_error);
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], (std::vector<float>{-2.0f, 4.0f, -6.0f, 8.0f}));
}

// ------------------------------------------------------------- the registry

// "auto" and "cuda" as the machine allows: with no usable CUDA device
// (CI, this project's build machines) auto is the CPU and cuda refuses
// with the reason; where one is (the H100 machine) both make the CUDA
// backend.
TEST(Registry, MakesTheBackendsByName) {
  EXPECT_EQ(make_backend("cpu", 1).backend->info().name, "cpu");
  const std::string why = cuda_backend_unusable_reason();
  const bool gpu = why.empty();
  const BackendChoice a = make_backend("auto", 1);
  EXPECT_EQ(a.name, gpu ? "cuda" : "cpu");
  EXPECT_EQ(a.note.rfind(gpu ? "cuda" : "cpu: ", 0), 0u) << a.note;
  EXPECT_NE(guarded_counters(*make_backend("guarded", 1).backend), nullptr);
  if (gpu) {
    const BackendChoice c = make_backend("cuda", 1);
    EXPECT_EQ(c.name, "cuda");
    EXPECT_EQ(c.backend->info().name, "cuda");
  } else {
    try {
      make_backend("cuda", 1);
      FAIL() << "cuda made";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "backend 'cuda': " + why);
    }
  }
  EXPECT_THROW(make_backend("tpu", 1), std::invalid_argument);
  const std::vector<BackendAvailability> av = available_backends();
  ASSERT_EQ(av.size(), 2u);
  EXPECT_EQ(av[0].name, "cpu");
  EXPECT_TRUE(av[0].available);
  EXPECT_EQ(av[1].name, "cuda");
  EXPECT_EQ(av[1].available, gpu);
  EXPECT_EQ(av[1].reason, why);
}

// ------------------------------------------------------------- training

class GuardedTraining : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

// Every recipe on every model: the step touches backend memory only through
// Backend calls (a host access would crash), reads once per ordinary step,
// and computes exactly what the CPU backend computes.
TEST_P(GuardedTraining, OneReadPerStepAndTheCpuResults) {
  const auto& [recipe, model] = GetParam();
  auto gbe = guarded();
  auto cbe = make_backend("cpu", 1).backend;
  const RunConfig c = config(recipe, model);
  engine::Run g(0, c, data_for(model), *gbe);
  engine::Run cpu(0, c, data_for(model), *cbe);
  std::vector<Record> out;
  int ordinary = 0;
  for (int k = 0; k < c.steps; ++k) {
    const std::int64_t before = guarded_counters(*gbe)->downloads;
    g.step(out);
    cpu.step(out);
    const std::int64_t reads = guarded_counters(*gbe)->downloads - before;
    const StepMetrics& m = g.steps().back();
    const StepMetrics& r = cpu.steps().back();
    SCOPED_TRACE("step " + std::to_string(m.step));
    if (!m.overflow && std::isfinite(m.loss)) {
      EXPECT_EQ(reads, 1);
      ++ordinary;
    }
    // Bit for bit: the guarded backend runs the CPU backend's kernels.
    EXPECT_EQ(std::memcmp(&m.loss, &r.loss, sizeof m.loss), 0) << m.loss << " vs " << r.loss;
    EXPECT_EQ(std::memcmp(&m.grad_norm, &r.grad_norm, sizeof m.grad_norm), 0);
    EXPECT_EQ(m.overflow, r.overflow);
    EXPECT_EQ(m.skipped, r.skipped);
    EXPECT_EQ(m.loss_scale, r.loss_scale);
    EXPECT_EQ(m.train_accuracy, r.train_accuracy);
    if (!m.overflow && std::isfinite(m.loss)) continue;
    // A diverged run (fp16 without a scaler) ends as the CPU one does.
    if (g.finished()) break;
  }
  if (recipe != "fp16") {
    EXPECT_EQ(ordinary, c.steps);
  }
  // An evaluation reads once, whatever the number of test batches.
  const std::int64_t before = guarded_counters(*gbe)->downloads;
  const EvalMetrics e = g.evaluate(out);
  EXPECT_EQ(guarded_counters(*gbe)->downloads - before, 1);
  const EvalMetrics e_cpu = cpu.evaluate(out);
  EXPECT_EQ(e.val_loss, e_cpu.val_loss);
  EXPECT_EQ(e.val_accuracy, e_cpu.val_accuracy);
}

std::vector<std::tuple<std::string, std::string>> every_recipe_and_model() {
  std::vector<std::tuple<std::string, std::string>> out;
  for (const std::string& r : recipe_names())
    for (const char* m : {"mlp", "cnn", "transformer"}) out.emplace_back(r, m);
  return out;
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<std::string, std::string>>& i) {
  std::string s = std::get<0>(i.param) + "_" + std::get<1>(i.param);
  for (char& ch : s)
    if (ch == '-') ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(EveryRecipe, GuardedTraining, ::testing::ValuesIn(every_recipe_and_model()), case_name);

// Statistics steps, the step inspector and an overflow's attribution re-run
// read more (per-layer figures); they work on the guarded backend and give
// the CPU backend's figures.
TEST(GuardedTraining, StatisticsInspectionAndOverflowMatchTheCpu) {
  auto gbe = guarded();
  auto cbe = make_backend("cpu", 1).backend;
  RunConfig c = config("mixed-fp16", "mlp");
  c.stats_every = 2;
  engine::Run g(0, c, spirals(), *gbe);
  engine::Run cpu(0, c, spirals(), *cbe);
  std::vector<Record> out;
  for (engine::Run* r : {&g, &cpu}) {
    r->step(out);
    r->request_inspection();
    r->step(out);
    r->inject_fault(FaultTarget::Gradients, r->model().leaves().front()->name(), true);
    r->step(out);
    r->step(out);
  }
  ASSERT_EQ(g.grad_stats().size(), cpu.grad_stats().size());
  ASSERT_FALSE(g.grad_stats().empty());
  for (std::size_t i = 0; i < g.grad_stats().size(); ++i) {
    const GradStats& a = g.grad_stats()[i];
    const GradStats& b = cpu.grad_stats()[i];
    EXPECT_EQ(a.layer, b.layer);
    EXPECT_EQ(a.histogram, b.histogram);
    EXPECT_EQ(a.underflow_scaled, b.underflow_scaled);
    EXPECT_EQ(a.grad_error, b.grad_error);
    EXPECT_EQ(a.output_error, b.output_error);
  }
  ASSERT_EQ(g.events().size(), cpu.events().size());
  bool overflow_event = false;
  for (std::size_t i = 0; i < g.events().size(); ++i) {
    EXPECT_EQ(g.events()[i].kind, cpu.events()[i].kind);
    EXPECT_EQ(g.events()[i].layer, cpu.events()[i].layer);
    EXPECT_EQ(g.events()[i].count, cpu.events()[i].count);
    overflow_event = overflow_event || g.events()[i].kind == EventKind::Overflow;
  }
  EXPECT_TRUE(overflow_event);
  EXPECT_TRUE(g.steps()[2].overflow);
  EXPECT_TRUE(g.steps()[2].skipped);
}

}  // namespace
