// Tests of the bulk casts (cast.h): every vectorized path equals the scalar
// reference bit for bit, for every format and direction, at every length
// and alignment, whatever MXCSR says; nothing is written past the end.
#include <gtest/gtest.h>
#include <xmmintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "numeric/cast.h"
#include "numeric/convert.h"
#include "numeric/format.h"

namespace {

using engine::CastOptions;
using engine::CastPath;
using engine::Format;

constexpr CastPath kPaths[] = {CastPath::Scalar, CastPath::F16C, CastPath::AVX512, CastPath::AVX512BF16};
constexpr std::size_t kLengths[] = {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 127, 129, 1000, 4109};
constexpr std::uint8_t kGuard = 0xA5;

float float_of(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
std::uint32_t bits_of(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// Random FP32 patterns with every special class mixed in: signed zeros,
// infinities, quiet and signalling NaNs, FP32 subnormals, and values at the
// narrow formats' ties and overflow thresholds.
std::vector<float> hostile_floats(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const std::uint32_t specials[] = {
      0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u, 0x7F800001u,
      0x7FFFFFFFu, 0xFFBFFFFFu, 0x00000001u, 0x807FFFFFu, 0x00400000u, 0x00008000u, 0x00018000u,
      0x7F7FFFFFu, 0x7F7F8000u, 0x7F7F7FFFu, 0x477FF000u /*65520*/, 0x477FEFFFu, 0x47700000u /*61440*/,
      0x43E80000u /*464*/, 0x43E80001u, 0x43E00000u /*448*/, 0x33000000u /*2^-25*/, 0x33000001u,
      0x3A800000u /*2^-10*/, 0x37800000u /*2^-16*/, 0x37000000u /*2^-17*/, 0x3F808000u, 0x3F818000u,
      0x3F801000u, 0x3F803000u, 0x3B000000u /*2^-9*/, 0x3A800001u, 0x387FC000u, 0x38800000u};
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t r = rng();
    switch (r % 8) {
      case 0: v[i] = float_of(specials[rng() % std::size(specials)] ^ (rng() & 0x80000000u)); break;
      case 1:  // anywhere within about FP8/FP16 range
        v[i] = float_of((rng() & 0x807FFFFFu) | ((100u + rng() % 60u) << 23));
        break;
      case 2:  // exact ties of 3-bit to 10-bit mantissas near 1
        v[i] = float_of(0x3F800000u | ((rng() & 0x7Fu) << 16) | (1u << (12 + rng() % 8)));
        break;
      default: v[i] = float_of(rng()); break;
    }
  }
  return v;
}

std::string label(CastPath p, Format f, std::size_t n) {
  return std::string(engine::cast_path_name(p)) + " " + engine::format_name(f) + " n=" + std::to_string(n);
}

class CastPaths : public ::testing::TestWithParam<CastPath> {
 protected:
  void SetUp() override {
    if (!engine::cast_path_supported(GetParam()))
      GTEST_SKIP() << engine::cast_path_name(GetParam()) << " not supported by this CPU";
  }
};

// FP32 -> f through path p against the element-wise scalar reference, at
// offset `misalign` elements from an aligned buffer, with guard bytes after.
void check_from_f32(CastPath p, Format f, std::size_t n, std::size_t misalign, bool saturate,
                    std::uint32_t seed) {
  const std::size_t w = engine::storage_bytes(f);
  const std::vector<float> src_all = hostile_floats(n + misalign, seed);
  const float* src = src_all.data() + misalign;
  std::vector<std::uint8_t> dst((n + misalign + 64) * w, kGuard);
  std::uint8_t* out = dst.data() + misalign * w;
  CastOptions opt;
  opt.saturate = saturate;
  engine::cast_from_f32_path(p, f, src, out, n, opt);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t want = engine::encode(f, src[i], saturate);
    std::uint32_t got = 0;
    std::memcpy(&got, out + i * w, w);
    ASSERT_EQ(got, want) << label(p, f, n) << " sat=" << saturate << " i=" << i << " x=0x" << std::hex
                         << bits_of(src[i]);
  }
  for (std::size_t b = (misalign + n) * w; b < dst.size(); ++b)
    ASSERT_EQ(dst[b], kGuard) << label(p, f, n) << ": wrote past the end";
  for (std::size_t b = 0; b < misalign * w; ++b) ASSERT_EQ(dst[b], kGuard) << label(p, f, n);
}

void check_to_f32(CastPath p, Format f, std::size_t n, std::size_t misalign, std::uint32_t seed) {
  const std::size_t w = engine::storage_bytes(f);
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> src_all((n + misalign) * w);
  for (auto& b : src_all) b = static_cast<std::uint8_t>(rng());
  const std::uint8_t* src = src_all.data() + misalign * w;
  std::vector<float> dst(n + misalign + 32, float_of(0x5A5A5A5Au));
  engine::cast_to_f32_path(p, f, src, dst.data() + misalign, n);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t code = 0;
    std::memcpy(&code, src + i * w, w);
    ASSERT_EQ(bits_of(dst[misalign + i]), bits_of(engine::decode(f, code)))
        << label(p, f, n) << " i=" << i << " code=0x" << std::hex << code;
  }
  for (std::size_t i = misalign + n; i < dst.size(); ++i)
    ASSERT_EQ(bits_of(dst[i]), 0x5A5A5A5Au) << label(p, f, n) << ": wrote past the end";
}

