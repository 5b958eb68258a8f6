// Recipes: named presets of every layer's precision plus master weights,
// loss scaling and optimizer state format (DESIGN.md "Precision recipes").
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "amp/loss_scaler.h"
#include "amp/precision.h"

namespace engine {

class Layer;
class Model;

// How autocast treats a layer: GEMM/conv layers go low precision;
// LayerNorm and softmax stay FP32 in mixed recipes; elementwise layers
// (ReLU, GELU, pooling, reshapes) follow their input.
enum class LayerRole : std::uint8_t { Matmul, Norm, Elementwise };
LayerRole layer_role(const Layer& l);

struct Recipe {
  std::string name;            // "fp32", "fp16", "mixed-fp16", "mixed-bf16", "fp8", "custom"
  LayerPrecision matmul;
  LayerPrecision norm;
  LayerPrecision elementwise;
  bool master_weights = false;
  LossScalerConfig scaling;
  Format optimizer_state = Format::FP32;
  // Per-layer overrides by leaf name (the custom recipe, and UI edits).
  std::map<std::string, LayerPrecision> overrides;

  LayerPrecision precision_for(const Layer& l) const;
};

// The preset names, in the order the UI lists them.
const std::vector<std::string>& recipe_names();
// Throws std::invalid_argument "unknown recipe 'x' (expected one of ...)".
Recipe make_recipe(std::string_view name);

}  // namespace engine
