// Bit-level comparison of float results for the tests that hold the CUDA
// module's host+device math to the CPU backend (test_cuda_ops_math,
// test_cuda_step_math).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace test {

inline std::uint32_t bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
inline float from_bits(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// Bit-for-bit equality of `got` (named `what` in the report) with the CPU's
// `want`, any NaN equal to any NaN where `any_nan`; reports the first
// mismatches.
inline ::testing::AssertionResult same_bits(const std::vector<float>& want, const std::vector<float>& got,
                                            bool any_nan = false, const char* what = "got") {
  if (want.size() != got.size()) return ::testing::AssertionFailure() << "sizes differ";
  std::size_t bad = 0;
  std::string first;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (bits(want[i]) == bits(got[i])) continue;
    if (any_nan && std::isnan(want[i]) && std::isnan(got[i])) continue;
    if (bad++ < 5) {
      char line[160];
      std::snprintf(line, sizeof line, "\n  [%zu] cpu 0x%08x (%g) %s 0x%08x (%g)", i, bits(want[i]),
                    static_cast<double>(want[i]), what, bits(got[i]), static_cast<double>(got[i]));
      first += line;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << want.size() << " differ:" << first;
}

}  // namespace test
