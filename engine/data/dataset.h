// Datasets in memory (plain structs) and load_dataset(), the one entry point by name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace engine {

// Shape of one sample. Images: channels x height x width (features is their
// product). Flat data (spirals, tiny-gradients): channels = height = width = 0
// and only `features` is set.
struct SampleShape {
  std::size_t channels = 0;
  std::size_t height = 0;
  std::size_t width = 0;
  std::size_t features = 0;  // floats per sample
  bool is_image() const { return channels != 0; }
};

// One split of a data set, fully decoded. Read-only once loaded, so any
// number of threads may read it.
struct Dataset {
  std::string name;     // "fashion-mnist", "spirals", "tiny-gradients", or the folder's name
  std::string split;    // "train" or "test"
  std::string source;   // folder the files came from, or "generated, seed N"
  SampleShape shape;
  std::size_t count = 0;          // samples
  int classes = 0;                // > 0: classification with `labels`; 0: regression with `targets`
  std::size_t target_width = 0;   // regression: floats per target; classification: 0
  std::vector<float> inputs;          // count x shape.features, row-major
  std::vector<std::int32_t> labels;   // classification: count values in [0, classes)
  std::vector<float> targets;         // regression: count x target_width, row-major
  // Images: inputs = (pixel/255 - input_mean) / input_std. Flat sets: raw
  // values (mean 0, std 1 recorded for display).
  double input_mean = 0.0;
  double input_std = 1.0;
  // Regression targets were multiplied by this (tiny-gradients: 2^-20).
  double target_scale = 1.0;
  // Token windows (text): sample i is inputs[i*P .. i*P + features) with
  // labels[i*P .. i*P + labels_per_sample), P the pitch. The defaults keep
  // every other set as it was (P = features, one label).
  std::size_t row_pitch = 0;         // floats between consecutive samples' starts in `inputs`; 0: shape.features
  std::size_t labels_per_sample = 1; // labels of one sample (text: T, one per position)
  std::size_t label_pitch = 0;       // int32s between consecutive samples' labels; 0: labels_per_sample
  std::vector<std::string> vocabulary; // text: UTF-8 of each token id; empty otherwise
  bool is_text() const { return !vocabulary.empty(); }

  bool is_classification() const { return classes > 0; }
  // Width of the model's output layer: logits per class, or target floats.
  std::size_t output_width() const {
    return is_classification() ? static_cast<std::size_t>(classes) : target_width;
  }
};

struct DatasetPair {
  Dataset train;
  Dataset test;
};

// Where `fashion-mnist` is read from (Debian's dataset-fashion-mnist).
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// spec: "fashion-mnist", "spirals", "tiny-gradients", or a folder holding
// MNIST-format IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte,
// t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, each optionally .gz).
// `seed` fixes the generated sets (the IDX sets ignore it). Bad input throws
// std::runtime_error with one line naming the file or folder and the problem.
// Any thread; returns a fresh pair (no shared state).
DatasetPair load_dataset(std::string_view spec, std::uint64_t seed);

// Sizes d.inputs to n floats (zero). A large set's memory is asked for in
// 2 MiB pages where the kernel offers them (Linux, madvise THP): a batch
// gathers rows scattered over the whole set, and with 4 KiB pages each row
// costs TLB misses that cost more than its copy.
void size_inputs(Dataset& d, std::size_t n);

// The names load_dataset() knows besides folders, for menus and --help.
std::vector<std::string> builtin_dataset_names();

}  // namespace engine
