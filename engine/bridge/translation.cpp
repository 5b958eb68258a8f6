// translate_recipe: each layer's precision as torch.autocast, FP32 islands or rounding, and the list of what has no PyTorch form.
#include "bridge/translation.h"

#include <stdexcept>

#include "amp/recipe.h"
#include "nn/layer.h"
#include "nn/model.h"
#include "nn/parameter.h"
#include "numeric/format.h"

namespace engine {

namespace {

bool is_autocast_format(Format f) { return f == Format::FP16 || f == Format::BF16; }
const char* torch_dtype(Format f) { return f == Format::FP16 ? "float16" : "bfloat16"; }

// Issues grouped by what they are, with the leaves they concern.
class Issues {
 public:
  void add(const std::string& what, const std::string& leaf = "") {
    auto it = m_index.find(what);
    if (it == m_index.end()) {
      it = m_index.emplace(what, m_items.size()).first;
      m_items.push_back({what, {}});
    }
    if (!leaf.empty()) m_items[it->second].second.push_back(leaf);
  }
  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    for (const auto& [what, leaves] : m_items) {
      std::string line = what;
      if (!leaves.empty()) {
        line += " (";
        for (std::size_t i = 0; i < leaves.size() && i < 6; ++i) line += (i ? ", " : "") + leaves[i];
        if (leaves.size() > 6) line += ", ... " + std::to_string(leaves.size()) + " layers in all";
        line += ")";
      }
      out.push_back(line);
    }
    return out;
  }

 private:
  std::vector<std::pair<std::string, std::vector<std::string>>> m_items;
  std::map<std::string, std::size_t> m_index;
};

std::string change_text(const LiveChange& c) {
  switch (c.kind) {
    case LiveChange::Kind::LayerPrecision:
      return std::string("precision of ") + c.layer + " set to compute " + format_key(c.precision.compute);
    case LiveChange::Kind::LossScaler: return std::string("loss scaler set to ") + scaling_mode_key(c.scaler.mode);
    case LiveChange::Kind::Inspect: return "";  // measures only; the training is the same
    case LiveChange::Kind::InjectFault: return "an injected inf/NaN" + (c.layer.empty() ? "" : " in " + c.layer);
  }
  return "a live change";
}

}  // namespace

