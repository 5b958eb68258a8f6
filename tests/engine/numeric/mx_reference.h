// Test-only independent reference for the OCP Microscaling element and scale
// formats (FP6 E3M2, FP6 E2M3, FP4 E2M1, E8M0): values computed from the
// sign / exponent / mantissa fields in double, and encoders written as a
// search for the nearest representable value with an explicit ties-to-even-
// code rule -- deliberately unlike the integer rounding of
// engine/numeric/convert.cpp, so the two can check each other. Nothing here
// reads format_info, so a wrong table entry there cannot hide a wrong codec.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "engine/numeric/reference_rounding.h"
#include "numeric/format.h"

namespace mxref {

using reftest::bits_of;
using reftest::float_of;

struct ElemSpec {
  int exp_bits;
  int man_bits;
  int bias;
  double max;  // largest finite magnitude, spelled out (OCP MX v1.0 table)
};

// Spelled out from the OCP MX v1.0 element table.
inline ElemSpec elem_spec(engine::Format f) {
  switch (f) {
    case engine::Format::E3M2: return {3, 2, 3, 28.0};
    case engine::Format::E2M3: return {2, 3, 1, 7.5};
    case engine::Format::E2M1: return {2, 1, 1, 6.0};
    default: break;
  }
  return {0, 0, 0, 0.0};
}

inline int code_bits(const ElemSpec& s) { return 1 + s.exp_bits + s.man_bits; }
inline std::uint32_t code_count(const ElemSpec& s) { return 1u << code_bits(s); }
inline std::uint32_t sign_bit(const ElemSpec& s) { return 1u << (s.exp_bits + s.man_bits); }
inline std::uint32_t max_magnitude_code(const ElemSpec& s) { return sign_bit(s) - 1u; }

// (-1)^s * 2^(1 - bias) * (0.m)          for exponent field 0 (subnormal)
// (-1)^s * 2^(e - bias) * (1.m)          otherwise (no inf, no NaN codes)
inline double elem_value(const ElemSpec& s, std::uint32_t code) {
  const std::uint32_t sign = (code >> (s.exp_bits + s.man_bits)) & 1u;
  const std::uint32_t exp = (code >> s.man_bits) & ((1u << s.exp_bits) - 1u);
  const std::uint32_t man = code & ((1u << s.man_bits) - 1u);
  const double frac = static_cast<double>(man) / static_cast<double>(1u << s.man_bits);
  const double mag = exp == 0 ? std::ldexp(frac, 1 - s.bias)
                              : std::ldexp(1.0 + frac, static_cast<int>(exp) - s.bias);
  return sign ? -mag : mag;
}

// The code convert.h's RNE encoder must return for v: the nearest magnitude
// (ties to the even code), saturating at max; +-inf -> +-max; NaN -> +-max
// with the NaN's sign bit; the sign of zero kept.
inline std::uint32_t elem_encode_nearest(const ElemSpec& s, double v) {
  const std::uint32_t sign = std::signbit(v) ? sign_bit(s) : 0u;
  const std::uint32_t top = max_magnitude_code(s);
  if (std::isnan(v)) return sign | top;
  const double a = std::fabs(v);
  if (a >= s.max) return sign | top;  // saturation (and inf)
  std::uint32_t best = 0;
  double best_d = std::numeric_limits<double>::infinity();
  for (std::uint32_t c = 0; c <= top; ++c) {
    const double d = std::fabs(elem_value(s, c) - a);  // exact: a is a float below 28
    if (d < best_d || (d == best_d && (c & 1u) == 0u)) {
      best = c;
      best_d = d;
    }
  }
  return sign | best;
}

// The two representable magnitudes around |v| (lo <= |v| <= hi; lo == hi
// when |v| is representable); hi is max beyond max.
struct Bracket {
  double lo, hi;
};
inline Bracket elem_bracket(const ElemSpec& s, double a) {
  a = std::fabs(a);
  if (a >= s.max) return {s.max, s.max};
  double lo = 0.0, hi = s.max;
  for (std::uint32_t c = 0; c <= max_magnitude_code(s); ++c) {
    const double v = elem_value(s, c);
    if (v <= a && v > lo) lo = v;
    if (v >= a && v < hi) hi = v;
  }
  return {lo, hi};
}

// ---- E8M0 ------------------------------------------------------------------
inline double e8m0_value(std::uint32_t code) {
  if (code == 0xFFu) return std::numeric_limits<double>::quiet_NaN();
  return std::ldexp(1.0, static_cast<int>(code) - 127);
}

// convert.h's E8M0 rule: the nearest of the 255 powers of two 2^-127..2^127
// (ties to the even code), which saturates both ways by construction;
// +-0 -> 0x00, +inf -> 0xFE, NaN and every other negative value -> 0xFF.
inline std::uint8_t e8m0_encode_nearest(float x) {
  if (std::isnan(x)) return 0xFF;
  if (x == 0.0f) return 0x00;
  if (x < 0.0f) return 0xFF;
  if (std::isinf(x)) return 0xFE;
  const double a = static_cast<double>(x);
  std::uint32_t best = 0;
  double best_d = std::numeric_limits<double>::infinity();
  for (std::uint32_t c = 0; c <= 254; ++c) {
    const double d = std::fabs(e8m0_value(c) - a);
    if (d < best_d || (d == best_d && (c & 1u) == 0u)) {
      best = c;
      best_d = d;
    }
  }
  return static_cast<std::uint8_t>(best);
}

}  // namespace mxref
