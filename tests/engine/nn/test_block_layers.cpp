// Block-scaled GEMM layers (issue 14) against naive double-precision
// references: Linear, PatchEmbed and Conv2d with compute MXFP8, MXFP4 and
// NVFP4 compute exactly the products of their operands quantized as
// nn/block_gemm.h and nn/conv2d.cpp document (which operand, along which
// axis, NVFP4's 16 x 16 weight tiles and tensor decode scales), plus the
// FP32 bias (and position table); the bias gradient sums the unquantized dy.
//
// The reference quantizer is numeric/block.h's block_encode_reference (one
// block at a time through the scalar conversions), decoded without the
// NVFP4 tensor scale, whose 1/S_enc then multiplies the product as the
// GEMM's alpha does. Each check also shows the test can tell: the same
// reference with the unquantized operands, or with an operand quantized
// along the other axis, is far outside the tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "engine/nn/gradcheck.h"
#include "nn/conv2d.h"
#include "nn/linear.h"
#include "nn/patch_embed.h"
#include "numeric/block.h"
#include "numeric/convert.h"

namespace {

using namespace engine;
using test::backend;

// A GEMM's f32 accumulation of K products: far below 1e-5 of sum |terms|.
constexpr double kTol = 1e-5;
// An operand quantized differently (or not at all) moves some output by at
// least this much of its magnitude (MXFP8's elements carry 3 mantissa bits).
constexpr double kDistinct = 1e-3;

const Format kFormats[] = {Format::MXFP8, Format::MXFP4, Format::NVFP4};

// Values over several binades, with a per-row magnitude (so neighbouring
// blocks get different scales) and a few exact zeros.
std::vector<float> operand(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::uniform_int_distribution<int> e(-4, 3), row_e(-3, 3);
  std::uniform_int_distribution<int> zero(0, 40);
  std::vector<float> v(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    const int re = row_e(rng);
    for (std::int64_t c = 0; c < cols; ++c)
      v[static_cast<std::size_t>(r * cols + c)] = zero(rng) == 0 ? 0.0f : std::ldexp(n(rng), e(rng) + re);
  }
  return v;
}

// An operand quantized by the reference encoder: values without the NVFP4
// tensor scale, and its decode factor 1/S_enc (1 for MX).
struct Quant {
  std::vector<float> v;
  double decode = 1.0;
};

Quant quant(Format f, const std::vector<float>& src, std::int64_t rows, std::int64_t cols, BlockLayout layout) {
  const BlockEncoding e = block_encode_reference(f, src.data(), rows, cols, layout);
  Quant q;
  q.v.resize(src.size());
  block_decode(e, q.v.data(), false);
  q.decode = 1.0 / static_cast<double>(e.tensor_scale);
  return q;
}

Quant unquantized(const std::vector<float>& src) { return {src, 1.0}; }

BlockLayout weight_layout(Format f) { return block_info(f).tensor_scale ? BlockLayout::Tiles : BlockLayout::Rows; }

// A reference result: values and, per value, the magnitude its f32
// accumulation error is relative to (sum of |terms|, plus |bias|).
struct Ref {
  std::vector<double> v, mag;
};

// C[i, j] = alpha * sum_p a(i, p) b(p, j) + add(i, j).
Ref gemm_ref(std::int64_t m, std::int64_t n, std::int64_t k, const std::function<double(std::int64_t, std::int64_t)>& a,
             const std::function<double(std::int64_t, std::int64_t)>& b, double alpha,
             const std::function<double(std::int64_t, std::int64_t)>& add = nullptr) {
  Ref r;
  r.v.resize(static_cast<std::size_t>(m * n));
  r.mag.resize(r.v.size());
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0, mag = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        const double t = a(i, p) * b(p, j);
        s += t;
        mag += std::abs(t);
      }
      const double extra = add ? add(i, j) : 0.0;
      r.v[static_cast<std::size_t>(i * n + j)] = alpha * s + extra;
      r.mag[static_cast<std::size_t>(i * n + j)] = std::abs(alpha) * mag + std::abs(extra);
    }
  return r;
}

