// Tests of engine/solve/lu.h: the factorization equals the scalar reference
// (lu_reference.h) bit for bit where the GEMM's order of summation cannot
// matter, stays within the reference's rounding elsewhere, and the
// triangular solves solve.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include <omp.h>

#include "backend/backend.h"
#include "backend/registry.h"
#include "engine/solve/lu_reference.h"
#include "solve/lu.h"
#include "solve/matrix.h"

namespace {

using engine::Format;
using engine::LuConfig;
using engine::SolveFormat;

engine::Backend& cpu() {
  static engine::BackendChoice be = engine::make_backend("cpu", 0);
  return *be.backend;
}

LuConfig config(Format f, Format acc, std::int64_t nb) {
  LuConfig c;
  c.factor = SolveFormat::of(f);
  c.accumulate = acc;
  c.block = nb;
  return c;
}

// Entries that differ in their bits (0: bit for bit the reference).
std::int64_t bit_differences(const std::vector<float>& a, const std::vector<float>& b) {
  std::int64_t d = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) ++d;
  return d;
}

// max |P A - L U| / max |A| with the factors' values (exact products in double).
double factor_residual(const engine::Matrix& a, const std::vector<float>& lu, const std::vector<std::int64_t>& piv,
                       double scale) {
  const std::int64_t n = a.n;
  std::vector<double> pa(a.a.begin(), a.a.end());
  for (std::int64_t k = 0; k < n; ++k)
    if (piv[static_cast<std::size_t>(k)] != k)
      for (std::int64_t j = 0; j < n; ++j) std::swap(pa[k * n + j], pa[piv[static_cast<std::size_t>(k)] * n + j]);
  double worst = 0.0, amax = 0.0;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (std::int64_t p = 0; p <= std::min(i, j); ++p)
        s += (p == i ? 1.0 : static_cast<double>(lu[i * n + p])) * static_cast<double>(lu[p * n + j]);
      worst = std::max(worst, std::fabs(pa[i * n + j] * scale - s));
      amax = std::max(amax, std::fabs(pa[i * n + j] * scale));
    }
  return worst / amax;
}

struct Case {
  Format f, acc;
};
const Case kExactCases[] = {{Format::FP16, Format::FP32}, {Format::BF16, Format::FP32}, {Format::TF32, Format::FP32},
                            {Format::E4M3, Format::FP32}, {Format::E5M2, Format::FP32}, {Format::FP16, Format::FP16},
                            {Format::BF16, Format::BF16}};

TEST(SolveLu, RankOneBlocksThroughTheGemmEqualTheReferenceBitForBit) {
  // nb = 1: every trailing update is a GEMM with k = 1, one exact product
  // (the factor's values multiply exactly in FP32) and one subtraction.
  const engine::Matrix a = engine::random_matrix(40, 1e3, 7);
  for (const Case& c : kExactCases) {
    const auto f = engine::lu_factor(a, config(c.f, c.acc, 1), &cpu());
    const auto r = solvetest::reference_lu(a, c.f, c.acc, 1);
    ASSERT_TRUE(f.ok && r.ok) << engine::format_name(c.f);
    EXPECT_EQ(f.pivots, r.pivots) << engine::format_name(c.f);
    EXPECT_EQ(f.scale, r.scale) << engine::format_name(c.f);
    EXPECT_EQ(bit_differences(f.lu, r.lu), 0) << engine::format_name(c.f) << " acc " << engine::format_name(c.acc);
  }
}

