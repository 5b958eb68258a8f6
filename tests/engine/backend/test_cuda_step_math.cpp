// The CUDA step entries' math (backend/cuda/step_math.cuh), compiled for the
// host, held bit for bit to the CPU backend and the scalar reference: the
// kernels in step.cu run these functions, so this is what a machine without
// a GPU can check of them. Block quantization runs the kernel's lane split
// (lane_amax_bits / lane_quantize) one lane at a time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "amp/grad_set.h"
#include "amp/loss_scaler.h"
#include "backend/backend.h"
#include "engine/support/same_bits.h"
#include "backend/cuda/step_math.cuh"
#include "numeric/block.h"
#include "numeric/cast.h"
#include "numeric/convert.h"
#include "numeric/format.h"
#include "numeric/inspect.h"

namespace {

using engine::Format;
namespace psm = pl_cuda::step_math;

using test::bits;
using test::from_bits;

engine::Backend& cpu() {
  static const std::unique_ptr<engine::Backend> be = engine::make_cpu_backend();
  return *be;
}

// The values every test mixes in: signed zeros, subnormals, the normal
// range's ends, huge values, infinities, NaNs (quiet, signalling, negative,
// with payloads).
const std::uint32_t kSpecials[] = {
    0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x000abcdeu, 0x807fffffu, 0x00800000u, 0x80800000u,
    0x7f7fffffu, 0xff7fffffu, 0x71800000u, 0xf2345678u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u,
    0x7fa12345u, 0xff812345u, 0x7fc0beefu, 0x3f800000u, 0x33800000u, 0x0d800000u,
};

struct ValueMix {
  int exp_lo = -30, exp_hi = 10;  // binades of the ordinary values
  double special = 0.0;           // share of kSpecials
  double zero = 0.0;              // share of +0
  bool positive = false;          // ordinary values only positive
};

std::vector<float> make_values(std::size_t n, std::uint64_t seed, const ValueMix& mix) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<int> expo(mix.exp_lo, mix.exp_hi);
  std::uniform_int_distribution<std::size_t> pick(0, std::size(kSpecials) - 1);
  std::vector<float> v(n);
  for (float& x : v) {
    const double r = unit(rng);
    if (r < mix.special) {
      x = from_bits(kSpecials[pick(rng)]);
    } else if (r < mix.special + mix.zero) {
      x = 0.0f;
    } else {
      const double m = std::ldexp(1.0 + unit(rng), expo(rng));
      x = static_cast<float>(!mix.positive && unit(rng) < 0.5 ? -m : m);
    }
  }
  return v;
}

// Bit-for-bit equality with the CPU's result (tests/engine/support/same_bits.h).
::testing::AssertionResult same_bits(const std::vector<float>& want, const std::vector<float>& got,
                                     bool any_nan = false) {
  return test::same_bits(want, got, any_nan, "step_math");
}

struct StateFormat {
  Format format;
  PlCudaFormat cuda;
};
const StateFormat kStateFormats[] = {{Format::FP32, PL_CUDA_FP32}, {Format::TF32, PL_CUDA_TF32},
                                     {Format::BF16, PL_CUDA_BF16}, {Format::FP16, PL_CUDA_FP16},
                                     {Format::E4M3, PL_CUDA_E4M3}, {Format::E5M2, PL_CUDA_E5M2}};

// ---- float helpers --------------------------------------------------------------

TEST(CudaStepMath, OperationsFollowX86NaNRules) {
  const float qnan = from_bits(0x7fc00000u), snan = from_bits(0x7fa12345u), nnan = from_bits(0xff812345u);
  const float inf = INFINITY;
  // A NaN operand is made quiet and returned, the first when both are.
  EXPECT_EQ(bits(psm::mul_rn(snan, 2.0f)), 0x7fe12345u);
  EXPECT_EQ(bits(psm::mul_rn(2.0f, nnan)), 0xffc12345u);
  EXPECT_EQ(bits(psm::add_rn(nnan, snan)), 0xffc12345u);
  EXPECT_EQ(bits(psm::sub_rn(qnan, nnan)), 0x7fc00000u);
  // Invalid operations give the default NaN.
  EXPECT_EQ(bits(psm::mul_rn(inf, 0.0f)), 0xffc00000u);
  EXPECT_EQ(bits(psm::sub_rn(inf, inf)), 0xffc00000u);
  EXPECT_EQ(bits(psm::div_rn(0.0f, 0.0f)), 0xffc00000u);
  EXPECT_EQ(bits(psm::sqrt_rn(-1.0f)), 0xffc00000u);
  EXPECT_EQ(bits(psm::sqrt_rn(snan)), 0x7fe12345u);
  EXPECT_EQ(psm::min_flt_max(inf), 3.40282347e38f);
  EXPECT_EQ(psm::min_flt_max(qnan), 3.40282347e38f);
  EXPECT_EQ(psm::min_flt_max(-inf), -inf);
  // What the compiler does for the same operations (this host is x86).
  volatile float a = inf, z = 0.0f, s = snan;
  EXPECT_EQ(bits(a * z), bits(psm::mul_rn(inf, 0.0f)));
  EXPECT_EQ(bits(s * 2.0f), bits(psm::mul_rn(snan, 2.0f)));
}

