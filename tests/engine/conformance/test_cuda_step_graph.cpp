// The step on the device, captured once: a small training step (batch in,
// forward, the loss gradient scaled by the device's loss scale, the
// fused unscale, the device's scale update, the guarded optimizer, the
// results slot read a step later) run through the CUDA Backend's code,
// uncaptured and captured into graphs that are replayed, with overflows,
// backoffs and growths. Over the host table (no GPU: its capture records
// the calls and replays them) the runs agree bit for bit with each other
// and with the CPU backend deciding on the host with LossScaler; on a GPU
// (CudaStepGraphDevice, skipped without one) captured and uncaptured agree.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "amp/grad_set.h"
#include "amp/loss_scaler.h"
#include "backend/backend.h"
#include "backend/cuda_backend.h"
#include "backend/cuda_module.h"
#include "backend/cuda_step.h"
#include "data/dataset.h"
#include "engine/test_configs.h"
#include "host_cuda_table.h"
#include "train/run.h"

namespace {

using engine::Backend;
using engine::CudaStepControl;

constexpr std::int64_t kB = 8, kI = 16, kO = 4;  // batch, inputs, outputs
constexpr float kLr = 0.01f, kMomentum = 0.9f;
// GradScaler's rule with a short interval and a scale near FLT_MAX's
// reach, so the run overflows, backs off and grows again.
const engine::LossScalerConfig kScaling{engine::ScalingMode::Dynamic, 0x1p120, 2.0, 0.5, 4};

// The results slot (int64 slots): loss (double), sum of squares (double),
// the non-finite count, then the scale state after the step.
constexpr std::size_t kLossSlot = 0, kSumSlot = 1, kCountSlot = 2, kStateSlot = 3;
constexpr std::size_t kStateSlots = (sizeof(PlCudaScaleState) + 7) / 8;
constexpr std::size_t kSlots = kStateSlot + kStateSlots;

// What a step reports.
struct StepRecord {
  std::uint64_t loss_bits = 0, sum_bits = 0;
  std::int64_t nonfinite = 0;
  std::uint32_t scale_bits = 0;
  bool taken = true;
  std::int64_t tracker = 0;
  bool operator==(const StepRecord&) const = default;
};

// The batch of step k (1-based): fixed by k alone; every 37th carries a
// value that overflows the forward pass.
void make_batch(std::int64_t k, float* x, float* y) {
  std::mt19937 rng(static_cast<std::uint32_t>(1000 + k));
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (std::int64_t i = 0; i < kB * kI; ++i) x[i] = n(rng);
  for (std::int64_t i = 0; i < kB * kO; ++i) y[i] = n(rng);
  if (k % 37 == 0) x[3] = 3.0e38f;
}

StepRecord decode(const std::int64_t* r) {
  StepRecord s;
  std::memcpy(&s.loss_bits, &r[kLossSlot], 8);
  std::memcpy(&s.sum_bits, &r[kSumSlot], 8);
  s.nonfinite = r[kCountSlot];
  PlCudaScaleState st;
  std::memcpy(&st, &r[kStateSlot], sizeof st);
  std::memcpy(&s.scale_bits, &st.scale, 4);
  s.taken = st.taken != 0;
  s.tracker = st.growth_tracker;
  return s;
}

// A model's buffers on one backend.
struct Toy {
  Backend& be;
  float *x, *y, *w, *mom, *pred, *dpred, *dseed, *dw;
  std::int64_t* results;
  PlCudaScaleState* state;
  explicit Toy(Backend& b) : be(b) {
    auto f = [&](std::int64_t n) { return static_cast<float*>(be.allocate(static_cast<std::size_t>(n) * 4)); };
    x = f(kB * kI), y = f(kB * kO), w = f(kI * kO), mom = f(kI * kO), pred = f(kB * kO), dpred = f(kB * kO),
    dseed = f(kB * kO), dw = f(kI * kO);
    results = static_cast<std::int64_t*>(be.allocate(kSlots * 8));
    state = static_cast<PlCudaScaleState*>(be.allocate(sizeof(PlCudaScaleState)));
    std::vector<float> w0(kI * kO);
    std::mt19937 rng(7);
    std::normal_distribution<float> n(0.0f, 0.3f);
    for (float& v : w0) v = n(rng);
    be.upload(w, w0.data(), w0.size() * 4);
    be.fill_zero(mom, kI * kO * 4);
    PlCudaScaleState s{};
    s.scale = s.loss_scale = static_cast<float>(kScaling.init_scale);
    s.inv_scale = static_cast<float>(1.0 / kScaling.init_scale);
    s.taken = 1;
    s.lr = kLr;
    be.upload(state, &s, sizeof s);
  }
  ~Toy() {
    for (void* p : {static_cast<void*>(x), static_cast<void*>(y), static_cast<void*>(w), static_cast<void*>(mom),
                    static_cast<void*>(pred), static_cast<void*>(dpred), static_cast<void*>(dseed),
                    static_cast<void*>(dw), static_cast<void*>(results), static_cast<void*>(state)})
      be.release(p);
  }
  std::vector<float> weights() {
    std::vector<float> h(kI * kO);
    be.download(h.data(), w, h.size() * 4);
    return h;
  }

