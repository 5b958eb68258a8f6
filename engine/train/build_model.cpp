// Building a RunConfig's model: the one place that reads model and widths.
#include "train/build_model.h"

#include <stdexcept>
#include <string>

#include "data/synthetic.h"

namespace engine {

DataShape planned_data_shape(const std::string& dataset) {
  if (dataset == "spirals") return {{2}, 2};
  if (dataset == "tiny-gradients")
    return {{static_cast<std::int64_t>(kTinyGradientsInputs)}, static_cast<std::int64_t>(kTinyGradientsOutputs)};
  return {{1, 28, 28}, 10};
}

std::unique_ptr<Model> build_model(const RunConfig& c, const Shape& sample, std::int64_t outputs) {
  if (c.model == "mlp" && !c.widths.empty()) return build_mlp(sample, outputs, c.widths);
  if (c.model == "gpt") {
    // Token windows of c.context ids; outputs: the vocabulary.
    if (sample.size() != 1 || sample[0] != c.context)
      throw std::runtime_error("gpt: needs token windows of context " + std::to_string(c.context) + " (the data gives " +
                               shape_string(sample) + ")");
    return build_gpt(outputs, GptShape{c.depth, c.width, c.heads, c.context, c.qk_norm});
  }
  return build_model(c.model, sample, outputs);
}

std::unique_ptr<Model> build_model(const RunConfig& c) {
  const DataShape d = planned_data_shape(c.dataset);
  // A gpt reads windows of c.context tokens whatever the set's planned
  // sample; its outputs are the planned vocabulary.
  if (c.model == "gpt") return build_model(c, {c.context}, d.outputs);
  return build_model(c, d.sample, d.outputs);
}

}  // namespace engine