TEST(CudaStepMath, IlogbMatchesStd) {
  const std::vector<float> v = make_values(20000, 1, {-149, 127, 0.0, 0.0, false});
  for (float x : v) ASSERT_EQ(psm::ilogb_f32(x), std::ilogb(x)) << x;
  for (std::uint32_t u = 1; u < 0x00800000u; u = u * 3 + 1) ASSERT_EQ(psm::ilogb_f32(from_bits(u)), std::ilogb(from_bits(u)));
}

TEST(CudaStepMath, RoundStateMatchesQuantizeInplace) {
  std::vector<float> v = make_values(50000, 2, {-140, 127, 0.05, 0.01, false});
  // Every FP32 exponent and the E4M3 / FP16 overflow edges.
  for (std::uint32_t e = 0; e < 256; ++e) v.push_back(from_bits(e << 23 | 0x2aaaaau));
  for (float x : {448.0f, 464.0f, 465.0f, 65504.0f, 65519.0f, 65520.0f, 57344.0f, 61440.0f})
    for (float s : {1.0f, -1.0f}) v.push_back(s * x);
  for (const StateFormat& f : kStateFormats) {
    std::vector<float> want = v, got(v.size());
    engine::quantize_inplace(f.format, want.data(), want.size());
    for (std::size_t i = 0; i < v.size(); ++i) got[i] = psm::round_state(f.cuda, v[i]);
    EXPECT_TRUE(same_bits(want, got)) << engine::format_name(f.format);
  }
}

// ---- unscale ----------------------------------------------------------------------

TEST(CudaStepMath, UnscaleMatchesCpu) {
  // Sizes across the CPU's 2^14 blocks (and the kernel's chunks), one empty.
  const std::int64_t sizes[] = {3, 0, 16384, 40000, 1};
  for (float inv : {1.0f, 0x1p-16f, 0.3f, 0.0f, 0x1p+100f}) {
    std::vector<std::vector<float>> grads, mine;
    std::vector<std::int64_t> counts(std::size(sizes), -7);
    std::vector<engine::GradBuffer> views;
    std::uint64_t seed = 10;
    for (std::int64_t n : sizes) {
      grads.push_back(make_values(static_cast<std::size_t>(n), seed++, {-40, 40, 0.01, 0.01, false}));
      mine.push_back(grads.back());
    }
    for (std::size_t k = 0; k < grads.size(); ++k)
      views.push_back({grads[k].data(), sizes[k], counts.data() + k});
    double cpu_sq = -1.0;
    cpu().unscale_grads(views.data(), views.size(), inv, &cpu_sq);

    // The kernel's order: per 2^14 chunk, 256 strided partials and a tree.
    constexpr std::int64_t kChunk = std::int64_t{1} << 14;
    std::vector<double> chunk_sums;
    for (std::size_t k = 0; k < mine.size(); ++k) {
      std::int64_t bad = 0;
      std::vector<float>& g = mine[k];
      for (std::int64_t c0 = 0; c0 < sizes[k]; c0 += kChunk) {
        double t[256] = {};
        for (std::int64_t i = c0; i < std::min(sizes[k], c0 + kChunk); ++i) {
          const float v = psm::unscale_value(g[static_cast<std::size_t>(i)], inv);
          g[static_cast<std::size_t>(i)] = v;
          bad += psm::nonfinite_f32(v);
          t[(i - c0) % 256] = pl_cuda::dadd_rn(t[(i - c0) % 256], psm::square_f64(v));
        }
        for (int half = 128; half > 0; half >>= 1)
          for (int j = 0; j < half; ++j) t[j] = t[j] + t[j + half];
        chunk_sums.push_back(t[0]);
      }
      EXPECT_TRUE(same_bits(grads[k], g)) << "inv " << inv << " gradient " << k;
      EXPECT_EQ(counts[k], bad) << "inv " << inv << " gradient " << k;
    }
    double t[256] = {};
    for (std::size_t c = 0; c < chunk_sums.size(); ++c) t[c % 256] += chunk_sums[c];
    for (int half = 128; half > 0; half >>= 1)
      for (int j = 0; j < half; ++j) t[j] = t[j] + t[j + half];
    // The sums differ in order only.
    if (std::isfinite(cpu_sq)) EXPECT_NEAR(t[0], cpu_sq, 1e-12 * cpu_sq) << "inv " << inv;
    else EXPECT_EQ(std::isnan(t[0]), std::isnan(cpu_sq)) << "inv " << inv;
  }
}

// ---- scale_amax ---------------------------------------------------------------------

