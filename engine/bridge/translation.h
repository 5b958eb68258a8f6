// The recipe in PyTorch's terms: per layer how the exported script runs it, and what does not translate.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "amp/loss_scaler.h"
#include "train/commands.h"
#include "train/run_config.h"

namespace engine {

class Model;

struct Translation {
  std::string autocast = "none";  // the script's AUTOCAST: "none", "float16" or "bfloat16"
  // Per leaf (the lab's names, forward order): "fp32" (outside autocast,
  // FP32 inputs), "lowp" (the autocast dtype) or "follow" (its input's dtype).
  std::vector<std::pair<std::string, std::string>> precision;
  // Parameters kept in the autocast dtype without an FP32 master copy: the
  // script rounds them after every update.
  std::vector<std::string> rounded_weights;
  std::vector<std::string> no_decay;  // parameters without weight decay
  ScalingMode scaling = ScalingMode::None;
  LossScalerConfig scaler;
  bool tf32 = false;  // some layer computes in TF32
  std::vector<std::string> untranslated;
};

// Translates run `run_id` of `config` on `model` (built from the config).
// Throws std::runtime_error (one line) for a recipe that cannot be
// expressed (pytorch_export.h untranslated_parts).
Translation translate_recipe(const RunConfig& config, const std::vector<StampedChange>& changes, int run_id,
                             Model& model);

}  // namespace engine
