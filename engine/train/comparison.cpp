// Comparisons: one rule for which settings every recipe of a comparison shares.
#include "train/comparison.h"

#include <algorithm>
#include <stdexcept>

#include "amp/recipe.h"

namespace engine {

std::vector<ComparisonRun> comparison_runs(const RunConfig& base, const std::vector<std::string>& recipes) {
  std::vector<ComparisonRun> runs;
  for (const std::string& r : recipes) {
    ComparisonRun run;
    run.config = base;
    RunConfig& c = run.config;
    c.recipe = r;
    c.compare = recipes;
    c.loss_scale_set = false;
    c.loss_scale = LossScalerConfig{};
    if (base.loss_scale_set) {
      try {
        const LossScalerConfig own = make_recipe(r).scaling;
        if (own.mode != ScalingMode::None) {
          c.loss_scale = base.loss_scale;
          // "none" for a comparison means: keep each scaling recipe's own mode.
          if (c.loss_scale.mode == ScalingMode::None) c.loss_scale.mode = own.mode;
          c.loss_scale_set = true;
        }
      } catch (const std::invalid_argument&) {
        // An unknown recipe: validate() names it.
      }
    }
    const auto repeats = std::count(recipes.begin(), recipes.begin() + static_cast<std::ptrdiff_t>(runs.size()), r);
    run.name = repeats == 0 ? r : r + " (" + std::to_string(repeats + 1) + ")";
    runs.push_back(std::move(run));
  }
  return runs;
}

}  // namespace engine
