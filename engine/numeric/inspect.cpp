// Inspect: bits, class, neighbours and rounding error of one value in one
// format, built on the scalar reference conversions (numeric/convert.h).
#include "numeric/inspect.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

#include "numeric/convert.h"

namespace engine {

RoundingThresholds rounding_thresholds(Format f) {
  const FormatInfo& fi = format_info(f);
  RoundingThresholds t;
  t.underflow = fi.min_subnormal / 2.0;
  t.subnormal_hi = fi.min_normal - fi.min_subnormal / 2.0;
  // For E4M3 the tie at 464 still rounds to 448 (even mantissa), so only
  // values above it overflow; IEEE formats' max has an odd mantissa.
  const double ulp_max = std::ldexp(1.0, std::ilogb(fi.max) - fi.man_bits);
  t.overflow = fi.max + ulp_max / 2.0;
  t.tie_overflows = fi.has_inf;
  return t;
}

Magnitude classify_magnitude(const RoundingThresholds& t, double a) {
  a = std::fabs(a);
  if (a == 0.0) return Magnitude::Zero;
  if (!std::isfinite(a)) return Magnitude::Overflow;
  if (a <= t.underflow) return Magnitude::Underflow;
  if (a < t.subnormal_hi) return Magnitude::Subnormal;
  if (a > t.overflow || (t.tie_overflows && a == t.overflow)) return Magnitude::Overflow;
  return Magnitude::Normal;
}

const char* value_class_name(ValueClass c) {
  switch (c) {
    case ValueClass::Zero: return "zero";
    case ValueClass::Subnormal: return "subnormal";
    case ValueClass::Normal: return "normal";
    case ValueClass::Inf: return "inf";
    case ValueClass::NaN: return "nan";
  }
  return "?";
}

namespace {

// Encoding width in the container's bit positions: TF32's 19 bits are the
// top of its FP32 container, so its least significant bit is bit 13.
struct Layout {
  int total_bits;      // container bits
  std::uint32_t one;   // one unit in the last place of the encoding
  std::uint32_t sign;  // the sign bit
};

Layout layout_of(Format f) {
  const FormatInfo& fi = format_info(f);
  if (f == Format::TF32) return {32, 1u << 13, 1u << 31};
  if (f == Format::E8M0) return {8, 1u, 0u};  // unsigned: no sign bit
  // FP6 and FP4 codes sit right-aligned in their byte: their width is `bits`.
  if (is_element_format(f)) return {fi.bits, 1u, 1u << (fi.bits - 1)};
  return {fi.storage_bytes * 8, 1u, 1u << (fi.bits - 1)};
}

double decoded(Format f, std::uint32_t bits) { return static_cast<double>(decode(f, bits)); }

// The neighbour of the encoding `bits` one ulp toward +inf (up) or -inf; NaN
// when there is none (beyond max, or the encoding is not finite).
double neighbour(Format f, std::uint32_t bits, bool up) {
  if (f == Format::E8M0) {
    // Codes 0..254 are consecutive powers of two.
    if ((!up && bits == 0) || bits >= 0xFEu + (up ? 0u : 1u)) return std::numeric_limits<double>::quiet_NaN();
    return decoded(f, up ? bits + 1 : bits - 1);
  }
  const Layout l = layout_of(f);
  const bool negative = (bits & l.sign) != 0;
  std::uint32_t mag = bits & (l.sign - 1u);
  if (f == Format::TF32) mag &= ~((1u << 13) - 1u);
  std::uint32_t out;
  if (mag == 0) {
    out = up ? l.one : (l.sign | l.one);
  } else if (up != negative) {  // away from zero
    // Past the largest code (FP6/FP4, whose top code is finite) there is none.
    if ((mag + l.one) & l.sign) return std::numeric_limits<double>::quiet_NaN();
    out = (negative ? l.sign : 0u) | (mag + l.one);
  } else {  // toward zero
    out = (negative ? l.sign : 0u) | (mag - l.one);
  }
  const double v = decoded(f, out);
  return std::isfinite(v) ? v : std::numeric_limits<double>::quiet_NaN();
}

ValueClass class_of(Format f, double v) {
  if (std::isnan(v)) return ValueClass::NaN;
  if (std::isinf(v)) return ValueClass::Inf;
  if (v == 0.0) return ValueClass::Zero;
  return std::fabs(v) < format_info(f).min_normal ? ValueClass::Subnormal : ValueClass::Normal;
}

void fill(Inspection& i) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const FormatInfo& fi = format_info(i.format);
  i.field_bits = i.format == Format::TF32 ? i.bits >> 13 : i.bits;
  i.cls = class_of(i.format, i.value);
  if (std::isfinite(i.value)) {
    i.prev = neighbour(i.format, i.bits, false);
    i.next = neighbour(i.format, i.bits, true);
  } else {
    i.prev = i.next = nan;
  }
  i.gap_down = std::isnan(i.prev) ? nan : i.value - i.prev;
  i.gap_up = std::isnan(i.next) ? nan : i.next - i.value;
  if (std::isfinite(i.value) && std::isfinite(i.input)) {
    i.abs_error = std::fabs(i.value - i.input);
    i.rel_error = i.input == 0.0 ? 0.0 : i.abs_error / std::fabs(i.input);
  } else {
    i.abs_error = i.rel_error = nan;
  }
  (void)fi;
}

}  // namespace

