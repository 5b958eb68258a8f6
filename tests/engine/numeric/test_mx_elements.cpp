// Tests of the OCP Microscaling element and scale formats (issue 14): FP6
// E3M2, FP6 E2M3, FP4 E2M1 and E8M0 -- their scalar codecs (convert.h)
// against the independent field-based reference of mx_reference.h, their
// stochastic rounding, their format_info / names, inspect(), and the bulk
// casts (cast.h) on every path this CPU runs; block formats must throw from
// every single-value entry point.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/numeric/mx_reference.h"
#include "numeric/cast.h"
#include "numeric/convert.h"
#include "numeric/format.h"
#include "numeric/inspect.h"

namespace {

using engine::CastOptions;
using engine::CastPath;
using engine::Format;
using mxref::bits_of;
using mxref::float_of;

constexpr Format kFp6Fp4[] = {Format::E3M2, Format::E2M3, Format::E2M1};
constexpr CastPath kPaths[] = {CastPath::Scalar, CastPath::F16C, CastPath::AVX512, CastPath::AVX512BF16};

// The per-format scalar functions, so that both they and the generic
// encode/decode are held to the reference.
std::uint8_t scalar_encode(Format f, float x) {
  switch (f) {
    case Format::E3M2: return engine::fp32_to_e3m2(x);
    case Format::E2M3: return engine::fp32_to_e2m3(x);
    case Format::E2M1: return engine::fp32_to_e2m1(x);
    default: break;
  }
  ADD_FAILURE() << "not an FP6/FP4 format";
  return 0;
}
std::uint8_t scalar_encode_sr(Format f, float x, std::uint32_t r) {
  switch (f) {
    case Format::E3M2: return engine::fp32_to_e3m2_sr(x, r);
    case Format::E2M3: return engine::fp32_to_e2m3_sr(x, r);
    case Format::E2M1: return engine::fp32_to_e2m1_sr(x, r);
    default: break;
  }
  ADD_FAILURE() << "not an FP6/FP4 format";
  return 0;
}
float scalar_decode(Format f, std::uint8_t c) {
  switch (f) {
    case Format::E3M2: return engine::e3m2_to_fp32(c);
    case Format::E2M3: return engine::e2m3_to_fp32(c);
    case Format::E2M1: return engine::e2m1_to_fp32(c);
    default: break;
  }
  ADD_FAILURE() << "not an FP6/FP4 format";
  return 0.0f;
}

bool same_float(float a, float b) { return bits_of(a) == bits_of(b) || (std::isnan(a) && std::isnan(b)); }

// The dense sweep of inputs for one element format: every BF16 bit pattern
// as a float; every midpoint between adjacent representable magnitudes and
// its float neighbours, both signs; values beyond max; the special values;
// FP32 subnormals; and random FP32 patterns.
std::vector<float> sweep_inputs(const mxref::ElemSpec& s) {
  std::vector<float> v;
  v.reserve(70000 + 200000);
  for (std::uint32_t b = 0; b < (1u << 16); ++b) v.push_back(float_of(b << 16));
  std::vector<double> mags;
  for (std::uint32_t c = 0; c <= mxref::max_magnitude_code(s); ++c) mags.push_back(mxref::elem_value(s, c));
  // The virtual next value after max (one ulp of max's binade above it):
  // its midpoint with max is where plain RNE would overflow.
  const double ulp_max = mags.back() - mags[mags.size() - 2];
  mags.push_back(mags.back() + ulp_max);
  for (std::size_t i = 0; i + 1 < mags.size(); ++i) {
    const float mid = static_cast<float>((mags[i] + mags[i + 1]) / 2.0);  // exact
    for (float m : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY), static_cast<float>(mags[i]),
                    std::nextafter(static_cast<float>(mags[i]), INFINITY),
                    std::nextafter(static_cast<float>(mags[i]), 0.0f)}) {
      v.push_back(m);
      v.push_back(-m);
    }
  }
  for (float m : {static_cast<float>(s.max) * 1.0001f, static_cast<float>(2 * s.max), 1000.0f, 1e30f, FLT_MAX,
                  INFINITY, std::numeric_limits<float>::quiet_NaN(), float_of(0x7F800001u) /*sNaN*/,
                  float_of(0x7FFFFFFFu), 0.0f, FLT_MIN, float_of(0x00000001u), float_of(0x007FFFFFu),
                  float_of(0x00400000u), 1e-30f}) {
    v.push_back(m);
    v.push_back(-m);
  }
  std::mt19937 rng(1234);
  for (int i = 0; i < 200000; ++i) v.push_back(float_of(rng()));
  return v;
}

// ---- decoding: every code --------------------------------------------------

TEST(MxElements, EveryCodeDecodesToItsFieldValue) {
  for (Format f : kFp6Fp4) {
    SCOPED_TRACE(engine::format_name(f));
    const mxref::ElemSpec s = mxref::elem_spec(f);
    for (std::uint32_t c = 0; c < mxref::code_count(s); ++c) {
      const double want = mxref::elem_value(s, c);
      const float got = engine::decode(f, c);
      EXPECT_EQ(static_cast<double>(got), want) << "code 0x" << std::hex << c;
      EXPECT_EQ(std::signbit(got), (c & mxref::sign_bit(s)) != 0) << "code 0x" << std::hex << c;
      EXPECT_TRUE(same_float(scalar_decode(f, static_cast<std::uint8_t>(c)), got)) << "code 0x" << std::hex << c;
    }
  }
}