void check_quantize(CastPath p, Format f, std::size_t n, std::size_t misalign, bool saturate,
                    std::uint32_t seed) {
  const std::vector<float> orig = hostile_floats(n + misalign + 32, seed);
  std::vector<float> x = orig;
  CastOptions opt;
  opt.saturate = saturate;
  engine::quantize_inplace_path(p, f, x.data() + misalign, n, opt);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const bool inside = i >= misalign && i < misalign + n;
    const float want = inside ? engine::quantize(f, orig[i], saturate) : orig[i];
    ASSERT_EQ(bits_of(x[i]), bits_of(want)) << label(p, f, n) << " sat=" << saturate << " i=" << i
                                            << " x=0x" << std::hex << bits_of(orig[i]);
  }
}

TEST_P(CastPaths, FromF32EqualsScalarForEveryFormat) {
  std::uint32_t seed = 1;
  for (Format f : engine::kAllFormats)
    for (std::size_t n : kLengths)
      for (std::size_t mis : {0, 1, 3})
        for (bool sat : {false, true}) check_from_f32(GetParam(), f, n, mis, sat, seed++);
}

TEST_P(CastPaths, ToF32EqualsScalarForEveryFormat) {
  std::uint32_t seed = 1000;
  for (Format f : engine::kAllFormats)
    for (std::size_t n : kLengths)
      for (std::size_t mis : {0, 1, 3}) check_to_f32(GetParam(), f, n, mis, seed++);
}

TEST_P(CastPaths, QuantizeInplaceEqualsScalar) {
  std::uint32_t seed = 2000;
  for (Format f : engine::kAllFormats)
    for (std::size_t n : kLengths)
      for (std::size_t mis : {0, 1})
        for (bool sat : {false, true}) check_quantize(GetParam(), f, n, mis, sat, seed++);
}

// Every FP16/BF16/FP8 code decodes identically on the path (exhaustive).
TEST_P(CastPaths, DecodesEveryCode) {
  for (Format f : {Format::BF16, Format::FP16, Format::E5M2, Format::E4M3}) {
    const std::size_t w = engine::storage_bytes(f);
    const std::size_t n = w == 1 ? 256 : 65536;
    std::vector<std::uint8_t> codes(n * w);
    for (std::size_t c = 0; c < n; ++c) std::memcpy(&codes[c * w], &c, w);
    std::vector<float> out(n);
    engine::cast_to_f32_path(GetParam(), f, codes.data(), out.data(), n);
    for (std::size_t c = 0; c < n; ++c)
      ASSERT_EQ(bits_of(out[c]), bits_of(engine::decode(f, static_cast<std::uint32_t>(c))))
          << engine::format_name(f) << std::hex << " code 0x" << c;
  }
}

