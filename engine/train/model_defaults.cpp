// Per-model defaults: optimizer, shape, named sizes (train/model_defaults.h).
#include "train/model_defaults.h"

#include <stdexcept>

namespace engine {

OptimizerDefaults optimizer_defaults(const std::string& model) {
  if (model == "gpt") return {"adamw", kGptLearningRate};
  const RunConfig plain;
  return {plain.optimizer, plain.lr};
}

double default_learning_rate(const std::string& model, const std::string& optimizer) {
  if (model == "gpt" && (optimizer == "adamw" || optimizer == "adam")) return kGptLearningRate;
  return RunConfig{}.lr;
}

void apply_optimizer_defaults(RunConfig& c, bool optimizer_named, bool lr_named) {
  if (!optimizer_named) c.optimizer = optimizer_defaults(c.model).optimizer;
  if (!lr_named) c.lr = default_learning_rate(c.model, c.optimizer);
}

ModelShape default_shape(const std::string& model) {
  ModelShape s;
  if (model == "mlp") s.widths = {256, 128};
  else if (model == "cnn") s.channels = {32, 64};
  else if (model == "transformer") s.depth = kTransformerDepth, s.width = kTransformerWidth, s.heads = kTransformerHeads;
  else if (model == "gpt") s.depth = kGptDepth, s.width = kGptWidth, s.heads = kGptHeads, s.context = kGptContext;
  return s;
}

ModelShape model_shape(const RunConfig& c) {
  ModelShape s = default_shape(c.model);
  if (c.model == "mlp" && !c.widths.empty()) s.widths = c.widths;
  if (c.model == "cnn" && !c.channels.empty()) s.channels = c.channels;
  if (c.model == "transformer" || c.model == "gpt") {
    s.depth = c.depth.value_or(s.depth);
    s.width = c.width.value_or(s.width);
    s.heads = c.heads.value_or(s.heads);
  }
  if (c.model == "gpt") s.context = c.context;
  return s;
}

const std::vector<std::string>& size_names() {
  static const std::vector<std::string> names = {"default", "gpu"};
  return names;
}

SizedModel sized_model(const std::string& model, const std::string& size) {
  if (size == "default") return {default_shape(model), RunConfig{}.batch};
  if (size != "gpu") throw std::invalid_argument("'size' must be default or gpu (got '" + size + "')");
  SizedModel m;
  if (model == "mlp") m = {{{4096, 4096, 4096}, {}, 0, 0, 0, 0}, 1024};
  else if (model == "cnn") m = {{{}, {128, 256}, 0, 0, 0, 0}, 512};
  else if (model == "transformer") m = {{{}, {}, 8, 1024, 16, 0}, 512};
  else if (model == "gpt") m = {{{}, {}, 8, 768, 12, 256}, 64};
  else m = {default_shape(model), RunConfig{}.batch};
  return m;
}

void apply_size(RunConfig& c, const std::string& size, const std::set<std::string>& named, const std::string& origin) {
  SizedModel m;
  try {
    m = sized_model(c.model, size);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(origin + ": " + e.what());
  }
  const auto keep = [&named](const char* key) { return named.count(key) > 0; };
  const bool is_default = size == "default";
  if (!keep("batch")) c.batch = m.batch;
  if (c.model == "mlp" && !keep("widths")) c.widths = is_default ? std::vector<std::int64_t>{} : m.shape.widths;
  if (c.model == "cnn" && !keep("channels")) c.channels = is_default ? std::vector<std::int64_t>{} : m.shape.channels;
  if (c.model == "transformer" || c.model == "gpt") {
    if (!keep("depth") && !keep("layers")) c.depth = is_default ? std::nullopt : std::optional(m.shape.depth);
    if (!keep("width")) c.width = is_default ? std::nullopt : std::optional(m.shape.width);
    if (!keep("heads")) c.heads = is_default ? std::nullopt : std::optional(m.shape.heads);
  }
  if (c.model == "gpt" && !keep("context")) c.context = m.shape.context;
}

std::string size_of(const RunConfig& c) {
  const ModelShape s = model_shape(c);
  for (const std::string& size : size_names()) {
    const SizedModel m = sized_model(c.model, size);
    if (s == m.shape) return size;
  }
  return "";
}

}  // namespace engine