TEST(MxElements, LiteralValuesOfTheOcpTables) {
  // FP4 E2M1: the eight magnitudes of OCP MX v1.0, then the same negated.
  const float e2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (std::uint8_t c = 0; c < 8; ++c) {
    EXPECT_EQ(engine::e2m1_to_fp32(c), e2m1[c]) << int(c);
    EXPECT_EQ(engine::e2m1_to_fp32(static_cast<std::uint8_t>(c | 0x8u)), -e2m1[c]) << int(c);
  }
  EXPECT_TRUE(std::signbit(engine::e2m1_to_fp32(0x8)));
  // Maxima and smallest subnormals / normals.
  EXPECT_EQ(engine::e3m2_to_fp32(0x1F), 28.0f);
  EXPECT_EQ(engine::e2m3_to_fp32(0x1F), 7.5f);
  EXPECT_EQ(engine::e2m1_to_fp32(0x7), 6.0f);
  EXPECT_EQ(engine::e3m2_to_fp32(0x3F), -28.0f);
  EXPECT_EQ(engine::e2m3_to_fp32(0x3F), -7.5f);
  EXPECT_EQ(engine::e2m1_to_fp32(0xF), -6.0f);
  EXPECT_EQ(engine::e3m2_to_fp32(0x01), 0x1p-4f);
  EXPECT_EQ(engine::e2m3_to_fp32(0x01), 0x1p-3f);
  EXPECT_EQ(engine::e2m1_to_fp32(0x1), 0x1p-1f);
  EXPECT_EQ(engine::e3m2_to_fp32(0x04), 0.25f);  // smallest normal 2^-2
  EXPECT_EQ(engine::e2m3_to_fp32(0x08), 1.0f);   // smallest normal 2^0
  EXPECT_EQ(engine::e3m2_to_fp32(0x03), 0.1875f);  // largest subnormal 3 * 2^-4
  EXPECT_EQ(engine::e2m3_to_fp32(0x07), 0.875f);   // largest subnormal 7 * 2^-3
  EXPECT_EQ(engine::e3m2_to_fp32(0x0D), 1.25f);    // 0|011|01
  EXPECT_EQ(engine::e2m3_to_fp32(0x0B), 1.375f);   // 0|01|011
}

// ---- encoding --------------------------------------------------------------

TEST(MxElements, EveryDecodedValueRoundTrips) {
  for (Format f : kFp6Fp4) {
    SCOPED_TRACE(engine::format_name(f));
    const mxref::ElemSpec s = mxref::elem_spec(f);
    for (std::uint32_t c = 0; c < mxref::code_count(s); ++c) {
      const float v = engine::decode(f, c);
      EXPECT_EQ(engine::encode(f, v), c) << "code 0x" << std::hex << c;
      EXPECT_EQ(engine::encode(f, v, true), c) << "code 0x" << std::hex << c;
      EXPECT_EQ(scalar_encode(f, v), c) << "code 0x" << std::hex << c;
      // A representable value is exact: stochastic rounding leaves it alone.
      for (std::uint32_t r : {0u, 1u, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFFu, 0x12345678u})
        EXPECT_EQ(scalar_encode_sr(f, v, r), c) << "code 0x" << std::hex << c << " random " << r;
    }
  }
}

TEST(MxElements, EncodeEqualsNearestValueSearchOverADenseSweep) {
  for (Format f : kFp6Fp4) {
    SCOPED_TRACE(engine::format_name(f));
    const mxref::ElemSpec s = mxref::elem_spec(f);
    int failures = 0;
    for (float x : sweep_inputs(s)) {
      const std::uint32_t want = mxref::elem_encode_nearest(s, static_cast<double>(x));
      const std::uint32_t got = scalar_encode(f, x);
      const std::uint32_t got_generic = engine::encode(f, x);
      const std::uint32_t got_sat = engine::encode(f, x, true);
      if (got != want || got_generic != want || got_sat != want) {
        ADD_FAILURE() << "x = " << x << " (0x" << std::hex << bits_of(x) << "): want 0x" << want << " got 0x"
                      << got << " / encode 0x" << got_generic << " / encode(sat) 0x" << got_sat;
        if (++failures > 20) return;
      }
      // quantize() is encode then decode.
      const float q = engine::quantize(f, x);
      if (!same_float(q, static_cast<float>(mxref::elem_value(s, want))) && ++failures <= 20)
        ADD_FAILURE() << "quantize(" << x << ") = " << q;
    }
  }
}

