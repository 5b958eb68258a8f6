// Test-only independent reference for rounding FP32 to the small formats:
// written from the definition (double arithmetic, frexp/ldexp and an
// explicit ties-to-even decision), deliberately unlike the integer bit
// tricks of engine/numeric/convert.cpp, so the two can check each other.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "numeric/format.h"

namespace reftest {

struct RefFormat {
  int exp_bits;
  int man_bits;
  int bias;
  double max;   // largest finite value
  bool has_inf;
};

inline RefFormat ref_format(engine::Format f) {
  // Spelled out here rather than read from format_info, so a wrong table
  // entry there cannot hide a wrong conversion.
  switch (f) {
    case engine::Format::FP32: return {8, 23, 127, 3.4028234663852886e38, true};
    case engine::Format::TF32: return {8, 10, 127, std::ldexp(2.0 - std::ldexp(1.0, -10), 127), true};
    case engine::Format::BF16: return {8, 7, 127, std::ldexp(2.0 - std::ldexp(1.0, -7), 127), true};
    case engine::Format::FP16: return {5, 10, 15, 65504.0, true};
    case engine::Format::E5M2: return {5, 2, 15, 57344.0, true};
    case engine::Format::E4M3: return {4, 3, 7, 448.0, false};
    default: break;  // the MX element and block formats: mx_reference.h
  }
  return {8, 23, 127, 0.0, true};
}

inline std::uint32_t bits_of(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
inline float float_of(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// The value of |x| rounded to the format, ties to even, as a double: the
// quotient of |x| by one unit in the last place of its binade (clamped to
// the subnormal binade) is exact in double, and the decision between its
// floor and floor + 1 is written out.
inline double ref_round_magnitude(const RefFormat& f, double v) {
  if (v == 0.0) return 0.0;
  const int emin = 1 - f.bias;
  int k = 0;
  std::frexp(v, &k);  // v = m * 2^k, m in [0.5, 1)
  int e = k - 1;      // v in [2^e, 2^(e+1))
  if (e < emin) e = emin;
  const double ulp = std::ldexp(1.0, e - f.man_bits);
  const double q = v / ulp;
  double n = std::floor(q);
  const double rest = q - n;
  const bool odd = std::fmod(n, 2.0) != 0.0;
  if (rest > 0.5 || (rest == 0.5 && odd)) n += 1.0;
  return n * ulp;
}

// Result class of a reference rounding.
struct RefResult {
  bool is_nan = false;
  bool negative = false;
  double magnitude = 0.0;  // +inf for infinity
};

// FP32 x rounded to f with the overflow rules of docs/numerics.md: IEEE formats
// overflow to inf; E4M3 to NaN, or to 448 with `saturate` (inf too); E5M2
// with `saturate` clamps finite overflow to 57344 and keeps inf.
inline RefResult ref_round(engine::Format fmt, float x, bool saturate) {
  const RefFormat f = ref_format(fmt);
  RefResult r;
  r.negative = std::signbit(x);
  if (std::isnan(x)) {
    r.is_nan = true;
    return r;
  }
  const double v = std::fabs(static_cast<double>(x));
  const bool in_inf = std::isinf(v);
  const double rounded = in_inf ? std::numeric_limits<double>::infinity() : ref_round_magnitude(f, v);
  if (rounded > f.max) {
    const bool sat = saturate && (fmt == engine::Format::E4M3 || (fmt == engine::Format::E5M2 && !in_inf));
    if (sat) {
      r.magnitude = f.max;
    } else if (f.has_inf) {
      r.magnitude = std::numeric_limits<double>::infinity();
    } else {
      r.is_nan = true;
    }
    return r;
  }
  r.magnitude = rounded;
  return r;
}

// Encodes a reference result from its value: exponent from ilogb, fraction
// by scaling. NaNs use the policy of numeric/convert.h, given separately
// by nan_bits.
inline std::uint32_t ref_encode_value(engine::Format fmt, const RefResult& r) {
  const RefFormat f = ref_format(fmt);
  const int width = 1 + f.exp_bits + f.man_bits;
  const std::uint32_t sign = r.negative ? (1u << (width - 1)) : 0u;
  std::uint32_t mag = 0;
  if (std::isinf(r.magnitude)) {
    mag = ((1u << f.exp_bits) - 1u) << f.man_bits;
  } else if (r.magnitude == 0.0) {
    mag = 0;
  } else {
    const double min_normal = std::ldexp(1.0, 1 - f.bias);
    if (r.magnitude < min_normal) {
      mag = static_cast<std::uint32_t>(r.magnitude / std::ldexp(1.0, 1 - f.bias - f.man_bits));
    } else {
      const int e = std::ilogb(r.magnitude);
      const double frac = r.magnitude / std::ldexp(1.0, e) - 1.0;
      mag = (static_cast<std::uint32_t>(e + f.bias) << f.man_bits) |
            static_cast<std::uint32_t>(frac * std::ldexp(1.0, f.man_bits));
    }
  }
  return sign | mag;
}

// The bit pattern engine::encode must return for x (TF32: the FP32
// container's pattern). NaN inputs follow the documented NaN policy: quiet,
// sign kept; FP16/BF16/TF32 keep the top payload bits.
inline std::uint32_t ref_encode(engine::Format fmt, float x, bool saturate) {
  const std::uint32_t u = bits_of(x);
  const RefResult r = ref_round(fmt, x, saturate);
  switch (fmt) {
    case engine::Format::FP32: return u;
    case engine::Format::TF32: {
      if (r.is_nan) return (u | 0x00400000u) & 0xFFFFE000u;
      const float v = static_cast<float>(r.magnitude);  // exact: r is a TF32 value
      return bits_of(r.negative ? -v : v);
    }
    case engine::Format::BF16:
      if (r.is_nan) return (u >> 16) | 0x0040u;
      return ref_encode_value(fmt, r);
    case engine::Format::FP16:
      if (r.is_nan) return ((u >> 16) & 0x8000u) | 0x7E00u | ((u >> 13) & 0x3FFu);
      return ref_encode_value(fmt, r);
    case engine::Format::E5M2:
      if (r.is_nan) return (r.negative ? 0x80u : 0u) | 0x7Eu;
      return ref_encode_value(fmt, r);
    case engine::Format::E4M3:
      if (r.is_nan) return (r.negative ? 0x80u : 0u) | 0x7Fu;
      return ref_encode_value(fmt, r);
    default: break;
  }
  return u;
}

}  // namespace reftest
