// Layer rows: build_model + apply_recipe on the UI thread, then read each
// leaf's formats and the engine's own byte counts.
#include "panels/layer_rows.h"

#include <QStringList>

#include <sstream>
#include <stdexcept>

#include "amp/apply.h"
#include "backend/backend.h"
#include "backend/registry.h"
#include "amp/recipe.h"
#include "data/synthetic.h"
#include "nn/block_gemm.h"
#include "nn/layer.h"
#include "nn/model.h"

namespace {

// Sample shape and output width of a data set without loading it: the IDX
// sets (Fashion-MNIST, MNIST-format folders) are 1x28x28 images of 10 classes.
void dataShape(const std::string& dataset, engine::Shape& sample, std::int64_t& outputs) {
  if (dataset == "spirals") {
    sample = {2};
    outputs = 2;
  } else if (dataset == "tiny-gradients") {
    sample = {static_cast<std::int64_t>(engine::kTinyGradientsInputs)};
    outputs = static_cast<std::int64_t>(engine::kTinyGradientsOutputs);
  } else {
    sample = {1, 28, 28};
    outputs = 10;
  }
}

QString joinShape(const engine::Shape& s, const char* sep) {
  QStringList parts;
  for (std::int64_t d : s) parts << QString::number(d);
  return parts.join(QString::fromLatin1(sep));
}

std::int64_t product(const QString& shape) {
  std::int64_t n = 1;
  for (const QString& d : shape.split(QLatin1Char('x'))) n *= d.toLongLong();
  return n;
}

}  // namespace

QVector<PrecisionTableRow> layerRowsFor(const engine::RunConfig& config) {
  engine::Shape sample;
  std::int64_t outputs = 0;
  dataShape(config.dataset, sample, outputs);
  std::unique_ptr<engine::Model> model;
  if (config.model == "mlp" && !config.widths.empty())
    model = engine::build_mlp(sample, outputs, config.widths);
  else
    model = engine::build_model(config.model, sample, outputs);

  engine::Recipe recipe = engine::make_recipe(config.recipe);
  std::map<std::string, engine::LayerPrecision> plain;
  for (engine::Layer* l : model->leaves()) plain[l->name()] = recipe.precision_for(*l);
  for (const auto& [name, p] : config.layers) recipe.overrides[name] = p;
  // Host memory and a CPU backend of its own: this runs on the UI thread,
  // apart from any trainer.
  static const std::unique_ptr<engine::Backend> backend = engine::make_backend("cpu", 1).backend;
  engine::apply_recipe(*backend, *model, recipe);

  // describe(): "name kind shape params" per leaf; the shape is the
  // output per sample ("16x64").
  std::map<std::string, QString> outShape;
  std::istringstream lines(model->describe());
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string name, kind, shape;
    if (words >> name >> kind >> shape) outShape[name] = QString::fromStdString(shape);
  }

  QVector<PrecisionTableRow> rows;
  for (engine::Layer* l : model->leaves()) {
    PrecisionTableRow row;
    row.layer = QString::fromStdString(l->name());
    row.kind = QString::fromLatin1(l->kind());
    row.precision = l->precision();
    row.recipePrecision = plain[l->name()];
    std::int64_t bytes = 0;
    const std::vector<engine::Parameter*> params = l->parameters();
    for (engine::Parameter* p : params) {
      row.parameters += p->numel();
      bytes += engine::weight_device_bytes(*p) + static_cast<std::int64_t>(p->master.bytes());
    }
    const QString out = outShape.count(l->name()) ? outShape[l->name()] : QString();
    row.shape = params.empty() ? QStringLiteral("→ %1").arg(out) : joinShape(params.front()->shape, " x ");
    // Saved activations: the output of one batch in the storage format.
    if (!out.isEmpty())
      bytes += config.batch * product(out) * static_cast<std::int64_t>(engine::storage_bytes(row.precision.storage));
    row.memoryBytes = bytes;
    rows << row;
  }
  return rows;
}
