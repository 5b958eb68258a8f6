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

}  // namespace engine
