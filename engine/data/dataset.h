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
  std::string name;     // "fashion-mnist", "spirals", "tiny-gradients", "jargon", or the folder's or file's name
  std::string split;    // "train" or "test" (text: the validation split)
  std::string source;   // folder or file the data came from, or "generated, seed N"
  SampleShape shape;
  std::size_t count = 0;          // samples
  int classes = 0;                // > 0: classification with `labels`; 0: regression with `targets`
  std::size_t target_width = 0;   // regression: floats per target; classification: 0
  std::vector<float> inputs;          // count x shape.features, row-major (text: the token stream)
  std::vector<std::int32_t> labels;   // classification: count values in [0, classes) (text: the next tokens)
  std::vector<float> targets;         // regression: count x target_width, row-major
  // Images: inputs = (pixel/255 - input_mean) / input_std. Flat sets: raw
  // values (mean 0, std 1 recorded for display).
  double input_mean = 0.0;
  double input_std = 1.0;
  // Regression targets were multiplied by this (tiny-gradients: 2^-20).
  double target_scale = 1.0;
  // Samples that overlap (text, data/text.h): sample i is inputs[i * row_pitch ..
  // + shape.features) with labels[i * label_pitch .. + labels_per_sample).
  // The defaults are the other sets' one row and one label per sample.
  std::size_t row_pitch = 0;          // floats between consecutive samples' starts; 0: shape.features
  std::size_t labels_per_sample = 1;  // text: one per position (the next token)
  std::size_t label_pitch = 0;        // int32s between consecutive samples' labels; 0: labels_per_sample
  std::vector<std::string> vocabulary;  // text: the UTF-8 of each token id; empty otherwise

  bool is_text() const { return !vocabulary.empty(); }
  std::size_t input_stride() const { return row_pitch ? row_pitch : shape.features; }
  std::size_t label_stride() const { return label_pitch ? label_pitch : labels_per_sample; }

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

// spec: "fashion-mnist", "spirals", "tiny-gradients", "jargon" (the Jargon
// File, Debian's jargon-text), "text:PATH" (any UTF-8 text file, plain or
// gzipped), or a folder holding MNIST-format IDX files
// (train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte,
// t10k-labels-idx1-ubyte, each optionally .gz). `seed` fixes the generated
// sets (the others ignore it); `context` is a text sample's window in tokens
// (the others ignore it; data/text.h). Bad input throws std::runtime_error
// with one line naming the file or folder and the problem.
// Any thread; returns a fresh pair (no shared state).
DatasetPair load_dataset(std::string_view spec, std::uint64_t seed, std::size_t context = 64);

// Sizes d.inputs to n floats (zero). A large set's memory is asked for in
// 2 MiB pages where the kernel offers them (Linux, madvise THP): a batch
// gathers rows scattered over the whole set, and with 4 KiB pages each row
// costs TLB misses that cost more than its copy.
void size_inputs(Dataset& d, std::size_t n);

// The names load_dataset() knows besides folders, for menus and --help.
std::vector<std::string> builtin_dataset_names();

}  // namespace engine