// Every representable value of each narrow format, the exact midpoint to
// its neighbour (ties both ways), one FP32 ulp either side of both, with
// both signs: the rounding decisions the vector kernels make differently
// from the scalar code (subnormal units by FP32 addition, overflow clamps).
TEST_P(CastPaths, TiesAndNeighboursOfEveryCode) {
  for (Format f : {Format::BF16, Format::FP16, Format::E5M2, Format::E4M3}) {
    const std::uint32_t positive_codes = engine::storage_bytes(f) == 1 ? 0x80u : 0x8000u;
    std::vector<float> xs;
    for (std::uint32_t c = 0; c + 1 < positive_codes; ++c) {
      const float a = engine::decode(f, c);
      const float b = engine::decode(f, c + 1);
      if (!std::isfinite(a)) continue;
      const float mid = std::isfinite(b) ? static_cast<float>((static_cast<double>(a) + b) / 2) : a * 1.0625f;
      for (float v : {a, mid}) {
        for (float w : {v, std::nextafter(v, INFINITY), std::nextafter(v, -INFINITY)}) {
          xs.push_back(w);
          xs.push_back(-w);
        }
      }
    }
    for (bool sat : {false, true}) {
      CastOptions opt;
      opt.saturate = sat;
      const std::size_t w = engine::storage_bytes(f);
      std::vector<std::uint8_t> got(xs.size() * w), want(xs.size() * w);
      engine::cast_from_f32_path(GetParam(), f, xs.data(), got.data(), xs.size(), opt);
      engine::cast_from_f32_path(CastPath::Scalar, f, xs.data(), want.data(), xs.size(), opt);
      for (std::size_t i = 0; i < xs.size(); ++i)
        ASSERT_EQ(std::memcmp(&got[i * w], &want[i * w], w), 0)
            << engine::format_name(f) << " sat=" << sat << " x=" << xs[i] << " (0x" << std::hex << bits_of(xs[i]) << ")";
      std::vector<float> q = xs, qs = xs;
      engine::quantize_inplace_path(GetParam(), f, q.data(), q.size(), opt);
      engine::quantize_inplace_path(CastPath::Scalar, f, qs.data(), qs.size(), opt);
      ASSERT_EQ(std::memcmp(q.data(), qs.data(), q.size() * 4), 0) << engine::format_name(f);
    }
  }
}

// Large random arrays (1 Mi elements) per format: every path, both
// directions, with the FPU set to FTZ + DAZ + round-toward-zero, which the
// engine or a library (oneDNN) may leave behind. The integer kernels ignore
// MXCSR and the hardware conversions use an explicit rounding immediate.
TEST_P(CastPaths, IndependentOfMxcsr) {
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040u | 0x6000u);
  const std::size_t n = (1u << 20) + 5;
  const std::vector<float> src = hostile_floats(n, 77);
  bool ok = true;
  for (Format f : engine::kAllFormats) {
    const std::size_t w = engine::storage_bytes(f);
    std::vector<std::uint8_t> a(n * w), b(n * w);
    engine::cast_from_f32_path(GetParam(), f, src.data(), a.data(), n);
    engine::cast_from_f32_path(CastPath::Scalar, f, src.data(), b.data(), n);
    std::vector<float> da(n), db(n);
    engine::cast_to_f32_path(GetParam(), f, a.data(), da.data(), n);
    engine::cast_to_f32_path(CastPath::Scalar, f, a.data(), db.data(), n);
    std::vector<float> qa = src, qb = src;
    engine::quantize_inplace_path(GetParam(), f, qa.data(), n);
    engine::quantize_inplace_path(CastPath::Scalar, f, qb.data(), n);
    if (a != b || std::memcmp(da.data(), db.data(), n * 4) != 0 ||
        std::memcmp(qa.data(), qb.data(), n * 4) != 0) {
      ok = false;
      ADD_FAILURE() << engine::format_name(f) << " differs from scalar under FTZ/DAZ/RZ";
    }
  }
  _mm_setcsr(saved);
  EXPECT_TRUE(ok);
}

