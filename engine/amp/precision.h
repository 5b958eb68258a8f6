// LayerPrecision: the formats one layer computes, stores and accumulates in.
#pragma once

#include <string>

#include "numeric/format.h"

namespace engine {

// Per-layer precision (DESIGN.md "Precision recipes").
//  compute:    the format inputs and weights are rounded to before the op
//              (TF32/BF16/FP16/FP8 GEMM operands)
//  storage:    the format of the layer's outputs and saved activations
//  accumulate: the accumulation format of GEMMs and reductions: FP32, or the
//              compute format (rounded after every addition; a demonstration)
//  grad:       the format activation gradients (and weight gradients, as
//              they leave the GEMM) are rounded to in backward; FP8 recipes
//              use E5M2 here and E4M3 for compute
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

}  // namespace engine