TEST(MxElements, KnownTiesAndSaturation) {
  // E2M1 ties go to the even code (even mantissa bit).
  EXPECT_EQ(engine::fp32_to_e2m1(0.25f), 0x0);  // 0 | 0.5     -> 0
  EXPECT_EQ(engine::fp32_to_e2m1(0.75f), 0x2);  // 0.5 | 1     -> 1
  EXPECT_EQ(engine::fp32_to_e2m1(1.25f), 0x2);  // 1 | 1.5     -> 1
  EXPECT_EQ(engine::fp32_to_e2m1(1.75f), 0x4);  // 1.5 | 2     -> 2
  EXPECT_EQ(engine::fp32_to_e2m1(2.5f), 0x4);   // 2 | 3       -> 2
  EXPECT_EQ(engine::fp32_to_e2m1(3.5f), 0x6);   // 3 | 4       -> 4
  EXPECT_EQ(engine::fp32_to_e2m1(5.0f), 0x6);   // 4 | 6       -> 4
  EXPECT_EQ(engine::fp32_to_e2m1(-5.0f), 0xE);
  EXPECT_EQ(engine::fp32_to_e2m1(5.0001f), 0x7);
  EXPECT_EQ(engine::fp32_to_e2m1(0.2500001f), 0x1);
  // Past max: saturates (7 would tie to the even "8" under plain RNE).
  EXPECT_EQ(engine::fp32_to_e2m1(7.0f), 0x7);
  EXPECT_EQ(engine::fp32_to_e2m1(1e30f), 0x7);
  EXPECT_EQ(engine::fp32_to_e2m1(-1e30f), 0xF);
  EXPECT_EQ(engine::fp32_to_e2m1(INFINITY), 0x7);
  EXPECT_EQ(engine::fp32_to_e2m1(-INFINITY), 0xF);
  EXPECT_EQ(engine::fp32_to_e3m2(30.0f), 0x1F);  // tie 28 | (32): RNE would go up, saturates
  EXPECT_EQ(engine::fp32_to_e3m2(32.0f), 0x1F);
  EXPECT_EQ(engine::fp32_to_e3m2(-FLT_MAX), 0x3F);
  EXPECT_EQ(engine::fp32_to_e2m3(7.75f), 0x1F);  // 7.5 | (8)
  EXPECT_EQ(engine::fp32_to_e2m3(-INFINITY), 0x3F);
  // NaN: +-max with the NaN's sign bit.
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(engine::fp32_to_e2m1(qnan), 0x7);
  EXPECT_EQ(engine::fp32_to_e2m1(-qnan), 0xF);
  EXPECT_EQ(engine::fp32_to_e3m2(qnan), 0x1F);
  EXPECT_EQ(engine::fp32_to_e3m2(-qnan), 0x3F);
  EXPECT_EQ(engine::fp32_to_e2m3(float_of(0x7F800001u)), 0x1F);
  EXPECT_EQ(engine::fp32_to_e2m3(float_of(0xFFC00000u)), 0x3F);
  // Signed zero and underflow keep the sign.
  EXPECT_EQ(engine::fp32_to_e2m1(-0.0f), 0x8);
  EXPECT_EQ(engine::fp32_to_e2m1(-0.1f), 0x8);
  EXPECT_EQ(engine::fp32_to_e3m2(-0x1p-6f), 0x20);
  EXPECT_EQ(engine::fp32_to_e3m2(0x1p-5f), 0x00);                      // tie 0 | 2^-4 -> 0
  EXPECT_EQ(engine::fp32_to_e3m2(std::nextafter(0x1p-5f, 1.0f)), 0x01);
  EXPECT_EQ(engine::fp32_to_e2m3(0x1p-4f), 0x00);                      // tie 0 | 2^-3 -> 0
  EXPECT_EQ(engine::fp32_to_e2m3(3 * 0x1p-4f), 0x02);                  // tie 1/8 | 2/8 -> 2/8
  // Largest subnormal rounding up into the smallest normal.
  EXPECT_EQ(engine::fp32_to_e2m3(0.9375f), 0x08);  // tie 7/8 | 1 -> 1 (even)
  EXPECT_EQ(engine::fp32_to_e3m2(0.21875f), 0x04);  // tie 3/16 | 1/4 -> 1/4
  // FP32 subnormal inputs are far below every element's smallest subnormal.
  EXPECT_EQ(engine::fp32_to_e2m1(float_of(0x007FFFFFu)), 0x0);
  EXPECT_EQ(engine::fp32_to_e2m1(float_of(0x807FFFFFu)), 0x8);
}

// ---- stochastic rounding -----------------------------------------------------

TEST(MxElements, StochasticIsAlwaysOneOfTheTwoNeighbours) {
  std::mt19937 rng(99);
  for (Format f : kFp6Fp4) {
    SCOPED_TRACE(engine::format_name(f));
    const mxref::ElemSpec s = mxref::elem_spec(f);
    int failures = 0;
    for (float x : sweep_inputs(s)) {
      const std::uint32_t rne = scalar_encode(f, x);
      const mxref::Bracket b = mxref::elem_bracket(s, static_cast<double>(x));
      for (int k = 0; k < 3; ++k) {
        const std::uint32_t r = k == 0 ? 0u : k == 1 ? 0xFFFFFFFFu : rng();
        const std::uint32_t c = scalar_encode_sr(f, x, r);
        if (c != engine::encode_sr(f, x, r) && ++failures <= 20)
          ADD_FAILURE() << "encode_sr differs from the scalar function at x = " << x;
        if (std::isnan(x)) {
          if (c != rne && ++failures <= 20) ADD_FAILURE() << "NaN must encode as +-max with its sign";
          continue;
        }
        const double got = mxref::elem_value(s, c);
        const bool ok = (std::fabs(got) == b.lo || std::fabs(got) == b.hi) &&
                        std::signbit(got) == std::signbit(x);
        if (!ok && ++failures <= 20)
          ADD_FAILURE() << "x = " << x << " random 0x" << std::hex << r << ": got " << got << ", neighbours "
                        << b.lo << " and " << b.hi;
        if (b.lo == b.hi && c != rne && ++failures <= 20)
          ADD_FAILURE() << "x = " << x << " is exact (or saturates) but stochastic gave 0x" << std::hex << c
                        << " and RNE 0x" << rne;
      }
    }
  }
}

// Counts the round-ups of x over n random words and checks them against
// the binomial mean n * p, p = (|x| - lo) / (hi - lo), within 5 sigma.
void expect_round_up_rate(double lo, double hi, float x, int n, std::mt19937& rng,
                          const std::function<double(std::uint32_t)>& round) {
  const double p = (std::fabs(static_cast<double>(x)) - lo) / (hi - lo);
  int ups = 0;
  for (int i = 0; i < n; ++i) {
    const double v = std::fabs(round(rng()));
    if (v == hi) ++ups;
    else ASSERT_EQ(v, lo) << "x = " << x;
  }
  const double sigma = std::sqrt(n * p * (1.0 - p));
  EXPECT_NEAR(ups, n * p, 5.0 * sigma + 1.0) << "x = " << x << " lo " << lo << " hi " << hi << " p " << p;
}

