// The optimizer a model trains with when the user names none: shared by the CLI and the app's setup panel.
#pragma once

#include <string>

#include "train/run_config.h"

namespace engine {

// The gpt's learning rate under AdamW (or Adam) when none is named:
// nanoGPT's for its small character models. Measured at the baby shape on
// jargon (fp32, batch 32, 300 steps, cosine to 0 without warm-up: what a
// first run in the app has time for), validation loss 2.621 nats against
// 2.736 at 2e-3 and 2.770 at 3e-3; the higher rates pay off only with a
// warm-up and longer runs (tests/bench/gpt_convergence.sh uses 3e-3).
inline constexpr double kGptLearningRate = 1e-3;

struct OptimizerDefaults {
  std::string optimizer;  // "sgd" or "adamw"
  double lr = 0.0;
};

// The mlp, the cnn and the transformer: RunConfig's own (SGD with momentum,
// lr 0.05). The gpt: AdamW at kGptLearningRate (SGD trains a transformer
// language model slowly and unevenly; every nanoGPT user starts from AdamW).
OptimizerDefaults optimizer_defaults(const std::string& model);

// The learning rate `optimizer` starts from on `model`: the gpt's under the
// Adam family, RunConfig's otherwise.
double default_learning_rate(const std::string& model, const std::string& optimizer);

// Fills in c.model's defaults for what the user did not name: the optimizer
// when !optimizer_named, then the learning rate (for the optimizer c now
// has) when !lr_named. What was named stays as it is.
void apply_optimizer_defaults(RunConfig& c, bool optimizer_named, bool lr_named);

}  // namespace engine
