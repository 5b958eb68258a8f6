// Trainer: the engine thread's controls, determinism, comparisons on one
// seed, live precision changes, failures reported as records.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "backend/cuda_backend.h"
#include "nn/layer.h"
#include "nn/model.h"
#include "train/run.h"
#include "train/trainer.h"
#include "engine/train/trainer_test_support.h"

using namespace std::chrono_literals;
using engine::Record;
using engine::RunConfig;
using engine::StepMetrics;
using engine::Trainer;

using namespace trainer_test;

TEST(Trainer, SameConfigAndSeedGiveIdenticalSteps) {
  std::vector<double> losses[2];
  for (int k = 0; k < 2; ++k) {
    Trainer t;
    t.add_run(spirals(60));
    t.start();
    t.wait();
    const engine::Run* r = t.run(0);
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(r->steps().size(), 60u);
    for (const auto& m : r->steps()) losses[k].push_back(m.loss);
  }
  EXPECT_EQ(losses[0], losses[1]);  // bit for bit
}

TEST(Trainer, ComparedRunsShareWeightsAndBatches) {
  Trainer t;
  t.add_run(spirals(25));
  t.add_run(spirals(25));
  t.start();
  t.wait();
  ASSERT_NE(t.run(0), nullptr);
  ASSERT_NE(t.run(1), nullptr);
  for (std::size_t i = 0; i < 25; ++i) EXPECT_EQ(t.run(0)->steps()[i].loss, t.run(1)->steps()[i].loss) << i;
}

TEST(Trainer, LearnsSpirals) {
  RunConfig c = spirals(1500);
  Trainer t;
  t.add_run(c);
  t.start();
  t.wait();
  const engine::Run* r = t.run(0);
  ASSERT_NE(r, nullptr);
  ASSERT_FALSE(r->evals().empty());
  EXPECT_GT(r->evals().back().val_accuracy, 0.9);
  EXPECT_LT(r->steps().back().loss, r->steps().front().loss * 0.5);
}

TEST(Trainer, PauseStepResumeStop) {
  Trainer t;
  t.add_run(spirals(1000000));
  t.start();
  std::vector<Record> all;
  ASSERT_TRUE(drain_until(t, all, [](auto& a) { return count_steps(a, 0) >= 5; }));
  t.pause();
  // Paused status arrives at the next step boundary; afterwards no step runs.
  ASSERT_TRUE(drain_until(t, all, [](auto& a) { return has_paused_status(a); }));
  const std::int64_t at_pause = count_steps(all, 0);
  std::this_thread::sleep_for(100ms);
  t.drain(all);
  EXPECT_EQ(count_steps(all, 0), at_pause);
  t.step_once();
  ASSERT_TRUE(drain_until(t, all, [&](auto& a) { return count_steps(a, 0) == at_pause + 1; }));
  std::this_thread::sleep_for(50ms);
  t.drain(all);
  EXPECT_EQ(count_steps(all, 0), at_pause + 1);
  t.resume();
  ASSERT_TRUE(drain_until(t, all, [&](auto& a) { return count_steps(a, 0) >= at_pause + 20; }));
  const auto t0 = std::chrono::steady_clock::now();
  t.stop();
  t.wait();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);  // within a step's time (plus slack)
  EXPECT_FALSE(t.active());
  t.drain(all);
  bool stopped = false;
  for (const Record& r : all)
    if (const auto* s = std::get_if<engine::RunStatus>(&r); s && s->state == engine::RunState::Stopped) stopped = true;
  EXPECT_TRUE(stopped);
  // Step numbers are consecutive: nothing lost.
  const auto steps = steps_of(t, all);
  for (std::size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i].step, static_cast<std::int64_t>(i + 1));
  // A stopped run, shorter than its first epoch, still ends with a
  // validation point where it stopped (the chart draws it).
  const engine::EvalMetrics* last_eval = nullptr;
  for (const Record& r : all)
    if (const auto* e = std::get_if<engine::EvalMetrics>(&r)) last_eval = e;
  ASSERT_NE(last_eval, nullptr);
  EXPECT_EQ(last_eval->step, steps.back().step);
  EXPECT_GT(last_eval->val_accuracy, 0.0);
}