TEST(MxElements, StochasticRoundUpProbabilityIsTheDiscardedFraction) {
  std::mt19937 rng(2024);
  constexpr int kDraws = 6000;
  for (Format f : kFp6Fp4) {
    SCOPED_TRACE(engine::format_name(f));
    const mxref::ElemSpec s = mxref::elem_spec(f);
    // Points inside every gap between adjacent magnitudes (subnormal gaps
    // included) at fractions 1/8, 1/2, 0.3 and 0.9, with random signs.
    for (std::uint32_t c = 0; c < mxref::max_magnitude_code(s); ++c) {
      const double lo = mxref::elem_value(s, c), hi = mxref::elem_value(s, c + 1);
      for (double t : {0.125, 0.5, 0.3, 0.9}) {
        float x = static_cast<float>(lo + t * (hi - lo));
        if (rng() & 1u) x = -x;
        expect_round_up_rate(lo, hi, x, kDraws, rng, [&](std::uint32_t r) {
          return mxref::elem_value(s, scalar_encode_sr(f, x, r));
        });
      }
    }
    // Below the smallest subnormal: rounds to zero or to it.
    const double sub = mxref::elem_value(s, 1);
    const float tiny = static_cast<float>(sub * 0.2);
    expect_round_up_rate(0.0, sub, tiny, kDraws, rng,
                         [&](std::uint32_t r) { return mxref::elem_value(s, scalar_encode_sr(f, tiny, r)); });
    // Beyond max: always max.
    for (int i = 0; i < 100; ++i) {
      EXPECT_EQ(scalar_encode_sr(f, static_cast<float>(s.max) * 1.01f, rng()), mxref::max_magnitude_code(s));
      EXPECT_EQ(scalar_encode_sr(f, -INFINITY, rng()), mxref::max_magnitude_code(s) | mxref::sign_bit(s));
    }
  }
}

// ---- E8M0 ------------------------------------------------------------------

TEST(E8M0, EveryCodeDecodes) {
  for (std::uint32_t c = 0; c < 255; ++c) {
    const float v = engine::e8m0_to_fp32(static_cast<std::uint8_t>(c));
    EXPECT_EQ(static_cast<double>(v), std::ldexp(1.0, static_cast<int>(c) - 127)) << c;
    EXPECT_EQ(engine::decode(Format::E8M0, c), v) << c;
  }
  EXPECT_EQ(engine::e8m0_to_fp32(0), 0x1p-127f);
  EXPECT_EQ(engine::e8m0_to_fp32(127), 1.0f);
  EXPECT_EQ(engine::e8m0_to_fp32(254), 0x1p127f);
  EXPECT_TRUE(std::isnan(engine::e8m0_to_fp32(255)));
  EXPECT_TRUE(std::isnan(engine::decode(Format::E8M0, 0xFF)));
}

TEST(E8M0, EncodeFollowsTheHeaderRules) {
  for (std::uint32_t c = 0; c < 255; ++c) {
    const float v = engine::e8m0_to_fp32(static_cast<std::uint8_t>(c));
    EXPECT_EQ(engine::fp32_to_e8m0(v), c);
    EXPECT_EQ(engine::encode(Format::E8M0, v), c);
  }
  // Nearest power of two, ties (1.5 * 2^e) to the even code.
  EXPECT_EQ(engine::fp32_to_e8m0(1.4999999f), 127);  // -> 1
  EXPECT_EQ(engine::fp32_to_e8m0(1.5f), 128);        // 1 (127) | 2 (128) -> 2
  EXPECT_EQ(engine::fp32_to_e8m0(3.0f), 128);        // 2 (128) | 4 (129) -> 2
  EXPECT_EQ(engine::fp32_to_e8m0(3.0000002f), 129);
  EXPECT_EQ(engine::fp32_to_e8m0(0.75f), 126);       // 0.5 (126) | 1 (127) -> 0.5
  EXPECT_EQ(engine::fp32_to_e8m0(0.7500001f), 127);
  EXPECT_EQ(engine::fp32_to_e8m0(1.9f), 128);
  EXPECT_EQ(engine::fp32_to_e8m0(1.2f), 127);
  EXPECT_EQ(engine::fp32_to_e8m0(448.0f), 136);  // 448 = 1.75 * 2^8 -> 2^9
  // Saturation and the special inputs.
  EXPECT_EQ(engine::fp32_to_e8m0(0x1.8p127f), 0xFE);  // tie 2^127 | (2^128) -> saturates
  EXPECT_EQ(engine::fp32_to_e8m0(FLT_MAX), 0xFE);
  EXPECT_EQ(engine::fp32_to_e8m0(INFINITY), 0xFE);
  EXPECT_EQ(engine::fp32_to_e8m0(0.0f), 0x00);
  EXPECT_EQ(engine::fp32_to_e8m0(-0.0f), 0x00);
  EXPECT_EQ(engine::fp32_to_e8m0(-1.0f), 0xFF);
  EXPECT_EQ(engine::fp32_to_e8m0(-FLT_MIN), 0xFF);
  EXPECT_EQ(engine::fp32_to_e8m0(float_of(0x80000001u)), 0xFF);
  EXPECT_EQ(engine::fp32_to_e8m0(-INFINITY), 0xFF);
  EXPECT_EQ(engine::fp32_to_e8m0(std::numeric_limits<float>::quiet_NaN()), 0xFF);
  EXPECT_EQ(engine::fp32_to_e8m0(float_of(0xFFC00000u)), 0xFF);
  // FP32 subnormals: 2^-127 = 0x00400000 is code 0, 2^-126 (FLT_MIN) code 1.
  EXPECT_EQ(engine::fp32_to_e8m0(float_of(0x00000001u)), 0x00);  // below 2^-127: saturates up
  EXPECT_EQ(engine::fp32_to_e8m0(float_of(0x003FFFFFu)), 0x00);
  EXPECT_EQ(engine::fp32_to_e8m0(float_of(0x00400000u)), 0x00);
  EXPECT_EQ(engine::fp32_to_e8m0(float_of(0x005FFFFFu)), 0x00);
  EXPECT_EQ(engine::fp32_to_e8m0(float_of(0x00600000u)), 0x00);  // tie 1.5 * 2^-127 -> even code 0
  EXPECT_EQ(engine::fp32_to_e8m0(float_of(0x00600001u)), 0x01);
  EXPECT_EQ(engine::fp32_to_e8m0(float_of(0x007FFFFFu)), 0x01);
  EXPECT_EQ(engine::fp32_to_e8m0(FLT_MIN), 0x01);
  EXPECT_EQ(engine::fp32_to_e8m0(0x1.8p-126f), 0x02);  // tie 2^-126 (1) | 2^-125 (2) -> 2
}

