// Seeded normal samples for the tests' inputs (the conformance suite and the
// CUDA math tests draw their data the same way).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace test {

inline std::vector<float> normal_values(std::size_t n, std::uint64_t seed, float stddev = 1.0f, float mean = 0.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(mean, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace test