  // Forward and the scaled backward. While a step state is set, the loss
  // gradient takes the device's loss scale (the `scale` argument is then
  // ignored), so a replayed graph reads the scale the device holds.
  void forward_backward(const float* staging, float scale) {
    be.upload(x, staging, kB * kI * 4);
    be.upload(y, staging + kB * kI, kB * kO * 4);
    engine::GemmArgs g;
    g.m = kB, g.n = kO, g.k = kI;
    g.a = {x, engine::Format::FP32, false, kI};
    g.b = {w, engine::Format::FP32, false, kO};
    g.c = pred, g.ldc = kO;
    be.gemm(g);
    be.mse_forward(pred, y, kB * kO, reinterpret_cast<double*>(results + kLossSlot));
    be.mse_backward(pred, y, kB * kO, scale, dseed);
    engine::GemmArgs d;
    d.m = kI, d.n = kO, d.k = kB;
    d.a = {x, engine::Format::FP32, true, kI};
    d.b = {dseed, engine::Format::FP32, false, kO};
    d.c = dw, d.ldc = kO;
    be.gemm(d);
  }
  void sgd() {
    engine::SgdUpdate u;
    u.value = w, u.grad = dw, u.momentum_buf = mom, u.n = kI * kO, u.lr = kLr, u.momentum = kMomentum;
    be.sgd_update(u);
  }
  engine::GradBuffer grad() { return {dw, kI * kO, results + kCountSlot}; }

