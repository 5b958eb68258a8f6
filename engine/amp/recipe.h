// Recipes: named presets of every layer's precision plus master weights,
// loss scaling and optimizer state format (docs/numerics.md "Recipes").
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "amp/loss_scaler.h"
#include "numeric/precision.h"

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
  // FP8 per-tensor delayed scaling (layers whose compute or grad format is
  // E4M3/E5M2): Transformer Engine's DelayedScaling defaults.
  DelayedScaling fp8;
  // Block-scaled gradient formats: stochastic rounding of dy's elements
  // (NVFP4's recipe, as Transformer Engine does); the run setting
  // grad_rounding overrides it.
  bool stochastic_grads = false;
  // Per-layer overrides (the custom recipe, UI edits, and presets that pin
  // a kind of layer). A key is a leaf name ("block0.attn.softmax") or
  // "kind:" plus a leaf kind ("kind:layernorm": every LayerNorm leaf).
  // A leaf's name wins over its kind.
  std::map<std::string, LayerPrecision> overrides;

  LayerPrecision precision_for(const Layer& l) const;
};

// The prefix of override keys that address every leaf of one kind.
inline constexpr std::string_view kKindPrefix = "kind:";
// The kinds of leaf layers (Layer::kind() of every leaf the models build),
// for validating "kind:" keys.
const std::vector<std::string>& leaf_kinds();
// For a "kind:<k>" key: whether <k> is a known leaf kind (an unknown one
// would silently match nothing). Other keys (leaf names): true.
bool valid_override_key(std::string_view key);

// Why a layer cannot take a precision (empty when it can): element formats
// (FP6, FP4, E8M0) are no layer format; a block format is only the compute
// or grad format of a layer with a block GEMM path (linear, patch_embed,
// conv2d), and a block grad format needs a block compute format. E.g.
// "block0.attn.scores: MXFP8 is a block format: only linear, patch_embed and
// conv2d layers compute in one".
std::string precision_problem(const Layer& l, const LayerPrecision& p);
// Whether a leaf of this kind has a block-scaled GEMM path.
bool takes_block_formats(std::string_view kind);

// The preset names, in the order the UI lists them.
const std::vector<std::string>& recipe_names();
// Throws std::invalid_argument "unknown recipe 'x' (expected one of ...)".
Recipe make_recipe(std::string_view name);

}  // namespace engine