TEST(E8M0, EncodeEqualsNearestPowerOfTwoSearch) {
  std::vector<float> xs;
  for (std::uint32_t b = 0; b < (1u << 16); ++b) xs.push_back(float_of(b << 16));
  for (int e = -130; e <= 127; ++e) {
    const float p = std::ldexp(1.0f, e);
    const float tie = 1.5f * p;
    for (float x : {p, tie, std::nextafter(tie, 0.0f), std::nextafter(tie, INFINITY), std::nextafter(p, 0.0f),
                    std::nextafter(p, INFINITY)})
      xs.push_back(x);
  }
  std::mt19937 rng(5);
  for (int i = 0; i < 300000; ++i) xs.push_back(float_of(rng()));
  for (std::uint32_t u = 0; u < (1u << 23); u += 4093) xs.push_back(float_of(u));  // FP32 subnormals
  int failures = 0;
  for (float x : xs) {
    const std::uint8_t want = mxref::e8m0_encode_nearest(x);
    const std::uint8_t got = engine::fp32_to_e8m0(x);
    if (got != want || engine::encode(Format::E8M0, x) != want) {
      ADD_FAILURE() << "x = " << x << " (0x" << std::hex << bits_of(x) << "): want 0x" << int(want) << " got 0x"
                    << int(got);
      if (++failures > 20) return;
    }
  }
}

TEST(E8M0, StochasticRoundsBetweenAdjacentPowersOfTwo) {
  std::mt19937 rng(77);
  constexpr int kDraws = 6000;
  for (int e : {-127, -100, -1, 0, 5, 126}) {
    const double lo = std::ldexp(1.0, e), hi = std::ldexp(1.0, e + 1);
    for (double t : {0.1, 0.25, 0.5, 0.6, 0.97}) {
      const float x = static_cast<float>(lo + t * (hi - lo));
      SCOPED_TRACE(x);
      expect_round_up_rate(lo, hi, x, kDraws, rng, [&](std::uint32_t r) {
        return mxref::e8m0_value(engine::fp32_to_e8m0_sr(x, r));
      });
    }
  }
  for (int i = 0; i < 200; ++i) {
    const std::uint32_t r = rng();
    // Exact powers of two stay; specials follow the RNE rules.
    EXPECT_EQ(engine::fp32_to_e8m0_sr(1.0f, r), 127);
    EXPECT_EQ(engine::fp32_to_e8m0_sr(0x1p-127f, r), 0);
    EXPECT_EQ(engine::fp32_to_e8m0_sr(0x1p127f, r), 254);
    EXPECT_EQ(engine::fp32_to_e8m0_sr(0x1.fffffep127f, r), 0xFE);  // no 2^128: saturates
    EXPECT_EQ(engine::fp32_to_e8m0_sr(INFINITY, r), 0xFE);
    EXPECT_EQ(engine::fp32_to_e8m0_sr(0.0f, r), 0x00);
    EXPECT_EQ(engine::fp32_to_e8m0_sr(-0.0f, r), 0x00);
    EXPECT_EQ(engine::fp32_to_e8m0_sr(float_of(0x00000010u), r), 0x00);  // below 2^-127
    EXPECT_EQ(engine::fp32_to_e8m0_sr(-2.0f, r), 0xFF);
    EXPECT_EQ(engine::fp32_to_e8m0_sr(std::numeric_limits<float>::quiet_NaN(), r), 0xFF);
    EXPECT_EQ(engine::encode_sr(Format::E8M0, 3.0f, r), engine::fp32_to_e8m0_sr(3.0f, r));
  }
}

// ---- format table, names -----------------------------------------------------

