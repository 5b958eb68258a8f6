// Layer catalog: builds the model of a config on a private CPU backend and
// reads each leaf's shapes, formats and bytes from the engine's own objects.
#include "train/layer_catalog.h"

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "amp/apply.h"
#include "amp/recipe.h"
#include "backend/backend.h"
#include "backend/registry.h"
#include "nn/block_gemm.h"
#include "nn/composite.h"
#include "nn/layer.h"
#include "nn/model.h"

namespace engine {

namespace {

std::int64_t numel(const Shape& s) {
  std::int64_t n = 1;
  for (std::int64_t d : s) n *= d;
  return n;
}

// Each leaf's output shape per sample, composites opened up (the same walk as
// Model::describe()).
std::map<std::string, Shape> leaf_outputs(Model& model) {
  std::map<std::string, Shape> out;
  Shape s = {1};
  s.insert(s.end(), model.sample_shape().begin(), model.sample_shape().end());
  for (const auto& owned : model.layers()) {
    Layer* top = owned.get();
    std::vector<std::pair<Layer*, Shape>> leaves;
    if (auto* c = dynamic_cast<CompositeLayer*>(top))
      c->leaf_shapes(s, leaves);
    else
      leaves.emplace_back(top, top->output_shape(s));
    for (auto& [leaf, shape] : leaves) out[leaf->name()] = Shape(shape.begin() + 1, shape.end());
    s = top->output_shape(s);
  }
  return out;
}

}  // namespace

namespace {

LayerCatalog build_catalog(const RunConfig& config) {
  LayerCatalog catalog;
  catalog.data = planned_data_shape(config.dataset, config.context);
  // A gpt reads windows of its context whatever the set (build_model).
  if (config.model == "gpt") catalog.data.sample = {config.context};
  // Shapes and formats only: no tensor of this model holds memory, so a
  // GPU-sized model is described as fast as a small one.
  const ShapeOnlyScope shapes_only;
  std::unique_ptr<Model> model = build_model(config, catalog.data.sample, catalog.data.outputs);

  Recipe recipe = make_recipe(config.recipe);
  std::map<std::string, LayerPrecision> plain;
  for (Layer* l : model->leaves()) plain[l->name()] = recipe.precision_for(*l);
  for (const auto& [name, p] : config.layers) recipe.overrides[name] = p;
  apply_recipe_shapes(*model, recipe);

  const std::map<std::string, Shape> outputs = leaf_outputs(*model);
  for (Layer* l : model->leaves()) {
    LayerInfo info;
    info.name = l->name();
    info.kind = l->kind();
    info.precision = l->precision();
    info.recipe_precision = plain[l->name()];
    if (auto it = outputs.find(l->name()); it != outputs.end()) info.output = it->second;
    const std::vector<Parameter*> params = l->parameters();
    if (!params.empty()) info.weight = params.front()->shape;
    for (Parameter* p : params) {
      info.parameters += p->numel();
      info.state_bytes += weight_device_bytes(*p) + static_cast<std::int64_t>(p->master.bytes());
    }
    if (!info.output.empty())
      info.activation_bytes =
          config.batch * numel(info.output) * static_cast<std::int64_t>(storage_bytes(info.precision.storage));
    catalog.layers.push_back(std::move(info));
  }
  return catalog;
}

}  // namespace

// The window asks for the same model's catalog several times in a row (the
// precision table, the setup panel's check, a run's start, each run of a
// lesson, each lesson opened again). Building a shape-only model is cheap,
// but not free (each layer's objects and names). The last answers are
// kept, keyed by the only fields a catalog reads (the data set, the model's
// shape: widths, channels, depth, width, heads, context, qk_norm; the
// recipe and the layer overrides) at a batch of one, written by to_json,
// which writes every shape field that differs from the model's default; a call's
// batch scales the activations on the way out.
LayerCatalog describe_layers(const RunConfig& config) {
  static std::mutex mutex;
  static std::deque<std::pair<std::string, LayerCatalog>> recent;
  constexpr std::size_t kKept = 32;
  RunConfig one;
  one.dataset = config.dataset;
  one.context = config.context;
  one.model = config.model;
  one.widths = config.widths;
  one.channels = config.channels;
  one.depth = config.depth;
  one.width = config.width;
  one.heads = config.heads;
  one.qk_norm = config.qk_norm;
  one.recipe = config.recipe;
  one.layers = config.layers;
  one.batch = 1;
  std::string key = to_json(one);
  const auto scaled = [&](LayerCatalog catalog) {
    for (LayerInfo& l : catalog.layers) l.activation_bytes *= config.batch;
    return catalog;
  };
  {
    const std::lock_guard<std::mutex> lock(mutex);
    for (const auto& [k, catalog] : recent)
      if (k == key) return scaled(catalog);
  }
  LayerCatalog catalog = build_catalog(one);
  {
    const std::lock_guard<std::mutex> lock(mutex);
    recent.emplace_front(std::move(key), catalog);
    if (recent.size() > kKept) recent.pop_back();
  }
  return scaled(std::move(catalog));
}

}  // namespace engine