TEST(CudaStepMath, ScaleAmaxMatchesCpu) {
  struct Case {
    double special;
    float scale;
  };
  for (const Case& c : {Case{0.0, 1.0f}, Case{0.0, 0.017f}, Case{0.001, 3.5f}, Case{0.001, 0.0f},
                        Case{0.0, 0x1p+120f}}) {
    std::vector<float> x = make_values(30000, 20, {-130, 60, c.special, 0.01, false});
    if (c.special > 0) x.back() = INFINITY;  // inf without NaN elsewhere is tested below
    std::vector<float> y(x.size()), mine(x.size());
    float amax = -1.0f;
    cpu().scale_amax(x.data(), c.scale, y.data(), static_cast<std::int64_t>(x.size()), &amax);
    std::uint32_t m = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      m = std::max(m, psm::abs_bits_f32(x[i]));
      mine[i] = psm::mul_rn(x[i], c.scale);
    }
    EXPECT_TRUE(same_bits(y, mine)) << c.scale;
    EXPECT_EQ(bits(amax), bits(psm::amax_from_bits(m))) << c.scale;
  }
  // inf without NaN: inf.
  std::vector<float> x = {1.0f, -INFINITY, 3.0f}, y(3);
  float amax = 0.0f;
  cpu().scale_amax(x.data(), 2.0f, y.data(), 3, &amax);
  std::uint32_t m = 0;
  for (float v : x) m = std::max(m, psm::abs_bits_f32(v));
  EXPECT_EQ(bits(amax), bits(psm::amax_from_bits(m)));
  EXPECT_EQ(bits(psm::amax_from_bits(0)), 0u);  // n == 0
}

// ---- SGD ------------------------------------------------------------------------------

struct SgdCase {
  float momentum, keep, weight_decay;
  bool nesterov, first;
};

TEST(CudaStepMath, SgdMatchesCpu) {
  const SgdCase cases[] = {
      {0.0f, 1.0f, 0.0f, false, false},  {0.0f, 1.0f, 5e-4f, false, false}, {0.9f, 1.0f, 0.0f, false, true},
      {0.9f, 1.0f, 1e-2f, false, true},  {0.9f, 1.0f, 1e-2f, false, false}, {0.9f, 0.7f, 1e-2f, false, false},
      {0.9f, 1.0f, 1e-2f, true, true},   {0.9f, 1.0f, 0.0f, true, false},   {0.5f, 0.5f, 3e-3f, true, false},
  };
  const std::size_t n = 5000;  // several of the CPU's 2048-element blocks
  std::uint64_t seed = 100;
  for (const StateFormat& f : kStateFormats) {
    for (const SgdCase& c : cases) {
      for (double special : {0.0, 0.02}) {
        const std::vector<float> p0 = make_values(n, seed++, {-20, 4, special, 0.01, false});
        const std::vector<float> g = make_values(n, seed++, {-30, 6, special, 0.05, false});
        std::vector<float> b0 = make_values(n, seed++, {-30, 6, special, 0.01, false});
        engine::quantize_inplace(f.format, b0.data(), n);
        const bool momentum = c.momentum != 0.0f;
        std::vector<float> p = p0, b = b0;
        engine::SgdUpdate u;
        u.value = p.data();
        u.grad = g.data();
        u.momentum_buf = momentum ? b.data() : nullptr;
        u.n = static_cast<std::int64_t>(n);
        u.lr = 0.05f;
        u.momentum = c.momentum;
        u.keep = c.keep;
        u.weight_decay = c.weight_decay;
        u.nesterov = c.nesterov;
        u.first = c.first;
        u.state_format = f.format;
        cpu().sgd_update(u);

        const psm::SgdParams s{u.lr, c.momentum, c.keep, c.weight_decay, c.nesterov, c.first, f.cuda};
        std::vector<float> mp = p0, mb = b0;
        for (std::size_t i = 0; i < n; ++i) {
          if (momentum) {
            float bi = c.first ? 0.0f : mb[i];
            psm::sgd_momentum(s, mp[i], g[i], bi);
            mb[i] = bi;
          } else {
            mp[i] = psm::sgd_plain(s, mp[i], g[i]);
          }
        }
        const std::string what = std::string(engine::format_name(f.format)) + " momentum " +
                                 std::to_string(c.momentum) + " keep " + std::to_string(c.keep) + " wd " +
                                 std::to_string(c.weight_decay) + (c.nesterov ? " nesterov" : "") +
                                 (c.first ? " first" : "") + " specials " + std::to_string(special);
        // Where two NaNs meet in an addition or product, which one the CPU
        // returns is its compiler's choice of operand order: NaN, not bits.
        EXPECT_TRUE(same_bits(p, mp, special > 0)) << "value, " << what;
        if (momentum) {
          EXPECT_TRUE(same_bits(b, mb, special > 0)) << "momentum buffer, " << what;
        }
      }
    }
  }
}

