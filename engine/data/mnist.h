// MNIST-format folders (Fashion-MNIST, MNIST, ...): four IDX files to a DatasetPair.
#pragma once

#include <string>

#include "data/dataset.h"

namespace engine {

struct MnistOptions {
  std::string name;          // Dataset::name
  int classes = 0;           // > 0: fixed class count (labels must be below it);
                             // 0: max training label + 1
  std::string install_hint;  // appended to "missing" errors, e.g. "install dataset-fashion-mnist"
};

// Reads <dir>/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]; the plain
// name wins when both exist. Pixels become x/255 normalised by the mean and
// std of the *training* pixels, computed exactly from a 256-bin histogram
// (Fashion-MNIST: mean 0.2860, std 0.3530); the test split uses the same
// constants, as torchvision's Normalize would. Any thread.
DatasetPair load_mnist_folder(const std::string& dir, const MnistOptions& opt);

}  // namespace engine