// max |got - ref| / magnitude, and where.
struct Err {
  double rel = 0;
  std::size_t at = 0;
  double got = 0, want = 0;
};
Err max_err(const std::vector<float>& got, const Ref& ref) {
  Err e;
  EXPECT_EQ(got.size(), ref.v.size());
  for (std::size_t i = 0; i < std::min(got.size(), ref.v.size()); ++i) {
    const double d = std::abs(double(got[i]) - ref.v[i]);
    const double rel = ref.mag[i] > 0 ? d / ref.mag[i] : (d > 0 ? INFINITY : 0.0);
    if (rel > e.rel) e = {rel, i, got[i], ref.v[i]};
  }
  return e;
}

// got matches `right` to kTol and is kDistinct away from every `wrong`.
void expect_matches(const char* what, const std::vector<float>& got, const Ref& right,
                    std::initializer_list<std::pair<const char*, Ref>> wrong) {
  const Err e = max_err(got, right);
  EXPECT_LT(e.rel, kTol) << what << ": element " << e.at << " got " << e.got << ", expected " << e.want;
  for (const auto& [name, ref] : wrong)
    EXPECT_GT(max_err(got, ref).rel, kDistinct) << what << ": indistinguishable from " << name;
}

std::string trace(Format f) { return std::string("compute ") + format_name(f); }

// ---------------------------------------------------------------- Linear

struct LinearCase {
  // in: two MX blocks and a short one, five NVFP4 blocks; rows: one and a
  // half MX blocks down the columns (wgrad).
  static constexpr std::int64_t rows = 48, in = 80, out = 40;
  std::vector<float> x = operand(rows, in, 11), w = operand(out, in, 12), dy = operand(rows, out, 13), b;
  LinearCase() {
    std::mt19937_64 rng(14);
    b = test::uniform_values(out, rng);
  }
};

TEST(BlockLinear, ForwardIsTheProductOfRowQuantizedXAndW) {
  LinearCase c;
  for (Format f : kFormats) {
    SCOPED_TRACE(trace(f));
    Linear fc("fc", c.in, c.out);
    fc.weight().weight.from_f32(c.w.data(), c.out * c.in);
    fc.bias().weight.from_f32(c.b.data(), c.out);
    fc.set_precision({f, Format::FP32, Format::FP32, f});
    auto ctx = fc.make_context();
    Tensor x = Tensor::from_values({c.rows, c.in}, Format::FP32, c.x), y;
    fc.forward(backend(), x, y, *ctx);
    ASSERT_EQ(y.format(), Format::FP32);
    ASSERT_EQ(y.shape(), (Shape{c.rows, c.out}));
    auto ref = [&](const Quant& xq, const Quant& wq) {
      return gemm_ref(
          c.rows, c.out, c.in, [&](auto i, auto p) { return double(xq.v[i * c.in + p]); },
          [&](auto p, auto j) { return double(wq.v[j * c.in + p]); }, xq.decode * wq.decode,
          [&](auto, auto j) { return double(c.b[j]); });
    };
    const Quant xq = quant(f, c.x, c.rows, c.in, BlockLayout::Rows);
    const Quant wq = quant(f, c.w, c.out, c.in, weight_layout(f));
    const Quant wrong_w = quant(f, c.w, c.out, c.in, BlockLayout::Columns);
    expect_matches("y", y.to_f32(), ref(xq, wq),
                   {{"unquantized x and W", ref(unquantized(c.x), unquantized(c.w))},
                    {"W quantized down its columns", ref(xq, wrong_w)}});
    // The weight itself is untouched (quantized on the fly from FP32).
    EXPECT_EQ(fc.weight().weight.to_f32(), c.w);
    // Saved: x quantized down its columns, counted at the format's bytes.
    EXPECT_EQ(ctx->bytes(), static_cast<std::size_t>(block_bytes(f, c.rows, c.in, BlockLayout::Columns)));
    EXPECT_GT(ctx->emulation_bytes(), 0u);
  }
}