// ---- Adam / AdamW -----------------------------------------------------------------------

TEST(CudaStepMath, AdamMatchesCpu) {
  const std::size_t n = 5000;
  std::uint64_t seed = 200;
  const float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, wd = 1e-2f;
  for (const StateFormat& f : kStateFormats) {
    for (bool decoupled : {false, true}) {
      for (int t : {1, 10}) {
        for (double special : {0.0, 0.02}) {
          const std::vector<float> p0 = make_values(n, seed++, {-20, 4, special, 0.01, false});
          const std::vector<float> g = make_values(n, seed++, {-40, 6, special, 0.05, false});
          std::vector<float> m0 = make_values(n, seed++, {-40, 2, special, 0.01, false});
          std::vector<float> v0 = make_values(n, seed++, {-80, 2, special, 0.01, true});
          if (t == 1) {
            std::fill(m0.begin(), m0.end(), 0.0f);
            std::fill(v0.begin(), v0.end(), 0.0f);
          }
          engine::quantize_inplace(f.format, m0.data(), n);
          engine::quantize_inplace(f.format, v0.data(), n);
          engine::AdamUpdate u;
          std::vector<float> p = p0, m = m0, v = v0;
          u.value = p.data();
          u.grad = g.data();
          u.exp_avg = m.data();
          u.exp_avg_sq = v.data();
          u.n = static_cast<std::int64_t>(n);
          u.step_size = static_cast<float>(lr / (1.0 - std::pow(beta1, t)));
          u.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, t)));
          u.one_minus_beta1 = 1.0f - beta1;
          u.beta2 = beta2;
          u.one_minus_beta2 = 1.0f - beta2;
          u.eps = 1e-8f;
          u.l2 = decoupled ? 0.0f : wd;
          u.shrink = decoupled ? 1.0f - lr * wd : 1.0f;
          u.state_format = f.format;
          cpu().adam_update(u);

          const psm::AdamParams a{u.step_size, u.bc2_sqrt, u.one_minus_beta1, u.beta2, u.one_minus_beta2,
                                      u.eps,       u.l2,       u.shrink,          f.cuda};
          std::vector<float> mp = p0, mm = m0, mv = v0;
          for (std::size_t i = 0; i < n; ++i) psm::adam_element(a, mp[i], g[i], mm[i], mv[i]);
          const std::string what = std::string(engine::format_name(f.format)) + (decoupled ? " adamw" : " adam") +
                                   " t " + std::to_string(t) + " specials " + std::to_string(special);
          EXPECT_TRUE(same_bits(p, mp, special > 0)) << "value, " << what;
          EXPECT_TRUE(same_bits(m, mm, special > 0)) << "exp_avg, " << what;
          EXPECT_TRUE(same_bits(v, mv, special > 0)) << "exp_avg_sq, " << what;
        }
      }
    }
  }
}

// ---- gradient census ----------------------------------------------------------------------

TEST(CudaStepMath, ClassifyMagnitudeMatchesInspect) {
  for (Format f : {Format::FP16, Format::BF16, Format::E4M3, Format::E5M2, Format::FP32}) {
    const engine::RoundingThresholds t = engine::rounding_thresholds(f);
    const psm::CensusParams c{t.underflow, t.subnormal_hi, t.overflow, t.tie_overflows, 1.0, -40};
    std::vector<double> probes = {0.0, -0.0, INFINITY, -INFINITY, NAN, t.underflow, t.subnormal_hi, t.overflow,
                                  -t.overflow};
    for (double x : {t.underflow, t.subnormal_hi, t.overflow}) {
      probes.push_back(std::nextafter(x, 0.0));
      probes.push_back(std::nextafter(x, INFINITY));
    }
    for (float v : make_values(20000, 300, {-160, 130, 0.0, 0.0, false})) probes.push_back(v);
    for (double a : probes)
      ASSERT_EQ(psm::classify_magnitude(c, a), static_cast<int>(engine::classify_magnitude(t, a)))
          << engine::format_name(f) << " " << a;
  }
}