TEST(SolveLu, TensorCoreModeRoundsOnlyTheUpdatesOperands) {
  // Held in FP32, the trailing update's operands rounded to F: with nb = 1
  // their product is exact in FP32, so the GEMM equals the reference.
  const engine::Matrix a = engine::random_matrix(40, 1e3, 8);
  for (Format f : {Format::BF16, Format::FP16, Format::TF32, Format::E4M3}) {
    LuConfig c = config(f, Format::FP32, 1);
    c.storage = LuConfig::Storage::FP32;
    const auto lu = engine::lu_factor(a, c, &cpu());
    const auto r = solvetest::reference_lu(a, f, Format::FP32, 1, true);
    EXPECT_EQ(lu.pivots, r.pivots) << engine::format_name(f);
    EXPECT_EQ(bit_differences(lu.lu, r.lu), 0) << engine::format_name(f);
    // and it is not the LU held in F
    const auto held = solvetest::reference_lu(a, f, Format::FP32, 1, false);
    EXPECT_GT(bit_differences(lu.lu, held.lu), 0) << engine::format_name(f);
  }
  // Blocks of 8: the first panel and its U12 are FP32 work, before any
  // rounded operand: the first 8 pivots and rows of U are an FP32 LU's.
  LuConfig c = config(Format::BF16, Format::FP32, 8);
  c.storage = LuConfig::Storage::FP32;
  const auto lu = engine::lu_factor(a, c, &cpu());
  const auto f32 = solvetest::reference_lu(a, Format::FP32, Format::FP32, 8);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(lu.pivots[i], f32.pivots[i]) << i;
    for (int j = i; j < 40; ++j) EXPECT_EQ(lu.lu[i * 40 + j], f32.lu[i * 40 + j]) << i << "," << j;
  }
}

TEST(SolveLu, OnePanelEqualsTheReferenceBitForBitInEveryFormat) {
  // nb >= n: the whole matrix is one panel, the engine's own loops.
  const engine::Matrix a = engine::random_matrix(33, 1e2, 3);
  for (Format f : {Format::FP32, Format::TF32, Format::BF16, Format::FP16, Format::E4M3, Format::E5M2}) {
    const auto lu = engine::lu_factor(a, config(f, Format::FP32, 64), &cpu());
    const auto r = solvetest::reference_lu(a, f, Format::FP32, 64);
    EXPECT_EQ(lu.pivots, r.pivots) << engine::format_name(f);
    EXPECT_EQ(bit_differences(lu.lu, r.lu), 0) << engine::format_name(f);
  }
}

TEST(SolveLu, ALargePanelSplitAmongThreadsEqualsTheReferenceBitForBit) {
  // One panel of 700 columns: from column 118 to 582 its rows below the
  // diagonal are split among the threads (rows x columns before > 65536), and in FP32 storage four updates
  // run per pass over a column. Neither may move a bit: FP32 (the fused
  // path), BF16 held in BF16 (the per-update path) and FP16 accumulating
  // in FP16.
  const engine::Matrix a = engine::random_matrix(700, 1e2, 12);
  const Case cases[] = {{Format::FP32, Format::FP32}, {Format::BF16, Format::FP32}, {Format::FP16, Format::FP16}};
  for (const Case& k : cases) {
    const auto lu = engine::lu_factor(a, config(k.f, k.acc, 700), &cpu());
    const auto r = solvetest::reference_lu(a, k.f, k.acc, 700);
    EXPECT_EQ(lu.pivots, r.pivots) << engine::format_name(k.f);
    EXPECT_EQ(bit_differences(lu.lu, r.lu), 0) << engine::format_name(k.f);
  }
}

