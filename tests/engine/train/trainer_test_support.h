// Helpers of the trainer, journal and stress tests: a small spirals run and
// draining a trainer's records until something holds.
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "engine/test_configs.h"
#include "engine/support/test_backend.h"
#include "records/metrics.h"
#include "train/run_config.h"
#include "train/trainer.h"

namespace trainer_test {

using namespace std::chrono_literals;
using engine::Record;
using engine::RunConfig;
using engine::StepMetrics;
using engine::Trainer;

inline RunConfig spirals(std::int64_t steps) {
  RunConfig c = test::small_run("fp32", "mlp", "spirals", steps, 32, 3);
  c.optimizer = "adam";
  c.lr = 0.01;
  c.backend = test::run_backend_name();  // ctest runs the trainer tests on the guarded backend too
  return c;
}

inline std::vector<StepMetrics> steps_of(Trainer& t, std::vector<Record>& all) {
  std::vector<StepMetrics> out;
  for (const Record& r : all)
    if (const auto* m = std::get_if<StepMetrics>(&r)) out.push_back(*m);
  return out;
}

inline std::int64_t count_steps(const std::vector<Record>& recs, int run) {
  std::int64_t n = 0;
  for (const Record& r : recs)
    if (const auto* m = std::get_if<StepMetrics>(&r); m && m->run_id == run) ++n;
  return n;
}

// Drains until `pred(all)` holds or the timeout passes.
template <class Pred>
bool drain_until(Trainer& t, std::vector<Record>& all, Pred pred, std::chrono::milliseconds timeout = 20000ms) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    t.drain(all);
    if (pred(all)) return true;
    std::this_thread::sleep_for(2ms);
  }
  t.drain(all);
  return pred(all);
}

// Whether the records hold a Paused status (the engine reached its step boundary).
inline bool has_paused_status(const std::vector<Record>& recs) {
  for (const Record& r : recs)
    if (const auto* s = std::get_if<engine::RunStatus>(&r); s && s->state == engine::RunState::Paused) return true;
  return false;
}

}  // namespace trainer_test