TEST(BlockLinear, BackwardQuantizesEachOperandAlongItsReduction) {
  LinearCase c;
  for (Format f : kFormats) {
    SCOPED_TRACE(trace(f));
    Linear fc("fc", c.in, c.out);
    fc.weight().weight.from_f32(c.w.data(), c.out * c.in);
    fc.bias().weight.from_f32(c.b.data(), c.out);
    fc.set_precision({f, Format::FP32, Format::FP32, f});
    fc.stochastic_grads = false;
    auto ctx = fc.make_context();
    Tensor x = Tensor::from_values({c.rows, c.in}, Format::FP32, c.x), y, dx;
    fc.forward(backend(), x, y, *ctx);
    fc.backward(backend(), Tensor::from_values({c.rows, c.out}, Format::FP32, c.dy), &dx, *ctx);
    ASSERT_EQ(dx.format(), Format::FP32);
    ASSERT_EQ(fc.weight().grad.format(), Format::FP32);

    // dgrad: dx [rows, in] = dy [rows, out] W [out, in], reduction over out:
    // dy row-wise, W down its columns (NVFP4: the forward's 16 x 16 tiles).
    auto dgrad = [&](const Quant& dyq, const Quant& wq) {
      return gemm_ref(
          c.rows, c.in, c.out, [&](auto i, auto p) { return double(dyq.v[i * c.out + p]); },
          [&](auto p, auto j) { return double(wq.v[p * c.in + j]); }, dyq.decode * wq.decode);
    };
    const Quant dy_rows = quant(f, c.dy, c.rows, c.out, BlockLayout::Rows);
    const BlockLayout wl = block_info(f).tensor_scale ? BlockLayout::Tiles : BlockLayout::Columns;
    const Quant w_dgrad = quant(f, c.w, c.out, c.in, wl);
    const Quant w_fwd_rows = quant(f, c.w, c.out, c.in, BlockLayout::Rows);
    expect_matches("dx", dx.to_f32(), dgrad(dy_rows, w_dgrad),
                   {{"unquantized dy and W", dgrad(unquantized(c.dy), unquantized(c.w))},
                    {"W quantized along its rows", dgrad(dy_rows, w_fwd_rows)}});

    // wgrad: dW [out, in] = dy^T x, reduction over rows: dy and x both
    // quantized down their columns.
    auto wgrad = [&](const Quant& dyq, const Quant& xq) {
      return gemm_ref(
          c.out, c.in, c.rows, [&](auto i, auto p) { return double(dyq.v[p * c.out + i]); },
          [&](auto p, auto j) { return double(xq.v[p * c.in + j]); }, dyq.decode * xq.decode);
    };
    const Quant dy_cols = quant(f, c.dy, c.rows, c.out, BlockLayout::Columns);
    const Quant x_cols = quant(f, c.x, c.rows, c.in, BlockLayout::Columns);
    const Quant x_rows = quant(f, c.x, c.rows, c.in, BlockLayout::Rows);
    expect_matches("dW", fc.weight().grad.to_f32(), wgrad(dy_cols, x_cols),
                   {{"unquantized dy and x", wgrad(unquantized(c.dy), unquantized(c.x))},
                    {"dy quantized along its rows", wgrad(dy_rows, x_cols)},
                    {"x quantized along its rows (the forward's copy)", wgrad(dy_cols, x_rows)}});

    // The bias gradient sums the unquantized dy, in f32.
    const std::vector<float> db = fc.bias().grad.to_f32();
    for (std::int64_t j = 0; j < c.out; ++j) {
      double s = 0, mag = 0;
      for (std::int64_t r = 0; r < c.rows; ++r) {
        s += c.dy[r * c.out + j];
        mag += std::abs(c.dy[r * c.out + j]);
      }
      EXPECT_LE(std::abs(db[j] - s), kTol * mag) << "db[" << j << "]";
    }
  }
}