TEST(MxFormats, FormatInfoOfTheElementAndScaleFormats) {
  struct Want {
    Format f;
    const char* name;
    int bits, exp_bits, man_bits, bias;
    double max, min_normal, min_subnormal, epsilon;
    bool has_nan;
  };
  const Want wants[] = {
      {Format::E3M2, "FP6-E3M2", 6, 3, 2, 3, 28.0, 0x1p-2, 0x1p-4, 0.25, false},
      {Format::E2M3, "FP6-E2M3", 6, 2, 3, 1, 7.5, 1.0, 0x1p-3, 0.125, false},
      {Format::E2M1, "FP4-E2M1", 4, 2, 1, 1, 6.0, 1.0, 0.5, 0.5, false},
      {Format::E8M0, "E8M0", 8, 8, 0, 127, 0x1p127, 0x1p-127, 0x1p-127, 1.0, true},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(w.name);
    const engine::FormatInfo& i = engine::format_info(w.f);
    EXPECT_STREQ(i.name, w.name);
    EXPECT_STREQ(engine::format_name(w.f), w.name);
    EXPECT_EQ(i.bits, w.bits);
    EXPECT_EQ(i.exp_bits, w.exp_bits);
    EXPECT_EQ(i.man_bits, w.man_bits);
    EXPECT_EQ(i.bias, w.bias);
    EXPECT_EQ(i.storage_bytes, 1);  // one code per byte, unpacked
    EXPECT_EQ(engine::storage_bytes(w.f), 1u);
    EXPECT_EQ(i.max, w.max);
    EXPECT_EQ(i.min_normal, w.min_normal);
    EXPECT_EQ(i.min_subnormal, w.min_subnormal);
    EXPECT_EQ(i.epsilon, w.epsilon);
    EXPECT_FALSE(i.has_inf);
    EXPECT_EQ(i.has_nan, w.has_nan);
  }
  // Block formats describe their element format, with no storage of their own.
  struct BlockWant {
    Format f;
    const char* name;
    Format element;
  };
  const BlockWant blocks[] = {{Format::MXFP8, "MXFP8", Format::E4M3},
                              {Format::MXFP8_E5M2, "MXFP8-E5M2", Format::E5M2},
                              {Format::MXFP6, "MXFP6", Format::E2M3},
                              {Format::MXFP6_E3M2, "MXFP6-E3M2", Format::E3M2},
                              {Format::MXFP4, "MXFP4", Format::E2M1},
                              {Format::NVFP4, "NVFP4", Format::E2M1}};
  for (const BlockWant& b : blocks) {
    SCOPED_TRACE(b.name);
    const engine::FormatInfo& i = engine::format_info(b.f);
    const engine::FormatInfo& e = engine::format_info(b.element);
    EXPECT_STREQ(i.name, b.name);
    EXPECT_EQ(i.storage_bytes, 0);
    EXPECT_FALSE(i.has_inf);
    EXPECT_EQ(i.bits, e.bits);
    EXPECT_EQ(i.exp_bits, e.exp_bits);
    EXPECT_EQ(i.man_bits, e.man_bits);
    EXPECT_EQ(i.bias, e.bias);
    EXPECT_EQ(i.max, e.max);
    EXPECT_EQ(i.min_subnormal, e.min_subnormal);
  }
}

TEST(MxFormats, FamiliesPartitionTheEnum) {
  std::set<int> seen;
  for (Format f : engine::kAllFormats) EXPECT_TRUE(seen.insert(static_cast<int>(f)).second);
  for (Format f : engine::kElementFormats) EXPECT_TRUE(seen.insert(static_cast<int>(f)).second);
  for (Format f : engine::kBlockFormats) EXPECT_TRUE(seen.insert(static_cast<int>(f)).second);
  EXPECT_EQ(static_cast<int>(seen.size()), engine::kFormatEnumCount);
  EXPECT_EQ(engine::kFormatEnumCount, 16);
  for (int v = 0; v < engine::kFormatEnumCount; ++v) {
    const Format f = static_cast<Format>(v);
    EXPECT_TRUE(seen.count(v)) << v;
    const int families = int(engine::is_tensor_format(f)) + int(engine::is_element_format(f)) +
                         int(engine::is_block_format(f));
    EXPECT_EQ(families, 1) << engine::format_name(f);
  }
  for (Format f : engine::kElementFormats) EXPECT_TRUE(engine::is_element_format(f)) << engine::format_name(f);
  for (Format f : engine::kBlockFormats) EXPECT_TRUE(engine::is_block_format(f)) << engine::format_name(f);
  for (Format f : engine::kAllFormats) EXPECT_TRUE(engine::is_tensor_format(f)) << engine::format_name(f);
}

TEST(MxFormats, KeysAndNamesParseBackForAllSixteenFormats) {
  const char* keys[] = {"fp32", "tf32", "bf16", "fp16", "e5m2", "e4m3", "e3m2", "e2m3",
                        "e2m1", "e8m0", "mxfp8", "mxfp8-e5m2", "mxfp6", "mxfp6-e3m2", "mxfp4", "nvfp4"};
  std::set<std::string> distinct;
  for (int v = 0; v < engine::kFormatEnumCount; ++v) {
    const Format f = static_cast<Format>(v);
    SCOPED_TRACE(engine::format_name(f));
    EXPECT_STREQ(engine::format_key(f), keys[v]);
    EXPECT_EQ(engine::parse_format(engine::format_key(f)), f);
    EXPECT_EQ(engine::parse_format(engine::format_name(f)), f);
    EXPECT_TRUE(distinct.insert(engine::format_key(f)).second);
  }
  // The other spellings of format.h.
  EXPECT_EQ(engine::parse_format("fp6-e3m2"), Format::E3M2);
  EXPECT_EQ(engine::parse_format("fp6-e2m3"), Format::E2M3);
  EXPECT_EQ(engine::parse_format("fp4-e2m1"), Format::E2M1);
  EXPECT_EQ(engine::parse_format("FP4-E2M1"), Format::E2M1);
  EXPECT_EQ(engine::parse_format("mxfp8-e4m3"), Format::MXFP8);
  EXPECT_EQ(engine::parse_format("mxfp6-e2m3"), Format::MXFP6);
  EXPECT_EQ(engine::parse_format("MXFP8-E5M2"), Format::MXFP8_E5M2);
  EXPECT_EQ(engine::parse_format("NVFP4"), Format::NVFP4);
  EXPECT_FALSE(engine::parse_format("fp4").has_value());
  EXPECT_FALSE(engine::parse_format("mxfp5").has_value());
  EXPECT_FALSE(engine::parse_format("e8m1").has_value());
}

// ---- inspect ---------------------------------------------------------------

