// The optimizer defaults per model (train/model_defaults.h).
#include "train/model_defaults.h"

namespace engine {

OptimizerDefaults optimizer_defaults(const std::string& model) {
  if (model == "gpt") return {"adamw", kGptLearningRate};
  const RunConfig plain;
  return {plain.optimizer, plain.lr};
}

double default_learning_rate(const std::string& model, const std::string& optimizer) {
  if (model == "gpt" && (optimizer == "adamw" || optimizer == "adam")) return kGptLearningRate;
  return RunConfig{}.lr;
}

void apply_optimizer_defaults(RunConfig& c, bool optimizer_named, bool lr_named) {
  if (!optimizer_named) c.optimizer = optimizer_defaults(c.model).optimizer;
  if (!lr_named) c.lr = default_learning_rate(c.model, c.optimizer);
}

}  // namespace engine