TEST(SolveLu, TheFirstPanelAndItsRowsOfUAreAnFp32LusBitForBit) {
  // Tensor Core mode, panels of 96: the first panel runs in groups of
  // eight columns (each group's rows taking the earlier columns' updates
  // in one pass) and its rows of U right of it in tiles of 64 columns plus
  // a tail (300 - 96 = 204 = 3 x 64 + 12), all before any rounded operand:
  // its pivots and its 96 rows of L and U equal the scalar FP32 LU's.
  const engine::Matrix a = engine::random_matrix(300, 1e2, 21);
  LuConfig c = config(Format::BF16, Format::FP32, 96);
  c.storage = LuConfig::Storage::FP32;
  const auto lu = engine::lu_factor(a, c, &cpu());
  const auto f32 = solvetest::reference_lu(a, Format::FP32, Format::FP32, 96);
  std::int64_t differ = 0;
  for (int i = 0; i < 96; ++i) {
    EXPECT_EQ(lu.pivots[i], f32.pivots[i]) << i;
    for (int j = 0; j < 300; ++j) differ += std::memcmp(&lu.lu[i * 300 + j], &f32.lu[i * 300 + j], sizeof(float)) != 0;
  }
  // L's first 96 columns below the panel, in the row order the panel left
  // them in (the later panels' swaps, which differ, undone).
  auto first_columns = [](std::vector<float> w, const std::vector<std::int64_t>& piv) {
    for (int k = 299; k >= 96; --k)
      for (int j = 0; j < 96; ++j) std::swap(w[k * 300 + j], w[piv[k] * 300 + j]);
    return w;
  };
  const auto ours = first_columns(lu.lu, lu.pivots), ref = first_columns(f32.lu, f32.pivots);
  for (int i = 96; i < 300; ++i)
    for (int j = 0; j < 96; ++j) differ += std::memcmp(&ours[i * 300 + j], &ref[i * 300 + j], sizeof(float)) != 0;
  EXPECT_EQ(differ, 0);
}

TEST(SolveLu, LowPrecisionAccumulationIsInOrderSoBlocksEqualTheReference) {
  // Accumulating in FP16/BF16 the GEMM rounds after every addition, in
  // order: blocks of 8 equal the reference's in-order sums too.
  const engine::Matrix a = engine::random_matrix(50, 1e2, 11);
  for (Format f : {Format::FP16, Format::BF16}) {
    const auto lu = engine::lu_factor(a, config(f, f, 8), &cpu());
    const auto r = solvetest::reference_lu(a, f, f, 8);
    EXPECT_EQ(lu.pivots, r.pivots) << engine::format_name(f);
    EXPECT_EQ(bit_differences(lu.lu, r.lu), 0) << engine::format_name(f);
  }
}

TEST(SolveLu, BlockedFp32AccumulationStaysWithinTheFormatsRounding) {
  // Blocks of 16 through the GEMM: its FP32 sums may be ordered otherwise
  // than the reference's, so an entry can differ by an ulp of F, and the
  // difference travels on through the later updates; the factorization's
  // residual is as small as the reference's.
  const engine::Matrix a = engine::random_matrix(96, 1e2, 5);
  for (Format f : {Format::FP32, Format::BF16, Format::FP16}) {
    const auto lu = engine::lu_factor(a, config(f, Format::FP32, 16), &cpu());
    const auto r = solvetest::reference_lu(a, f, Format::FP32, 16);
    const double u = SolveFormat::of(f).unit_roundoff();
    const double mine = factor_residual(a, lu.lu, lu.pivots, lu.scale);
    const double ref = factor_residual(a, r.lu, r.pivots, r.scale);
    EXPECT_LT(mine, 96 * u) << engine::format_name(f);
    EXPECT_LT(mine, 2.0 * ref + 4 * u) << engine::format_name(f);
  }
}

TEST(SolveLu, BlockFormatsRoundTheUpdatesOperandsByBlocks) {
  // Tensor Core mode with MX/NVFP4 operands: the LU's residual is of the
  // element format's size, smaller for more element bits.
  const engine::Matrix a = engine::random_matrix(96, 1e2, 4);
  std::map<Format, double> residual;
  for (Format f : {Format::MXFP8, Format::MXFP6, Format::MXFP4, Format::NVFP4}) {
    LuConfig c = config(f, Format::FP32, 32);
    c.storage = LuConfig::Storage::FP32;
    const auto lu = engine::lu_factor(a, c, &cpu());
    ASSERT_TRUE(lu.ok) << lu.failure;
    EXPECT_EQ(lu.scale, 1.0);  // the block scales carry the range
    const double res = factor_residual(a, lu.lu, lu.pivots, lu.scale);
    EXPECT_LT(res, 96 * SolveFormat::of(f).unit_roundoff()) << engine::format_name(f);
    EXPECT_GT(res, 1e-6) << engine::format_name(f);  // not an FP32 LU
    residual[f] = res;
  }
  // FP4's one significand bit against FP8's three.
  EXPECT_GT(residual[Format::MXFP4], 2 * residual[Format::MXFP8]);
  LuConfig held = config(Format::MXFP8, Format::FP32, 32);
  EXPECT_NE(engine::lu_config_problem(held).find("--storage fp32"), std::string::npos);
}