TEST(CudaStepMath, CensusMatchesCpu) {
  const std::size_t n = 20000;
  std::uint64_t seed = 400;
  for (Format f : {Format::FP16, Format::BF16, Format::E4M3, Format::E5M2}) {
    for (double scale : {1.0, 65536.0, 0x1p-8}) {
      for (int log2_lo : {-40, -140}) {
        for (int extra : {0, 1, 2}) {  // none, own, block
          std::vector<float> values = make_values(n, seed++, {-150, 40, 0.02, 0.05, false});
          std::vector<float> other = make_values(n, seed++, {-20, 4, 0.0, 0.1, false});
          // The format's thresholds themselves (ties) and their neighbours,
          // at scale 1 and divided by the scale, both signs; and own values
          // of zero (the run flushed them) every 7th value.
          {
            const engine::RoundingThresholds th = engine::rounding_thresholds(f);
            std::size_t at = 0;
            for (double x : {th.underflow, th.subnormal_hi, th.overflow})
              for (double s : {1.0, scale})
                for (float y : {static_cast<float>(x / s), std::nextafter(static_cast<float>(x / s), 0.0f),
                                std::nextafter(static_cast<float>(x / s), INFINITY)})
                  for (float sign : {1.0f, -1.0f}) values[(at++) * 5 + 1] = sign * y;
          }
          for (std::size_t i = 3; i < n; i += 7) other[i] = 0.0f;
          engine::GradCensus c;
          c.values = values.data();
          c.own = extra == 1 ? other.data() : nullptr;
          c.block = extra == 2 ? other.data() : nullptr;
          c.n = static_cast<std::int64_t>(n);
          c.thresholds = engine::rounding_thresholds(f);
          c.scale = scale;
          c.log2_lo = log2_lo;
          std::vector<std::int64_t> want(engine::kCensusSlots, 3);  // counts are added
          c.out = want.data();
          cpu().gradient_census(c);

          const psm::CensusParams p{c.thresholds.underflow, c.thresholds.subnormal_hi, c.thresholds.overflow,
                                        c.thresholds.tie_overflows, scale, log2_lo};
          std::vector<std::int64_t> got(psm::kCensusSlots, 3);
          for (std::size_t i = 0; i < n; ++i) {
            const psm::CensusHit h =
                psm::census_hit(p, values[i], extra == 1, other[i], extra == 2, other[i]);
            for (int s : {h.bin, h.scaled, h.unscaled})
              if (s >= 0) ++got[static_cast<std::size_t>(s)];
          }
          EXPECT_EQ(want, got) << engine::format_name(f) << " scale " << scale << " log2_lo " << log2_lo
                               << " extra " << extra;
        }
      }
    }
  }
}

// ---- block quantization ---------------------------------------------------------------------

struct BlockFmt {
  Format format;
  PlCudaBlockFormat cuda;
};
const BlockFmt kBlockFormats[] = {{Format::MXFP8, PL_CUDA_MXFP8},           {Format::MXFP8_E5M2, PL_CUDA_MXFP8_E5M2},
                                  {Format::MXFP6, PL_CUDA_MXFP6},           {Format::MXFP6_E3M2, PL_CUDA_MXFP6_E3M2},
                                  {Format::MXFP4, PL_CUDA_MXFP4},           {Format::NVFP4, PL_CUDA_NVFP4}};

TEST(CudaStepMath, ElementRoundingMatchesReference) {
  const std::pair<int, Format> elements[] = {{psm::kElemE4M3, Format::E4M3},
                                             {psm::kElemE5M2, Format::E5M2},
                                             {psm::kElemE2M3, Format::E2M3},
                                             {psm::kElemE3M2, Format::E3M2},
                                             {psm::kElemE2M1, Format::E2M1}};
  std::vector<float> v = make_values(40000, 500, {-30, 20, 0.0, 0.01, false});
  for (std::uint32_t u : kSpecials)
    if ((u & 0x7fffffffu) < 0x7f800000u) v.push_back(from_bits(u));
  std::mt19937 rng(7);
  for (const auto& [e, f] : elements) {
    // +-inf saturates in a block (E5M2's encode keeps it): as block.cpp.
    const float maxv = static_cast<float>(engine::format_info(f).max);
    EXPECT_EQ(psm::element_value(e, INFINITY, false, 0), maxv);
    EXPECT_EQ(psm::element_value(e, -INFINITY, true, 12345u), -maxv);
    for (float x : v) {
      const std::uint32_t r = rng();
      ASSERT_EQ(bits(psm::element_value(e, x, false, 0)), bits(engine::decode(f, engine::encode(f, x, true))))
          << engine::format_name(f) << " " << x;
      ASSERT_EQ(bits(psm::element_value(e, x, true, r)),
                bits(engine::decode(f, engine::encode_sr(f, x, r, true))))
          << engine::format_name(f) << " SR " << x;
    }
  }
}

TEST(CudaStepMath, BlockScalesMatchReference) {
  for (float amax : make_values(20000, 600, {-149, 127, 0.0, 0.01, true})) {
    const float s_enc = psm::nvfp4_tensor_scale(amax);
    ASSERT_EQ(bits(s_enc), bits(engine::nvfp4_tensor_scale(amax))) << amax;
    for (float block_amax : {amax, amax * 0.37f, amax * 1e-6f, 0.0f}) {
      const std::uint8_t code = psm::nvfp4_scale_code(block_amax, s_enc);
      ASSERT_EQ(code, engine::nvfp4_scale_code(block_amax, s_enc)) << block_amax;
      ASSERT_EQ(bits(psm::nvfp4_block_encode(code, s_enc)), bits(engine::nvfp4_block_encode(code, s_enc)));
    }
    for (const BlockFmt& f : kBlockFormats) {
      psm::BlockFormat bf{};
      ASSERT_TRUE(psm::block_format(f.cuda, bf));
      const engine::BlockInfo& bi = engine::block_info(f.format);
      EXPECT_EQ(bf.block, bi.block);
      EXPECT_EQ(bf.tensor_scale, bi.tensor_scale);
      if (bf.tensor_scale) continue;
      EXPECT_EQ(bf.emax, bi.emax);
      ASSERT_EQ(psm::mx_exponent(bits(amax), bf.emax) + 127, engine::mx_scale_code(amax, bi.element)) << amax;
    }
  }
}

