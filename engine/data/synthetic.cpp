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
  size_inputs(d, count * features);
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

// The arithmetic the loss-scaling demonstration rests on (default batch
// B = 128, k = 128 outputs, a zero-initialised output layer: Run starts
// regression heads at zero, Model::init(seed, zero_head)):
//  * x_j ~ U(-8, 8): E[x^2] = 64/3.  A_ij ~ U(-a, a) with a = 3/(8 sqrt(4))
//    = 3/16: E[A^2] = a^2/3 = 3/256.  So z = A x has E[z_i^2] = 4 * 3/256 *
//    64/3 = 1, and |z_i| <= 4 * a * 8 = 6.
//  * y = 2^-14 z: |y| ~ 2^-14 ~ 6.1e-5, FP16's smallest normal. Targets and
//    predictions are FP16 numbers with about FP16's own precision (below
//    2^-14 the subnormal spacing 2^-24 is still 2^-10 of the typical
//    target), so a model that keeps its activations in FP16 can fit them.
//  * MSE with PyTorch's mean over B x k = 2^14 elements:
//    L = 2^-14 sum (yhat - y)^2, dL/dyhat = 2 (yhat - y) / 2^14 = 2^-13 (yhat - y).
//  * At step 1 yhat = 0, so dL/dyhat = -2^-13 2^-14 z = -2^-27 z. For
//    |z| <= 4 (all but the far tail of E[z^2] = 1) that is at most 2^-25,
//    half FP16's smallest subnormal 2^-24, which rounds to 0 (the tie goes
//    to the even 0). The fp16 recipe rounds dL/dyhat to FP16 in the output
//    layer's backward: it is zero, every weight gradient is zero, and the
//    model stays at 0 with the loss at E[y^2] = 2^-28 ~ 3.7e-9. GradScaler's
//    initial 2^16 makes it -2^-11 z, a normal FP16 number for |z| >= 2^-3:
//    mixed-fp16 learns as FP32 does. FP32 and BF16 (smallest normal 2^-126)
//    are unaffected. (The loss itself, ~2^-28, would be zero in FP16 too;
//    the engine computes it in FP32/double.)
//  * Why B k = 2^14: the flush needs 2 s |z| / (B k) <= 2^-25 for residuals
//    of the targets' size, i.e. B k >= 2^26 s |z| = 2^14 for |z| up to 4.
//    B k = 4096 (32 outputs) would put the threshold at |z| = 1 and let a
//    third of the gradients through, rounded up to 2^-24: fp16 then learns
//    most of the way (measured: its loss fell to 11% of the start).
//  * Why 4 wide inputs: every gradient below the output layer carries that
//    layer's weights, which are ~2^-14 small here, so in any recipe the
//    hidden layers barely move and the model learns as a linear model on its
//    random ReLU features, at a speed set by the curvature (2/k) E[h h^T].
//    In 4 dimensions 128 such features fit a linear map closely, and inputs
//    of +-8 make them O(1), so FP32 gets the loss below 1% of its start in a
//    few hundred steps at lr 0.05.
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
      const float xf = static_cast<float>(rng.uniform(-kTinyGradientsInputRange, kTinyGradientsInputRange));
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
  // a = 3 / (range sqrt(in)): E[z^2] = in * a^2/3 * range^2/3 = 1, see above.
  const double bound = 3.0 / (kTinyGradientsInputRange * std::sqrt(double(kIn)));
  std::vector<double> a(kOut * kIn);
  SplitMix64 rng(derive_seed(seed, kTinyMatrix));
  for (double& v : a) v = rng.uniform(-bound, bound);
  return {tiny_split("train", seed, kTinyTrain, train_count, a),
          tiny_split("test", seed, kTinyTest, test_count, a)};
}

}  // namespace engine
