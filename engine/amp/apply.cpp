// Precision application: parameter layouts for a recipe or one layer's change.
#include "amp/apply.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string_view>

#include "amp/fp8_scaling.h"
#include "amp/recipe.h"
#include "nn/layer.h"
#include "nn/model.h"
#include "numeric/cast.h"

namespace engine {

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Encodes n master values times `scale` into the FP8 weight `dst`
// (saturating, as Transformer Engine casts), through a stack buffer so a
// refresh allocates nothing. Returns max|master| (the amax to record).
float encode_scaled(Format f, const float* master, float scale, void* dst, std::int64_t n) {
  constexpr std::int64_t kChunk = 1024;
  float buf[kChunk];
  CastOptions opt;
  opt.saturate = true;
  auto* d = static_cast<std::byte*>(dst);
  const std::size_t db = storage_bytes(f);
  for (std::int64_t i = 0; i < n; i += kChunk) {
    const std::int64_t m = std::min(kChunk, n - i);
    for (std::int64_t j = 0; j < m; ++j) buf[j] = master[i + j] * scale;
    cast_from_f32(f, buf, d + static_cast<std::size_t>(i) * db, static_cast<std::size_t>(m), opt);
  }
  return amax_of(master, n);
}

// Rebuilds one parameter's tensors for compute format `compute`.
void layout_parameter(Parameter& p, Format compute, bool master_weights, const DelayedScaling& scaling) {
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
  p.weight_history = DelayedScale();
  p.master = Tensor();
  p.weight = Tensor();
  // TF32 weights are stored as FP32 values rounded to TF32. In an FP8 layer
  // only the GEMM weight ("<layer>.weight") is an FP8 operand; its bias (and
  // a patch embedding's position table) stays FP32, as in Transformer Engine.
  const bool gemm_weight = ends_with(p.name, ".weight");
  const bool block = is_block_format(compute);
  const Format stored = (is_fp8(compute) && !gemm_weight) || block ? Format::FP32 : compute;
  p.quantized = block && gemm_weight ? compute : Format::FP32;
  if (master_weights) {
    p.master = std::move(truth);
    if (is_fp8(stored)) {
      // Delayed scaling of the weight. The layout counts as step 0: its amax
      // starts the history, and the FP8 copy is encoded with the scale that
      // gives; from then on every refresh encodes with the scale of the
      // weights before it and records the new weights' amax.
      p.weight_history = DelayedScale(stored, scaling);
      p.weight_history.record(amax_of(p.master.f32(), p.master.numel()));
      p.weight_scale = p.weight_history.scale();
      p.weight.resize(p.shape, stored);
      encode_scaled(stored, p.master.f32(), p.weight_scale, p.weight.data(), p.master.numel());
    } else {
      encode_to(p.master, stored, p.weight);
    }
    p.grad.resize(p.shape, Format::FP32);
  } else if (stored == Format::FP32) {
    p.weight = std::move(truth);
    p.grad.resize(p.shape, Format::FP32);
  } else {
    // No master copy: the low-precision weights are the only copy (the
    // fp16 recipe's lesson: updates below half an ulp vanish). FP8 weights
    // are then stored unscaled: the optimizer updates their values directly.
    encode_to(truth, stored, p.weight);
    p.grad.resize(p.shape, stored == Format::TF32 ? Format::FP32 : stored);
  }
  p.grad.zero();
}

void apply_to_leaf(Layer& leaf, const LayerPrecision& prec, bool master_weights, const DelayedScaling& scaling,
                   bool stochastic_grads) {
  leaf.set_precision(prec);
  leaf.stochastic_grads = stochastic_grads;
  leaf.set_delayed_scaling(scaling);
  for (Parameter* p : leaf.parameters()) layout_parameter(*p, prec.compute, master_weights, scaling);
}

}  // namespace

void apply_recipe(Model& model, const Recipe& recipe) {
  for (Layer* leaf : model.leaves())
    apply_to_leaf(*leaf, recipe.precision_for(*leaf), recipe.master_weights, recipe.fp8, recipe.stochastic_grads);
}

void apply_layer_precision(Model& model, const std::string& layer, const LayerPrecision& p,
                           bool master_weights, const DelayedScaling& scaling, bool stochastic_grads) {
  for (Layer* leaf : model.leaves()) {
    if (leaf->name() == layer) {
      apply_to_leaf(*leaf, p, master_weights, scaling, stochastic_grads);
      return;
    }
  }
  throw std::invalid_argument("no layer named '" + layer + "' in the model");
}

void refresh_weights(Model& model) {
  for (Layer* leaf : model.leaves()) {
    for (Parameter* p : leaf->parameters()) {
      if (!p->has_master()) continue;
      const auto n = static_cast<std::size_t>(p->master.numel());
      if (p->weight.format() == Format::FP32) {
        std::memcpy(p->weight.data(), p->master.data(), p->master.bytes());
      } else if (p->weight_history.active()) {
        // Delayed: encode with the scale of the earlier weights' amaxes,
        // then record these weights' amax for the next refresh.
        p->weight_scale = p->weight_history.scale();
        p->weight_history.record(
            encode_scaled(p->weight.format(), p->master.f32(), p->weight_scale, p->weight.data(), p->master.numel()));
      } else {
        cast_from_f32(p->weight.format(), p->master.f32(), p->weight.data(), n);
      }
    }
  }
}

}  // namespace engine