// Stochastic casts give the same bits on every path (they share the
// counter-based random stream) and equal the element-wise *_sr functions.
TEST_P(CastPaths, StochasticEqualsElementwise) {
  const std::size_t n = 3001;
  const std::vector<float> src = hostile_floats(n, 99);
  for (Format f : engine::kAllFormats) {
    for (bool sat : {false, true}) {
      CastOptions opt;
      opt.stochastic = true;
      opt.seed = 1234;
      opt.saturate = sat;
      const std::size_t w = engine::storage_bytes(f);
      std::vector<std::uint8_t> got(n * w), want(n * w);
      engine::cast_from_f32_path(GetParam(), f, src.data(), got.data(), n, opt);
      engine::cast_from_f32_path(CastPath::Scalar, f, src.data(), want.data(), n, opt);
      ASSERT_EQ(got, want) << engine::format_name(f);
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint32_t r = engine::stochastic_bits(opt.seed, i);
        std::uint32_t expect = 0;
        switch (f) {
          case Format::FP32: expect = bits_of(src[i]); break;
          case Format::TF32: continue;  // no scalar *_sr function for TF32; see test_stochastic
          case Format::BF16: expect = engine::fp32_to_bf16_sr(src[i], r); break;
          case Format::FP16: expect = engine::fp32_to_fp16_sr(src[i], r); break;
          case Format::E5M2: expect = engine::fp32_to_e5m2_sr(src[i], r, sat); break;
          case Format::E4M3: expect = engine::fp32_to_e4m3_sr(src[i], r, sat); break;
          default: FAIL() << "kAllFormats holds only tensor formats";
        }
        std::uint32_t g = 0;
        std::memcpy(&g, &got[i * w], w);
        ASSERT_EQ(g, expect) << engine::format_name(f) << " i=" << i;
      }
      std::vector<float> q = src;
      engine::quantize_inplace_path(GetParam(), f, q.data(), n, opt);
      std::vector<float> decoded(n);
      engine::cast_to_f32_path(CastPath::Scalar, f, want.data(), decoded.data(), n);
      ASSERT_EQ(std::memcmp(q.data(), decoded.data(), n * 4), 0) << engine::format_name(f);
    }
  }
}

