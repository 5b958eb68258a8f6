// MNIST-format folders: locate the four IDX files, validate them together, normalise pixels.
#include "data/mnist.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "data/idx.h"

namespace engine {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& where, const std::string& problem) {
  throw std::runtime_error(where + ": " + problem);
}

std::string with_hint(const std::string& msg, const MnistOptions& opt) {
  return opt.install_hint.empty() ? msg : msg + " (" + opt.install_hint + ")";
}

// The file for `base` in dir: plain name first, then base + ".gz".
std::string locate(const std::string& dir, const std::string& base, const MnistOptions& opt) {
  const fs::path plain = fs::path(dir) / base;
  std::error_code ec;
  if (fs::is_regular_file(plain, ec)) return plain.string();
  const fs::path gz = fs::path(dir) / (base + ".gz");
  if (fs::is_regular_file(gz, ec)) return gz.string();
  fail(plain.string() + "[.gz]", with_hint("missing", opt));
}

struct Split {
  std::string images_path, labels_path;
  IdxArray images, labels;
};

void check_shapes(const Split& s) {
  if (s.images.dims.size() != 3) {
    fail(s.images_path, "expected 3 dimensions (count, rows, columns) for images, got " +
                            std::to_string(s.images.dims.size()));
  }
  if (s.labels.dims.size() != 1) {
    fail(s.labels_path, "expected 1 dimension (count) for labels, got " +
                            std::to_string(s.labels.dims.size()));
  }
  if (s.labels.count() != s.images.count()) {
    fail(s.labels_path, std::to_string(s.labels.count()) + " labels for " +
                            std::to_string(s.images.count()) + " images in " + s.images_path);
  }
}

void check_labels(const Split& s, int classes, const char* why) {
  const auto it = std::max_element(s.labels.data.begin(), s.labels.data.end());
  if (it != s.labels.data.end() && *it >= classes) {
    fail(s.labels_path, "label " + std::to_string(*it) + " at index " +
                            std::to_string(it - s.labels.data.begin()) + " is not below " +
                            std::to_string(classes) + " classes" + why);
  }
}

Dataset to_dataset(Split& s, const MnistOptions& opt, const std::string& dir, const char* split,
                   int classes, const std::array<float, 256>& lut, double mean, double stddev) {
  Dataset d;
  d.name = opt.name;
  d.split = split;
  d.source = dir;
  d.shape.channels = 1;
  d.shape.height = s.images.dims[1];
  d.shape.width = s.images.dims[2];
  d.shape.features = d.shape.height * d.shape.width;
  d.count = s.images.count();
  d.classes = classes;
  d.input_mean = mean;
  d.input_std = stddev;

  const std::size_t n = s.images.data.size();
  size_inputs(d, n);
  const std::uint8_t* px = s.images.data.data();
  float* x = d.inputs.data();
  for (std::size_t i = 0; i < n; ++i) x[i] = lut[px[i]];
  s.images.data = {};  // release the bytes early (47 MB for Fashion-MNIST)

  d.labels.assign(s.labels.data.begin(), s.labels.data.end());
  return d;
}

}  // namespace

DatasetPair load_mnist_folder(const std::string& dir, const MnistOptions& opt) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail(dir, with_hint("dataset folder not found", opt));

  Split train, test;
  train.images_path = locate(dir, "train-images-idx3-ubyte", opt);
  train.labels_path = locate(dir, "train-labels-idx1-ubyte", opt);
  test.images_path = locate(dir, "t10k-images-idx3-ubyte", opt);
  test.labels_path = locate(dir, "t10k-labels-idx1-ubyte", opt);

  // Inflating the training images is most of the time; the other three files
  // are read on a second thread meanwhile (the machine has at least 2 cores;
  // this is a one-off at set-up, not the training loop's thread pool).
  std::exception_ptr side_error;
  std::thread side([&] {
    try {
      train.labels = read_idx(train.labels_path, "labels");
      test.images = read_idx(test.images_path, "pixels");
      test.labels = read_idx(test.labels_path, "labels");
    } catch (...) {
      side_error = std::current_exception();
    }
  });
  try {
    train.images = read_idx(train.images_path, "pixels");
  } catch (...) {
    side.join();
    throw;
  }
  side.join();
  if (side_error) std::rethrow_exception(side_error);

  check_shapes(train);
  check_shapes(test);
  if (test.images.dims[1] != train.images.dims[1] || test.images.dims[2] != train.images.dims[2]) {
    fail(test.images_path, "images are " + std::to_string(test.images.dims[1]) + "x" +
                               std::to_string(test.images.dims[2]) + " but the training images are " +
                               std::to_string(train.images.dims[1]) + "x" +
                               std::to_string(train.images.dims[2]));
  }

  int classes = opt.classes;
  if (classes > 0) {
    check_labels(train, classes, "");
  } else {
    const auto it = std::max_element(train.labels.data.begin(), train.labels.data.end());
    classes = std::max(2, int{*it} + 1);
  }
  check_labels(test, classes, opt.classes > 0 ? "" : " (the training labels define the classes)");

  // Mean and std of x/255 over every training pixel, exact: a 256-bin
  // histogram is an integer count, the moments follow in double.
  std::array<std::uint64_t, 256> hist[4] = {};
  const std::uint8_t* px = train.images.data.data();
  const std::size_t n = train.images.data.size();
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {  // four tables: no store-to-load chain on runs of equal pixels
    ++hist[0][px[i]];
    ++hist[1][px[i + 1]];
    ++hist[2][px[i + 2]];
    ++hist[3][px[i + 3]];
  }
  for (; i < n; ++i) ++hist[0][px[i]];
  double sum = 0.0, sum_sq = 0.0;
  for (int v = 0; v < 256; ++v) {
    const double c = double(hist[0][v] + hist[1][v] + hist[2][v] + hist[3][v]);
    const double x = v / 255.0;
    sum += c * x;
    sum_sq += c * x * x;
  }
  const double mean = sum / double(n);
  const double var = std::max(0.0, sum_sq / double(n) - mean * mean);
  const double stddev = var > 0.0 ? std::sqrt(var) : 1.0;  // a constant image set stays finite

  std::array<float, 256> lut;
  for (int v = 0; v < 256; ++v) lut[v] = static_cast<float>((v / 255.0 - mean) / stddev);

  DatasetPair out;
  out.train = to_dataset(train, opt, dir, "train", classes, lut, mean, stddev);
  out.test = to_dataset(test, opt, dir, "test", classes, lut, mean, stddev);
  return out;
}

}  // namespace engine
