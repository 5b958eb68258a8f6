// numeric/inspect: a value's bits, class, neighbours and error in every
// format, and the rounding thresholds the gradient statistics classify by.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "numeric/convert.h"
#include "numeric/inspect.h"

namespace {

using namespace engine;

TEST(Inspect, OneTenthInFp16AndBf16) {
  const Inspection h = inspect(Format::FP16, 0.1f);
  EXPECT_EQ(h.bits, 0x2E66u);
  EXPECT_EQ(hex_bits(Format::FP16, h.bits), "0x2E66");
  EXPECT_EQ(binary_fields(Format::FP16, h.field_bits), "0|01011|1001100110");
  EXPECT_EQ(h.cls, ValueClass::Normal);
  EXPECT_EQ(h.value, static_cast<double>(fp16_to_fp32(0x2E66)));
  EXPECT_DOUBLE_EQ(h.abs_error, std::fabs(h.value - static_cast<double>(0.1f)));
  // Neighbours one ulp away: 2^-4 binade, ulp 2^-14.
  EXPECT_DOUBLE_EQ(h.gap_up, std::ldexp(1.0, -14));
  EXPECT_DOUBLE_EQ(h.gap_down, std::ldexp(1.0, -14));
  EXPECT_EQ(inspect(Format::BF16, 0.1f).bits, 0x3DCDu);
}

TEST(Inspect, BoundaryClassesOfEveryFormat) {
  for (Format f : kAllFormats) {
    SCOPED_TRACE(format_name(f));
    const FormatInfo& fi = format_info(f);
    EXPECT_EQ(inspect(f, 0.0f).cls, ValueClass::Zero);
    EXPECT_EQ(inspect(f, static_cast<float>(fi.min_subnormal)).cls, ValueClass::Subnormal);
    EXPECT_EQ(inspect(f, static_cast<float>(fi.min_normal)).cls, ValueClass::Normal);
    if (f != Format::FP32) {
      EXPECT_TRUE(inspect(f, static_cast<float>(fi.min_subnormal / 4)).underflowed);
    }
    const Inspection top = inspect(f, static_cast<float>(fi.max));
    EXPECT_EQ(top.value, fi.max);
    EXPECT_TRUE(std::isnan(top.next)) << "nothing above max";
    if (f != Format::FP32) {
      // A finite float beyond the format's range (FLT_MAX for BF16 and TF32).
      const Inspection over = inspect(f, static_cast<float>(std::min(fi.max * 4, 3.4028234663852886e38)));
      EXPECT_TRUE(over.overflowed);
      EXPECT_EQ(over.cls, fi.has_inf ? ValueClass::Inf : ValueClass::NaN);
      EXPECT_EQ(class_text(over), fi.has_inf ? "inf (overflow)" : "nan (overflow)");
    }
    EXPECT_EQ(inspect(f, NAN).cls, ValueClass::NaN);
    // The smallest subnormal's lower neighbour is zero, its upper one 2x it.
    const Inspection tiny = inspect(f, static_cast<float>(fi.min_subnormal));
    EXPECT_EQ(tiny.prev, 0.0);
    EXPECT_EQ(tiny.next, 2 * fi.min_subnormal);
  }
  // E4M3 saturates where asked: 1000 -> 448.
  const Inspection sat = inspect(Format::E4M3, 1000.0f, true);
  EXPECT_EQ(sat.value, 448.0);
  EXPECT_TRUE(sat.saturated);
  EXPECT_EQ(class_text(sat), "normal (saturated)");
}

TEST(Inspect, EveryFp8CodeRoundTripsThroughItsBits) {
  for (Format f : {Format::E4M3, Format::E5M2}) {
    for (std::uint32_t code = 0; code < 256; ++code) {
      const Inspection i = inspect_bits(f, code);
      EXPECT_EQ(i.bits, code);
      if (std::isnan(i.value)) continue;
      EXPECT_EQ(inspect(f, static_cast<float>(i.value)).bits, code) << code;
    }
  }
}

TEST(Inspect, ThresholdsMatchTheRoundingItself) {
  for (Format f : kAllFormats) {
    SCOPED_TRACE(format_name(f));
    const RoundingThresholds t = rounding_thresholds(f);
    // At the underflow threshold the value rounds to zero, just above it not.
    EXPECT_EQ(quantize(f, static_cast<float>(t.underflow)), 0.0f);
    EXPECT_NE(quantize(f, std::nextafter(static_cast<float>(t.underflow), 1.0f)), 0.0f);
    EXPECT_EQ(classify_magnitude(t, t.underflow), Magnitude::Underflow);
    EXPECT_EQ(classify_magnitude(t, format_info(f).min_subnormal), Magnitude::Subnormal);
    EXPECT_EQ(classify_magnitude(t, format_info(f).max), Magnitude::Normal);
    EXPECT_EQ(classify_magnitude(t, INFINITY), Magnitude::Overflow);
    EXPECT_EQ(classify_magnitude(t, 0.0), Magnitude::Zero);
  }
  // E4M3: the tie at 464 still rounds to 448; above it overflows.
  const RoundingThresholds e4 = rounding_thresholds(Format::E4M3);
  EXPECT_EQ(e4.overflow, 464.0);
  EXPECT_EQ(classify_magnitude(e4, 464.0), Magnitude::Normal);
  EXPECT_EQ(classify_magnitude(e4, 465.0), Magnitude::Overflow);
  // FP16: 65520 (the tie) overflows to inf.
  EXPECT_EQ(classify_magnitude(rounding_thresholds(Format::FP16), 65520.0), Magnitude::Overflow);
}

}  // namespace
