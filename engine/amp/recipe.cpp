// Recipe presets, following PyTorch autocast's op lists.
#include "amp/recipe.h"

#include <cstring>
#include <stdexcept>

#include "nn/layer.h"

namespace engine {

LayerRole layer_role(const Layer& l) {
  if (l.is_matmul()) return LayerRole::Matmul;
  const char* k = l.kind();
  if (std::strcmp(k, "layernorm") == 0 || std::strcmp(k, "softmax") == 0) return LayerRole::Norm;
  return LayerRole::Elementwise;
}

LayerPrecision Recipe::precision_for(const Layer& l) const {
  if (auto it = overrides.find(l.name()); it != overrides.end()) return it->second;
  if (!overrides.empty()) {
    if (auto it = overrides.find(std::string(kKindPrefix) + l.kind()); it != overrides.end()) return it->second;
  }
  switch (layer_role(l)) {
    case LayerRole::Matmul: return matmul;
    case LayerRole::Norm: return norm;
    case LayerRole::Elementwise: return elementwise;
  }
  return matmul;
}

const std::vector<std::string>& leaf_kinds() {
  static const std::vector<std::string> kinds = {
      "linear", "conv2d", "patch_embed", "attention_scores", "attention_values", "layernorm", "softmax",
      "relu",   "gelu",   "maxpool2d",   "flatten",          "mean_pool",        "embedding",  "pos_embedding"};
  return kinds;
}

bool valid_override_key(std::string_view key) {
  if (!key.starts_with(kKindPrefix)) return true;
  const std::string_view kind = key.substr(kKindPrefix.size());
  for (const auto& k : leaf_kinds())
    if (k == kind) return true;
  return false;
}

bool takes_block_formats(std::string_view kind) {
  return kind == "linear" || kind == "patch_embed" || kind == "conv2d";
}

std::string precision_problem(const Layer& l, const LayerPrecision& p) {
  const std::string who = l.name() + ": ";
  for (Format f : {p.compute, p.storage, p.accumulate, p.grad}) {
    if (is_element_format(f))
      return who + format_name(f) + " is an element format of the block formats, not a layer format (use " +
             (f == Format::E8M0 ? std::string("MXFP8, MXFP6 or MXFP4") : std::string("a block format such as MXFP4 or NVFP4")) + ")";
  }
  for (Format f : {p.storage, p.accumulate}) {
    if (is_block_format(f))
      return who + format_name(f) + " is a block format: only a GEMM layer's compute and grad formats can be one";
  }
  if ((is_block_format(p.compute) || is_block_format(p.grad)) && !takes_block_formats(l.kind()))
    return who + format_name(is_block_format(p.compute) ? p.compute : p.grad) +
           " is a block format: only linear, patch_embed and conv2d layers compute in one (this is a " + l.kind() + ")";
  if (is_block_format(p.grad) && !is_block_format(p.compute))
    return who + "the grad format " + format_name(p.grad) + " is a block format, so the compute format must be one too (got " +
           format_name(p.compute) + ")";
  return {};
}

const std::vector<std::string>& recipe_names() {
  static const std::vector<std::string> names = {"fp32",  "fp16",  "mixed-fp16", "mixed-bf16", "fp8",
                                                  "mxfp8", "mxfp4", "nvfp4",      "custom"};
  return names;
}

namespace {
LayerPrecision all(Format f, Format acc = Format::FP32) { return {f, f, acc, f}; }

// As Transformer Engine, the attention's own GEMMs (q k^T, probs v) stay out
// of the FP8 and block recipes: BF16 operands, FP32 outputs. Its projections
// are Linear leaves and follow the recipe.
void attention_gemms_in_bf16(Recipe& r) {
  const LayerPrecision bf16_gemm{Format::BF16, Format::FP32, Format::FP32, Format::BF16};
  r.overrides[std::string(kKindPrefix) + "attention_scores"] = bf16_gemm;
  r.overrides[std::string(kKindPrefix) + "attention_values"] = bf16_gemm;
}
}  // namespace

Recipe make_recipe(std::string_view name) {
  Recipe r;
  r.name = std::string(name);
  const LayerPrecision fp32 = all(Format::FP32);
  if (name == "fp32" || name == "custom") {
    // custom starts from fp32; the per-layer table (overrides) changes it.
    r.matmul = r.norm = r.elementwise = fp32;
    r.master_weights = false;
    r.scaling.mode = ScalingMode::None;
  } else if (name == "fp16") {
    // A model cast with .half(): everything FP16, weights updated in FP16,
    // no master copy and no loss scaling. GEMMs still accumulate in FP32
    // (Tensor Core semantics); norms/softmax compute and store FP16.
    r.matmul = r.norm = r.elementwise = all(Format::FP16);
    r.master_weights = false;
    r.scaling.mode = ScalingMode::None;
    // The optimizer's state is FP16 too (a .half() model's momentum buffers
    // are FP16): weights, gradients and state take half of FP32's bytes.
    r.optimizer_state = Format::FP16;
  } else if (name == "mixed-fp16") {
    // torch.autocast(float16) + GradScaler: FP16 GEMMs with FP32 accumulate,
    // norms and softmax in FP32, FP32 master weights, dynamic loss scaling.
    r.matmul = all(Format::FP16);
    r.elementwise = all(Format::FP16);
    r.norm = fp32;
    r.master_weights = true;
    r.scaling.mode = ScalingMode::Dynamic;
  } else if (name == "mixed-bf16") {
    // BF16 has FP32's exponent range: no loss scaling needed.
    r.matmul = all(Format::BF16);
    r.elementwise = all(Format::BF16);
    r.norm = fp32;
    r.master_weights = true;
    r.scaling.mode = ScalingMode::None;
  } else if (name == "fp8") {
    // Transformer Engine style: E4M3 GEMM inputs forward, E5M2 gradients,
    // per-tensor delayed scaling (r.fp8), FP32 accumulate; GEMM outputs and
    // everything else stay FP32. Like TE, the attention's own GEMMs (q k^T
    // and probs v) stay out of FP8: BF16 operands, FP32 outputs; its
    // projections are Linear leaves and do run in FP8.
    r.matmul = {Format::E4M3, Format::FP32, Format::FP32, Format::E5M2};
    r.elementwise = fp32;
    r.norm = fp32;
    attention_gemms_in_bf16(r);
    r.master_weights = true;
    r.scaling.mode = ScalingMode::Dynamic;
  } else if (name == "mxfp8" || name == "mxfp4" || name == "nvfp4") {
    // Block-scaled GEMMs (numeric/block.h), Transformer Engine's choices
    // where it has them: every GEMM operand of Linear and PatchEmbed layers
    // (x and W forward; dy and W for dgrad; x and dy for wgrad) quantized
    // from the high-precision tensor along its GEMM's reduction dimension,
    // gradients included (TE's MXFP8BlockScaling uses E4M3 for every
    // tensor); FP32 accumulate; outputs, norms and elementwise layers FP32;
    // the attention's own GEMMs BF16 as in the fp8 recipe. The block scales
    // give each block of 32 (16) values its own range, so no loss scaling
    // is needed. NVFP4 rounds gradients stochastically (TE's default) and
    // quantizes weights in 16 x 16 tiles.
    const Format f = name == "mxfp8" ? Format::MXFP8 : name == "mxfp4" ? Format::MXFP4 : Format::NVFP4;
    r.matmul = {f, Format::FP32, Format::FP32, f};
    r.elementwise = fp32;
    r.norm = fp32;
    attention_gemms_in_bf16(r);
    r.master_weights = true;
    r.scaling.mode = ScalingMode::None;
    r.stochastic_grads = f == Format::NVFP4;
  } else {
    std::string list;
    for (const auto& n : recipe_names()) list += (list.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown recipe '" + std::string(name) + "' (expected one of " + list + ")");
  }
  return r;
}

}  // namespace engine
