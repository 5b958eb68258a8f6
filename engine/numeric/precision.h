// LayerPrecision: the formats one layer computes, stores and accumulates in.
#pragma once

#include <string>

#include "numeric/format.h"

namespace engine {

// Per-layer precision (docs/numerics.md "Recipes").
//  compute:    the format inputs and weights are rounded to before the op
//              (TF32/BF16/FP16/FP8 GEMM operands)
//  storage:    the format of the layer's outputs and saved activations
//  accumulate: the accumulation format of GEMMs and reductions: FP32, or the
//              compute format (rounded after every addition; a demonstration)
//  grad:       the format activation gradients (and weight gradients, as
//              they leave the GEMM) are rounded to in backward; FP8 recipes
//              use E5M2 here and E4M3 for compute
//
// FP8 (E4M3/E5M2) as compute or grad format of a GEMM layer (Linear,
// Conv2d, PatchEmbed) means per-tensor delayed scaling of its GEMM
// operands (nn/fp8_scaling.h): x and the weight are cast as
// saturate(value * scale) to `compute`, dy to `grad`, and the GEMM result
// is multiplied by 1/(scale_a * scale_b). Biases and position embeddings
// of such a layer are not GEMM operands: they stay FP32, as Transformer
// Engine keeps them in the parameters' own precision. With an FP8 grad
// format the parameter gradients leave the GEMM in FP32 (TE's wgrad into an
// FP32 main_grad); dx is still rounded to `grad`, unscaled, as it crosses
// to the previous layer (whose own delayed scale then rescales it).
struct LayerPrecision {
  Format compute = Format::FP32;
  Format storage = Format::FP32;
  Format accumulate = Format::FP32;
  Format grad = Format::FP32;

  bool operator==(const LayerPrecision&) const = default;
  bool is_fp32() const {
    return compute == Format::FP32 && storage == Format::FP32 && accumulate == Format::FP32 &&
           grad == Format::FP32;
  }
};

// Transformer Engine's DelayedScaling parameters (recipe.py), with its
// defaults: the amax of the last amax_history_len steps decides the scale,
// scale = fp8_max / amax / 2^margin.
struct DelayedScaling {
  int amax_history_len = 1024;
  int margin = 0;
  // false: no per-tensor scaling at all (scale stays 1: a plain saturating
  // FP8 cast) — the lesson of why FP8 needs it. The run setting fp8_scaling.
  bool enabled = true;

  bool operator==(const DelayedScaling&) const = default;
};

}  // namespace engine
