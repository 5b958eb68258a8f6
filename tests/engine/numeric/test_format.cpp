// Tests of the format table (docs/numerics.md "Number formats") and format names.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "numeric/convert.h"
#include "numeric/format.h"

namespace {

using engine::Format;
using engine::format_info;

TEST(Format, TableMatchesDesign) {
  struct Row {
    Format f;
    const char* name;
    int bits, exp, man, bias, bytes;
    double max, min_normal, min_subnormal;
    bool inf;
  };
  const Row rows[] = {
      {Format::FP32, "FP32", 32, 8, 23, 127, 4, 3.4028234663852886e38, std::ldexp(1.0, -126),
       std::ldexp(1.0, -149), true},
      {Format::TF32, "TF32", 19, 8, 10, 127, 4, std::ldexp(2.0 - std::ldexp(1.0, -10), 127),
       std::ldexp(1.0, -126), std::ldexp(1.0, -136), true},
      {Format::BF16, "BF16", 16, 8, 7, 127, 2, 3.3895313892515355e38, std::ldexp(1.0, -126),
       std::ldexp(1.0, -133), true},
      {Format::FP16, "FP16", 16, 5, 10, 15, 2, 65504.0, std::ldexp(1.0, -14), std::ldexp(1.0, -24), true},
      {Format::E5M2, "FP8-E5M2", 8, 5, 2, 15, 1, 57344.0, std::ldexp(1.0, -14), std::ldexp(1.0, -16),
       true},
      {Format::E4M3, "FP8-E4M3", 8, 4, 3, 7, 1, 448.0, std::ldexp(1.0, -6), std::ldexp(1.0, -9), false},
  };
  for (const Row& r : rows) {
    const auto& i = format_info(r.f);
    SCOPED_TRACE(r.name);
    EXPECT_STREQ(i.name, r.name);
    EXPECT_EQ(i.bits, r.bits);
    EXPECT_EQ(i.exp_bits, r.exp);
    EXPECT_EQ(i.man_bits, r.man);
    EXPECT_EQ(i.bias, r.bias);
    EXPECT_EQ(i.storage_bytes, r.bytes);
    EXPECT_EQ(engine::storage_bytes(r.f), static_cast<std::size_t>(r.bytes));
    EXPECT_EQ(i.max, r.max);
    EXPECT_EQ(i.min_normal, r.min_normal);
    EXPECT_EQ(i.min_subnormal, r.min_subnormal);
    EXPECT_EQ(i.epsilon, std::ldexp(1.0, -r.man));
    EXPECT_EQ(i.has_inf, r.inf);
    EXPECT_STREQ(engine::format_name(r.f), r.name);
  }
}

// The table's numbers are the values the conversions actually produce.
TEST(Format, TableAgreesWithConversions) {
  for (Format f : engine::kAllFormats) {
    const auto& i = format_info(f);
    SCOPED_TRACE(i.name);
    // The largest finite value survives a round trip; the next FP32 value up
    // that is half an ulp beyond it overflows.
    const float max = static_cast<float>(i.max);
    EXPECT_EQ(engine::quantize(f, max), max);
    EXPECT_EQ(engine::quantize(f, -max), -max);
    if (f != Format::FP32) {
      const float beyond = static_cast<float>(i.max + std::ldexp(i.epsilon * 0.5, std::ilogb(i.max)) * 1.001);
      const float q = engine::quantize(f, beyond);
      if (i.has_inf) EXPECT_TRUE(std::isinf(q)) << beyond;
      else EXPECT_TRUE(std::isnan(q)) << beyond;
    }
    EXPECT_EQ(engine::quantize(f, static_cast<float>(i.min_normal)), static_cast<float>(i.min_normal));
    const float sub = static_cast<float>(i.min_subnormal);
    EXPECT_EQ(engine::quantize(f, sub), sub);
    EXPECT_EQ(engine::quantize(f, sub * 0.5f), 0.0f) << "half the smallest subnormal ties to zero";
    EXPECT_EQ(engine::quantize(f, 1.0f + static_cast<float>(i.epsilon)), 1.0f + static_cast<float>(i.epsilon));
    EXPECT_EQ(engine::quantize(f, 1.0f + static_cast<float>(i.epsilon) * 0.5f), 1.0f)
        << "1 + eps/2 ties to the even 1";
  }
}

TEST(Format, ParseAcceptsNamesAndKeys) {
  for (Format f : engine::kAllFormats) {
    EXPECT_EQ(engine::parse_format(engine::format_key(f)), f);
    EXPECT_EQ(engine::parse_format(engine::format_name(f)), f);
  }
  EXPECT_EQ(engine::parse_format("fp8-e5m2"), Format::E5M2);
  EXPECT_EQ(engine::parse_format("fp8-e4m3"), Format::E4M3);
  EXPECT_EQ(engine::parse_format("E4M3"), Format::E4M3);
  EXPECT_EQ(engine::parse_format("BF16"), Format::BF16);
  EXPECT_FALSE(engine::parse_format("").has_value());
  EXPECT_FALSE(engine::parse_format("fp64").has_value());
  EXPECT_FALSE(engine::parse_format("e4m3fnuz").has_value());
  EXPECT_FALSE(engine::parse_format("fp16 ").has_value());
}

TEST(Format, KeysAreTheConfigSpellings) {
  EXPECT_STREQ(engine::format_key(Format::FP32), "fp32");
  EXPECT_STREQ(engine::format_key(Format::TF32), "tf32");
  EXPECT_STREQ(engine::format_key(Format::BF16), "bf16");
  EXPECT_STREQ(engine::format_key(Format::FP16), "fp16");
  EXPECT_STREQ(engine::format_key(Format::E5M2), "e5m2");
  EXPECT_STREQ(engine::format_key(Format::E4M3), "e4m3");
}

}  // namespace
