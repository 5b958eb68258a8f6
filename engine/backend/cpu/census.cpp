// The CPU backend's gradient statistics: the gradient census and the error
// sums against the FP32 shadow.
#include <algorithm>
#include <bit>
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/step_kernels.h"
#include "numeric/cast.h"

namespace engine {

namespace {

// The census of values [b, e) added into out (kCensusSlots counts).
void census_range(const GradCensus& c, std::int64_t b, std::int64_t e, std::int64_t* out) {
  std::int64_t* hist = out + 1;
  std::int64_t* scaled = out + 1 + kCensusBins;
  std::int64_t* unscaled = scaled + 5;
  for (std::int64_t i = b; i < e; ++i) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(c.values[i]) & 0x7FFFFFFFu;
    if (u == 0) {
      ++out[0];
    } else if (u < 0x7F800000u) {
      // floor(log2|v|) (std::ilogb's, a libm call a value): the exponent
      // field, or for a subnormal the position of its top bit.
      const int e2 = u >= 0x00800000u ? static_cast<int>(u >> 23) - 127 : std::bit_width(u) - 150;
      ++hist[std::clamp(e2 - c.log2_lo, 0, kCensusBins - 1)];
    }
  }
  if (c.block) {
    // Flushed by the block quantization (or zero as the run computed it):
    // Underflow, else Normal, scaled and unscaled alike.
    for (std::int64_t i = b; i < e; ++i) {
      if (c.values[i] == 0.0f) continue;
      const bool flushed = c.block[i] == 0.0f || (c.own && c.own[i] == 0.0f);
      const int m = static_cast<int>(flushed ? Magnitude::Underflow : Magnitude::Normal);
      ++scaled[m];
      ++unscaled[m];
    }
    return;
  }
  // classify_magnitude of |v| * scale (Underflow where the run's own value
  // is zero: flushed somewhere on the way, whatever the exact value's
  // size) and of |v|, as nested counts: class k is (>= k) - (>= k + 1).
  // With scale 1 the two are one count (the forcing included).
  const RoundingThresholds& t = c.thresholds;
  std::int64_t s[10] = {};
  cpu::census_class_sums(c.values + b, c.own ? c.own + b : nullptr, e - b, c.scale, t.underflow, t.subnormal_hi,
                         t.overflow, t.tie_overflows, s);
  if (c.scale != 1.0)
    cpu::census_class_sums(c.values + b, nullptr, e - b, 1.0, t.underflow, t.subnormal_hi, t.overflow,
                           t.tie_overflows, s + 5);
  const std::int64_t* un = c.scale == 1.0 ? s : s + 5;
  for (int k = 0; k < 4; ++k) {
    scaled[k] += s[k] - s[k + 1];
    unscaled[k] += un[k] - un[k + 1];
  }
  scaled[4] += s[4];
  unscaled[4] += un[4];
}

}  // namespace

void CpuBackend::gradient_census(const GradCensus& c) {
  // Counts are integers: any split over the threads gives the same sums.
  if (!cpu::worth_parallel(c.n)) {
    census_range(c, 0, c.n, c.out);
    return;
  }
  use_threads();
#pragma omp parallel
  {
    std::int64_t local[kCensusSlots] = {};
    const auto t = static_cast<std::int64_t>(omp_get_thread_num());
    const auto nt = static_cast<std::int64_t>(omp_get_num_threads());
    census_range(c, c.n * t / nt, c.n * (t + 1) / nt, local);
#pragma omp critical(pl_gradient_census)
    for (int k = 0; k < kCensusSlots; ++k) c.out[k] += local[k];
  }
}

void CpuBackend::error_sums(const float* a, const float* b, std::int64_t n, double* out) {
  cpu::error_sums_run(a, b, n, out);
}

}  // namespace engine
