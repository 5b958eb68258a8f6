// Comparisons: the run configs of recipes side by side, built one way for the CLI and the app.
#pragma once

#include <string>
#include <vector>

#include "train/run_config.h"

namespace engine {

struct ComparisonRun {
  std::string name;  // the recipe; "fp16 (2)" when a recipe repeats
  RunConfig config;
};

// One run per recipe, in order, each `base` with its recipe set: the same
// seed, data, model and initial weights, so differences come from precision
// alone. Each recipe keeps its own loss-scaling rule: the base's loss-scaler
// settings (mode, initial scale, growth, backoff, interval) apply only to
// recipes that scale the loss (mixed-fp16, fp8); fp32, fp16 and mixed-bf16
// stay unscaled. `compare` of every config lists all the recipes. The
// base's per-layer overrides (`layers`) apply to every run. Any thread.
// An unknown recipe is passed through for validate() to name.
std::vector<ComparisonRun> comparison_runs(const RunConfig& base, const std::vector<std::string>& recipes);

}  // namespace engine