// The kernel's work, one lane at a time: the tensor amax (NVFP4), each
// block's lanes' amaxes and their max, then each lane's elements.
PlCudaBlockQuantized step_math_block_quantize(PlCudaBlockFormat f, const float* src, float* dst, std::int64_t rows,
                                              std::int64_t cols, PlCudaBlockLayout layout, bool stochastic,
                                              std::uint64_t seed) {
  psm::BlockFormat bf{};
  EXPECT_TRUE(psm::block_format(f, bf));
  if (rows <= 0 || cols <= 0) return PlCudaBlockQuantized{1.0f, 1, {0, 0, 0}};
  float s_enc = 1.0f;
  if (bf.tensor_scale) {
    std::uint32_t m = 0;
    for (std::int64_t i = 0; i < rows * cols; ++i) m = std::max(m, psm::finite_abs_bits_f32(src[i]));
    s_enc = psm::nvfp4_tensor_scale(from_bits(m));
  }
  const psm::BlockGrid g = psm::block_grid(rows, cols, layout, bf.block);
  const std::uint64_t key = pl_cuda::stream_key(seed);
  int min_exponent = 127;
  for (std::int64_t b = 0; b < g.nbr * g.nbc; ++b) {
    std::uint32_t m = 0;
    for (int lane = 0; lane < g.bc; ++lane) m = std::max(m, psm::lane_amax_bits(src, g, b, lane));
    const psm::BlockScale s = psm::block_scale(bf, m, s_enc);
    if (!s.nan) min_exponent = std::min(min_exponent, s.exponent);
    for (int lane = 0; lane < g.bc; ++lane) psm::lane_quantize(src, dst, g, b, lane, bf, s, stochastic, key);
  }
  return psm::block_result(bf, s_enc, min_exponent);
}

struct Shape {
  std::int64_t rows, cols;
};

void check_block_quantize(const BlockFmt& f, engine::BlockLayout layout, const std::vector<float>& x, Shape sh,
                          bool stochastic, const std::string& what) {
  const PlCudaBlockLayout cl = layout == engine::BlockLayout::Rows      ? PL_CUDA_BLOCK_ROWS
                               : layout == engine::BlockLayout::Columns ? PL_CUDA_BLOCK_COLUMNS
                                                                        : PL_CUDA_BLOCK_TILES;
  const std::uint64_t seed = 0x5eed + static_cast<std::uint64_t>(sh.rows * 131 + sh.cols);
  std::vector<float> want(x.size(), -1.0f), got(x.size(), -2.0f);
  engine::BlockQuantized info{-1.0f, false};
  cpu().block_quantize(f.format, x.data(), want.data(), sh.rows, sh.cols, layout, {stochastic, seed}, &info);
  const PlCudaBlockQuantized q =
      step_math_block_quantize(f.cuda, x.data(), got.data(), sh.rows, sh.cols, cl, stochastic, seed);
  const std::string label = std::string(engine::format_name(f.format)) + " layout " +
                            std::to_string(static_cast<int>(layout)) + (stochastic ? " SR " : " RNE ") +
                            std::to_string(sh.rows) + "x" + std::to_string(sh.cols) + " " + what;
  EXPECT_TRUE(same_bits(want, got)) << label;
  EXPECT_EQ(bits(info.tensor_decode), bits(q.tensor_decode)) << label;
  EXPECT_EQ(info.bf16_exact, q.bf16_exact != 0) << label;
  // In place (dst == src), as the kernel may run.
  std::vector<float> in_place = x;
  step_math_block_quantize(f.cuda, in_place.data(), in_place.data(), sh.rows, sh.cols, cl, stochastic, seed);
  EXPECT_TRUE(same_bits(want, in_place)) << label << " in place";
}