TEST(Trainer, PrecisionChangeReachesTheEngineAtAStepBoundary) {
  Trainer t;
  t.add_run(spirals(1000000));
  t.start();
  std::vector<Record> all;
  ASSERT_TRUE(drain_until(t, all, [](auto& a) { return count_steps(a, 0) >= 3; }));
  // The first leaf of the mlp; names come from the model builder.
  engine::LayerPrecision fp16{engine::Format::FP16, engine::Format::FP16, engine::Format::FP32,
                              engine::Format::FP16};
  std::string first;
  {
    // Build the same model on this thread to learn the leaf names.
    auto m = engine::build_model("mlp", {2}, 2);
    for (engine::Layer* l : m->leaves())
      if (!l->parameters().empty()) {
        first = l->name();
        break;
      }
  }
  ASSERT_FALSE(first.empty());
  t.set_layer_precision(0, first, fp16);
  ASSERT_TRUE(drain_until(t, all, [&](auto& a) {
    for (const Record& r : a)
      if (const auto* e = std::get_if<engine::Event>(&r); e && e->kind == engine::EventKind::PrecisionChange && e->layer == first)
        return true;
    return false;
  }));
  const std::int64_t before = count_steps(all, 0);
  ASSERT_TRUE(drain_until(t, all, [&](auto& a) { return count_steps(a, 0) >= before + 5; }));
  t.stop();
  t.wait();
  const engine::Run* r = t.run(0);
  ASSERT_NE(r, nullptr);
  for (engine::Layer* l : const_cast<engine::Run*>(r)->model().leaves()) {
    if (l->name() != first) continue;
    EXPECT_EQ(l->precision(), fp16);
    for (engine::Parameter* p : l->parameters()) EXPECT_EQ(p->weight.format(), engine::Format::FP16);
  }
  for (const auto& m : r->steps()) EXPECT_TRUE(std::isfinite(m.loss));
}

TEST(Trainer, MissingDatasetIsAFailedRunNotACrash) {
  Trainer t;
  RunConfig c = spirals(10);
  c.dataset = "/nonexistent/folder";
  t.add_run(c);
  t.start();
  t.wait();
  std::vector<Record> all;
  t.drain(all);
  bool failed = false;
  for (const Record& r : all)
    if (const auto* s = std::get_if<engine::RunStatus>(&r); s && s->state == engine::RunState::Failed) {
      failed = true;
      EXPECT_NE(s->message.find("/nonexistent/folder"), std::string::npos) << s->message;
    }
  EXPECT_TRUE(failed);
}

TEST(Trainer, DivergenceIsAnEvent) {
  // A regression with a learning rate far too large: the loss grows
  // geometrically, overflows to inf and then NaN.
  RunConfig c = spirals(120);
  c.dataset = "tiny-gradients";
  c.optimizer = "sgd";
  c.lr = 10.0;
  c.momentum = 0.9;
  c.widths = {64};
  Trainer t;
  t.add_run(c);
  t.start();
  t.wait();
  const engine::Run* r = t.run(0);
  ASSERT_NE(r, nullptr);
  // A diverged run stops cleanly, with its reason, and stays inspectable.
  EXPECT_LT(r->steps().size(), 120u);
  std::vector<Record> all;
  t.drain(all);
  std::string reason;
  bool summary = false;
  for (const Record& rec : all) {
    if (const auto* s = std::get_if<engine::RunStatus>(&rec); s && s->state == engine::RunState::Failed) reason = s->message;
    summary = summary || std::holds_alternative<engine::RunSummary>(rec);
  }
  EXPECT_NE(reason.find("diverged at step " + std::to_string(r->steps().size())), std::string::npos) << reason;
  EXPECT_TRUE(summary);
  bool nan_event = false;
  for (const auto& e : r->events()) nan_event |= e.kind == engine::EventKind::NanLoss;
  bool nan_loss = false;
  for (const auto& m : r->steps()) nan_loss |= !std::isfinite(m.loss);
  EXPECT_EQ(nan_event, nan_loss);  // a NaN loss, if it came to one, is an event
  bool overflow_event = false;
  for (const auto& e : r->events()) overflow_event |= e.kind == engine::EventKind::Overflow && !e.layer.empty();
  EXPECT_TRUE(overflow_event) << "the overflow was expected to be attributed to a layer";
}

