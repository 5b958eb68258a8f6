// Generated data sets: spirals and tiny-gradients, reproducible from the seed alone.
#include "data/synthetic.h"

#include <cmath>
#include <numbers>
#include <string>

#include "data/rng.h"

namespace engine {
namespace {

// Stream ids for derive_seed(): every split has its own generator, so the
// test split does not change when the training count does.
enum : std::uint64_t {
  kSpiralsTrain = 1,
  kSpiralsTest = 2,
  kTinyMatrix = 10,
  kTinyTrain = 11,
  kTinyTest = 12,
};

Dataset flat_dataset(const char* name, const char* split, std::uint64_t seed, std::size_t features,
                     std::size_t count) {
  Dataset d;
  d.name = name;
  d.split = split;
  d.source = "generated, seed " + std::to_string(seed);
  d.shape.features = features;
  d.count = count;
  d.inputs.resize(count * features);
  return d;
}

Dataset spirals_split(const char* split, std::uint64_t seed, std::uint64_t stream, std::size_t count) {
  // TensorFlow Playground (dataset.ts, classifySpiralData): radius
  // r = 5u, angle t = 1.75 * 2 pi u + delta, delta = 0 or pi per class,
  // point (r sin t, r cos t) plus uniform noise. The Playground spaces u on
  // a grid; here u ~ U(0,1) so train and test are different draws.
  constexpr double kNoise = 0.25;  // +-0.25 on the Playground's +-6 canvas: "a little"
  constexpr double kToUnit = 1.0 / 5.0;
  Dataset d = flat_dataset("spirals", split, seed, 2, count);
  d.classes = 2;
  d.labels.resize(count);
  SplitMix64 rng(derive_seed(seed, stream));
  for (std::size_t i = 0; i < count; ++i) {
    const int label = static_cast<int>(i % 2);
    const double u = rng.uniform01();
    const double r = 5.0 * u;
    const double t = 1.75 * 2.0 * std::numbers::pi * u + label * std::numbers::pi;
    const double nx = rng.uniform(-1.0, 1.0) * kNoise;
    const double ny = rng.uniform(-1.0, 1.0) * kNoise;
    d.inputs[2 * i] = static_cast<float>((r * std::sin(t) + nx) * kToUnit);
    d.inputs[2 * i + 1] = static_cast<float>((r * std::cos(t) + ny) * kToUnit);
    d.labels[i] = label;
  }
  return d;
}

// Why 2^-20 (the arithmetic the loss-scaling demonstration rests on):
//  * x_j ~ U(-1,1): E[x^2] = 1/3.  A_ij ~ U(-a,a) with a = 3/sqrt(32):
//    E[A^2] = a^2/3 = 3/32.  So z = A x has E[z_i^2] = 32 * 3/32 * 1/3 = 1:
//    unscaled targets are O(1).
//  * y = 2^-20 z, so |y| ~ 2^-20 ~ 9.5e-7.
//  * MSE with PyTorch's mean over a batch of 64 x 4 outputs = 256 elements:
//    L = (1/256) sum (yhat - y)^2, dL/dyhat = 2 (yhat - y) / 256 = 2^-7 (yhat - y).
//  * Once predictions are at the targets' scale (a zero-initialised output
//    layer from step 0, or any network after its O(1) output has decayed),
//    |yhat - y| ~ 2^-20 and |dL/dyhat| ~ 2^-27 ~ 7.5e-9, about 1e-8: below
//    FP16's smallest subnormal 2^-24 ~ 6.0e-8 (anything below 2^-25 rounds to
//    0), so FP16 gradients are zero and FP16 training stalls. The loss
//    itself, ~2^-40, is zero in FP16 too. Scaled by GradScaler's initial
//    2^16 the gradient is ~2^-11 ~ 4.9e-4, a normal FP16 number: loss
//    scaling brings the learning back. FP32 and BF16 (min normal 2^-126) are
//    unaffected.
Dataset tiny_split(const char* split, std::uint64_t seed, std::uint64_t stream, std::size_t count,
                   const std::vector<double>& a) {
  constexpr std::size_t kIn = kTinyGradientsInputs, kOut = kTinyGradientsOutputs;
  Dataset d = flat_dataset("tiny-gradients", split, seed, kIn, count);
  d.target_width = kOut;
  d.target_scale = kTinyGradientsTargetScale;
  d.targets.resize(count * kOut);
  SplitMix64 rng(derive_seed(seed, stream));
  double x[kIn];
  for (std::size_t i = 0; i < count; ++i) {
    for (std::size_t j = 0; j < kIn; ++j) {
      // Draw in double, store the float, and compute y from the stored float
      // so the target is exactly A applied to what the model sees.
      const float xf = static_cast<float>(rng.uniform(-1.0, 1.0));
      d.inputs[i * kIn + j] = xf;
      x[j] = xf;
    }
    for (std::size_t o = 0; o < kOut; ++o) {
      double z = 0.0;
      for (std::size_t j = 0; j < kIn; ++j) z += a[o * kIn + j] * x[j];
      d.targets[i * kOut + o] = static_cast<float>(kTinyGradientsTargetScale * z);
    }
  }
  return d;
}

}  // namespace

DatasetPair make_spirals(std::uint64_t seed, std::size_t train_count, std::size_t test_count) {
  return {spirals_split("train", seed, kSpiralsTrain, train_count),
          spirals_split("test", seed, kSpiralsTest, test_count)};
}

DatasetPair make_tiny_gradients(std::uint64_t seed, std::size_t train_count, std::size_t test_count) {
  constexpr std::size_t kIn = kTinyGradientsInputs, kOut = kTinyGradientsOutputs;
  const double bound = 3.0 / std::sqrt(double(kIn));  // E[A^2] = 3/32, see above
  std::vector<double> a(kOut * kIn);
  SplitMix64 rng(derive_seed(seed, kTinyMatrix));
  for (double& v : a) v = rng.uniform(-bound, bound);
  return {tiny_split("train", seed, kTinyTrain, train_count, a),
          tiny_split("test", seed, kTinyTest, test_count, a)};
}

}  // namespace engine
