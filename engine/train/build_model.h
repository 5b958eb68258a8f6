// The model a RunConfig describes, built in one place for the run, its FP32
// shadow and the UI's precision table.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "nn/model.h"
#include "train/run_config.h"

namespace engine {

// The sample shape and output width of a data set as load_dataset() would
// give it, without loading it: spirals and tiny-gradients by their
// definitions, fashion-mnist and MNIST-format folders 1x28x28 images of 10
// classes, a text set ("jargon", "text:PATH") windows of `context` tokens
// over its vocabulary (plan_text_dataset: the file is read, no windows are
// built; the plan is remembered per spec, file size and modification time,
// since the setup panel asks at every change). Throws the text set's
// one-line errors.
struct DataShape {
  Shape sample;
  std::int64_t outputs = 0;
};
DataShape planned_data_shape(const std::string& dataset, std::int64_t context = 64);

// c.model for samples of `sample` shape and `outputs` outputs, in the shape
// c sets (model_defaults.h model_shape: the mlp's widths, the cnn's
// channels, the transformer's and the gpt's depth, width and heads), the
// model's defaults where it sets none.
// Untrained and in FP32 (no recipe applied). Throws std::runtime_error for
// an unknown model or a shape it cannot take.
std::unique_ptr<Model> build_model(const RunConfig& c, const Shape& sample, std::int64_t outputs);
// The same for c.dataset's planned shape (planned_data_shape).
std::unique_ptr<Model> build_model(const RunConfig& c);

}  // namespace engine