TEST(BlockLinear, BlocksAtTheBottomOfTheScaleRangeStayExact) {
  // block.h: "Every dequantized value e * 2^X (MX) ... is exact in FP32
  // and, for all formats but MXFP8 with a block scale below 2^-124 (E4M3)
  // ..., exact in BF16 too: the CPU's GEMMs on these values are exact".
  // One block per format at the lowest scale the claim covers, holding its
  // element max and 31 copies of its smallest element: the small values are
  // FP32 and BF16 subnormals, every value is on the block grid already, and
  // y = x . ones = big + 31 small is exact in f32. (The CPU backend's
  // decode-to-f32 path gives it; its native BF16 GEMM, on CPUs with
  // AVX512-BF16, drops the subnormal BF16 operands: y = big. The layers
  // send these blocks there because block_quantize reports them bf16_exact.)
  struct Case {
    Format f;
    int x;         // the block's shared exponent
    double big;    // element max
    double small;  // smallest positive element
  };
  for (const Case& k : {Case{Format::MXFP8, -124, 448.0, 0x1.0p-9}, Case{Format::MXFP6, -126, 7.5, 0x1.0p-3},
                        Case{Format::MXFP4, -126, 6.0, 0.5}}) {
    SCOPED_TRACE(trace(k.f));
    const std::int64_t in = 32;
    std::vector<float> x(in, static_cast<float>(std::ldexp(k.small, k.x)));
    x[0] = static_cast<float>(std::ldexp(k.big, k.x));
    const std::vector<float> ones(in, 1.0f);
    // On the grid: quantizing changes nothing.
    ASSERT_EQ(quant(k.f, x, 1, in, BlockLayout::Rows).v, x);
    Linear fc("fc", in, 1, false);
    fc.weight().weight.from_f32(ones.data(), in);
    fc.set_precision({k.f, Format::FP32, Format::FP32, k.f});
    auto ctx = fc.make_context();
    Tensor xt = Tensor::from_values({1, in}, Format::FP32, x), y;
    fc.forward(backend(), xt, y, *ctx);
    const float want = static_cast<float>(std::ldexp(k.big + 31 * k.small, k.x));
    EXPECT_EQ(y.to_f32()[0], want) << "x = {" << x[0] << ", 31 x " << x[1] << "}, W = ones";
  }
}

TEST(BlockLinear, NonBlockGradFormatUsesDyAsRounded) {
  // Block compute with a BF16 grad format: dy is rounded to BF16 (not block
  // quantized) and meets the block-quantized W and x in the backward GEMMs.
  LinearCase c;
  const Format f = Format::MXFP4;
  Linear fc("fc", c.in, c.out);
  fc.weight().weight.from_f32(c.w.data(), c.out * c.in);
  fc.set_precision({f, Format::FP32, Format::FP32, Format::BF16});
  auto ctx = fc.make_context();
  Tensor x = Tensor::from_values({c.rows, c.in}, Format::FP32, c.x), y, dx;
  fc.forward(backend(), x, y, *ctx);
  fc.backward(backend(), Tensor::from_values({c.rows, c.out}, Format::FP32, c.dy), &dx, *ctx);
  Quant dy16;
  for (float v : c.dy) dy16.v.push_back(quantize(Format::BF16, v));
  const Quant wq = quant(f, c.w, c.out, c.in, BlockLayout::Columns);
  const Quant xq = quant(f, c.x, c.rows, c.in, BlockLayout::Columns);
  const Ref dxr = gemm_ref(
      c.rows, c.in, c.out, [&](auto i, auto p) { return double(dy16.v[i * c.out + p]); },
      [&](auto p, auto j) { return double(wq.v[p * c.in + j]); }, 1.0);
  // dx leaves in the grad format (BF16 values).
  std::vector<float> dxv = dx.to_f32();
  for (std::size_t i = 0; i < dxv.size(); ++i) {
    const double want = quantize(Format::BF16, static_cast<float>(dxr.v[i]));
    EXPECT_LE(std::abs(dxv[i] - want), 0x1.0p-7 * std::abs(want) + kTol * dxr.mag[i]) << "dx " << i;
  }
  const Ref dwr = gemm_ref(
      c.out, c.in, c.rows, [&](auto i, auto p) { return double(dy16.v[p * c.out + i]); },
      [&](auto p, auto j) { return double(xq.v[p * c.in + j]); }, 1.0);
  const std::vector<float> dw = fc.weight().grad.to_f32();
  for (std::size_t i = 0; i < dw.size(); ++i) {
    const double want = quantize(Format::BF16, static_cast<float>(dwr.v[i]));
    EXPECT_LE(std::abs(dw[i] - want), 0x1.0p-7 * std::abs(want) + kTol * dwr.mag[i]) << "dW " << i;
  }
}

