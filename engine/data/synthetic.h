// Generated data sets: spirals (classification) and tiny-gradients (the loss-scaling regression).
#pragma once

#include <cstddef>
#include <cstdint>

#include "data/dataset.h"

namespace engine {

// TensorFlow Playground's "spiral": two interleaved spirals (class 0 and 1,
// the second turned by pi), radius 0..5 over 1.75 turns, uniform noise of
// +-0.25 on each coordinate; coordinates divided by 5 so inputs lie in about
// [-1, 1]. Classes alternate (even index class 0). Any thread.
DatasetPair make_spirals(std::uint64_t seed, std::size_t train_count = 2000,
                         std::size_t test_count = 1000);

// y = target_scale * A x with x ~ U(-8, 8)^4, A (128 x 4) fixed by the
// seed, target_scale = 2^-14: targets at FP16's smallest normal, whose MSE
// gradients at batch 128 (2^14 elements) sit below half FP16's smallest
// subnormal, so they flush to zero unless the loss is scaled (the
// arithmetic is in synthetic.cpp). Any thread.
inline constexpr std::size_t kTinyGradientsInputs = 4;
inline constexpr std::size_t kTinyGradientsOutputs = 128;
inline constexpr double kTinyGradientsInputRange = 8.0;  // x_j ~ U(-8, 8)
inline constexpr double kTinyGradientsTargetScale = 0x1.0p-14;
DatasetPair make_tiny_gradients(std::uint64_t seed, std::size_t train_count = 8192,
                                std::size_t test_count = 1024);

}  // namespace engine
