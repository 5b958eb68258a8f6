// FP8 delayed scaling: amax history ring and Transformer Engine's scale formula.
#include "nn/fp8_scaling.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "numeric/clones.h"

namespace engine {

DelayedScale::DelayedScale(Format format, const DelayedScaling& config) : m_format(format), m_config(config) {
  if (!is_fp8(format))
    throw std::invalid_argument(std::string("delayed scaling needs an FP8 format (got ") + format_name(format) + ")");
  if (config.amax_history_len < 1)
    throw std::invalid_argument("delayed scaling: amax_history_len must be >= 1 (got " +
                                std::to_string(config.amax_history_len) + ")");
  m_fp8_max = static_cast<float>(format_info(format).max);  // 448 or 57344, exact in float
  m_history.assign(static_cast<std::size_t>(config.amax_history_len), 0.0f);
}

float DelayedScale::history_max() const {
  // The amaxes are |x| maxima (+0 up, +inf, or NaN), whose bit patterns
  // order as their values with inf above every finite one and NaN above
  // inf: one branch-free (vectorized) max over the patterns, every step on
  // every FP8 tensor's 1024 entries.
  std::uint32_t m = 0;
  for (float a : m_history) m = std::max(m, std::bit_cast<std::uint32_t>(a) & 0x7FFFFFFFu);
  if (m > 0x7F800000u) return std::numeric_limits<float>::quiet_NaN();
  return std::bit_cast<float>(m);
}

void DelayedScale::record(float amax) {
  if (m_history.empty()) return;
  m_history[m_next] = amax;
  m_next = (m_next + 1) % m_history.size();
  ++m_records;
  if (!m_config.enabled) return;  // unscaled FP8: the scale stays 1
  const float a = history_max();
  // _default_sf_compute: sf = (fp8_max / amax) / 2^margin, in float32 as
  // torch computes it; keep the previous scale for amax 0 or non-finite.
  if (!(a > 0.0f) || !std::isfinite(a)) return;
  float sf = m_fp8_max / a;
  sf = sf / std::ldexp(1.0f, m_config.margin);
  // A denormal amax can make 448/amax overflow float: that is TE's
  // behaviour too (the scale becomes inf and every value saturates), but a
  // scale of inf would turn 0 * scale into NaN here; keep the old one.
  if (std::isfinite(sf) && sf > 0.0f) m_scale = sf;
}

float* DelayedScale::amax_slot() {
  m_amax.reserve(sizeof(float));
  m_pending = true;
  return m_amax.as<float>();
}

void DelayedScale::take_pending(float amax) {
  m_pending = false;
  record(amax);
}

namespace {

std::uint32_t abs_bits(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  return u & 0x7FFFFFFFu;
}

constexpr std::int64_t kAmaxParallelMin = std::int64_t{1} << 17;

}  // namespace

// Both: max|x_i| and whether any x_i is NaN in one vectorizable pass, on
// |x| as bits (NaN patterns are the integers above inf's), so neither
// -ffast-math nor a NaN comparison can hide one.
//
// The clones are the loops over one range; the threads split the range
// outside them. (An OpenMP region inside a target_clones function is
// outlined into a function of its own, compiled for the x86-64 baseline,
// which has no unsigned 32-bit max: the loop ran scalar on every CPU.)
PL_CPU_CLONES std::uint32_t amax_bits(const float* x, std::int64_t n) {
  std::uint32_t m = 0;
  for (std::int64_t i = 0; i < n; ++i) m = std::max(m, abs_bits(x[i]));
  return m;
}

namespace {

// max over [0, n) of f(begin, end), in two halves on two threads and so on
// above the threshold (max is exact in any order).
template <class F>
std::uint32_t max_over(std::int64_t n, F&& f) {
  if (n < kAmaxParallelMin) return f(std::int64_t{0}, n);
  constexpr int kChunks = 16;
  const std::int64_t chunk = (n + kChunks - 1) / kChunks;
  std::uint32_t m = 0;
#pragma omp parallel for schedule(static) reduction(max : m)
  for (int c = 0; c < kChunks; ++c) {
    const std::int64_t b = c * chunk, e = std::min(n, b + chunk);
    if (b < e) m = std::max(m, f(b, e));
  }
  return m;
}

}  // namespace

float amax_of(const float* x, std::int64_t n) {
  return amax_from_bits(max_over(n, [x](std::int64_t b, std::int64_t e) { return amax_bits(x + b, e - b); }));
}

float scale_and_amax(const float* x, float scale, float* out, std::int64_t n) {
  return amax_from_bits(max_over(
      n, [=](std::int64_t b, std::int64_t e) { return scale_amax_bits(x + b, scale, out + b, e - b); }));
}

}  // namespace engine