TEST(BlockLinear, StochasticGradsAreUnbiasedAndLeaveTheForwardAlone) {
  // NVFP4's recipe rounds dy stochastically: one backward differs from
  // round-to-nearest, and the mean of many is much closer to the product
  // with the unquantized dy (x still quantized down its columns) than
  // round-to-nearest is. The forward never rounds stochastically.
  LinearCase c;
  const Format f = Format::NVFP4;
  Linear fc("fc", c.in, c.out, false);
  fc.weight().weight.from_f32(c.w.data(), c.out * c.in);
  fc.set_precision({f, Format::FP32, Format::FP32, f});
  fc.stochastic_grads = true;
  auto ctx = fc.make_context();
  Tensor x = Tensor::from_values({c.rows, c.in}, Format::FP32, c.x), y;
  Tensor dyt = Tensor::from_values({c.rows, c.out}, Format::FP32, c.dy);
  fc.forward(backend(), x, y, *ctx);
  const std::vector<float> y0 = y.to_f32();
  const Quant xq = quant(f, c.x, c.rows, c.in, BlockLayout::Columns);
  auto wgrad = [&](const Quant& dyq) {
    return gemm_ref(
        c.out, c.in, c.rows, [&](auto i, auto p) { return double(dyq.v[p * c.out + i]); },
        [&](auto p, auto j) { return double(xq.v[p * c.in + j]); }, dyq.decode * xq.decode);
  };
  const Ref exact = wgrad(unquantized(c.dy));
  const Ref nearest = wgrad(quant(f, c.dy, c.rows, c.out, BlockLayout::Columns));
  const int n = 64;
  std::vector<double> mean(exact.v.size(), 0.0);
  std::vector<float> first;
  for (int k = 0; k < n; ++k) {
    fc.backward(backend(), dyt, nullptr, *ctx);
    const std::vector<float> dw = fc.weight().grad.to_f32();
    if (k == 0) first = dw;
    for (std::size_t i = 0; i < dw.size(); ++i) mean[i] += dw[i] / n;
  }
  EXPECT_GT(max_err(first, nearest).rel, kDistinct) << "stochastic rounding gave round-to-nearest's dW";
  double e_mean = 0, e_nearest = 0;
  for (std::size_t i = 0; i < mean.size(); ++i) {
    e_mean += (mean[i] - exact.v[i]) * (mean[i] - exact.v[i]);
    e_nearest += (nearest.v[i] - exact.v[i]) * (nearest.v[i] - exact.v[i]);
  }
  EXPECT_LT(std::sqrt(e_mean), 0.5 * std::sqrt(e_nearest));
  fc.forward(backend(), x, y, *ctx);
  EXPECT_EQ(y.to_f32(), y0);
}

// ---------------------------------------------------------------- PatchEmbed