// A bad field, an unknown backend, and "cuda" where no CUDA device is
// usable (where one is, as on the H100 machine, a cuda run is accepted).
TEST(Trainer, RejectsBadConfigsBeforeStarting) {
  Trainer t;
  RunConfig c = spirals(10);
  c.batch = 0;
  EXPECT_THROW(t.add_run(c), std::runtime_error);
  c = spirals(10);
  c.backend = "tpu";
  EXPECT_THROW(t.add_run(c), std::runtime_error);
  c.backend = "cuda";
  const std::string why = engine::cuda_backend_unusable_reason();
  if (why.empty()) {
    EXPECT_EQ(t.add_run(c), 0);
  } else {
    try {
      t.add_run(c);
      FAIL() << "a cuda run was accepted without a device";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "backend 'cuda': " + why + "; use --backend cpu or auto");
    }
  }
}

TEST(Trainer, StepRateSlowsALessonDownAndStopStillActsAtOnce) {
  Trainer t;
  t.add_run(spirals(1000000));
  t.set_step_rate(20.0);  // 20 steps a second
  t.start();
  std::vector<Record> all;
  std::this_thread::sleep_for(1s);
  t.drain(all);
  const std::int64_t in_a_second = count_steps(all, 0);
  EXPECT_GE(in_a_second, 10);
  EXPECT_LE(in_a_second, 30);
  t.set_step_rate(0.0);  // as fast as possible again
  // Unthrottled, 30 more steps come within a few seconds even under a
  // sanitizer on a loaded machine (throttled at 20/s they would take 1.5 s
  // more than the deadline allows).
  const auto deadline = std::chrono::steady_clock::now() + 1200ms;
  while (count_steps(all, 0) <= in_a_second + 30 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
    t.drain(all);
  }
  EXPECT_GT(count_steps(all, 0), in_a_second + 30);
  t.set_step_rate(0.5);  // one step every two seconds: stop must not wait for it
  std::this_thread::sleep_for(100ms);
  const auto t0 = std::chrono::steady_clock::now();
  t.stop();
  t.wait();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
}

TEST(Trainer, InspectNextStepGivesOneInspectionPerRun) {
  Trainer t;
  t.add_run(spirals(1000000));
  t.add_run(spirals(1000000));
  t.start();
  t.pause();
  std::vector<Record> all;
  ASSERT_TRUE(drain_until(t, all, [](auto& a) { return has_paused_status(a); }));
  all.clear();
  t.inspect_next_step();
  t.step_once();
  auto inspections = [](const std::vector<Record>& a) {
    int n = 0;
    for (const Record& r : a) n += std::holds_alternative<engine::StepInspection>(r);
    return n;
  };
  ASSERT_TRUE(drain_until(t, all, [&](auto& a) { return inspections(a) == 2; }));
  t.step_once();
  std::this_thread::sleep_for(100ms);
  t.drain(all);
  EXPECT_EQ(inspections(all), 2) << "only the inspected step";
  t.stop();
  t.wait();
}

