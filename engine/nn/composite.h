// Composite layers (attention, transformer block): layers made of leaf layers.
#pragma once

#include <utility>
#include <vector>

#include "nn/layer.h"

namespace engine {

// A layer whose work is done by child layers. leaves() returns them (so the
// precision table, the non-finite attribution and the gradient statistics
// see each one); the composite's own precision() is unused.
class CompositeLayer : public Layer {
 public:
  using Layer::Layer;

  // Every leaf with its output shape for input shape `in`, in forward order
  // (Model::describe). Throws like output_shape() on a bad input.
  virtual void leaf_shapes(const Shape& in, std::vector<std::pair<Layer*, Shape>>& out) = 0;

  // Sets every leaf's precision (a recipe sets them one by one instead).
  void set_precision(const LayerPrecision& p) override {
    m_precision = p;
    for (Layer* l : leaves()) l->set_precision(p);
  }
};

}  // namespace engine