TEST(BlockPatchEmbed, ForwardAndGradientsAreTheBlockProducts) {
  // 3 channels, patch 4: P = 48 (an MX block and a short one); 12 x 12: 9 tokens.
  const std::int64_t B = 3, C = 3, H = 12, W = 12, p = 4, dim = 24, T = 9, P = C * p * p, rows = B * T;
  const std::vector<float> img = operand(B * C, H * W, 21);
  const std::vector<float> w = operand(dim, P, 22);
  const std::vector<float> dy = operand(rows, dim, 23);
  std::mt19937_64 rng(24);
  const std::vector<float> bias = test::uniform_values(dim, rng), pos = test::uniform_values(T * dim, rng);
  // The patches, gathered here: token t = (ty, tx), within a patch (c, i, j).
  std::vector<float> patches(static_cast<std::size_t>(rows * P));
  auto pixel = [&](std::int64_t r, std::int64_t k) {
    const std::int64_t b = r / T, t = r % T, ty = t / (W / p), tx = t % (W / p);
    const std::int64_t ch = k / (p * p), i = (k / p) % p, j = k % p;
    return ((b * C + ch) * H + ty * p + i) * W + tx * p + j;
  };
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t k = 0; k < P; ++k) patches[r * P + k] = img[pixel(r, k)];
  for (Format f : kFormats) {
    SCOPED_TRACE(trace(f));
    PatchEmbed pe("pe", C, H, W, p, dim);
    ASSERT_EQ(pe.tokens(), T);
    pe.weight().weight.from_f32(w.data(), dim * P);
    pe.bias().weight.from_f32(bias.data(), dim);
    pe.pos().weight.from_f32(pos.data(), T * dim);
    pe.set_precision({f, Format::FP32, Format::FP32, f});
    auto ctx = pe.make_context();
    Tensor x = Tensor::from_values({B, C, H, W}, Format::FP32, img), y, dx;
    pe.forward(backend(), x, y, *ctx);
    ASSERT_EQ(y.shape(), (Shape{B, T, dim}));
    auto fwd = [&](const Quant& pq, const Quant& wq) {
      return gemm_ref(
          rows, dim, P, [&](auto i, auto k) { return double(pq.v[i * P + k]); },
          [&](auto k, auto j) { return double(wq.v[j * P + k]); }, pq.decode * wq.decode,
          [&](auto i, auto j) { return double(bias[j]) + pos[(i % T) * dim + j]; });
    };
    const Quant pq = quant(f, patches, rows, P, BlockLayout::Rows);
    const Quant wq = quant(f, w, dim, P, weight_layout(f));
    expect_matches("y", y.to_f32(), fwd(pq, wq),
                   {{"unquantized patches and W", fwd(unquantized(patches), unquantized(w))},
                    {"the image quantized instead of the patches",
                     [&] {
                       // Blocks along the image rows, then gathered.
                       const Quant iq = quant(f, img, B * C * H, W, BlockLayout::Rows);
                       Quant g;
                       g.decode = iq.decode;
                       for (std::int64_t r = 0; r < rows; ++r)
                         for (std::int64_t k = 0; k < P; ++k) g.v.push_back(iq.v[pixel(r, k)]);
                       return fwd(g, wq);
                     }()}});
    EXPECT_EQ(ctx->bytes(), static_cast<std::size_t>(block_bytes(f, rows, P, BlockLayout::Columns)));

    pe.backward(backend(), Tensor::from_values({B, T, dim}, Format::FP32, dy), &dx, *ctx);
    // dW [dim, P] = dy^T patches, both down their columns.
    const Quant dyc = quant(f, dy, rows, dim, BlockLayout::Columns), pc = quant(f, patches, rows, P, BlockLayout::Columns);
    const Ref dw = gemm_ref(
        dim, P, rows, [&](auto i, auto k) { return double(dyc.v[k * dim + i]); },
        [&](auto k, auto j) { return double(pc.v[k * P + j]); }, dyc.decode * pc.decode);
    expect_matches("dW", pe.weight().grad.to_f32(), dw, {});
    // dx: dy row-wise times W (down its columns; NVFP4: the forward's tiles), scattered back.
    const Quant dyr = quant(f, dy, rows, dim, BlockLayout::Rows);
    const Quant wd = quant(f, w, dim, P, block_info(f).tensor_scale ? BlockLayout::Tiles : BlockLayout::Columns);
    const Ref dp = gemm_ref(
        rows, P, dim, [&](auto i, auto k) { return double(dyr.v[i * dim + k]); },
        [&](auto k, auto j) { return double(wd.v[k * P + j]); }, dyr.decode * wd.decode);
    Ref dxr;
    dxr.v.assign(img.size(), 0.0);
    dxr.mag.assign(img.size(), 0.0);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t k = 0; k < P; ++k) {
        dxr.v[pixel(r, k)] = dp.v[r * P + k];
        dxr.mag[pixel(r, k)] = dp.mag[r * P + k];
      }
    expect_matches("dx", dx.to_f32(), dxr, {});
    // Bias and position gradients: sums of the unquantized dy.
    const std::vector<float> db = pe.bias().grad.to_f32(), dpos = pe.pos().grad.to_f32();
    for (std::int64_t j = 0; j < dim; ++j) {
      double s = 0, mag = 0;
      for (std::int64_t r = 0; r < rows; ++r) s += dy[r * dim + j], mag += std::abs(dy[r * dim + j]);
      EXPECT_LE(std::abs(db[j] - s), kTol * mag) << "db " << j;
    }
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t j = 0; j < dim; ++j) {
        double s = 0, mag = 0;
        for (std::int64_t b = 0; b < B; ++b) s += dy[(b * T + t) * dim + j], mag += std::abs(dy[(b * T + t) * dim + j]);
        EXPECT_LE(std::abs(dpos[t * dim + j] - s), kTol * mag) << "dpos " << t << " " << j;
      }
  }
}

