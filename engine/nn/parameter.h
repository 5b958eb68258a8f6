// Parameter: one trainable tensor with its master copy, compute copy and gradient.
#pragma once

#include <cstdint>
#include <string>

#include "nn/fp8_scaling.h"
#include "tensor/tensor.h"

namespace engine {

// Roles, as in llm.c: `master` is FP32 and empty unless the recipe keeps
// master weights; `weight` is what the layer multiplies with, in the layer's
// compute format (FP32 in the fp32 recipe, FP16 in fp16 where it is also the
// copy the optimizer updates). `grad` has the format of the copy the
// optimizer updates (FP32 with master weights, else weight's format); its
// values were rounded to the layer's grad format as they left the GEMM.
//
// After the optimizer updates `master`, refresh_weights() (amp/apply.h)
// re-rounds `weight`.
struct Parameter {
  std::string name;   // "fc1.weight"
  Shape shape;
  bool decay = true;  // weight decay applies (not to biases and norms)
  Tensor master;
  Tensor weight;
  Tensor grad;
  // FP8 per-tensor scale: weight holds round(value * scale); 1 otherwise.
  float weight_scale = 1.0f;
  // FP8 GEMM weights with a master copy: the amax history of the weights
  // and the scale the next refresh encodes with (delayed scaling, see
  // nn/fp8_scaling.h). Inactive otherwise.
  DelayedScale weight_history;
  // A layer with a block compute format (MXFP8, MXFP6, MXFP4, NVFP4)
  // quantizes this GEMM weight from its FP32 `weight` every forward; the
  // memory accounting counts the quantized copies a device would hold.
  // FP32 otherwise.
  Format quantized = Format::FP32;
  // How Model::init draws it: by its name (PyTorch's layer defaults), or,
  // where a builder says so (the gpt, after nanoGPT), N(0, init_std) or zeros.
  enum class Init : std::uint8_t { ByName, Normal, Zero };
  Init init = Init::ByName;
  double init_std = 0.02;

  bool has_master() const { return !master.empty(); }
  // The copy the optimizer updates.
  Tensor& updated() { return has_master() ? master : weight; }
  std::int64_t numel() const { return shape_numel(shape); }
};

}  // namespace engine
