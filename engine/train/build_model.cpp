// Building a RunConfig's model: the one place that reads the model and its shape.
#include "train/build_model.h"

#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>

#include "data/synthetic.h"
#include "data/text.h"
#include "train/model_defaults.h"

namespace engine {

namespace {

// plan_text_dataset reads (and for jargon gunzips and cleans) the whole
// file; the layer catalog asks for the plan at every change in the setup
// panel, so a plan is kept while the file's size and time stay the same.
TextPlan remembered_text_plan(const std::string& spec) {
  const std::string path = spec.rfind("text:", 0) == 0 ? spec.substr(5) : std::string(kJargonPath);
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  const auto time = std::filesystem::last_write_time(path, ec);
  if (ec) return plan_text_dataset(spec);  // its own one-line error
  using Key = std::tuple<std::string, std::uintmax_t, std::filesystem::file_time_type>;
  static std::mutex mutex;
  static std::map<Key, TextPlan> plans;
  const Key key{spec, size, time};
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (auto it = plans.find(key); it != plans.end()) return it->second;
  }
  const TextPlan plan = plan_text_dataset(spec);
  const std::lock_guard<std::mutex> lock(mutex);
  plans[key] = plan;
  return plan;
}

}  // namespace

DataShape planned_data_shape(const std::string& dataset, std::int64_t context) {
  if (is_text_spec(dataset))
    return {{context}, static_cast<std::int64_t>(remembered_text_plan(dataset).vocabulary)};
  if (dataset == "spirals") return {{2}, 2};
  if (dataset == "tiny-gradients")
    return {{static_cast<std::int64_t>(kTinyGradientsInputs)}, static_cast<std::int64_t>(kTinyGradientsOutputs)};
  return {{1, 28, 28}, 10};
}

std::unique_ptr<Model> build_model(const RunConfig& c, const Shape& sample, std::int64_t outputs) {
  if (c.model == "mlp" && !c.widths.empty()) return build_mlp(sample, outputs, c.widths);
  if (c.model == "cnn" && !c.channels.empty()) return build_cnn(sample, outputs, c.channels);
  if (c.model == "transformer") {
    const ModelShape s = model_shape(c);
    return build_transformer(sample, outputs, s.width, s.heads, s.depth);
  }
  if (c.model == "gpt") {
    // Token windows of c.context ids; outputs: the vocabulary.
    if (sample.size() != 1 || sample[0] != c.context)
      throw std::runtime_error("gpt: needs token windows of context " + std::to_string(c.context) + " (the data gives " +
                               shape_string(sample) + ")");
    const ModelShape s = model_shape(c);
    return build_gpt(outputs, GptShape{s.depth, s.width, s.heads, c.context, c.qk_norm});
  }
  return build_model(c.model, sample, outputs);
}

std::unique_ptr<Model> build_model(const RunConfig& c) {
  const DataShape d = planned_data_shape(c.dataset, c.context);
  // A gpt reads windows of c.context tokens whatever the set's planned
  // sample; its outputs are the planned vocabulary (a text set's).
  if (c.model == "gpt") return build_model(c, {c.context}, d.outputs);
  return build_model(c, d.sample, d.outputs);
}

}  // namespace engine