// ---------------------------------------------------------------- Conv2d

struct ConvCase {
  std::int64_t n, c, h, w, co, k, pad, stride;
  std::int64_t oh() const { return (h + 2 * pad - k) / stride + 1; }
  std::int64_t ow() const { return (w + 2 * pad - k) / stride + 1; }
};

// Every operand is quantized once along its innermost dimension: x Rows of
// [N*C, H*W], filters Rows of [C_out, C*k*k] (NVFP4: 16 x 16 tiles), dy Rows
// of [N*C_out, OH*OW]; the same copies serve forward, dgrad and wgrad.
void check_conv(const ConvCase& s, std::uint64_t seed) {
  const std::int64_t hw = s.h * s.w, ohw = s.oh() * s.ow(), wc = s.c * s.k * s.k;
  const std::vector<float> x = operand(s.n * s.c, hw, seed), w = operand(s.co, wc, seed + 1),
                           dy = operand(s.n * s.co, ohw, seed + 2);
  std::mt19937_64 rng(seed + 3);
  const std::vector<float> bias = test::uniform_values(s.co, rng);
  // Input pixel of output (oh, ow) and filter tap (i, j); -1 in the padding.
  auto in_at = [&](std::int64_t o, std::int64_t i, std::int64_t len) {
    const std::int64_t v = o * s.stride - s.pad + i;
    return v >= 0 && v < len ? v : -1;
  };
  for (Format f : kFormats) {
    SCOPED_TRACE(trace(f));
    Conv2d conv("conv", s.c, s.co, s.k, s.pad, s.stride);
    conv.weight().weight.from_f32(w.data(), s.co * wc);
    conv.bias().weight.from_f32(bias.data(), s.co);
    conv.set_precision({f, Format::FP32, Format::FP32, f});
    auto ctx = conv.make_context();
    Tensor xt = Tensor::from_values({s.n, s.c, s.h, s.w}, Format::FP32, x), y, dx;
    conv.forward(backend(), xt, y, *ctx);
    ASSERT_EQ(y.shape(), (Shape{s.n, s.co, s.oh(), s.ow()}));
    auto fwd = [&](const Quant& xq, const Quant& wq) {
      Ref r;
      for (std::int64_t b = 0; b < s.n; ++b)
        for (std::int64_t o = 0; o < s.co; ++o)
          for (std::int64_t oy = 0; oy < s.oh(); ++oy)
            for (std::int64_t ox = 0; ox < s.ow(); ++ox) {
              double acc = 0, mag = 0;
              for (std::int64_t ch = 0; ch < s.c; ++ch)
                for (std::int64_t i = 0; i < s.k; ++i)
                  for (std::int64_t j = 0; j < s.k; ++j) {
                    const std::int64_t iy = in_at(oy, i, s.h), ix = in_at(ox, j, s.w);
                    if (iy < 0 || ix < 0) continue;
                    const double t = double(xq.v[((b * s.c + ch) * s.h + iy) * s.w + ix]) *
                                     wq.v[((o * s.c + ch) * s.k + i) * s.k + j];
                    acc += t;
                    mag += std::abs(t);
                  }
              const double alpha = xq.decode * wq.decode;
              r.v.push_back(alpha * acc + bias[o]);
              r.mag.push_back(std::abs(alpha) * mag + std::abs(bias[o]));
            }
      return r;
    };
    const Quant xq = quant(f, x, s.n * s.c, hw, BlockLayout::Rows);
    const Quant wq = quant(f, w, s.co, wc, weight_layout(f));
    expect_matches("y", y.to_f32(), fwd(xq, wq),
                   {{"unquantized x and W", fwd(unquantized(x), unquantized(w))},
                    {"x quantized down its columns", fwd(quant(f, x, s.n * s.c, hw, BlockLayout::Columns), wq)}});
    EXPECT_EQ(ctx->bytes(), static_cast<std::size_t>(block_bytes(f, s.n * s.c, hw, BlockLayout::Rows)));

    conv.backward(backend(), Tensor::from_values({s.n, s.co, s.oh(), s.ow()}, Format::FP32, dy), &dx, *ctx);
    const Quant dyq = quant(f, dy, s.n * s.co, ohw, BlockLayout::Rows);
    Ref dxr, dwr;
    dxr.v.assign(x.size(), 0.0);
    dxr.mag.assign(x.size(), 0.0);
    dwr.v.assign(w.size(), 0.0);
    dwr.mag.assign(w.size(), 0.0);
    const double a_dx = dyq.decode * wq.decode, a_dw = dyq.decode * xq.decode;
    for (std::int64_t b = 0; b < s.n; ++b)
      for (std::int64_t o = 0; o < s.co; ++o)
        for (std::int64_t oy = 0; oy < s.oh(); ++oy)
          for (std::int64_t ox = 0; ox < s.ow(); ++ox) {
            const double g = dyq.v[((b * s.co + o) * s.oh() + oy) * s.ow() + ox];
            for (std::int64_t ch = 0; ch < s.c; ++ch)
              for (std::int64_t i = 0; i < s.k; ++i)
                for (std::int64_t j = 0; j < s.k; ++j) {
                  const std::int64_t iy = in_at(oy, i, s.h), ix = in_at(ox, j, s.w);
                  if (iy < 0 || ix < 0) continue;
                  const std::size_t xi = static_cast<std::size_t>(((b * s.c + ch) * s.h + iy) * s.w + ix);
                  const std::size_t wi = static_cast<std::size_t>(((o * s.c + ch) * s.k + i) * s.k + j);
                  dxr.v[xi] += a_dx * g * wq.v[wi];
                  dxr.mag[xi] += std::abs(a_dx * g * wq.v[wi]);
                  dwr.v[wi] += a_dw * g * xq.v[xi];
                  dwr.mag[wi] += std::abs(a_dw * g * xq.v[xi]);
                }
          }
    expect_matches("dx", dx.to_f32(), dxr, {});
    expect_matches("dW", conv.weight().grad.to_f32(), dwr, {});
    // Bias: per-channel sums of the unquantized dy.
    const std::vector<float> db = conv.bias().grad.to_f32();
    for (std::int64_t o = 0; o < s.co; ++o) {
      double sum = 0, mag = 0;
      for (std::int64_t b = 0; b < s.n; ++b)
        for (std::int64_t q = 0; q < ohw; ++q) {
          sum += dy[(b * s.co + o) * ohw + q];
          mag += std::abs(dy[(b * s.co + o) * ohw + q]);
        }
      EXPECT_LE(std::abs(db[o] - sum), kTol * mag) << "db " << o;
    }
  }
}

TEST(BlockConv2d, FewChannelsPaddedIsTheConvolutionOfTheQuantizedOperands) {
  // C*k*k = 36: an MX block and a short one; H*W = 100: three blocks and a short one.
  check_conv({2, 4, 10, 10, 5, 3, 1, 1}, 31);
}

TEST(BlockConv2d, SixteenChannelsStridedIsTheConvolutionOfTheQuantizedOperands) {
  // 16 input channels: the CPU backend's BF16 convolution path where it has one.
  check_conv({2, 16, 9, 9, 6, 3, 1, 2}, 41);
}

}  // namespace