TEST(SolveLu, KnownMatrixFactorsExactly) {
  // A 3 x 3 whose LU with partial pivoting is exact in every format:
  // rows swap so the 4 leads, multipliers 1/2 and 1/4.
  engine::Matrix a;
  a.n = 3;
  a.a = {2, 1, 1, 4, 3, 3, 1, 3, 2};
  // Column 1 pivots on the 4 (multipliers 1/2, 1/4), column 2 on 9/4 (row 3).
  for (Format f : {Format::FP32, Format::BF16, Format::FP16}) {
    const auto lu = engine::lu_factor(a, config(f, Format::FP32, 0), &cpu());
    ASSERT_TRUE(lu.ok);
    const double s = lu.scale;
    EXPECT_EQ(lu.pivots, (std::vector<std::int64_t>{1, 2, 2})) << engine::format_name(f);
    EXPECT_EQ(lu.lu[0], static_cast<float>(4 * s));
    EXPECT_EQ(lu.lu[3], 0.25f);
    EXPECT_EQ(lu.lu[4], static_cast<float>(2.25 * s));
    EXPECT_EQ(lu.lu[6], 0.5f);
  }
  const auto lu64 = engine::lu_factor(a, LuConfig{SolveFormat::f64(), Format::FP32, 0, true}, &cpu());
  EXPECT_EQ(lu64.lu64[3], 0.25);
  EXPECT_EQ(lu64.lu64[4], 2.25);
}

TEST(SolveLu, ScaleKeepsFp16AndFp8FromOverflowing) {
  engine::Matrix a = engine::random_matrix(32, 10.0, 1);
  for (double& v : a.a) v *= 1e7;  // far past FP16's 65504
  for (Format f : {Format::FP16, Format::E4M3}) {
    const auto lu = engine::lu_factor(a, config(f, Format::FP32, 0), &cpu());
    ASSERT_TRUE(lu.ok) << lu.failure;
    double amax = 0.0;
    for (double v : a.a) amax = std::max(amax, std::fabs(v));
    // The largest power of two that keeps mu * max|a| within theta of the
    // format's max: 2^-6 for FP16 (room to grow), 2^-1 for E4M3 (saturates).
    const double theta = f == Format::FP16 ? 1.0 / 64 : 0.5;
    EXPECT_LE(lu.scale * amax, theta * engine::format_info(f).max) << engine::format_name(f);
    EXPECT_GT(lu.scale * amax, theta / 2 * engine::format_info(f).max) << engine::format_name(f);
    EXPECT_EQ(std::log2(lu.scale), std::floor(std::log2(lu.scale)));  // a power of two
    for (float v : lu.lu) ASSERT_TRUE(std::isfinite(v));
  }
  LuConfig off = config(Format::FP16, Format::FP32, 0);
  off.scale = false;
  const auto raw = engine::lu_factor(a, off, &cpu());
  EXPECT_FALSE(raw.ok);  // unscaled, the entries round to inf
  EXPECT_NE(raw.failure.find("non-finite"), std::string::npos) << raw.failure;
  const auto bf = engine::lu_factor(a, config(Format::BF16, Format::FP32, 0), &cpu());
  EXPECT_EQ(bf.scale, 1.0);  // BF16 has FP32's range: no scale
}

