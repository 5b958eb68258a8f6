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

// A small gpt (width 32, 2 heads, windows of 16 tokens, `depth` blocks)
// trained by AdamW at a constant lr 3e-3: learns a short text in a few
// hundred steps.
inline engine::RunConfig small_gpt(const std::string& recipe, const std::string& dataset, std::int64_t steps,
                                   std::int64_t batch, std::uint64_t seed, std::int64_t depth) {
  engine::RunConfig c = small_run(recipe, "gpt", dataset, steps, batch, seed);
  c.depth = depth;
  c.width = 32;
  c.heads = 2;
  c.context = 16;
  c.optimizer = "adamw";
  c.lr = 3e-3;
  c.schedule = "constant";
  return c;
}

}  // namespace test
