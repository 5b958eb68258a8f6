// Building a RunConfig's model: the one place that reads model and widths.
#include "train/build_model.h"

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
  return build_model(c.model, sample, outputs);
}

std::unique_ptr<Model> build_model(const RunConfig& c) {
  const DataShape d = planned_data_shape(c.dataset);
  return build_model(c, d.sample, d.outputs);
}

}  // namespace engine