TEST(CudaStepMath, BlockQuantizeMatchesCpu) {
  const Shape shapes[] = {{37, 45}, {64, 64}, {1, 1}, {16, 33}, {3, 100}, {50, 7}, {100, 3}};
  struct Data {
    const char* name;
    ValueMix mix;
  };
  const Data data[] = {
      {"ordinary", {-12, 4, 0.0, 0.02, false}},
      {"wide", {-140, 127, 0.0, 0.05, false}},
      {"specials", {-20, 20, 0.01, 0.02, false}},
      {"tiny", {-149, -120, 0.0, 0.1, false}},
      {"huge", {100, 127, 0.0, 0.0, false}},
  };
  std::uint64_t seed = 700;
  for (const BlockFmt& f : kBlockFormats) {
    std::vector<engine::BlockLayout> layouts = {engine::BlockLayout::Rows, engine::BlockLayout::Columns};
    if (f.format == Format::NVFP4) layouts.push_back(engine::BlockLayout::Tiles);
    for (engine::BlockLayout layout : layouts) {
      for (bool stochastic : {false, true}) {
        for (const Shape& sh : shapes) {
          const auto n = static_cast<std::size_t>(sh.rows * sh.cols);
          for (const Data& d : data)
            check_block_quantize(f, layout, make_values(n, seed++, d.mix), sh, stochastic, d.name);
          check_block_quantize(f, layout, std::vector<float>(n, 0.0f), sh, stochastic, "all zero");
          std::vector<float> signed_zero(n, -0.0f);
          check_block_quantize(f, layout, signed_zero, sh, stochastic, "all -0");
          // One inf and one NaN, each in a block of its own otherwise ordinary.
          std::vector<float> x = make_values(n, seed++, {-8, 8, 0.0, 0.0, false});
          x[n / 2] = INFINITY;
          x[n - 1] = from_bits(0xffc01234u);
          check_block_quantize(f, layout, x, sh, stochastic, "inf and NaN");
          // Every value nonfinite: no finite amax (NVFP4's S_enc from 0).
          check_block_quantize(f, layout, std::vector<float>(n, -INFINITY), sh, stochastic, "all inf");
        }
      }
    }
  }
  // An empty matrix: the info only.
  for (const BlockFmt& f : kBlockFormats) {
    const PlCudaBlockQuantized q = step_math_block_quantize(f.cuda, nullptr, nullptr, 0, 5, PL_CUDA_BLOCK_ROWS, false, 0);
    const engine::BlockQuantized want = engine::block_quantize(f.format, nullptr, nullptr, 0, 5, engine::BlockLayout::Rows);
    EXPECT_EQ(bits(q.tensor_decode), bits(want.tensor_decode));
    EXPECT_EQ(q.bf16_exact != 0, want.bf16_exact);
  }
}

// A larger matrix: the CPU's parallel path (2^15 elements and up).
TEST(CudaStepMath, BlockQuantizeLargeMatchesCpu) {
  const Shape sh{300, 257};
  const auto n = static_cast<std::size_t>(sh.rows * sh.cols);
  std::uint64_t seed = 900;
  for (const BlockFmt& f : kBlockFormats) {
    std::vector<engine::BlockLayout> layouts = {engine::BlockLayout::Rows, engine::BlockLayout::Columns};
    if (f.format == Format::NVFP4) layouts.push_back(engine::BlockLayout::Tiles);
    for (engine::BlockLayout layout : layouts)
      for (bool stochastic : {false, true})
        check_block_quantize(f, layout, make_values(n, seed++, {-30, 10, 0.0005, 0.02, false}), sh, stochastic,
                             "large");
  }
}

}  // namespace

// ---- the loss scale on the device (update_scale) ----

// LossScaler driven as the step drives it (unscale, the read's total,
// should_step, update) beside step_math::update_scale on a device state:
// after every step the scale, the growth tracker, the step's decision and
// the next step's loss scale and 1/scale agree bit for bit. Sequences mix
// clean runs longer than the growth interval (growth), overflows (backoff),
// growth blocked at FLT_MAX and backoff into subnormals and zero.
struct ScalerCase {
  const char* name;
  engine::LossScalerConfig config;
  double overflow_rate;
};

