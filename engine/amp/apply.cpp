// Precision application: parameter layouts for a recipe or one layer's change.
#include "amp/apply.h"

#include <cstring>
#include <stdexcept>

#include "amp/recipe.h"
#include "nn/layer.h"
#include "nn/model.h"
#include "numeric/cast.h"

namespace engine {

namespace {

// Rebuilds one parameter's tensors for compute format `compute`.
void layout_parameter(Parameter& p, Format compute, bool master_weights) {
  // Source of truth in FP32.
  Tensor truth;
  if (p.has_master()) {
    truth = std::move(p.master);
  } else if (p.weight.format() == Format::FP32) {
    truth = std::move(p.weight);
  } else {
    decode_to(p.weight, truth);
    if (p.weight_scale != 1.0f) {
      const float inv = 1.0f / p.weight_scale;
      float* v = truth.f32();
      for (std::int64_t i = 0; i < truth.numel(); ++i) v[i] *= inv;
    }
  }
  p.weight_scale = 1.0f;
  p.master = Tensor();
  p.weight = Tensor();
  // TF32 weights are stored as FP32 values rounded to TF32.
  const Format stored = compute;
  if (master_weights) {
    p.master = std::move(truth);
    encode_to(p.master, stored, p.weight);
    p.grad.resize(p.shape, Format::FP32);
  } else if (stored == Format::FP32) {
    p.weight = std::move(truth);
    p.grad.resize(p.shape, Format::FP32);
  } else {
    // No master copy: the low-precision weights are the only copy (the
    // fp16 recipe's lesson: updates below half an ulp vanish).
    encode_to(truth, stored, p.weight);
    p.grad.resize(p.shape, stored == Format::TF32 ? Format::FP32 : stored);
  }
  p.grad.zero();
}

void apply_to_leaf(Layer& leaf, const LayerPrecision& prec, bool master_weights) {
  leaf.set_precision(prec);
  for (Parameter* p : leaf.parameters()) layout_parameter(*p, prec.compute, master_weights);
}

}  // namespace

void apply_recipe(Model& model, const Recipe& recipe) {
  for (Layer* leaf : model.leaves()) apply_to_leaf(*leaf, recipe.precision_for(*leaf), recipe.master_weights);
}

void apply_layer_precision(Model& model, const std::string& layer, const LayerPrecision& p,
                           bool master_weights) {
  for (Layer* leaf : model.leaves()) {
    if (leaf->name() == layer) {
      apply_to_leaf(*leaf, p, master_weights);
      return;
    }
  }
  throw std::invalid_argument("no layer named '" + layer + "' in the model");
}

void refresh_weights(Model& model) {
  for (Layer* leaf : model.leaves()) {
    for (Parameter* p : leaf->parameters()) {
      if (!p->has_master()) continue;
      if (p->weight.format() == Format::FP32) {
        std::memcpy(p->weight.data(), p->master.data(), p->master.bytes());
      } else {
        cast_from_f32(p->weight.format(), p->master.f32(), p->weight.data(),
                      static_cast<std::size_t>(p->master.numel()));
      }
    }
  }
}

}  // namespace engine