TEST(MxInspect, BitsFieldsAndNeighboursOfElementCodes) {
  using engine::ValueClass;
  {
    const engine::Inspection i = engine::inspect_bits(Format::E2M1, 0b0111);
    EXPECT_EQ(i.value, 6.0);
    EXPECT_EQ(i.field_bits, 0b0111u);
    EXPECT_EQ(engine::binary_fields(Format::E2M1, i.field_bits), "0|11|1");
    EXPECT_EQ(engine::hex_bits(Format::E2M1, i.bits), "0x07");
    EXPECT_EQ(i.cls, ValueClass::Normal);
    EXPECT_EQ(i.prev, 4.0);
    EXPECT_EQ(i.gap_down, 2.0);
  }
  {
    const engine::Inspection i = engine::inspect_bits(Format::E2M1, 0b1001);
    EXPECT_EQ(i.value, -0.5);
    EXPECT_EQ(engine::binary_fields(Format::E2M1, i.field_bits), "1|00|1");
    EXPECT_EQ(i.cls, ValueClass::Subnormal);
    EXPECT_EQ(i.prev, -1.0);
    EXPECT_EQ(i.next, 0.0);
  }
  // Bits beyond the 4-bit (6-bit) width are ignored.
  EXPECT_EQ(engine::inspect_bits(Format::E2M1, 0xF7).value, 6.0);
  EXPECT_EQ(engine::inspect_bits(Format::E2M1, 0x13).value, 1.5);
  EXPECT_EQ(engine::inspect_bits(Format::E3M2, 0xDF).value, 28.0);
  {
    const engine::Inspection i = engine::inspect_bits(Format::E3M2, 0b011111);
    EXPECT_EQ(i.value, 28.0);
    EXPECT_EQ(engine::binary_fields(Format::E3M2, i.field_bits), "0|111|11");
    EXPECT_EQ(i.prev, 24.0);
  }
  {
    const engine::Inspection i = engine::inspect_bits(Format::E2M3, 0b000001);
    EXPECT_EQ(i.value, 0.125);
    EXPECT_EQ(engine::binary_fields(Format::E2M3, i.field_bits), "0|00|001");
    EXPECT_EQ(i.cls, ValueClass::Subnormal);
    EXPECT_EQ(i.prev, 0.0);
    EXPECT_EQ(i.next, 0.25);
  }
  {
    const engine::Inspection i = engine::inspect_bits(Format::E2M3, 0b001000);
    EXPECT_EQ(i.value, 1.0);
    EXPECT_EQ(i.cls, ValueClass::Normal);
    EXPECT_EQ(i.prev, 0.875);
    EXPECT_EQ(i.next, 1.125);
  }
  // E8M0: no sign bit, eight exponent bits, neighbours are adjacent powers of two.
  {
    const engine::Inspection i = engine::inspect_bits(Format::E8M0, 127);
    EXPECT_EQ(i.value, 1.0);
    EXPECT_EQ(engine::binary_fields(Format::E8M0, i.field_bits), "01111111");
    EXPECT_EQ(engine::hex_bits(Format::E8M0, i.bits), "0x7F");
    EXPECT_EQ(i.prev, 0.5);
    EXPECT_EQ(i.next, 2.0);
  }
  {
    const engine::Inspection lo = engine::inspect_bits(Format::E8M0, 0);
    EXPECT_EQ(lo.value, std::ldexp(1.0, -127));
    EXPECT_TRUE(std::isnan(lo.prev));
    EXPECT_EQ(lo.next, std::ldexp(1.0, -126));
    const engine::Inspection hi = engine::inspect_bits(Format::E8M0, 254);
    EXPECT_EQ(hi.value, std::ldexp(1.0, 127));
    EXPECT_EQ(hi.prev, std::ldexp(1.0, 126));
    EXPECT_TRUE(std::isnan(hi.next));
    const engine::Inspection nan = engine::inspect_bits(Format::E8M0, 255);
    EXPECT_EQ(nan.cls, ValueClass::NaN);
    EXPECT_EQ(engine::binary_fields(Format::E8M0, 255), "11111111");
  }
  // Rounding a value into the element formats.
  {
    const engine::Inspection i = engine::inspect(Format::E2M1, 100.0f);
    EXPECT_EQ(i.value, 6.0);
    EXPECT_TRUE(i.saturated);
    EXPECT_FALSE(i.overflowed);
    const engine::Inspection u = engine::inspect(Format::E3M2, 0.03f);
    EXPECT_EQ(u.value, 0.0);
    EXPECT_TRUE(u.underflowed);
    const engine::Inspection r = engine::inspect(Format::E2M3, 1.3f);
    EXPECT_EQ(r.value, 1.25);
    EXPECT_EQ(r.bits, 0b001010u);
    EXPECT_NEAR(r.abs_error, 0.05, 1e-6);
  }
}

// header: "The representable neighbours of `value` (NaN where none: past
// max, ...)". The largest FP6/FP4 magnitude has no neighbour away from zero:
// the code one above it is the sign bit (-0), not a value past max.
TEST(MxInspect, NoNeighbourPastMax) {
  for (Format f : kFp6Fp4) {
    SCOPED_TRACE(engine::format_name(f));
    const mxref::ElemSpec s = mxref::elem_spec(f);
    const std::uint32_t top = mxref::max_magnitude_code(s);
    const engine::Inspection pos = engine::inspect_bits(f, top);
    EXPECT_EQ(pos.value, s.max);
    EXPECT_TRUE(std::isnan(pos.next)) << "next of +max = " << pos.next;
    EXPECT_TRUE(std::isnan(pos.gap_up)) << "gap_up of +max = " << pos.gap_up;
    const engine::Inspection neg = engine::inspect_bits(f, top | mxref::sign_bit(s));
    EXPECT_EQ(neg.value, -s.max);
    EXPECT_TRUE(std::isnan(neg.prev)) << "prev of -max = " << neg.prev;
  }
}

// ---- bulk casts ----------------------------------------------------------------

