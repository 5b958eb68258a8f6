// The CUDA backend's per-element and per-row math (backend/cuda/ops_math.cuh:
// elementwise.cu, rows.cu, pool.cu), compiled for the host and held to the
// CPU backend: quantize, the reduced-precision LayerNorm and softmax rows,
// the max-pool window rule, ReLU on 16-bit patterns and the cross-entropy
// argmax bit for bit, GELU within the conformance suite's tolerance. The
// kernels run these functions, so this is what a machine without a GPU can
// check of them. Where a NaN comes out of float arithmetic its payload is
// the compiler's and the GPU's choice (the GPU returns its canonical NaN):
// there any NaN equals any NaN; everything else is compared as bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/support/same_bits.h"
#include "engine/support/random_values.h"
#include "backend/cuda/ops_math.cuh"
#include "numeric/convert.h"
#include "numeric/format.h"

namespace {

using engine::Format;
namespace pc = pl_cuda;

using test::bits;
using test::from_bits;

engine::Backend& cpu() {
  static const std::unique_ptr<engine::Backend> be = engine::make_cpu_backend();
  return *be;
}

struct Fmt {
  Format format;
  PlCudaFormat cuda;
};
const Fmt kAllFormats[] = {{Format::FP32, PL_CUDA_FP32}, {Format::TF32, PL_CUDA_TF32}, {Format::FP16, PL_CUDA_FP16},
                           {Format::BF16, PL_CUDA_BF16}, {Format::E4M3, PL_CUDA_E4M3}, {Format::E5M2, PL_CUDA_E5M2}};
// The accumulate formats the CUDA module runs through the one-thread-per-row
// kernels (everything but FP32).
const Fmt kLowpFormats[] = {{Format::FP16, PL_CUDA_FP16}, {Format::BF16, PL_CUDA_BF16}, {Format::TF32, PL_CUDA_TF32},
                            {Format::E4M3, PL_CUDA_E4M3}, {Format::E5M2, PL_CUDA_E5M2}};

// Bit-for-bit equality with the CPU's result (tests/engine/support/same_bits.h).
::testing::AssertionResult same_bits(const std::vector<float>& want, const std::vector<float>& got,
                                     bool any_nan = false) {
  return test::same_bits(want, got, any_nan, "ops_math");
}

using test::normal_values;

std::size_t count_nonfinite(const std::vector<float>& v) {
  return static_cast<std::size_t>(std::count_if(v.begin(), v.end(), [](float x) { return !std::isfinite(x); }));
}

// ---- quantize ------------------------------------------------------------------

// Bit patterns: a stride through all 2^32, and for every exponent and sign
// the mantissas around each format's rounding ties (tie - 1, tie, tie + 1)
// and around its largest values.
std::vector<float> quantize_sample() {
  std::vector<float> v;
  for (std::uint64_t u = 0; u < (std::uint64_t{1} << 32); u += 16411) v.push_back(from_bits(static_cast<std::uint32_t>(u)));
  std::mt19937_64 rng(5);
  for (int kept : {10, 7, 3, 2}) {  // TF32/FP16, BF16, E4M3, E5M2 mantissa bits
    const std::uint32_t half = std::uint32_t{1} << (22 - kept);
    for (std::uint32_t sign : {0u, 0x80000000u})
      for (std::uint32_t e = 0; e < 256; ++e)
        for (int t = 0; t < 12; ++t) {
          const std::uint32_t m = (static_cast<std::uint32_t>(rng()) & ((1u << kept) - 1)) << (23 - kept);
          for (std::uint32_t d : {half - 1, half, half + 1})
            v.push_back(from_bits(sign | e << 23 | ((m + d) & 0x7fffffu)));
        }
  }
  // Overflow edges of each format, both signs.
  for (float x : {448.0f, 464.0f, 465.0f, 480.0f, 57344.0f, 61440.0f, 61441.0f, 65504.0f, 65519.0f, 65520.0f,
                  3.3895314e38f, 3.40282347e38f})
    for (float s : {1.0f, -1.0f}) {
      v.push_back(s * x);
      v.push_back(from_bits(bits(s * x) - 1));
      v.push_back(from_bits(bits(s * x) + 1));
    }
  return v;
}

TEST(CudaOpsMath, QuantizeValueMatchesCpuForEveryFormat) {
  const std::vector<float> x = quantize_sample();
  ASSERT_GT(x.size(), 300000u);
  for (const Fmt& f : kAllFormats) {
    for (bool saturate : {false, true}) {
      std::vector<float> want = x, got(x.size()), scalar(x.size());
      cpu().quantize(f.format, want.data(), static_cast<std::int64_t>(want.size()), saturate);
      for (std::size_t i = 0; i < x.size(); ++i) {
        got[i] = pc::quantize_value(f.cuda, x[i], saturate);
        scalar[i] = engine::quantize(f.format, x[i], saturate);
      }
      // Integer conversions: NaN payloads are defined, so bits throughout.
      EXPECT_TRUE(same_bits(want, got)) << engine::format_name(f.format) << " saturate " << saturate;
      EXPECT_TRUE(same_bits(scalar, got)) << engine::format_name(f.format) << " saturate " << saturate
                                          << " (engine::quantize)";
    }
  }
}

// ---- LayerNorm in reduced precision ---------------------------------------------------

struct RowCase {
  const char* name;
  std::int64_t rows, cols;
  std::vector<float> x;
};

std::vector<RowCase> layernorm_cases() {
  std::vector<RowCase> c;
  c.push_back({"ordinary", 40, 48, normal_values(40 * 48, 1, 3.0f, 1.0f)});
  c.back().x[5] = NAN;                  // row 0: NaN
  c.back().x[48 + 7] = INFINITY;        // row 1: inf
  c.back().x[2 * 48 + 1] = -INFINITY;   // row 2: -inf
  for (int j = 0; j < 48; ++j) c.back().x[3 * 48 + j] = -0.0f;  // row 3: all -0 (variance 0, eps only)
  // FP16: a few hundred values around 300 overflow the running sum (65504).
  c.push_back({"sum overflow", 4, 256, normal_values(4 * 256, 2, 5.0f, 300.0f)});
  // FP16: deviations of 300 overflow their square.
  {
    RowCase r{"square overflow", 2, 64, std::vector<float>(128)};
    for (std::size_t i = 0; i < r.x.size(); ++i) r.x[i] = (i % 2 ? 300.0f : -300.0f) + 0.01f * static_cast<float>(i);
    c.push_back(r);
  }
  // BF16/TF32/FP32 range: the sum overflows f32 itself.
  c.push_back({"f32 overflow", 2, 16, std::vector<float>(32, 3.0e38f)});
  // E4M3 (no inf, max 448): ordinary values of 100 overflow to NaN.
  c.push_back({"e4m3 range", 3, 20, normal_values(60, 3, 20.0f, 100.0f)});
  c.push_back({"tiny variance", 7, 1000, normal_values(7000, 4, 0.01f, 0.0f)});
  c.push_back({"one column", 3, 1, normal_values(3, 5, 1.0f, 2.0f)});
  c.push_back({"long", 2, 3000, normal_values(6000, 6, 1.0f, 0.5f)});
  return c;
}

TEST(CudaOpsMath, LayerNormRowsMatchCpu) {
  const float eps = 1e-5f;
  std::size_t fp16_overflow_rows = 0;
  for (const Fmt& f : kLowpFormats) {
    for (const RowCase& c : layernorm_cases()) {
      const auto n = static_cast<std::size_t>(c.rows * c.cols);
      const std::vector<float> gamma = normal_values(static_cast<std::size_t>(c.cols), 10, 0.2f, 1.0f);
      const std::vector<float> beta = normal_values(static_cast<std::size_t>(c.cols), 11, 0.1f);
      for (int which = 0; which < 4; ++which) {  // gamma and beta each present or null
        const float* g = which & 1 ? nullptr : gamma.data();
        const float* b = which & 2 ? nullptr : beta.data();
        std::vector<float> y(n, -1.0f), mean(static_cast<std::size_t>(c.rows), -1.0f), rstd(mean);
        cpu().layernorm_forward(c.x.data(), g, b, y.data(), mean.data(), rstd.data(), c.rows, c.cols, eps, f.format);
        std::vector<float> my(n, -2.0f), mm(mean.size(), -2.0f), mr(mean.size(), -2.0f);
        for (std::int64_t i = 0; i < c.rows; ++i)
          pc::layernorm_row_lowp(f.cuda, c.x.data() + i * c.cols, g, b, my.data() + i * c.cols, c.cols, eps,
                                 &mm[static_cast<std::size_t>(i)], &mr[static_cast<std::size_t>(i)]);
        const std::string what = std::string(engine::format_name(f.format)) + " " + c.name +
                                 (g ? "" : " no gamma") + (b ? "" : " no beta");
        EXPECT_TRUE(same_bits(y, my, true)) << "y, " << what;
        EXPECT_TRUE(same_bits(mean, mm, true)) << "mean, " << what;
        EXPECT_TRUE(same_bits(rstd, mr, true)) << "rstd, " << what;
        // FP16: the overflowed sum makes y NaN; the overflowed square makes
        // the variance inf and rstd 0 (y finite).
        if (f.format == Format::FP16 && which == 0 && std::string(c.name) == "sum overflow")
          fp16_overflow_rows += count_nonfinite(my) == my.size();
        if (f.format == Format::FP16 && which == 0 && std::string(c.name) == "square overflow")
          fp16_overflow_rows += std::count(mr.begin(), mr.end(), 0.0f) == static_cast<std::ptrdiff_t>(mr.size());
      }
    }
  }
  // The overflow cases do overflow in FP16 (else they test nothing).
  EXPECT_EQ(fp16_overflow_rows, 2u);
}

// ---- softmax in reduced precision ------------------------------------------------------

TEST(CudaOpsMath, SoftmaxRowsMatchCpu) {
  std::vector<RowCase> cases;
  for (int rep = 0; rep < 20; ++rep)
    cases.push_back({"ordinary", 50, 97, normal_values(50 * 97, 100 + static_cast<std::uint64_t>(rep), 4.0f)});
  {
    RowCase r{"specials", 6, 33, normal_values(6 * 33, 30, 2.0f)};
    r.x[3] = NAN;                                            // row 0: NaN
    r.x[33 + 4] = INFINITY;                                  // row 1: +inf (inf - inf: NaN)
    r.x[2 * 33 + 1] = -INFINITY;                             // row 2: one -inf (exp 0)
    for (int j = 0; j < 33; ++j) r.x[3 * 33 + j] = -INFINITY;  // row 3: all -inf
    r.x[4 * 33] = -0.0f;                                     // row 4: signed zeros
    r.x[4 * 33 + 1] = 0.0f;
    r.x[5 * 33 + 2] = 3.0e38f;                               // row 5: huge next to ordinary
    cases.push_back(r);
  }
  cases.push_back({"wide", 20, 64, normal_values(20 * 64, 31, 40.0f)});  // exponentials underflow
  cases.push_back({"one column", 5, 1, normal_values(5, 32, 3.0f)});
  // Equal logits: the sum of ones stalls (FP16 at 2048, BF16 at 256) or,
  // in E4M3, runs into its largest value.
  cases.push_back({"stall", 2, 4096, std::vector<float>(8192, 0.25f)});
  std::size_t rounded = 0;
  for (const Fmt& f : kLowpFormats) {
    for (const RowCase& c : cases) {
      const auto n = static_cast<std::size_t>(c.rows * c.cols);
      std::vector<float> y(n, -1.0f), my(n, -2.0f);
      cpu().softmax_forward(c.x.data(), y.data(), c.rows, c.cols, f.format);
      for (std::int64_t i = 0; i < c.rows; ++i)
        pc::softmax_row_lowp(f.cuda, c.x.data() + i * c.cols, my.data() + i * c.cols, c.cols);
      const std::string what = std::string(engine::format_name(f.format)) + " " + c.name;
      EXPECT_TRUE(same_bits(y, my, true)) << what;
      // y aliasing x, as the kernel allows.
      std::vector<float> in_place = c.x;
      for (std::int64_t i = 0; i < c.rows; ++i)
        pc::softmax_row_lowp(f.cuda, in_place.data() + i * c.cols, in_place.data() + i * c.cols, c.cols);
      EXPECT_TRUE(same_bits(my, in_place)) << what << " in place";
      if (f.format == Format::FP16 && std::string(c.name) == "stall") rounded += bits(my[0]) == bits(1.0f / 2048.0f);
    }
  }
  EXPECT_EQ(rounded, 1u) << "FP16 sum of 4096 ones should stall at 2048";
}

// The exponential's argument is a value of the format (x - max rounded to
// it), and not positive: on every such value, exp_f32_accurate rounded to
// the format equals the CPU's expf rounded to it, so the difference between
// the two f32 exponentials never reaches a softmax output.
TEST(CudaOpsMath, SoftmaxExponentialAgreesOnEveryFormatValue) {
  for (const Fmt& f : kLowpFormats) {
    std::vector<float> args = {0.0f, -0.0f};
    if (f.format == Format::TF32) {
      for (std::uint32_t u = 0x80002000u; u < 0xff800000u; u += 0x2000u) args.push_back(from_bits(u));
    } else {
      const std::uint32_t patterns = 1u << (8 * engine::storage_bytes(f.format));
      for (std::uint32_t p = 0; p < patterns; ++p) {
        const float v = engine::decode(f.format, p);
        if (v < 0.0f) args.push_back(v);
      }
    }
    ASSERT_GT(args.size(), 100u);
    std::size_t raw_differ = 0, bad = 0;
    for (float v : args) {
      const float mine = pc::exp_f32_accurate(v), glibc = std::exp(v);
      raw_differ += bits(mine) != bits(glibc);
      const float a = pc::quantize_value(f.cuda, mine, false), b = engine::quantize(f.format, glibc, false);
      if (bits(a) != bits(b) && bad++ < 5)
        ADD_FAILURE() << engine::format_name(f.format) << " exp(" << v << "): ops_math 0x" << std::hex << bits(a)
                      << " cpu 0x" << bits(b);
    }
    EXPECT_EQ(bad, 0u) << engine::format_name(f.format) << " (" << raw_differ << " of " << args.size()
                       << " f32 exponentials differ before rounding)";
  }
}

// ---- max pooling ---------------------------------------------------------------------

// The kernel's backward (pool.cu MaxPoolBackward): one pixel, dy of its
// window where the window's argmax is this pixel, else +0.
float pool_backward_pixel(const std::vector<float>& dy, const std::vector<std::int32_t>& argmax, std::int64_t h,
                          std::int64_t w, std::int64_t k, std::int64_t e) {
  const std::int64_t oh = h / k, ow = w / k;
  const std::int64_t plane = e / (h * w), i = e - plane * (h * w);
  const std::int64_t yy = i / w, xx = i - yy * w, oy = yy / k, ox = xx / k;
  float v = 0.0f;
  if (oy < oh && ox < ow) {
    const std::int64_t o = (plane * oh + oy) * ow + ox;
    if (argmax[static_cast<std::size_t>(o)] == i) v = pc::add_rn(0.0f, dy[static_cast<std::size_t>(o)]);
  }
  return v;
}

TEST(CudaOpsMath, MaxPoolWindowMatchesCpu) {
  struct Shape {
    std::int64_t n, c, h, w, k;
  };
  // k = 2 takes the CPU's branch-free path, the others its general loop;
  // odd sizes leave pixels outside every window.
  const Shape shapes[] = {{2, 3, 7, 5, 2}, {1, 2, 6, 6, 3}, {4, 8, 28, 28, 2}, {1, 1, 9, 9, 4}, {2, 2, 5, 11, 3}};
  std::uint64_t seed = 300;
  std::size_t nan_outputs = 0, tie_windows = 0;
  for (const Shape& s : shapes) {
    const std::int64_t oh = s.h / s.k, ow = s.w / s.k;
    const auto nx = static_cast<std::size_t>(s.n * s.c * s.h * s.w);
    const auto ny = static_cast<std::size_t>(s.n * s.c * oh * ow);
    // Small integers (many ties), signed zeros, NaNs with distinct payloads
    // (which NaN wins shows in the bits), infinities.
    std::mt19937_64 rng(seed++);
    std::vector<float> x(nx);
    for (std::size_t i = 0; i < nx; ++i) {
      const int r = static_cast<int>(rng() % 20);
      x[i] = r == 0   ? from_bits(0x7fc00000u | static_cast<std::uint32_t>(i & 0x3fffff))
             : r == 1 ? from_bits(0xffc00000u | static_cast<std::uint32_t>(i & 0x3fffff))
             : r == 2 ? 0.0f
             : r == 3 ? -0.0f
             : r == 4 ? -INFINITY
             : r == 5 ? INFINITY
                      : static_cast<float>(static_cast<int>(rng() % 5) - 2);
    }
    std::vector<float> y(ny, -1.0f);
    std::vector<std::int32_t> argmax(ny, -1);
    cpu().maxpool2d_forward(s.n, s.c, s.h, s.w, s.k, x.data(), y.data(), argmax.data());
    std::vector<float> my(ny);
    std::vector<std::int32_t> ma(ny);
    for (std::size_t o = 0; o < ny; ++o) {
      const auto e = static_cast<std::int64_t>(o);
      const std::int64_t plane = e / (oh * ow), r = e - plane * (oh * ow), oy = r / ow, ox = r - oy * ow;
      float best = 0.0f;
      std::int64_t index = -1;
      pc::maxpool_window(x.data() + plane * s.h * s.w, s.w, s.k, oy, ox, &best, &index);
      my[o] = best;
      ma[o] = static_cast<std::int32_t>(index);
      nan_outputs += std::isnan(best);
    }
    const std::string what = std::to_string(s.h) + "x" + std::to_string(s.w) + " k " + std::to_string(s.k);
    // The window rule picks an input: the bits, NaN payloads included.
    EXPECT_TRUE(same_bits(y, my)) << "forward " << what;
    EXPECT_EQ(argmax, ma) << "argmax " << what;
    for (std::size_t o = 0; o < ny; ++o) {
      // A window whose maximum appears twice: a tie the first one wins.
      const auto e = static_cast<std::int64_t>(o);
      const std::int64_t plane = e / (oh * ow), r = e - plane * (oh * ow), oy = r / ow, ox = r - oy * ow;
      int equal = 0;
      for (std::int64_t ky = 0; ky < s.k; ++ky)
        for (std::int64_t kx = 0; kx < s.k; ++kx)
          equal += x[static_cast<std::size_t>(plane * s.h * s.w + (oy * s.k + ky) * s.w + ox * s.k + kx)] == my[o];
      tie_windows += equal > 1;
    }

    // Backward: the kernel's per-pixel rule against the CPU's scatter.
    std::vector<float> dy = normal_values(ny, seed++);
    for (std::size_t o = 0; o < ny; o += 7) dy[o] = -0.0f;  // 0 + -0 is +0
    dy[1] = NAN;
    std::vector<float> dx(nx, -1.0f), mdx(nx);
    cpu().maxpool2d_backward(s.n, s.c, s.h, s.w, s.k, dy.data(), argmax.data(), dx.data());
    for (std::size_t e = 0; e < nx; ++e) mdx[e] = pool_backward_pixel(dy, ma, s.h, s.w, s.k, static_cast<std::int64_t>(e));
    EXPECT_TRUE(same_bits(dx, mdx, true)) << "backward " << what;
  }
  EXPECT_GT(nan_outputs, 10u);
  EXPECT_GT(tie_windows, 100u);

  // The rule on hand-made 2x2 windows (one plane, width 2).
  struct Window {
    std::uint32_t v[4];
    std::uint32_t best;
    std::int64_t index;
  };
  const Window windows[] = {
      {{0x80000000u, 0x00000000u, 0xbf800000u, 0xbf800000u}, 0x80000000u, 0},  // -0 then +0: -0 stays
      {{0x00000000u, 0x80000000u, 0xbf800000u, 0xbf800000u}, 0x00000000u, 0},  // +0 then -0: +0 stays
      {{0xbf800000u, 0x80000000u, 0x00000000u, 0xbf800000u}, 0x80000000u, 1},  // -1, -0, +0: -0
      {{0x40000000u, 0x40400000u, 0x40400000u, 0x3f800000u}, 0x40400000u, 1},  // tie: the first 3
      {{0x3f800000u, 0x7fc00001u, 0x7f800000u, 0x7fc00002u}, 0x7fc00001u, 1},  // first NaN wins over inf
      {{0x7fc00003u, 0x7f800000u, 0x7fc00004u, 0x40000000u}, 0x7fc00003u, 0},  // NaN first stays
      {{0xff800000u, 0xff800000u, 0xff800000u, 0xff800000u}, 0xff800000u, 0},  // all -inf
      {{0xffc00005u, 0x3f800000u, 0x3f800000u, 0x3f800000u}, 0xffc00005u, 0},  // negative NaN stays
  };
  for (const Window& win : windows) {
    float plane[4];
    for (int i = 0; i < 4; ++i) plane[i] = from_bits(win.v[i]);
    float best = 0.0f;
    std::int64_t index = -1;
    pc::maxpool_window(plane, 2, 2, 0, 0, &best, &index);
    EXPECT_EQ(bits(best), win.best) << std::hex << win.v[0] << " " << win.v[1] << " " << win.v[2] << " " << win.v[3];
    EXPECT_EQ(index, win.index) << std::hex << win.v[0] << " " << win.v[1] << " " << win.v[2] << " " << win.v[3];
    float y = 0.0f;
    std::int32_t a = -1;
    cpu().maxpool2d_forward(1, 1, 2, 2, 2, plane, &y, &a);
    EXPECT_EQ(bits(y), bits(best));
    EXPECT_EQ(a, index);
  }
}

// ---- ReLU ----------------------------------------------------------------------------

TEST(CudaOpsMath, Relu16MatchesCpuOnEveryPattern) {
  struct F16 {
    Format format;
    std::uint32_t inf_bits;  // elementwise.cu's inf_bits16
  };
  std::vector<std::uint16_t> x(65536);
  for (std::uint32_t u = 0; u < 65536; ++u) x[u] = static_cast<std::uint16_t>(u);
  std::mt19937_64 rng(400);
  std::vector<std::uint16_t> dy(65536);
  for (std::uint16_t& d : dy) d = static_cast<std::uint16_t>(rng());
  for (const F16& f : {F16{Format::FP16, 0x7c00u}, F16{Format::BF16, 0x7f80u}}) {
    std::vector<std::uint16_t> y(65536, 0xdead), dx(65536, 0xdead);
    cpu().relu16_forward(f.format, x.data(), y.data(), 65536);
    cpu().relu16_backward(f.format, x.data(), f.format, dy.data(), dx.data(), 65536);
    std::size_t bad_y = 0, bad_dx = 0, bad_sem = 0;
    for (std::uint32_t u = 0; u < 65536; ++u) {
      const std::uint16_t my = pc::relu16_value(x[u], f.inf_bits);
      const std::uint16_t mdx = pc::relu16_grad(x[u], dy[u], f.inf_bits);
      if (my != y[u] && bad_y++ < 5) ADD_FAILURE() << engine::format_name(f.format) << " relu16 forward 0x" << std::hex << u;
      if (mdx != dx[u] && bad_dx++ < 5)
        ADD_FAILURE() << engine::format_name(f.format) << " relu16 backward 0x" << std::hex << u;
      // Against the f32 rule on the decoded value: y = x < 0 ? +0 : x (the
      // pattern itself for NaN and -0), dx = x > 0 ? dy : +0.
      const float v = engine::decode(f.format, u);
      const std::uint16_t want_y = v < 0.0f ? std::uint16_t{0} : x[u];
      const std::uint16_t want_dx = v > 0.0f ? dy[u] : std::uint16_t{0};
      if ((my != want_y || mdx != want_dx) && bad_sem++ < 5)
        ADD_FAILURE() << engine::format_name(f.format) << " relu16 vs the f32 rule 0x" << std::hex << u;
    }
    EXPECT_EQ(bad_y + bad_dx + bad_sem, 0u) << engine::format_name(f.format);
  }
}

TEST(CudaOpsMath, ReluF32MatchesCpu) {
  std::vector<float> x = normal_values(10000, 401);
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, from_bits(0x7fa12345u), from_bits(1),
                            from_bits(0x80000001u)};
  x.insert(x.end(), std::begin(specials), std::end(specials));
  const std::vector<float> dy = normal_values(x.size(), 402);
  const auto n = static_cast<std::int64_t>(x.size());
  std::vector<float> y(x.size()), dx(x.size()), my(x.size()), mdx(x.size());
  cpu().relu_forward(x.data(), y.data(), n);
  cpu().relu_backward(x.data(), dy.data(), dx.data(), n);
  for (std::size_t i = 0; i < x.size(); ++i) {
    my[i] = pc::relu_value(x[i]);
    mdx[i] = pc::relu_grad(x[i], dy[i]);
  }
  EXPECT_TRUE(same_bits(y, my));
  EXPECT_TRUE(same_bits(dx, mdx));
}