TEST(SolveLu, SingularMatrixIsReportedNotThrown) {
  engine::Matrix a;
  a.n = 3;
  a.a = {1, 2, 3, 2, 4, 6, 1, 1, 1};
  const auto lu = engine::lu_factor(a, config(Format::FP32, Format::FP32, 0), &cpu());
  EXPECT_FALSE(lu.ok);
  EXPECT_NE(lu.failure.find("zero pivot in column 3"), std::string::npos) << lu.failure;
}

TEST(SolveLu, TriangularSolvesSolve) {
  const engine::Matrix a = engine::random_matrix(64, 10.0, 9);
  std::vector<double> x = engine::random_vector(64, 2), b(64), got(64);
  engine::matvec(a, x.data(), b.data());
  for (bool fp32 : {false, true}) {
    const auto lu = engine::lu_factor(a, LuConfig{SolveFormat::of(Format::FP32), Format::FP32, 16, true}, &cpu());
    engine::lu_solve(lu, b.data(), got.data(), fp32);
    double err = 0.0;
    for (int i = 0; i < 64; ++i) err = std::max(err, std::fabs(got[i] - x[i]));
    EXPECT_LT(err / engine::norm_inf(x), 1e-5);
  }
  const auto lu64 = engine::lu_factor(a, LuConfig{SolveFormat::f64(), Format::FP32, 0, true}, &cpu());
  engine::lu_solve(lu64, b.data(), got.data(), false);
  double err = 0.0;
  for (int i = 0; i < 64; ++i) err = std::max(err, std::fabs(got[i] - x[i]));
  EXPECT_LT(err / engine::norm_inf(x), 1e-13);
}

TEST(SolveLu, TheSolvesGiveTheSameBitsOnOneThreadAndOnAll) {
  // n = 700: the substitutions' rows split among the threads in fours,
  // a remainder row on its own; every row's sum is one thread's, in a fixed
  // order, so the thread count moves no bit (FP32 and FP64 solves, and an
  // FP64 factor's).
  const engine::Matrix a = engine::random_matrix(700, 1e3, 4);
  const std::vector<double> b = engine::random_vector(700, 5);
  const auto lu = engine::lu_factor(a, config(Format::BF16, Format::FP32, 64), &cpu());
  const auto lu64 = engine::lu_factor(a, LuConfig{SolveFormat::f64(), Format::FP32, 0, true}, &cpu());
  const int threads = omp_get_max_threads();
  auto solve_on = [&](int t, const engine::LuFactors& f, bool fp32) {
    omp_set_num_threads(t);
    std::vector<double> x(700);
    engine::lu_solve(f, b.data(), x.data(), fp32);
    omp_set_num_threads(threads);
    return x;
  };
  for (bool fp32 : {false, true}) {
    const auto one = solve_on(1, lu, fp32), all = solve_on(std::max(threads, 3), lu, fp32);
    EXPECT_EQ(std::memcmp(one.data(), all.data(), 700 * sizeof(double)), 0) << fp32;
  }
  const auto one = solve_on(1, lu64, false), all = solve_on(std::max(threads, 3), lu64, false);
  EXPECT_EQ(std::memcmp(one.data(), all.data(), 700 * sizeof(double)), 0);
}

TEST(SolveLu, ConfigProblemsAreNamed) {
  EXPECT_EQ(engine::lu_config_problem(config(Format::FP16, Format::FP16, 0)), "");
  EXPECT_NE(engine::lu_config_problem(config(Format::FP16, Format::BF16, 0)), "");
  EXPECT_NE(engine::lu_config_problem(config(Format::E4M3, Format::E4M3, 0)), "");
  EXPECT_NE(engine::lu_config_problem(config(Format::MXFP8, Format::FP32, 0)), "");  // needs Tensor Core mode
  EXPECT_NE(engine::lu_config_problem(config(Format::E2M1, Format::FP32, 0)), "");  // an element format alone
  EXPECT_EQ(engine::parse_factor_format("fp8-e4m3")->format, Format::E4M3);
  EXPECT_TRUE(engine::parse_factor_format("fp64")->fp64);
  EXPECT_FALSE(engine::parse_factor_format("fp128"));
}

}  // namespace
