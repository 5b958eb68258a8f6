// RunConfig builders shared by the engine tests.
#pragma once

#include <cstdint>
#include <string>

#include "train/run_config.h"

namespace test {

// A short run that a test steps itself: `steps` steps of `batch` samples,
// one thread, no gradient statistics (a test that wants them sets
// stats_every), evaluation once per epoch, and the RunConfig defaults for
// everything else (sgd, lr 0.05, cosine schedule).
inline engine::RunConfig small_run(const std::string& recipe, const std::string& model, const std::string& dataset,
                                   std::int64_t steps, std::int64_t batch, std::uint64_t seed) {
  engine::RunConfig c;
  c.recipe = recipe;
  c.model = model;
  c.dataset = dataset;
  c.steps = steps;
  c.batch = batch;
  c.seed = seed;
  c.eval_every = 0;
  c.stats_every = 0;
  c.threads = 1;
  return c;
}

}  // namespace test