// ---- GELU ----------------------------------------------------------------------------

// |got - ref| <= 2e-6 |ref| + 1e-7 (the conformance suite's
// GeluExactErfFormAndDerivative tolerance); reports the worst element.
::testing::AssertionResult within_gelu_tolerance(const std::vector<float>& got, const std::vector<double>& ref) {
  std::size_t bad = 0, worst = 0;
  double worst_ratio = -1.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - ref[i]);
    const double bound = 2e-6 * std::fabs(ref[i]) + 1e-7;
    const double ratio = std::isnan(got[i]) ? INFINITY : err / bound;
    bad += !(err <= bound);
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " out of tolerance; worst [" << worst
                                       << "] got " << got[worst] << " want " << ref[worst];
}

TEST(CudaOpsMath, GeluWithinConformanceTolerance) {
  // The conformance suite's inputs (N(0, 3)), a dense grid over [-12, 12]
  // (the derivative's zero near -0.75 included) and the tails.
  std::vector<float> x = normal_values(70000, 11, 3.0f);
  for (int i = -120000; i <= 120000; ++i) x.push_back(static_cast<float>(i) * 1e-4f);
  for (float t : {-40.0f, -30.0f, -20.0f, -15.0f, 15.0f, 30.0f, 1e10f, -1e10f, 3.0e38f, 1e-30f, -1e-30f})
    x.push_back(t);
  const std::vector<float> dy = normal_values(x.size(), 12);
  const std::size_t n = x.size();
  std::vector<double> y_ref(n), dx_ref(n);
  std::vector<float> y(n), dx(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double cdf = 0.5 * (1.0 + std::erf(v / std::sqrt(2.0)));
    y_ref[i] = v * cdf;
    dx_ref[i] = dy[i] * (cdf + v * std::exp(-0.5 * v * v) / std::sqrt(2.0 * std::numbers::pi));
    y[i] = pc::gelu_value(x[i]);
    dx[i] = pc::gelu_grad(x[i], dy[i]);
  }
  EXPECT_TRUE(within_gelu_tolerance(y, y_ref)) << "forward";
  EXPECT_TRUE(within_gelu_tolerance(dx, dx_ref)) << "backward";
  // The CPU backend's results, held to the same bound around ops_math's.
  std::vector<float> cy(n), cdx(n);
  cpu().gelu_forward(x.data(), cy.data(), static_cast<std::int64_t>(n));
  cpu().gelu_backward(x.data(), dy.data(), cdx.data(), static_cast<std::int64_t>(n));
  EXPECT_TRUE(within_gelu_tolerance(y, std::vector<double>(cy.begin(), cy.end()))) << "forward vs cpu";
  EXPECT_TRUE(within_gelu_tolerance(dx, std::vector<double>(cdx.begin(), cdx.end()))) << "backward vs cpu";

  // Non-finite inputs: as the CPU's scalar formulas (NaN in, NaN out; +inf
  // to +inf; -inf times 0 is NaN).
  EXPECT_TRUE(std::isnan(pc::gelu_value(NAN)));
  EXPECT_TRUE(std::isnan(pc::gelu_grad(NAN, 1.0f)));
  EXPECT_EQ(pc::gelu_value(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(pc::gelu_value(-INFINITY)));
  EXPECT_EQ(pc::gelu_value(0.0f), 0.0f);
  EXPECT_EQ(pc::gelu_grad(0.0f, 2.0f), 1.0f);
}

// ---- cross-entropy argmax ------------------------------------------------------------------

// The kernel's reduction (rows.cu cross_entropy_kernel): each of 32 lanes
// scans j = lane, lane + 32, ... skipping NaN, then a butterfly of
// argmax_take; z[0] NaN overrides. Returns lane `lane`'s (value, index).
pc::ArgMax kernel_argmax(const std::vector<float>& z, int lane) {
  const auto classes = static_cast<std::int64_t>(z.size());
  pc::ArgMax lanes[32];
  for (int l = 0; l < 32; ++l) {
    lanes[l] = pc::ArgMax{0.0f, -1};
    for (std::int64_t j = l; j < classes; j += 32)
      if (!pc::is_nan(z[static_cast<std::size_t>(j)])) lanes[l] = pc::argmax_take(lanes[l], pc::ArgMax{z[static_cast<std::size_t>(j)], j});
  }
  for (int o = 16; o > 0; o >>= 1) {
    pc::ArgMax next[32];
    for (int l = 0; l < 32; ++l) next[l] = pc::argmax_take(lanes[l], lanes[l ^ o]);
    std::copy(std::begin(next), std::end(next), std::begin(lanes));
  }
  const float z0 = z[0];
  return pc::is_nan(z0) ? pc::ArgMax{z0, 0} : lanes[lane];
}

TEST(CudaOpsMath, CrossEntropyArgmaxMatchesCpu) {
  std::mt19937_64 rng(500);
  const int rows = 4000;
  std::vector<std::int64_t> sizes;
  std::vector<float> all;
  std::vector<std::int32_t> mine, other;
  std::size_t bad = 0, nan_first = 0;
  for (int r = 0; r < rows; ++r) {
    // Few distinct values (ties, -0 and +0), NaNs, infinities; sizes
    // around and past the warp width.
    const std::int64_t classes = 1 + static_cast<std::int64_t>(rng() % 100);
    std::vector<float> z(static_cast<std::size_t>(classes));
    for (float& v : z) {
      const int k = static_cast<int>(rng() % 12);
      v = k == 0   ? NAN
          : k == 1 ? 0.0f
          : k == 2 ? -0.0f
          : k == 3 ? -INFINITY
          : k == 4 ? (rng() % 8 == 0 ? INFINITY : 2.0f)
                   : static_cast<float>(static_cast<int>(rng() % 5) - 2);
    }
    if (r % 50 == 0) std::fill(z.begin(), z.end(), NAN);
    // The CPU's scan, written out: first index of the largest, z[0] the start.
    std::int64_t arg = 0;
    float m = z[0];
    for (std::int64_t j = 1; j < classes; ++j)
      if (z[static_cast<std::size_t>(j)] > m) {
        m = z[static_cast<std::size_t>(j)];
        arg = j;
      }
    nan_first += std::isnan(z[0]);
    for (int lane : {0, 13, 31}) {
      const pc::ArgMax got = kernel_argmax(z, lane);
      const bool same_value = std::isnan(m) ? std::isnan(got.value) : bits(got.value) == bits(m);
      if ((got.index != arg || !same_value) && bad++ < 5)
        ADD_FAILURE() << "row " << r << " lane " << lane << ": index " << got.index << " want " << arg;
    }
    const std::int64_t k = kernel_argmax(z, 0).index;
    mine.push_back(static_cast<std::int32_t>(k));
    other.push_back(static_cast<std::int32_t>(classes > 1 ? (k + 1) % classes : -1));
    sizes.push_back(classes);
    all.insert(all.end(), z.begin(), z.end());
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_GT(nan_first, 100u);
  // The CPU backend's count of rows whose argmax equals the label, one row
  // per call (rows differ in width): every row with labels = ops_math's
  // argmax, none with the next index.
  std::int64_t hits = 0, misses = 0;
  std::size_t offset = 0;
  for (int r = 0; r < rows; ++r) {
    const std::int64_t classes = sizes[static_cast<std::size_t>(r)];
    std::vector<float> probs(static_cast<std::size_t>(classes));
    double loss = 0.0;
    std::int64_t correct = -1;
    cpu().cross_entropy_forward(all.data() + offset, &mine[static_cast<std::size_t>(r)], 1, classes, probs.data(), &loss,
                                &correct);
    hits += correct;
    correct = -1;
    cpu().cross_entropy_forward(all.data() + offset, &other[static_cast<std::size_t>(r)], 1, classes, probs.data(),
                                &loss, &correct);
    misses += correct;
    offset += static_cast<std::size_t>(classes);
  }
  EXPECT_EQ(hits, rows);
  EXPECT_EQ(misses, 0);
}

}  // namespace