Inspection inspect(Format f, float x, bool saturate) {
  Inspection i;
  i.format = f;
  i.input = static_cast<double>(x);
  i.bits = encode(f, x, saturate);
  i.value = decoded(f, i.bits);
  const bool finite_nonzero = std::isfinite(x) && x != 0.0f;
  // E4M3 has no inf: an infinite input becomes NaN, which is an overflow too.
  i.overflowed = (std::isfinite(x) && !std::isfinite(i.value)) || (std::isinf(x) && std::isnan(i.value));
  // A finite value beyond max, or an infinity, that came out as +-max.
  i.saturated = !std::isnan(x) && std::fabs(i.input) > format_info(f).max && std::isfinite(i.value);
  i.underflowed = finite_nonzero && i.value == 0.0;
  fill(i);
  return i;
}

Inspection inspect_bits(Format f, std::uint32_t bits) {
  const Layout l = layout_of(f);
  if (l.total_bits < 32) bits &= (1u << l.total_bits) - 1u;
  if (f == Format::TF32) bits &= ~((1u << 13) - 1u);
  Inspection i;
  i.format = f;
  i.bits = bits;
  i.value = decoded(f, bits);
  i.input = i.value;
  fill(i);
  return i;
}

std::string hex_bits(Format f, std::uint32_t bits) {
  char hex[16];
  const int bytes = format_info(f).storage_bytes;
  std::snprintf(hex, sizeof(hex), "0x%0*X", bytes * 2, bits);
  return hex;
}

std::string binary_fields(Format f, std::uint32_t field_bits) {
  const FormatInfo& info = format_info(f);
  if (f == Format::E8M0) {
    // Eight exponent bits, no sign, no mantissa.
    std::string s;
    for (int b = 7; b >= 0; --b) s.push_back(((field_bits >> b) & 1u) ? '1' : '0');
    return s;
  }
  const int total = 1 + info.exp_bits + info.man_bits;
  std::string s;
  for (int b = total - 1; b >= 0; --b) {
    s.push_back(((field_bits >> b) & 1u) ? '1' : '0');
    if (b == total - 1 || b == info.man_bits) s.push_back('|');
  }
  return s;
}

std::string class_text(const Inspection& i) {
  switch (i.cls) {
    case ValueClass::NaN: return i.overflowed ? "nan (overflow)" : "nan";
    case ValueClass::Inf: return i.overflowed ? "inf (overflow)" : "inf";
    case ValueClass::Zero: return i.underflowed ? "zero (underflow)" : "zero";
    case ValueClass::Subnormal: return "subnormal";
    case ValueClass::Normal: return i.saturated ? "normal (saturated)" : "normal";
  }
  return "?";
}

std::string shortest_decimal(float v) {
  if (std::isnan(v)) return std::signbit(v) ? "-nan" : "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, res.ptr);
}

}  // namespace engine