// E5M2 through every FP32 pattern whose bits the encoder's two roundings
// look at: sign, exponent and the ten fraction bits an FP16 keeps (2^19
// combinations, so every E5M2 code, tie and overflow), each with the low 13
// bits an FP16 intermediate drops set to 0, 1, just below, at and above
// their half, and all ones (the sticky bit the round-to-odd step must not
// lose), saturating and not.
TEST_P(CastPaths, E5M2EveryFp16RoundingPattern) {
  const std::uint32_t lows[] = {0x0000u, 0x0001u, 0x0FFFu, 0x1000u, 0x1001u, 0x1FFFu};
  std::vector<float> xs;
  xs.reserve((1u << 19) * std::size(lows));
  for (std::uint32_t top = 0; top < (1u << 19); ++top)
    for (std::uint32_t low : lows) xs.push_back(float_of((top << 13) | low));
  for (bool sat : {false, true}) {
    CastOptions opt;
    opt.saturate = sat;
    std::vector<std::uint8_t> got(xs.size()), want(xs.size());
    engine::cast_from_f32_path(GetParam(), Format::E5M2, xs.data(), got.data(), xs.size(), opt);
    engine::cast_from_f32_path(CastPath::Scalar, Format::E5M2, xs.data(), want.data(), xs.size(), opt);
    for (std::size_t i = 0; i < xs.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << "sat=" << sat << " x=0x" << std::hex << bits_of(xs[i]);
  }
}

// Both FP8 encodes over a stride of every FP32 pattern (every 257th: each
// exponent, both signs, fractions all over; 16.7 million values), with and
// without saturation, and, through the scaled cast, under FTZ + DAZ +
// round-toward-zero (the F16C kernel rounds with an FP32 add, in the
// nearest-even mode it sets for the call). The whole 2^32 was checked
// once against the scalar encoders when that kernel was written.
TEST_P(CastPaths, Fp8EncodesAStrideOfEveryFp32Pattern) {
  constexpr std::uint64_t kStride = 257;
  std::vector<float> xs;
  xs.reserve((std::uint64_t{1} << 32) / kStride + 1);
  for (std::uint64_t u = 0; u < (std::uint64_t{1} << 32); u += kStride) xs.push_back(float_of(static_cast<std::uint32_t>(u)));
  std::vector<std::uint8_t> got(xs.size()), want(xs.size());
  for (Format f : {Format::E4M3, Format::E5M2})
    for (bool sat : {false, true}) {
      CastOptions opt;
      opt.saturate = sat;
      engine::cast_from_f32_path(GetParam(), f, xs.data(), got.data(), xs.size(), opt);
      engine::cast_from_f32_path(CastPath::Scalar, f, xs.data(), want.data(), xs.size(), opt);
      for (std::size_t i = 0; i < xs.size(); ++i)
        ASSERT_EQ(got[i], want[i]) << engine::format_name(f) << " sat=" << sat << " x=0x" << std::hex << bits_of(xs[i]);
      const unsigned saved = _mm_getcsr();
      _mm_setcsr(saved | 0x8040u | 0x6000u);
      std::uint32_t amax = 0;
      const bool fused = engine::scale_amax_cast_path(GetParam(), Format::FP32, xs.data(), 1.0f, f, got.data(),
                                                      xs.size(), opt, &amax);
      _mm_setcsr(saved);
      if (!fused) continue;  // no fused kernel on this path
      for (std::size_t i = 0; i < xs.size(); ++i)
        ASSERT_EQ(got[i], want[i]) << engine::format_name(f) << " sat=" << sat << " under RZ, x=0x" << std::hex
                                   << bits_of(xs[i]);
    }
}

// The fused scale + amax + cast of FP8 delayed scaling equals its steps
// (decode, FP32 product, max of the unscaled |x| bit patterns, scalar cast)
// at every length and alignment, from FP32 values and from BF16 and FP16
// codes (every class: random patterns), for scales that keep values in
// range, push them past the format's maximum (3e30: past FP32's too), and
// 1 (no multiply), and around 2^-118, below which E4M3's 2^-8 is no longer
// folded into the scale; paths without a fused kernel say so and write
// nothing.
TEST_P(CastPaths, ScaledCastWithAmaxEqualsItsSteps) {
  const CastPath p = GetParam();
  const bool fused_path = p != CastPath::Scalar;
  for (Format from : {Format::FP32, Format::BF16, Format::FP16}) {
    const std::size_t ws = engine::storage_bytes(from);
    for (Format f : {Format::E4M3, Format::E5M2}) {
      for (float scale : {1.0f, 0.4375f, 3.0f, 1.0e-3f, 1.0e4f, 3.0e30f, 0x1p-118f, 0x1.fffffep-119f}) {
        for (bool sat : {false, true}) {
          for (std::size_t n : kLengths) {
            const std::size_t misalign = n % 5;
            const std::uint32_t seed = static_cast<std::uint32_t>(n * 7 + 1);
            // The source: FP32 values, or random 16-bit codes.
            std::vector<float> values = hostile_floats(n + misalign, seed);
            std::vector<std::uint8_t> src_all((n + misalign) * ws);
            if (from == Format::FP32) {
              if (!src_all.empty()) std::memcpy(src_all.data(), values.data(), src_all.size());
            } else {
              std::mt19937 rng(seed);
              for (auto& b : src_all) b = static_cast<std::uint8_t>(rng());
              for (std::size_t i = 0; i < n + misalign; ++i) {
                std::uint16_t c = 0;
                std::memcpy(&c, &src_all[i * ws], 2);
                values[i] = engine::decode(from, c);
              }
            }
            std::vector<std::uint8_t> dst(n + misalign + 64, kGuard);
            CastOptions opt;
            opt.saturate = sat;
            std::uint32_t amax = 0xDEADBEEFu;
            const bool done = engine::scale_amax_cast_path(p, from, src_all.data() + misalign * ws, scale, f,
                                                           dst.data() + misalign, n, opt, &amax);
            const std::string what = label(p, f, n) + " from " + engine::format_name(from);
            ASSERT_EQ(done, fused_path) << what;
            if (!done) {
              for (std::uint8_t b : dst) ASSERT_EQ(b, kGuard) << what << ": wrote without a kernel";
              continue;
            }
            std::uint32_t want_amax = 0;
            for (std::size_t i = 0; i < n; ++i) {
              const float x = values[misalign + i];
              want_amax = std::max(want_amax, bits_of(x) & 0x7FFFFFFFu);
              const std::uint32_t want = engine::encode(f, x * scale, sat);
              ASSERT_EQ(dst[misalign + i], want) << what << " scale=" << scale << " sat=" << sat << " i=" << i
                                                 << " x=0x" << std::hex << bits_of(x);
            }
            ASSERT_EQ(amax, want_amax) << what << " scale=" << scale;
            for (std::size_t b = 0; b < misalign; ++b) ASSERT_EQ(dst[b], kGuard) << what;
            for (std::size_t b = misalign + n; b < dst.size(); ++b)
              ASSERT_EQ(dst[b], kGuard) << what << ": wrote past the end";
          }
        }
      }
    }
  }
  // Stochastic rounding has no fused kernel on any path, nor has a source
  // format other than FP32, BF16 and FP16.
  const float one = 1.0f;
  std::uint8_t code = kGuard;
  std::uint32_t amax = 0;
  CastOptions stochastic;
  stochastic.stochastic = true;
  EXPECT_FALSE(engine::scale_amax_cast_path(p, Format::FP32, &one, 2.0f, Format::E4M3, &code, 1, stochastic, &amax));
  const std::uint8_t e4m3_one = 0x38;
  EXPECT_FALSE(engine::scale_amax_cast_path(p, Format::E4M3, &e4m3_one, 2.0f, Format::E5M2, &code, 1, {}, &amax));
  EXPECT_EQ(code, kGuard);
}

INSTANTIATE_TEST_SUITE_P(AllPaths, CastPaths, ::testing::ValuesIn(kPaths),
                         [](const auto& info) { return std::string(engine::cast_path_name(info.param)); });

TEST(Cast, BestPathIsSupportedAndUsedByDefault) {
  const CastPath best = engine::best_cast_path();
  EXPECT_TRUE(engine::cast_path_supported(best));
  EXPECT_TRUE(engine::cast_path_supported(CastPath::Scalar));
  if (engine::cast_path_supported(CastPath::AVX512BF16)) {
    EXPECT_TRUE(engine::cast_path_supported(CastPath::AVX512));
  }
  const std::vector<float> src = hostile_floats(1025, 5);
  for (Format f : engine::kAllFormats) {
    const std::size_t w = engine::storage_bytes(f);
    std::vector<std::uint8_t> a(src.size() * w), b(src.size() * w);
    engine::cast_from_f32(f, src.data(), a.data(), src.size());
    engine::cast_from_f32_path(CastPath::Scalar, f, src.data(), b.data(), src.size());
    EXPECT_EQ(a, b) << engine::format_name(f);
  }
}

TEST(Cast, KnownValuesThroughTheDefaultPath) {
  const float src[] = {0.1f, 65504.0f, 65520.0f, -0.0f, 448.0f, 464.0f, 480.0f, 57344.0f, 61440.0f};
  std::uint16_t h[9], b[9];
  std::uint8_t e4[9], e4s[9], e5[9], e5s[9];
  engine::cast_from_f32(Format::FP16, src, h, 9);
  engine::cast_from_f32(Format::BF16, src, b, 9);
  engine::cast_from_f32(Format::E4M3, src, e4, 9);
  engine::cast_from_f32(Format::E5M2, src, e5, 9);
  CastOptions sat;
  sat.saturate = true;
  engine::cast_from_f32(Format::E4M3, src, e4s, 9, sat);
  engine::cast_from_f32(Format::E5M2, src, e5s, 9, sat);
  EXPECT_EQ(h[0], 0x2E66);
  EXPECT_EQ(b[0], 0x3DCD);
  EXPECT_EQ(h[1], 0x7BFF);
  EXPECT_EQ(h[2], 0x7C00);
  EXPECT_EQ(h[3], 0x8000);
  EXPECT_EQ(e4[4], 0x7E);
  EXPECT_EQ(e4[5], 0x7E);
  EXPECT_EQ(e4[6], 0x7F);
  EXPECT_EQ(e4s[6], 0x7E);
  EXPECT_EQ(e5[7], 0x7B);
  EXPECT_EQ(e5[8], 0x7C);
  EXPECT_EQ(e5s[8], 0x7B);
  float back[9];
  engine::cast_to_f32(Format::FP16, h, back, 9);
  EXPECT_EQ(back[0], 0.0999755859375f);
  EXPECT_TRUE(std::signbit(back[3]));
  float q[3] = {0.1f, 1e6f, 3.0e-8f};
  engine::quantize_inplace(Format::FP16, q, 3);
  EXPECT_EQ(q[0], 0.0999755859375f);
  EXPECT_TRUE(std::isinf(q[1]));
  EXPECT_EQ(q[2], 0x1p-24f);  // 3e-8 is above half the smallest subnormal (2^-25 = 2.98e-8)
}

TEST(Cast, Fp32AndTf32CastsCopyOrRound) {
  const std::vector<float> src = hostile_floats(517, 11);
  std::vector<float> out(src.size());
  engine::cast_from_f32(Format::FP32, src.data(), out.data(), src.size());
  EXPECT_EQ(std::memcmp(out.data(), src.data(), src.size() * 4), 0);
  engine::cast_from_f32(Format::TF32, src.data(), out.data(), src.size());
  for (std::size_t i = 0; i < src.size(); ++i)
    ASSERT_EQ(bits_of(out[i]), bits_of(engine::round_to_tf32(src[i])));
  std::vector<float> back(src.size());
  engine::cast_to_f32(Format::TF32, out.data(), back.data(), out.size());
  EXPECT_EQ(std::memcmp(out.data(), back.data(), out.size() * 4), 0);
}

TEST(Cast, CoverageIsReported) {
  // Scalar covers everything; the vector paths have kernels for every
  // narrow format (FP32 and TF32 -> FP32 are copies).
  for (Format f : engine::kAllFormats) EXPECT_TRUE(engine::cast_path_covers(CastPath::Scalar, f, true));
  EXPECT_TRUE(engine::cast_path_covers(CastPath::F16C, Format::FP16, true));
  EXPECT_TRUE(engine::cast_path_covers(CastPath::AVX512, Format::E4M3, true));
  EXPECT_TRUE(engine::cast_path_covers(CastPath::AVX512, Format::E5M2, false));
  EXPECT_TRUE(engine::cast_path_covers(CastPath::F16C, Format::E4M3, true));
  EXPECT_FALSE(engine::cast_path_covers(CastPath::AVX512, Format::TF32, false));  // a copy
}

}  // namespace