TEST(CudaStepMath, UpdateScaleMatchesLossScaler) {
  using engine::ScalingMode;
  const ScalerCase cases[] = {
      {"dynamic defaults, interval 3", {ScalingMode::Dynamic, 65536.0, 2.0, 0.5, 3}, 0.2},
      {"dynamic, rare overflows", {ScalingMode::Dynamic, 1024.0, 2.0, 0.5, 5}, 0.05},
      {"dynamic, odd factors", {ScalingMode::Dynamic, 3.0e4, 3.0, 0.3, 2}, 0.3},
      {"dynamic, odd factors 2", {ScalingMode::Dynamic, 1.1, 1.0000001, 0.9999999, 1}, 0.5},
      {"dynamic at FLT_MAX", {ScalingMode::Dynamic, 1.7014118346046923e38, 2.0, 0.5, 1}, 0.02},
      {"dynamic into subnormals", {ScalingMode::Dynamic, 1.0e-36, 2.0, 0.5, 3}, 0.25},
      {"dynamic to zero", {ScalingMode::Dynamic, 1.0e-44, 1.5, 0.5, 1000}, 1.0},
      {"static", {ScalingMode::Static, 128.0, 2.0, 0.5, 1}, 0.3},
      {"none", {ScalingMode::None, 65536.0, 2.0, 0.5, 1}, 0.3},
  };
  engine::Backend& be = cpu();
  auto* sum_squares = static_cast<double*>(be.allocate(sizeof(double)));
  engine::GradSet grads;  // no gradients: the scaler's cycle alone
  grads.bind({}, nullptr, sum_squares);
  for (const ScalerCase& c : cases) {
    SCOPED_TRACE(c.name);
    engine::LossScaler scaler(c.config);
    const auto mode = static_cast<PlCudaScaleMode>(static_cast<int>(c.config.mode));
    const psm::ScaleRule rule{mode, c.config.growth_factor, c.config.backoff_factor, c.config.growth_interval};
    PlCudaScaleState s = psm::initial_scale_state(mode, c.config.init_scale);
    ASSERT_EQ(bits(s.loss_scale), bits(scaler.scale()));
    ASSERT_EQ(bits(s.inv_scale), bits(scaler.inverse_scale()));
    std::mt19937_64 rng(0x5ca1e + static_cast<std::uint64_t>(c.config.growth_interval));
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    int growths = 0, backoffs = 0, skips = 0;
    float lowest = scaler.scale();
    for (int step = 1; step <= 3000; ++step) {
      SCOPED_TRACE(step);
      // Bursts: a clean stretch of several intervals now and then.
      const bool burst_clean = (step / 200) % 3 == 1;
      const std::int64_t total = !burst_clean && unit(rng) < c.overflow_rate ? 1 + step % 7 : 0;
      const float before = scaler.scale();
      scaler.unscale(be, grads);
      scaler.record_nonfinite(total);
      const bool taken = scaler.should_step();
      scaler.update();
      psm::update_scale(rule, total, s);
      ASSERT_EQ(s.taken != 0, taken);
      ASSERT_EQ(s.nonfinite, total);
      ASSERT_EQ(s.growth_tracker, scaler.growth_tracker());
      ASSERT_EQ(bits(s.loss_scale), bits(scaler.scale()));
      ASSERT_EQ(bits(s.inv_scale), bits(scaler.inverse_scale()));
      if (mode != PL_CUDA_SCALE_NONE) { ASSERT_EQ(bits(s.scale), bits(scaler.scale())); }
      growths += scaler.scale() > before;
      backoffs += scaler.scale() < before;
      skips += !taken;
      lowest = std::min(lowest, scaler.scale());
    }
    // Every case exercises what its name says.
    if (mode == PL_CUDA_SCALE_DYNAMIC && c.overflow_rate < 1.0 && c.config.init_scale < 1e38) { EXPECT_GT(growths, 0); }
    if (mode == PL_CUDA_SCALE_DYNAMIC && c.config.init_scale > 1e-40) { EXPECT_GT(backoffs, 0); }
    if (mode != PL_CUDA_SCALE_NONE) {
      EXPECT_GT(skips, 0);
    } else {
      EXPECT_EQ(skips, 0);
    }
    if (std::string(c.name) == "dynamic to zero") { EXPECT_EQ(s.scale, 0.0f); }
    if (std::string(c.name) == "dynamic into subnormals") { EXPECT_LT(lowest, 1.17549435e-38f); }
  }
  be.release(sum_squares);
}

// A mode change resets the scale (LossScaler::set_config): the device
// state starts again from initial_scale_state.
TEST(CudaStepMath, ScaleStateResetMatchesSetConfig) {
  engine::LossScaler scaler({engine::ScalingMode::Dynamic, 4096.0, 2.0, 0.5, 2});
  engine::LossScalerConfig next{engine::ScalingMode::Static, 512.0, 2.0, 0.5, 2};
  scaler.set_config(next);
  const PlCudaScaleState s = psm::initial_scale_state(PL_CUDA_SCALE_STATIC, 512.0);
  EXPECT_EQ(bits(s.loss_scale), bits(scaler.scale()));
  EXPECT_EQ(bits(s.inv_scale), bits(scaler.inverse_scale()));
  EXPECT_EQ(s.growth_tracker, scaler.growth_tracker());
}

// The found-inf guard: no state, or a taken step, updates; a skipped one does not.
TEST(CudaStepMath, StepGuardFollowsTaken) {
  PlCudaScaleState s = psm::initial_scale_state(PL_CUDA_SCALE_DYNAMIC, 2.0);
  EXPECT_TRUE(psm::step_taken(nullptr));
  EXPECT_TRUE(psm::step_taken(&s));
  psm::update_scale({PL_CUDA_SCALE_DYNAMIC, 2.0, 0.5, 10}, 3, s);
  EXPECT_FALSE(psm::step_taken(&s));
  psm::update_scale({PL_CUDA_SCALE_DYNAMIC, 2.0, 0.5, 10}, 0, s);
  EXPECT_TRUE(psm::step_taken(&s));
}