Translation translate_recipe(const RunConfig& c, const std::vector<StampedChange>& changes, int run_id, Model& model) {
  Recipe r;
  try {
    r = make_recipe(c.recipe);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(std::string("'recipe': ") + e.what());
  }
  if (c.recipe == "fp8")
    throw std::runtime_error("recipe 'fp8' cannot be expressed in PyTorch: its GEMMs take E4M3 inputs and E5M2 "
                             "gradients with per-tensor delayed scaling (Transformer Engine's), for which "
                             "torch.autocast has no dtype");
  if (c.recipe == "mxfp8" || c.recipe == "mxfp4" || c.recipe == "nvfp4")
    throw std::runtime_error("recipe '" + c.recipe + "' cannot be expressed in PyTorch: its GEMMs take block-scaled " +
                             format_name(r.matmul.compute) + " operands, for which torch.autocast has no dtype");
  for (const auto& [name, p] : c.layers) r.overrides[name] = p;
  if (c.loss_scale_set) r.scaling = c.loss_scale;
  if (c.master_weights >= 0) r.master_weights = c.master_weights == 1;

  Translation t;
  Issues issues;
  // The autocast dtype: the low precision the matmul layers compute in.
  Format lowp = Format::FP32;
  if (is_autocast_format(r.matmul.compute)) lowp = r.matmul.compute;
  bool both = false;
  for (Layer* l : model.leaves()) {
    const Format f = r.precision_for(*l).compute;
    if (!is_autocast_format(f)) continue;
    if (lowp == Format::FP32) lowp = f;
    both = both || f != lowp;
  }
  if (lowp != Format::FP32) t.autocast = torch_dtype(lowp);
  if (both)
    issues.add(std::string("layers in both FP16 and BF16: autocast has one dtype; the script runs them all in ") +
               format_name(lowp));

  for (Layer* l : model.leaves()) {
    const LayerPrecision p = r.precision_for(*l);
    const std::string name = l->name();
    const LayerRole role = layer_role(*l);
    std::string mode = "fp32";
    if (p.compute == Format::FP32) {
      mode = "fp32";
    } else if (p.compute == Format::TF32) {
      mode = "fp32";
      t.tf32 = true;
      issues.add("TF32 compute: the script allows TF32 on CUDA (torch.backends.cuda.matmul.allow_tf32); a CPU "
                 "computes in FP32",
                 name);
    } else if (is_autocast_format(p.compute)) {
      mode = role == LayerRole::Elementwise ? "follow" : "lowp";
      if (role == LayerRole::Norm)
        issues.add(std::string("LayerNorm/softmax computing in ") + format_name(p.compute) +
                       ": torch.autocast runs layer_norm and softmax in FP32 on CUDA (an emulating CPU rounds their "
                       "inputs and outputs)",
                   name);
    } else {
      mode = lowp == Format::FP32 ? "fp32" : "lowp";
      issues.add(std::string(format_name(p.compute)) + " compute: torch.autocast has no such dtype; the script runs " +
                     (lowp == Format::FP32 ? std::string("FP32") : std::string(format_name(lowp))),
                 name);
    }
    if (is_autocast_format(p.compute) && p.accumulate != Format::FP32 && p.accumulate != Format::TF32)
      issues.add(std::string(format_name(p.accumulate)) +
                     " accumulation: PyTorch's kernels sum in FP32 (the lab rounds every partial sum)",
                 name);
    if (p.grad != p.compute && p.grad != Format::FP32 && !(p.compute == Format::FP32 && p.grad == Format::TF32))
      issues.add(std::string("gradients rounded to ") + format_name(p.grad) +
                     ": PyTorch's gradients take the forward's dtype",
                 name);
    if (!is_autocast_format(p.storage) && p.storage != Format::FP32 && p.storage != Format::TF32)
      issues.add(std::string("outputs stored in ") + format_name(p.storage) + ": no PyTorch dtype", name);
    t.precision.emplace_back(name, mode);
    for (Parameter* param : l->parameters()) {
      if (!param->decay) t.no_decay.push_back(param->name);
      if (r.master_weights) continue;
      if (is_autocast_format(p.compute)) {
        t.rounded_weights.push_back(param->name);
      } else if (p.compute != Format::FP32 && p.compute != Format::TF32) {
        throw std::runtime_error("recipe '" + c.recipe + "' cannot be expressed in PyTorch: " + name +
                                 " keeps its weights in " + format_name(p.compute) +
                                 " without an FP32 master copy, and PyTorch has no such dtype");
      }
    }
  }
  if (!r.master_weights && !t.rounded_weights.empty() && c.weight_rounding == "stochastic")
    issues.add("stochastic rounding of the weight updates: the script rounds to nearest (PyTorch has no stochastic "
               "rounding)");
  if (r.optimizer_state != Format::FP32)
    issues.add(std::string("optimizer state in ") + format_name(r.optimizer_state) +
               ": the script keeps it in FP32 (torch's optimizers keep it in the parameters' dtype)");
  t.scaling = r.scaling.mode;
  t.scaler = r.scaling;
  if (t.scaling == ScalingMode::Static)
    issues.add("static loss scaling: GradScaler has no fixed scale; the script's LabScaler keeps it fixed and skips "
               "non-finite steps");
  if (!c.spike.empty())
    issues.add("the activation spike '" + c.spike + "' (spike STEP:LAYER:VALUE): not injected");
  for (const StampedChange& s : changes) {
    if (s.run_id != run_id) continue;
    const std::string what = change_text(s.change);
    if (!what.empty())
      issues.add("live change after step " + std::to_string(s.after_step) + ", " + what +
                 ": not applied (the script keeps the starting recipe)");
  }
  t.untranslated = issues.lines();
  return t;
}

}  // namespace engine
