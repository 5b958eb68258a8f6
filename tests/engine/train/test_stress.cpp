// Stress, bounded in time: start/stop at random moments, pause/resume
// storms, precision changes racing the steps, a full queue. No deadlock, no
// leak (AddressSanitizer in CI), no race (ThreadSanitizer in CI), nothing
// lost from the journal.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <string>
#include <thread>

#include "engine/train/trainer_test_support.h"
#include "journal/journal.h"

namespace {

using namespace trainer_test;
using namespace engine;
namespace fs = std::filesystem;

// Budget per test: enough cycles to matter, bounded for sanitizer builds.
constexpr auto kBudget = 20s;

TEST(Stress, FiveHundredStartStopCyclesAtRandomMoments) {
  std::mt19937 rng(7);
  const auto end = std::chrono::steady_clock::now() + kBudget;
  int cycles = 0;
  for (; cycles < 500 && std::chrono::steady_clock::now() < end; ++cycles) {
    Trainer t;
    t.add_run(spirals(100000));
    if (cycles % 3 == 0) t.add_run(spirals(100000));
    t.start();
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
    if (cycles % 5 == 0) t.pause();
    t.stop();
    const auto t0 = std::chrono::steady_clock::now();
    t.wait();
    ASSERT_LT(std::chrono::steady_clock::now() - t0, 5s) << "stop took too long at cycle " << cycles;
    ASSERT_FALSE(t.active());
    std::vector<Record> all;
    t.drain(all);
    // Every run ended with a status the consumer saw.
    int ended = 0;
    for (const Record& r : all)
      if (const auto* s = std::get_if<RunStatus>(&r); s && (s->state == RunState::Stopped || s->state == RunState::Finished))
        ++ended;
    ASSERT_EQ(ended, t.run_count()) << "cycle " << cycles;
  }
  EXPECT_GE(cycles, 50);
  RecordProperty("cycles", cycles);
}

TEST(Stress, PauseResumeStormAndPrecisionChangesRacingSteps) {
  const fs::path dir = fs::temp_directory_path() / ("pl_stress_" + std::to_string(getpid()));
  fs::remove_all(dir);
  Trainer t;
  RunConfig c = spirals(100000);
  c.recipe = "mixed-fp16";
  t.add_run(c);
  attach_journal(t, dir.string(), {"storm"});
  t.start();
  std::mt19937 rng(11);
  std::thread controls([&] {
    const auto end = std::chrono::steady_clock::now() + 3s;
    while (std::chrono::steady_clock::now() < end) {
      switch (rng() % 5) {
        case 0: t.pause(); break;
        case 1: t.resume(); break;
        case 2: t.step_once(); break;
        case 3:
          t.set_layer_precision(0, rng() % 2 ? "fc1" : "fc2",
                                LayerPrecision{rng() % 2 ? Format::FP16 : Format::BF16, Format::FP16, Format::FP32, Format::FP16});
          break;
        default: t.set_step_rate(rng() % 2 ? 0.0 : 500.0); break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
    }
  });
  std::vector<Record> all;
  const auto end = std::chrono::steady_clock::now() + 3s;
  while (std::chrono::steady_clock::now() < end) {
    t.drain(all);
    std::this_thread::sleep_for(5ms);
  }
  controls.join();
  t.resume();
  t.stop();
  t.wait();
  t.drain(all);
  EXPECT_EQ(t.dropped(), 0u);
  // Steps are consecutive: nothing lost; the journal has every one of them.
  const auto steps = steps_of(t, all);
  ASSERT_FALSE(steps.empty());
  for (std::size_t i = 0; i < steps.size(); ++i) ASSERT_EQ(steps[i].step, static_cast<std::int64_t>(i + 1));
  const JournalContents j = read_journal(dir.string());
  EXPECT_EQ(j.status, "stopped");
  ASSERT_EQ(j.exports[0].history.steps.size(), steps.size());
  EXPECT_EQ(j.exports[0].history.steps.back().loss, steps.back().loss);
  fs::remove_all(dir);
}

TEST(Stress, AFullQueueDropsDataButNeverAStatus) {
  Trainer t(64);  // a consumer that never drains, and a tiny queue
  t.add_run(spirals(400));
  t.add_run(spirals(400));
  t.start();
  t.wait();
  EXPECT_GT(t.dropped(), 0u);
  std::vector<Record> all;
  t.drain(all);
  int finished = 0;
  for (const Record& r : all)
    if (const auto* s = std::get_if<RunStatus>(&r); s && s->state == RunState::Finished) ++finished;
  EXPECT_EQ(finished, 2);
}

}  // namespace