  // The step on the device: no host decision between its calls.
  void device_step(CudaStepControl& c, const float* staging, std::int64_t* host_results) {
    forward_backward(staging, 1.0f);
    const engine::GradBuffer g = grad();
    be.unscale_grads(&g, 1, 1.0f /* the step state's 1/scale is used */, reinterpret_cast<double*>(results + kSumSlot));
    c.update_scale(results + kCountSlot, 1, PL_CUDA_SCALE_DYNAMIC, kScaling.growth_factor, kScaling.backoff_factor,
                   kScaling.growth_interval, state);
    sgd();  // guarded: untouched when the state says skip
    be.copy(results + kStateSlot, state, sizeof(PlCudaScaleState));
    c.download_async(host_results, results, kSlots * 8);
  }
};

struct RunResult {
  std::vector<StepRecord> steps;
  std::vector<float> weights;
  long long calls_per_replay = -1;  // host table entries a replayed step made (host table only)
};

// Steps 1..n on `be`'s device path, uncaptured or captured: one graph per
// parity of the step (its own staging and results buffers, so the host
// fills step k+1's while step k may still run), captured at its first use
// after an uncaptured warm-up step, then replayed. Step k's record is read
// after step k+1 is launched; the last when the run ends.
RunResult run_device(Backend& be, std::int64_t n, bool captured, bool count_calls) {
  CudaStepControl* c = engine::cuda_step_control(be);
  EXPECT_NE(c, nullptr);
  RunResult out;
  if (!c) return out;
  Toy toy(be);
  const std::size_t staging_bytes = (kB * kI + kB * kO) * 4;
  float* staging[2];
  std::int64_t* host[2];
  PlCudaGraph* graph[2] = {nullptr, nullptr};
  for (int p = 0; p < 2; ++p) {
    staging[p] = static_cast<float*>(c->host_allocate(staging_bytes));
    host[p] = static_cast<std::int64_t*>(c->host_allocate(kSlots * 8));
  }
  c->set_step_state(toy.state);
  std::uint64_t marks[2] = {0, 0};
  for (std::int64_t k = 1; k <= n; ++k) {
    const int p = static_cast<int>(k % 2);
    make_batch(k, staging[p], staging[p] + kB * kI);
    const long long before = count_calls ? host_table_calls() : 0;
    if (!captured || k == 1) {
      toy.device_step(*c, staging[p], host[p]);
    } else {
      if (!graph[p]) {
        c->capture_begin();
        toy.device_step(*c, staging[p], host[p]);
        graph[p] = c->capture_end();
      }
      c->graph_launch(graph[p]);
    }
    marks[p] = c->record_mark();
    if (count_calls && captured && k > 3) out.calls_per_replay = host_table_calls() - before;
    if (k > 1) {  // the previous step's record, a step late
      c->wait_mark(marks[1 - p]);
      out.steps.push_back(decode(host[1 - p]));
    }
  }
  c->wait_mark(marks[n % 2]);
  out.steps.push_back(decode(host[n % 2]));
  c->set_step_state(nullptr);
  out.weights = toy.weights();
  for (int p = 0; p < 2; ++p) {
    c->graph_destroy(graph[p]);
    c->host_release(staging[p]);
    c->host_release(host[p]);
  }
  return out;
}

// The same steps on the CPU backend with the host deciding (LossScaler,
// one download a step, the optimizer skipped on overflow): what the
// device's state machine and guard must reproduce.
RunResult run_host_decided(std::int64_t n) {
  const std::unique_ptr<Backend> be = engine::make_cpu_backend(1);
  Toy toy(*be);
  engine::LossScaler scaler(kScaling);
  std::vector<float> staging(kB * kI + kB * kO);
  RunResult out;
  engine::GradSet none;
  auto* unused = static_cast<double*>(be->allocate(8));
  none.bind({}, nullptr, unused);
  for (std::int64_t k = 1; k <= n; ++k) {
    make_batch(k, staging.data(), staging.data() + kB * kI);
    toy.forward_backward(staging.data(), scaler.scale());
    const engine::GradBuffer g = toy.grad();
    be->unscale_grads(&g, 1, scaler.inverse_scale(), reinterpret_cast<double*>(toy.results + kSumSlot));
    std::int64_t r[kSlots] = {};
    be->download(r, toy.results, kStateSlot * 8);
    scaler.unscale(*be, none);  // the state machine's cycle; the pass above did the work
    scaler.record_nonfinite(r[kCountSlot]);
    const bool taken = scaler.should_step();
    if (taken) toy.sgd();
    scaler.update();
    StepRecord rec = decode(r);
    const float after = scaler.scale();
    std::memcpy(&rec.scale_bits, &after, 4);
    rec.taken = taken;
    rec.tracker = scaler.growth_tracker();
    out.steps.push_back(rec);
  }
  be->release(unused);
  out.weights = toy.weights();
  return out;
}

std::uint32_t bits_of(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

void expect_same(const RunResult& a, const RunResult& b, const char* what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (std::size_t k = 0; k < a.steps.size(); ++k) {
    SCOPED_TRACE("step " + std::to_string(k + 1));
    ASSERT_EQ(a.steps[k], b.steps[k]);
  }
  ASSERT_EQ(a.weights.size(), b.weights.size());
  for (std::size_t i = 0; i < a.weights.size(); ++i) ASSERT_EQ(bits_of(a.weights[i]), bits_of(b.weights[i])) << i;
}

// The run exercised what it is meant to: overflows skipped, backoffs and growths.
void expect_eventful(const RunResult& r) {
  int skipped = 0, backoffs = 0, growths = 0;
  std::uint32_t prev = bits_of(static_cast<float>(kScaling.init_scale));
  for (const StepRecord& s : r.steps) {
    skipped += !s.taken;
    float now, was;
    std::memcpy(&now, &s.scale_bits, 4);
    std::memcpy(&was, &prev, 4);
    backoffs += now < was;
    growths += now > was;
    prev = s.scale_bits;
  }
  EXPECT_GT(skipped, 5);
  EXPECT_GT(backoffs, 5);
  EXPECT_GT(growths, 5);
  for (float v : r.weights) EXPECT_TRUE(std::isfinite(v));
}

constexpr std::int64_t kSteps = 300;

TEST(CudaStepGraph, CapturedMatchesUncapturedOverHostTable) {
  const std::unique_ptr<Backend> a = make_host_table_cuda_backend();
  const std::unique_ptr<Backend> b = make_host_table_cuda_backend();
  const RunResult plain = run_device(*a, kSteps, false, false);
  const RunResult graphs = run_device(*b, kSteps, true, true);
  expect_eventful(plain);
  expect_same(plain, graphs, "captured vs uncaptured");
  // A replayed step is one table call (the launch; the host table's marks
  // are free), where the uncaptured step makes a dozen.
  EXPECT_EQ(graphs.calls_per_replay, 1);
}

TEST(CudaStepGraph, DeviceDecisionsMatchHostLossScaler) {
  const std::unique_ptr<Backend> a = make_host_table_cuda_backend();
  const RunResult device = run_device(*a, kSteps, true, false);
  const RunResult host = run_host_decided(kSteps);
  expect_eventful(host);
  expect_same(host, device, "host-decided CPU backend vs captured device path");
}

// What cannot be captured is refused with a message naming the entry, and
// the capture can still be ended.
TEST(CudaStepGraph, CaptureRefusesReadsAndAllocations) {
  const std::unique_ptr<Backend> be = make_host_table_cuda_backend();
  CudaStepControl* c = engine::cuda_step_control(*be);
  ASSERT_NE(c, nullptr);
  void* buf = be->allocate(64);
  c->capture_begin();
  std::int64_t host = 0;
  EXPECT_THROW(be->download(&host, buf, 8), std::invalid_argument);
  try {
    be->allocate(64);
    ADD_FAILURE() << "allocate during a capture was not refused";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("not during a capture"), std::string::npos) << e.what();
  }
  EXPECT_THROW(c->capture_begin(), std::invalid_argument);
  PlCudaGraph* g = c->capture_end();
  ASSERT_NE(g, nullptr);
  c->graph_destroy(g);
  be->release(buf);
}

// Only CUDA backends with the ABI 6 entries have step controls.
TEST(CudaStepGraph, CpuBackendHasNoStepControl) {
  const std::unique_ptr<Backend> cpu = engine::make_cpu_backend(1);
  EXPECT_EQ(engine::cuda_step_control(*cpu), nullptr);
}

// ---- Run: training steps captured through the CUDA Backend ----

// mixed-fp16 on the mlp with a scale high enough to overflow FP16's
// gradients, a growth interval short enough to overflow again, an
// activation spike, statistics steps and evaluations between the captured
// steps: every kind of step a run mixes.
engine::RunConfig captured_config(std::int64_t steps) {
  engine::RunConfig c = test::small_run("mixed-fp16", "mlp", "spirals", steps, 32, 11);
  c.optimizer = "sgd";
  c.schedule = "cosine";  // the rate changes every step: the graph reads it from the step state
  c.warmup = 10;
  c.lr = 0.05;
  c.stats_every = 60;
  c.eval_every = 100;
  c.loss_scale = {engine::ScalingMode::Dynamic, 0x1p40, 2.0, 0.5, 20};
  c.loss_scale_set = true;
  c.spike = "150:fc1:1e6";
  return c;
}

struct RunOutcome {
  std::vector<engine::StepMetrics> steps;
  std::vector<engine::Event> events;
  std::vector<double> val_losses;
  std::int64_t captured = 0;
};

RunOutcome train(Backend& be, const engine::RunConfig& c, bool graphs) {
  static const auto data = std::make_shared<const engine::DatasetPair>(engine::load_dataset("spirals", 3));
  engine::Run run(0, c, data, be);
  run.set_graph_capture(graphs);
  std::vector<engine::Record> out;
  RunOutcome o;
  while (!run.finished()) {
    run.step(out);
    if (run.eval_due()) o.val_losses.push_back(run.evaluate(out).val_loss);
  }
  o.steps = run.steps();
  o.events = run.events();
  o.captured = run.captured_steps();
  return o;
}

std::uint64_t bits64(double d) {
  std::uint64_t b;
  std::memcpy(&b, &d, 8);
  return b;
}

void expect_same_run(const RunOutcome& a, const RunOutcome& b) {
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (std::size_t k = 0; k < a.steps.size(); ++k) {
    SCOPED_TRACE("step " + std::to_string(k + 1));
    const engine::StepMetrics &x = a.steps[k], &y = b.steps[k];
    ASSERT_EQ(bits64(x.loss), bits64(y.loss));
    ASSERT_EQ(bits_of(x.loss_scale), bits_of(y.loss_scale));
    ASSERT_EQ(x.overflow, y.overflow);
    ASSERT_EQ(x.skipped, y.skipped);
    ASSERT_EQ(bits64(x.grad_norm), bits64(y.grad_norm));
    ASSERT_EQ(bits64(x.train_accuracy), bits64(y.train_accuracy));
    ASSERT_EQ(bits64(x.lr), bits64(y.lr));
    ASSERT_EQ(x.epoch, y.epoch);
  }
  ASSERT_EQ(a.events.size(), b.events.size());
  for (std::size_t k = 0; k < a.events.size(); ++k) {
    SCOPED_TRACE("event " + std::to_string(k));
    EXPECT_EQ(a.events[k].step, b.events[k].step);
    EXPECT_EQ(a.events[k].kind, b.events[k].kind);
    EXPECT_EQ(a.events[k].layer, b.events[k].layer);
    EXPECT_EQ(a.events[k].tensor, b.events[k].tensor);
    EXPECT_EQ(a.events[k].count, b.events[k].count);
    EXPECT_EQ(bits64(a.events[k].value), bits64(b.events[k].value));
  }
  ASSERT_EQ(a.val_losses.size(), b.val_losses.size());
  for (std::size_t k = 0; k < a.val_losses.size(); ++k) EXPECT_EQ(bits64(a.val_losses[k]), bits64(b.val_losses[k]));
}

TEST(CudaStepGraphRun, CapturedMatchesUncapturedAndCpu) {
  const engine::RunConfig c = captured_config(300);
  const std::unique_ptr<Backend> a = make_host_table_cuda_backend();
  const std::unique_ptr<Backend> b = make_host_table_cuda_backend();
  const std::unique_ptr<Backend> cpu = engine::make_cpu_backend(1);
  const RunOutcome captured = train(*a, c, true);
  const RunOutcome plain = train(*b, c, false);
  const RunOutcome host = train(*cpu, c, true);  // the CPU backend has no graphs: host decisions
  EXPECT_EQ(plain.captured, 0);
  EXPECT_EQ(host.captured, 0);
  // Every ordinary step after the first two is a replay (statistics steps,
  // the spike and the step after each of them run uncaptured).
  EXPECT_GT(captured.captured, 250);
  int skipped = 0, backoffs = 0, growths = 0, attributed = 0;
  for (std::size_t k = 0; k < captured.steps.size(); ++k) {
    skipped += captured.steps[k].skipped;
    if (k > 0) {
      backoffs += captured.steps[k].loss_scale < captured.steps[k - 1].loss_scale;
      growths += captured.steps[k].loss_scale > captured.steps[k - 1].loss_scale;
    }
  }
  for (const engine::Event& e : captured.events) attributed += e.kind == engine::EventKind::Overflow && e.count > 0;
  EXPECT_GT(skipped, 5);
  EXPECT_GT(backoffs, 5);
  EXPECT_GT(growths, 5);
  EXPECT_GT(attributed, 5);
  {
    SCOPED_TRACE("captured vs uncaptured (CUDA backend over the host table)");
    expect_same_run(captured, plain);
  }
  {
    SCOPED_TRACE("captured vs the CPU backend");
    expect_same_run(captured, host);
  }
}

// What a step costs the host in table calls: the rate and one replay against every op
// of the uncaptured step (the mlp's forward, backward, unscale, optimizer).
TEST(CudaStepGraphRun, ReplayIsOneLaunch) {
  static const auto data = std::make_shared<const engine::DatasetPair>(engine::load_dataset("spirals", 3));
  engine::RunConfig c = captured_config(40);
  c.stats_every = 0;
  c.eval_every = 0;
  c.spike.clear();
  c.loss_scale.init_scale = 1024.0;
  c.loss_scale.growth_interval = 1000;
  long long per_step[2] = {0, 0};
  for (int graphs = 0; graphs < 2; ++graphs) {
    const std::unique_ptr<Backend> be = make_host_table_cuda_backend();
    engine::Run run(0, c, data, *be);
    run.set_graph_capture(graphs == 1);
    std::vector<engine::Record> out;
    for (int k = 0; k < 10; ++k) run.step(out);
    const long long before = host_table_calls();
    run.step(out);  // step 11: neither the first, nor a memory sample (every 50)
    per_step[graphs] = host_table_calls() - before;
    if (graphs == 1) {
      EXPECT_GT(run.captured_steps(), 5);
    }
  }
  std::printf("host table calls per mixed-fp16 mlp step: uncaptured %lld, replayed %lld\n", per_step[0],
              per_step[1]);
  EXPECT_EQ(per_step[1], 2);  // the learning rate's upload and the launch (marks are free on the host table)
  EXPECT_GT(per_step[0], 20);
}

// The device sitting: the real module, captured against uncaptured.
TEST(CudaStepGraphDevice, CapturedMatchesUncapturedOnGpu) {
  if (const std::string why = engine::cuda_backend_unusable_reason(); !why.empty())
    GTEST_SKIP() << why;
  const std::unique_ptr<Backend> a = engine::make_cuda_backend(0);
  const std::unique_ptr<Backend> b = engine::make_cuda_backend(0);
  const RunResult plain = run_device(*a, kSteps, false, false);
  const RunResult graphs = run_device(*b, kSteps, true, false);
  expect_eventful(plain);
  expect_same(plain, graphs, "captured vs uncaptured on the GPU");
}

// The device sitting: a whole mixed-fp16 run on the real module, captured
// against uncaptured.
TEST(CudaStepGraphDevice, RunCapturedMatchesUncapturedOnGpu) {
  if (const std::string why = engine::cuda_backend_unusable_reason(); !why.empty()) GTEST_SKIP() << why;
  const engine::RunConfig c = captured_config(300);
  const std::unique_ptr<Backend> a = engine::make_cuda_backend(0);
  const std::unique_ptr<Backend> b = engine::make_cuda_backend(0);
  const RunOutcome captured = train(*a, c, true);
  const RunOutcome plain = train(*b, c, false);
  EXPECT_GT(captured.captured, 250);
  expect_same_run(captured, plain);
}

}  // namespace
