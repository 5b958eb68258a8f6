// Inspect: one value in one format — its bits, fields, class, neighbours and
// rounding error — and the magnitude thresholds where a format flushes,
// goes subnormal or overflows. Shared by `precision-lab-cli formats`, the
// gradient statistics and the app's explorer. Pure functions; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "numeric/format.h"

namespace engine {

// Where |x| lands when rounded (RNE) into a format.
enum class Magnitude : std::uint8_t { Zero, Underflow, Subnormal, Normal, Overflow };

// Exact rounding thresholds of a format, in double.
struct RoundingThresholds {
  double underflow = 0.0;     // |x| <= underflow rounds to zero (half the smallest subnormal: the tie goes to 0)
  double subnormal_hi = 0.0;  // |x| < subnormal_hi rounds to a subnormal (min_normal - min_subnormal/2)
  double overflow = 0.0;      // |x| > overflow (or ==, when tie_overflows) overflows: max + ulp(max)/2
  bool tie_overflows = true;  // IEEE formats: max has an odd mantissa, so the tie goes up to inf
};
RoundingThresholds rounding_thresholds(Format f);
// |a|'s fate in a format with these thresholds; a == 0: Zero; inf/NaN: Overflow.
Magnitude classify_magnitude(const RoundingThresholds& t, double a);

// The class of a value as stored.
enum class ValueClass : std::uint8_t { Zero, Subnormal, Normal, Inf, NaN };
const char* value_class_name(ValueClass c);  // "zero", "subnormal", "normal", "inf", "nan"

struct Inspection {
  Format format = Format::FP32;
  double input = 0.0;          // the value asked about (as read, FP32)
  std::uint32_t bits = 0;      // the encoded bits (TF32: its FP32 container)
  std::uint32_t field_bits = 0;  // sign|exponent|mantissa right-aligned (TF32: the top 19 bits)
  double value = 0.0;          // the stored value (NaN/inf as such)
  ValueClass cls = ValueClass::Zero;
  bool overflowed = false;     // a finite input became inf or NaN
  bool saturated = false;      // a finite input beyond max was clamped to +-max
  bool underflowed = false;    // a nonzero input became zero
  double abs_error = 0.0;      // |value - input| (finite values only, else NaN)
  double rel_error = 0.0;      // abs_error / |input| (0 for input 0; NaN when undefined)
  // The representable neighbours of `value` (NaN where none: past max, or
  // for NaN) and the gaps to them.
  double prev = 0.0, next = 0.0;
  double gap_down = 0.0, gap_up = 0.0;
};

// x rounded to f (RNE; saturating where `saturate` and the format allows).
Inspection inspect(Format f, float x, bool saturate = false);
// The value a bit pattern encodes (bits beyond the format's width ignored).
Inspection inspect_bits(Format f, std::uint32_t bits);
// "0x3C00" with the format's storage width in hex digits.
std::string hex_bits(Format f, std::uint32_t bits);
// "0|01111|0000000000": sign | exponent | mantissa of field_bits.
std::string binary_fields(Format f, std::uint32_t field_bits);
// The class word the CLI prints: "normal", "zero (underflow)", "inf (overflow)", "nan (overflow)", ...
std::string class_text(const Inspection& i);
// Shortest decimal that reads back as exactly this float ("nan", "-inf", ...).
std::string shortest_decimal(float v);

}  // namespace engine