std::vector<CastPath> supported_paths() {
  std::vector<CastPath> out;
  for (CastPath p : kPaths)
    if (engine::cast_path_supported(p)) out.push_back(p);
  return out;
}

TEST(MxCasts, BulkCastsEqualTheScalarFunctionsOnEveryPath) {
  std::vector<float> src = sweep_inputs(mxref::elem_spec(Format::E2M1));
  src.resize(100003);  // an odd length: vector tails
  for (Format f : engine::kElementFormats) {
    SCOPED_TRACE(engine::format_name(f));
    const std::size_t n = src.size();
    std::vector<std::uint8_t> want_codes(n);
    std::vector<float> want_q(n);
    for (std::size_t i = 0; i < n; ++i) {
      want_codes[i] = static_cast<std::uint8_t>(engine::encode(f, src[i]));
      want_q[i] = engine::decode(f, want_codes[i]);
    }
    std::vector<std::uint8_t> all_codes(256);
    for (int c = 0; c < 256; ++c) all_codes[c] = static_cast<std::uint8_t>(c);
    const std::uint32_t ncodes = f == Format::E8M0 ? 256u : mxref::code_count(mxref::elem_spec(f));

    for (CastPath p : supported_paths()) {
      SCOPED_TRACE(engine::cast_path_name(p));
      for (bool sat : {false, true}) {
        CastOptions opt;
        opt.saturate = sat;  // elements always saturate: no difference
        std::vector<std::uint8_t> codes(n + 1, 0xA5);
        engine::cast_from_f32_path(p, f, src.data(), codes.data(), n, opt);
        for (std::size_t i = 0; i < n; ++i)
          ASSERT_EQ(codes[i], want_codes[i]) << "x = " << src[i] << " at " << i;
        EXPECT_EQ(codes[n], 0xA5) << "wrote past the end";
        std::vector<float> q = src;
        engine::quantize_inplace_path(p, f, q.data(), n, opt);
        for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(same_float(q[i], want_q[i])) << "x = " << src[i];
      }
      std::vector<float> dec(ncodes + 1, 42.0f);
      engine::cast_to_f32_path(p, f, all_codes.data(), dec.data(), ncodes);
      for (std::uint32_t c = 0; c < ncodes; ++c)
        ASSERT_TRUE(same_float(dec[c], engine::decode(f, c))) << "code " << c;
      EXPECT_EQ(dec[ncodes], 42.0f);
      // Stochastic: element i uses stochastic_bits(seed, index_offset + i).
      CastOptions sr;
      sr.stochastic = true;
      sr.seed = 31337;
      sr.index_offset = 1000;
      std::vector<std::uint8_t> codes(n);
      engine::cast_from_f32_path(p, f, src.data(), codes.data(), n, sr);
      std::vector<float> q = src;
      engine::quantize_inplace_path(p, f, q.data(), n, sr);
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint32_t want = engine::encode_sr(f, src[i], engine::stochastic_bits(sr.seed, 1000 + i));
        ASSERT_EQ(codes[i], want) << "x = " << src[i] << " at " << i;
        ASSERT_TRUE(same_float(q[i], engine::decode(f, want))) << "x = " << src[i];
      }
    }
    // The default entry points.
    std::vector<std::uint8_t> codes(src.size());
    engine::cast_from_f32(f, src.data(), codes.data(), n);
    EXPECT_EQ(codes, want_codes);
    std::vector<float> q = src;
    engine::quantize_inplace(f, q.data(), n);
    for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(same_float(q[i], want_q[i]));
    std::vector<float> dec(ncodes);
    engine::cast_to_f32(f, all_codes.data(), dec.data(), ncodes);
    for (std::uint32_t c = 0; c < ncodes; ++c) ASSERT_TRUE(same_float(dec[c], engine::decode(f, c)));
  }
}

TEST(MxCasts, BlockFormatsHaveNoSingleValueCast) {
  float src[4] = {1.0f, 2.0f, -3.0f, 0.5f};
  std::uint8_t dst[16] = {};
  float out[4] = {};
  for (Format f : engine::kBlockFormats) {
    SCOPED_TRACE(engine::format_name(f));
    EXPECT_THROW(engine::encode(f, 1.0f), std::invalid_argument);
    EXPECT_THROW(engine::encode_sr(f, 1.0f, 123u), std::invalid_argument);
    EXPECT_THROW(engine::decode(f, 1u), std::invalid_argument);
    EXPECT_THROW(engine::cast_from_f32(f, src, dst, 4), std::invalid_argument);
    EXPECT_THROW(engine::cast_to_f32(f, dst, out, 4), std::invalid_argument);
    EXPECT_THROW(engine::quantize_inplace(f, src, 4), std::invalid_argument);
    CastOptions sr;
    sr.stochastic = true;
    EXPECT_THROW(engine::cast_from_f32(f, src, dst, 4, sr), std::invalid_argument);
    EXPECT_THROW(engine::quantize_inplace(f, src, 4, sr), std::invalid_argument);
    for (CastPath p : supported_paths()) {
      SCOPED_TRACE(engine::cast_path_name(p));
      EXPECT_THROW(engine::cast_from_f32_path(p, f, src, dst, 4), std::invalid_argument);
      EXPECT_THROW(engine::cast_to_f32_path(p, f, dst, out, 4), std::invalid_argument);
      EXPECT_THROW(engine::quantize_inplace_path(p, f, src, 4), std::invalid_argument);
      EXPECT_FALSE(engine::cast_path_covers(p, f, true) && p != CastPath::Scalar);
    }
  }
  // Nothing was modified by the throwing in-place calls.
  EXPECT_EQ(src[0], 1.0f);
  EXPECT_EQ(src[2], -3.0f);
}

}  // namespace