// Several runs with two or more CPU threads step side by side (one run per
// worker, each with a single-threaded backend of its own, RoundPool): the
// histories are bit for bit those of the runs stepped one at a time, and
// pause, one step, resume and stop still act on every run at a step
// boundary. Under ThreadSanitizer in CI.
RunConfig side_by_side(const std::string& recipe, std::int64_t steps, int threads) {
  RunConfig c = spirals(steps);
  c.recipe = recipe;
  c.backend = "cpu";  // the pool is the CPU backend's (the guarded one steps runs in turn)
  c.threads = threads;
  c.stats_every = 10;
  c.eval_every = 20;
  return c;
}

TEST(Trainer, RunsSideBySideMatchRunsOneAtATime) {
  const char* recipes[] = {"fp32", "mixed-fp16", "fp8"};
  std::vector<double> losses[2][3];
  std::vector<double> evals[2][3];
  for (int k = 0; k < 2; ++k) {
    Trainer t;
    for (const char* r : recipes) t.add_run(side_by_side(r, 60, k == 0 ? 1 : 2));
    t.start();
    std::vector<Record> all;
    t.wait();
    t.drain(all);
    for (int i = 0; i < 3; ++i) {
      const engine::Run* run = t.run(i);
      ASSERT_NE(run, nullptr);
      ASSERT_EQ(run->steps().size(), 60u) << recipes[i];
      for (const auto& m : run->steps()) losses[k][i].push_back(m.loss);
      for (const auto& e : run->evals()) evals[k][i].push_back(e.val_loss);
    }
    // Every run's records arrive in its own step order.
    std::int64_t last[3] = {0, 0, 0};
    for (const Record& r : all)
      if (const auto* m = std::get_if<StepMetrics>(&r)) {
        EXPECT_EQ(m->step, last[m->run_id] + 1) << "run " << m->run_id;
        last[m->run_id] = m->step;
      }
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(losses[0][i], losses[1][i]) << recipes[i];  // bit for bit
    EXPECT_EQ(evals[0][i], evals[1][i]) << recipes[i];
  }
}

TEST(Trainer, RunsSideBySidePauseStepResumeStop) {
  Trainer t;
  t.add_run(side_by_side("fp32", 1000000, 2));
  t.add_run(side_by_side("mixed-bf16", 1000000, 2));
  t.add_run(side_by_side("mixed-fp16", 1000000, 2));
  t.start();
  std::vector<Record> all;
  auto each = [&](auto pred) {
    return [pred](const std::vector<Record>& a) {
      for (int i = 0; i < 3; ++i)
        if (!pred(count_steps(a, i))) return false;
      return true;
    };
  };
  ASSERT_TRUE(drain_until(t, all, each([](std::int64_t n) { return n >= 5; })))
      << count_steps(all, 0) << " " << count_steps(all, 1) << " " << count_steps(all, 2);
  t.pause();
  ASSERT_TRUE(drain_until(t, all, [](auto& a) { return has_paused_status(a); }));
  std::this_thread::sleep_for(50ms);
  t.drain(all);
  std::int64_t at_pause[3];
  for (int i = 0; i < 3; ++i) at_pause[i] = count_steps(all, i);
  // Rounds step every run once: paused at a round's end, all equal.
  EXPECT_EQ(at_pause[0], at_pause[1]);
  EXPECT_EQ(at_pause[1], at_pause[2]);
  t.step_once();
  ASSERT_TRUE(drain_until(t, all, each([&](std::int64_t n) { return n == at_pause[0] + 1; })));
  std::this_thread::sleep_for(50ms);
  t.drain(all);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(count_steps(all, i), at_pause[i] + 1) << i;
  t.set_layer_precision(1, "fc2", engine::LayerPrecision{});  // a live change between rounds
  t.resume();
  ASSERT_TRUE(drain_until(t, all, each([&](std::int64_t n) { return n >= at_pause[0] + 20; })));
  t.stop();
  t.wait();
  EXPECT_FALSE(t.active());
  t.drain(all);
  int stopped = 0;
  for (const Record& r : all)
    if (const auto* s = std::get_if<engine::RunStatus>(&r); s && s->state == engine::RunState::Stopped) ++stopped;
  EXPECT_EQ(stopped, 3);
}
