// Precision application: parameter layouts for a recipe or one layer's change.
#include "amp/apply.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string_view>

#include "nn/fp8_scaling.h"
#include "amp/recipe.h"
#include "backend/backend.h"
#include "backend/fused.h"
#include "nn/layer.h"
#include "nn/model.h"
#include "numeric/cast.h"

namespace engine {

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Encodes the master values times `scale` into the FP8 weight (saturating,
// as Transformer Engine casts; `ws` is f32 scratch the backend may use), and
// writes max|master| into `amax` (backend memory).
void encode_scaled(Backend& be, const Tensor& master, float scale, Tensor& weight, Tensor& ws, float* amax) {
  const std::int64_t n = master.numel();
  ws.resize(master.shape(), Format::FP32);
  CastOptions opt;
  opt.saturate = true;
  fused::scale_amax_encode(be, master.f32(), scale, weight.format(), weight.data(), n, opt, amax, ws.f32());
}

// TF32 weights are stored as FP32 values rounded to TF32. In an FP8 layer
// only the GEMM weight ("<layer>.weight") is an FP8 operand; its bias (and
// a patch embedding's position table) stays FP32, as in Transformer Engine.
Format stored_format(const Parameter& p, Format compute) {
  const bool gemm_weight = ends_with(p.name, ".weight");
  return (is_fp8(compute) && !gemm_weight) || is_block_format(compute) ? Format::FP32 : compute;
}
Format quantized_format(const Parameter& p, Format compute) {
  return is_block_format(compute) && ends_with(p.name, ".weight") ? compute : Format::FP32;
}

// Rebuilds one parameter's tensors for compute format `compute`.
void layout_parameter(Backend& be, Parameter& p, Format compute, bool master_weights, const DelayedScaling& scaling) {
  // Source of truth in FP32.
  Tensor truth;
  if (p.has_master()) {
    truth = std::move(p.master);
  } else if (p.weight.format() == Format::FP32) {
    truth = std::move(p.weight);
  } else {
    decode_to(be, p.weight, truth);
    if (p.weight_scale != 1.0f) be.scale(truth.f32(), 1.0f / p.weight_scale, truth.numel());
  }
  p.weight_scale = 1.0f;
  p.weight_history = DelayedScale();
  p.master = Tensor();
  p.weight = Tensor();
  const Format stored = stored_format(p, compute);
  p.quantized = quantized_format(p, compute);
  if (master_weights) {
    p.master = std::move(truth);
    if (is_fp8(stored)) {
      // Delayed scaling of the weight. The layout counts as step 0: its amax
      // starts the history, and the FP8 copy is encoded with the scale that
      // gives; from then on every refresh encodes with the scale of the
      // weights before it and records the new weights' amax.
      // (A layout is not a training step: reading the amax back is fine.)
      p.weight_history = DelayedScale(stored, scaling);
      float* slot = p.weight_history.amax_slot();
      be.amax(p.master.f32(), p.master.numel(), slot);
      float amax = 0.0f;
      be.download(&amax, slot, sizeof amax);
      p.weight_history.take_pending(amax);
      p.weight_scale = p.weight_history.scale();
      p.weight.resize(p.shape, stored);
      Tensor ws;
      // Writes the same amax into the slot again (not pending: recorded).
      encode_scaled(be, p.master, p.weight_scale, p.weight, ws, slot);
    } else {
      encode_to(be, p.master, stored, p.weight);
    }
    p.grad.resize(p.shape, Format::FP32);
  } else if (stored == Format::FP32) {
    p.weight = std::move(truth);
    p.grad.resize(p.shape, Format::FP32);
  } else {
    // No master copy: the low-precision weights are the only copy (the
    // fp16 recipe's lesson: updates below half an ulp vanish). FP8 weights
    // are then stored unscaled: the optimizer updates their values directly.
    encode_to(be, truth, stored, p.weight);
    p.grad.resize(p.shape, stored == Format::TF32 ? Format::FP32 : stored);
  }
  p.grad.zero();
}

void apply_to_leaf(Backend& be, Layer& leaf, const LayerPrecision& prec, bool master_weights, const DelayedScaling& scaling,
                   bool stochastic_grads) {
  leaf.set_precision(prec);
  leaf.stochastic_grads = stochastic_grads;
  leaf.set_delayed_scaling(scaling);
  for (Parameter* p : leaf.parameters()) layout_parameter(be, *p, prec.compute, master_weights, scaling);
}

}  // namespace

void apply_recipe_shapes(Model& model, const Recipe& recipe) {
  for (Layer* leaf : model.leaves()) {
    const LayerPrecision prec = recipe.precision_for(*leaf);
    leaf->set_precision(prec);
    for (Parameter* p : leaf->parameters()) {
      // layout_parameter's tensors, sized and not filled.
      const Format stored = stored_format(*p, prec.compute);
      p->quantized = quantized_format(*p, prec.compute);
      p->master = Tensor();
      p->weight = Tensor();
      p->grad = Tensor();
      if (recipe.master_weights) p->master.resize(p->shape, Format::FP32);
      p->weight.resize(p->shape, stored);
      p->grad.resize(p->shape, recipe.master_weights || stored == Format::TF32 ? Format::FP32 : stored);
    }
  }
}

void apply_recipe(Backend& be, Model& model, const Recipe& recipe) {
  for (Layer* leaf : model.leaves())
    apply_to_leaf(be, *leaf, recipe.precision_for(*leaf), recipe.master_weights, recipe.fp8, recipe.stochastic_grads);
}

void apply_layer_precision(Backend& be, Model& model, const std::string& layer, const LayerPrecision& p,
                           bool master_weights, const DelayedScaling& scaling, bool stochastic_grads) {
  Layer* leaf = model.find_leaf(layer);
  if (!leaf) throw std::invalid_argument("no layer named '" + layer + "' in the model");
  apply_to_leaf(be, *leaf, p, master_weights, scaling, stochastic_grads);
}

UpdateEncode refresh_encode(Parameter& p, float* scratch) {
  UpdateEncode e;
  e.format = p.weight.format();
  e.codes = p.weight.data();
  if (p.weight_history.active()) {
    // Delayed: encode with the scale of the earlier weights' amaxes;
    // these weights' amax is recorded with the next step's read, before
    // the next refresh uses the history.
    p.weight_scale = p.weight_history.scale();
    e.opt.saturate = true;
    e.scale = p.weight_scale;
    e.amax = p.weight_history.amax_slot();
    e.scratch = scratch;
  }
  return e;
}

void refresh_weights(Backend& be, Model& model, Tensor& ws) {
  for (Layer* leaf : model.leaves()) {
    for (Parameter* p : leaf->parameters()) {
      if (!p->has_master()) continue;
      float* scratch = nullptr;
      if (p->weight_history.active()) {
        ws.resize(p->master.shape(), Format::FP32);
        scratch = ws.f32();
      }
      fused::encode_updated(be, p->master.f32(), p->master.numel(), refresh_encode(*p, scratch));
    }
  }
}

std::vector<DelayedScale*> pending_amaxes(Model& model) {
  std::vector<DelayedScale*> out;
  for (Layer* l : model.leaves()) {
    for (DelayedScale* d : l->delayed_scales())
      if (d->pending()) out.push_back(d);
    for (Parameter* p : l->parameters())
      if (p->weight_history.pending()) out.push_back(&p->weight_history);
  }
  return out;
}

void record_pending_amaxes(Backend& be, Model& model) {
  for (DelayedScale* d : pending_amaxes(model)) {
    float a = 0.0f;
    be.download(&a, d->pending_slot(), sizeof a);
    d->take_pending(a);
  }
}

}  // namespace engine
