// MNIST-format folders and Fashion-MNIST: shapes, normalisation, cross-file validation, timing.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "data/dataset.h"
#include "data/idx.h"
#include "data/mnist.h"
#include "engine/data/temp_dir.h"

namespace {

struct Folder {
  test::TempDir dir;
  std::vector<std::uint8_t> train_px, test_px, train_lb, test_lb;

  // 20 training and 6 test images of 4x3; training as gzip, test plain (a
  // folder may mix them).
  Folder() {
    for (int i = 0; i < 20 * 12; ++i) train_px.push_back(std::uint8_t((i * 37) % 256));
    for (int i = 0; i < 6 * 12; ++i) test_px.push_back(std::uint8_t((i * 11) % 256));
    for (int i = 0; i < 20; ++i) train_lb.push_back(std::uint8_t(i % 10));
    for (int i = 0; i < 6; ++i) test_lb.push_back(std::uint8_t(9 - i));
    write_all();
  }
  void write_all() {
    engine::write_idx(dir.file("train-images-idx3-ubyte.gz"), {20, 4, 3}, train_px, true);
    engine::write_idx(dir.file("train-labels-idx1-ubyte.gz"), {20}, train_lb, true);
    engine::write_idx(dir.file("t10k-images-idx3-ubyte"), {6, 4, 3}, test_px, false);
    engine::write_idx(dir.file("t10k-labels-idx1-ubyte"), {6}, test_lb, false);
  }
};

std::string load_error(const std::string& spec) {
  try {
    engine::load_dataset(spec, 1);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  ADD_FAILURE() << spec << ": load_dataset did not throw";
  return {};
}

TEST(MnistFolder, LoadsShapesLabelsAndNormalisesWithTrainingStatistics) {
  Folder f;
  const engine::DatasetPair p = engine::load_dataset(f.dir.path(), 7);
  const engine::Dataset& tr = p.train;
  EXPECT_EQ(tr.split, "train");
  EXPECT_EQ(p.test.split, "test");
  EXPECT_EQ(tr.count, 20u);
  EXPECT_EQ(p.test.count, 6u);
  EXPECT_TRUE(tr.shape.is_image());
  EXPECT_EQ(tr.shape.channels, 1u);
  EXPECT_EQ(tr.shape.height, 4u);
  EXPECT_EQ(tr.shape.width, 3u);
  EXPECT_EQ(tr.shape.features, 12u);
  EXPECT_EQ(tr.classes, 10);  // largest training label 9, + 1
  EXPECT_EQ(tr.output_width(), 10u);
  EXPECT_EQ(tr.target_width, 0u);
  ASSERT_EQ(tr.inputs.size(), 20u * 12u);
  ASSERT_EQ(p.test.inputs.size(), 6u * 12u);
  EXPECT_EQ(std::vector<std::int32_t>(tr.labels.begin(), tr.labels.end()),
            std::vector<std::int32_t>(f.train_lb.begin(), f.train_lb.end()));
  EXPECT_EQ(p.test.labels[0], 9);

  // Reference statistics of x/255 over the training pixels, in double.
  double sum = 0, sq = 0;
  for (auto v : f.train_px) sum += v / 255.0;
  const double mean = sum / f.train_px.size();
  for (auto v : f.train_px) sq += (v / 255.0 - mean) * (v / 255.0 - mean);
  const double sd = std::sqrt(sq / f.train_px.size());
  EXPECT_NEAR(tr.input_mean, mean, 1e-12);
  EXPECT_NEAR(tr.input_std, sd, 1e-12);
  for (std::size_t i = 0; i < f.train_px.size(); ++i) {
    ASSERT_NEAR(tr.inputs[i], (f.train_px[i] / 255.0 - mean) / sd, 1e-6) << i;
  }
  // The test split uses the training constants (not its own).
  EXPECT_EQ(p.test.input_mean, tr.input_mean);
  for (std::size_t i = 0; i < f.test_px.size(); ++i) {
    ASSERT_NEAR(p.test.inputs[i], (f.test_px[i] / 255.0 - mean) / sd, 1e-6) << i;
  }
}

TEST(MnistFolder, MissingFolderAndMissingFileNameThePath) {
  test::TempDir dir;
  const std::string gone = dir.file("no-such-folder");
  std::string msg = load_error(gone);
  EXPECT_EQ(msg.rfind(gone + ": ", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);

  Folder f;
  std::filesystem::remove(f.dir.file("t10k-labels-idx1-ubyte"));
  msg = load_error(f.dir.path());
  EXPECT_NE(msg.find(f.dir.file("t10k-labels-idx1-ubyte")), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
}

TEST(MnistFolder, FashionMnistMissingSaysWhatToInstall) {
  test::TempDir dir;
  engine::MnistOptions opt;
  opt.name = "fashion-mnist";
  opt.classes = 10;
  opt.install_hint = "install the Debian package dataset-fashion-mnist";
  const std::string gone = dir.file("fashion-mnist");
  try {
    engine::load_mnist_folder(gone, opt);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(gone + ": ", 0), 0u) << msg;
    EXPECT_NE(msg.find("dataset-fashion-mnist"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos);
  }
  std::filesystem::create_directory(gone);
  try {
    engine::load_mnist_folder(gone, opt);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(gone + "/train-images-idx3-ubyte"), std::string::npos) << msg;
    EXPECT_NE(msg.find("dataset-fashion-mnist"), std::string::npos) << msg;
  }
}

TEST(MnistFolder, LabelCountMismatchNamesTheLabelFile) {
  Folder f;
  f.train_lb.pop_back();
  engine::write_idx(f.dir.file("train-labels-idx1-ubyte.gz"), {19}, f.train_lb, true);
  const std::string msg = load_error(f.dir.path());
  const std::string labels = f.dir.file("train-labels-idx1-ubyte.gz");
  EXPECT_EQ(msg.rfind(labels + ": ", 0), 0u) << msg;
  EXPECT_NE(msg.find("19 labels for 20 images"), std::string::npos) << msg;
}

TEST(MnistFolder, LabelsMustBeBelowTheClassCount) {
  Folder f;
  engine::MnistOptions ten;
  ten.name = "fashion-mnist";
  ten.classes = 10;
  f.train_lb[5] = 10;
  f.write_all();
  try {
    engine::load_mnist_folder(f.dir.path(), ten);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(f.dir.file("train-labels-idx1-ubyte.gz") + ": ", 0), 0u) << msg;
    EXPECT_NE(msg.find("label 10 at index 5"), std::string::npos) << msg;
  }
  // Generic folder: classes come from the training labels; a test label
  // beyond them is an error naming the test label file.
  f.train_lb[5] = 5;
  f.test_lb[2] = 12;
  f.write_all();
  const std::string msg = load_error(f.dir.path());
  EXPECT_EQ(msg.rfind(f.dir.file("t10k-labels-idx1-ubyte") + ": ", 0), 0u) << msg;
  EXPECT_NE(msg.find("label 12"), std::string::npos) << msg;
}

TEST(MnistFolder, ImageSizeMismatchAndWrongRankNameTheFile) {
  Folder f;
  engine::write_idx(f.dir.file("t10k-images-idx3-ubyte"), {6, 3, 4}, f.test_px, false);
  std::string msg = load_error(f.dir.path());
  EXPECT_EQ(msg.rfind(f.dir.file("t10k-images-idx3-ubyte") + ": ", 0), 0u) << msg;
  EXPECT_NE(msg.find("3x4"), std::string::npos) << msg;

  Folder g;
  engine::write_idx(g.dir.file("train-images-idx3-ubyte.gz"), {20, 12}, g.train_px, true);
  msg = load_error(g.dir.path());
  EXPECT_EQ(msg.rfind(g.dir.file("train-images-idx3-ubyte.gz") + ": ", 0), 0u) << msg;
  EXPECT_NE(msg.find("expected 3 dimensions"), std::string::npos) << msg;
}

TEST(MnistFolder, CorruptFileInsideAFolderNamesThatFile) {
  Folder f;
  auto bytes = test::read_bytes(f.dir.file("t10k-images-idx3-ubyte"));
  bytes.resize(bytes.size() - 10);
  test::write_bytes(f.dir.file("t10k-images-idx3-ubyte"), bytes);
  const std::string msg = load_error(f.dir.path());
  EXPECT_EQ(msg.rfind(f.dir.file("t10k-images-idx3-ubyte") + ": truncated: expected 72 bytes of pixels, got 62", 0), 0u)
      << msg;
}

TEST(LoadDataset, UnknownNameIsAOneLineError) {
  const std::string msg = load_error("no-such-dataset-xyz");
  EXPECT_EQ(msg.rfind("no-such-dataset-xyz: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("fashion-mnist"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
}

TEST(FashionMnist, LoadsWithExpectedShapesCountsAndStatistics) {
  if (!std::filesystem::is_directory(engine::kFashionMnistDir)) {
    GTEST_SKIP() << engine::kFashionMnistDir << " not installed (Debian package dataset-fashion-mnist)";
  }
  const auto t0 = std::chrono::steady_clock::now();
  const engine::DatasetPair p = engine::load_dataset("fashion-mnist", 0);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ info     ] fashion-mnist loaded (60k + 10k decoded, normalised) in %.0f ms\n", ms);

  EXPECT_EQ(p.train.name, "fashion-mnist");
  EXPECT_EQ(p.train.count, 60000u);
  EXPECT_EQ(p.test.count, 10000u);
  EXPECT_EQ(p.train.shape.channels, 1u);
  EXPECT_EQ(p.train.shape.height, 28u);
  EXPECT_EQ(p.train.shape.width, 28u);
  EXPECT_EQ(p.train.shape.features, 784u);
  EXPECT_EQ(p.train.classes, 10);
  EXPECT_EQ(p.train.inputs.size(), 60000u * 784u);
  EXPECT_EQ(p.test.inputs.size(), 10000u * 784u);
  ASSERT_EQ(p.train.labels.size(), 60000u);
  // Fashion-MNIST is balanced: 6000 per class in train, 1000 in test.
  std::vector<int> per_class(10, 0);
  for (auto l : p.train.labels) {
    ASSERT_GE(l, 0);
    ASSERT_LT(l, 10);
    ++per_class[l];
  }
  for (int c : per_class) EXPECT_EQ(c, 6000);
  // Known statistics of the training pixels (x/255): mean 0.2860, std 0.3530.
  EXPECT_NEAR(p.train.input_mean, 0.2860, 5e-4);
  EXPECT_NEAR(p.train.input_std, 0.3530, 5e-4);
  double s = 0, sq = 0;
  for (float v : p.train.inputs) {
    s += v;
    sq += double(v) * v;
  }
  const double n = double(p.train.inputs.size());
  EXPECT_NEAR(s / n, 0.0, 1e-4);
  EXPECT_NEAR(std::sqrt(sq / n - (s / n) * (s / n)), 1.0, 1e-4);
}

}  // namespace
