// Layer catalog: what a run config's model is made of, layer by layer, and the
// shape of its data set, without loading data or training (for tables and menus).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "numeric/precision.h"
#include "tensor/tensor.h"
#include "train/build_model.h"
#include "train/run_config.h"

namespace engine {

// One leaf of the model, as a run of `config` would build it.
struct LayerInfo {
  std::string name;                 // "fc1", "block1.attn.qkv"
  std::string kind;                 // "linear", "relu", ...
  Shape output;                     // per sample ("16x64" is {16, 64})
  Shape weight;                     // the first parameter's shape; empty without parameters
  std::int64_t parameters = 0;      // every parameter's elements
  LayerPrecision precision;         // the recipe with config.layers applied
  LayerPrecision recipe_precision;  // the recipe alone
  // Weights in their device storage plus the FP32 master copy, and one
  // batch of this layer's saved output in its storage format.
  std::int64_t state_bytes = 0;
  std::int64_t activation_bytes = 0;
};

struct LayerCatalog {
  DataShape data;  // planned_data_shape(config.dataset, config.context)
  std::vector<LayerInfo> layers;  // the model's leaves in order
};

// Builds `config`'s model in a ShapeOnlyScope (no tensor holds memory) and
// applies its recipe and layer overrides. Throws std::runtime_error with one
// line when the model cannot take the data set (a cnn on 2-D spirals) or the
// recipe is unknown. Any thread; a few milliseconds.
LayerCatalog describe_layers(const RunConfig& config);

}  // namespace engine
