// Applying precision to a model: each leaf's LayerPrecision and each
// parameter's master / weight / grad tensors.
#pragma once

#include <string>
#include <vector>

#include "numeric/precision.h"

namespace engine {

class Backend;
class DelayedScale;
class Layer;
class Tensor;
class Model;
struct Parameter;
struct Recipe;
struct UpdateEncode;

// Sets every leaf's precision from the recipe and lays out its parameters:
// with master weights, `master` holds FP32 values and `weight` a copy in the
// layer's compute format; without, `weight` (in the compute format) is the
// copy the optimizer updates. The values' source of truth is kept: master
// if present, else weight (decoded), so this can run mid-training (a
// precision change at a step boundary). Trainer thread only.
//
// FP8 compute (E4M3/E5M2) with master weights: a GEMM weight
// ("<layer>.weight") is stored as saturate(value * scale) with
// Parameter::weight_scale = scale, its amax history started from the
// weights' amax (recipe.fp8: history length, margin); the layer's other
// parameters are stored FP32. Each leaf's activation scaling restarts
// (Layer::set_delayed_scaling).
void apply_recipe(Backend& be, Model& model, const Recipe& recipe);
// The same layers' precisions and parameter layouts (formats, master copies,
// gradients) without their values: for a model built in a ShapeOnlyScope,
// whose tensors hold no memory (the layer catalog).
void apply_recipe_shapes(Model& model, const Recipe& recipe);
// Changes one leaf's precision the same way; throws std::invalid_argument
// naming the layer when no leaf has that name.
void apply_layer_precision(Backend& be, Model& model, const std::string& layer, const LayerPrecision& p,
                           bool master_weights, const DelayedScaling& scaling = {}, bool stochastic_grads = false);
// Block compute (MXFP8, MXFP6, MXFP4, NVFP4): the layer quantizes its GEMM
// weight from FP32 values every forward, so `weight` stays FP32 (the
// master's copy, or the optimizer's copy without master weights) and
// Parameter::quantized names the block format; the other parameters stay
// FP32 as well.
//
// Re-rounds `weight` from `master` after an optimizer step (layers with
// master weights only). FP8 weights are encoded with the scale their amax
// history gave before this refresh (delayed scaling), then the new weights'
// amax is recorded.
// `ws` is f32 scratch (FP8 weights are scaled through it).
void refresh_weights(Backend& be, Model& model, Tensor& ws);
// refresh_weights' encode of one parameter with master weights (the
// master's values into `weight`), for an optimizer to write as it updates
// the master (ParamSlot::encode): sets p.weight_scale as the refresh does.
// `scratch`: backend memory of at least the parameter's element count in
// floats, which an FP8 weight's encode may use.
UpdateEncode refresh_encode(Parameter& p, float* scratch);

// FP8 delayed scaling keeps each step's amaxes in backend memory until the
// step's one read records them: the model's delayed scales (layers' x, dy
// and weight scales, parameters' weight histories) with an amax pending.
std::vector<DelayedScale*> pending_amaxes(Model& model);
// Reads and records every pending amax (one download each): what a
// training step's read does, for code that refreshes weights outside one.
void record_pending_amaxes(Backend& be, Model& model);

}  // namespace engine
