// LU factorization with partial pivoting in a chosen number format, and the
// triangular solves with its factors.
//
// What the factorization computes (docs/solver.md "The factorization"), for
// a factor format F other than FP64, a panel width nb, an accumulation
// format Acc (FP32, or F itself for FP16 and BF16) and a storage S: F itself
// (every value the LU holds is an F value: the textbook LU in F) or FP32
// (Tensor Core mode, as Haidar, Tomov, Dongarra and Higham's FP16-TC: the
// LU is held in FP32 and only the operands of the trailing update are
// rounded to F):
//  0. A is multiplied by a power of two mu (the scale: 1 unless F is FP16 or
//     FP8, then the largest power of two with mu * max|a_ij| <= theta * F's
//     max, theta = 2^-6 for FP16 and E5M2, which overflow to inf: room for
//     the entries to grow 64-fold; 2^-1 for E4M3, which saturates at 448),
//     rounded to FP32 and then to S (round-to-nearest-even; E4M3 saturating).
//  1. For each panel of nb columns k0..k1-1, an unblocked right-looking LU
//     of the panel's rows k0..n-1: the pivot is the first entry of largest
//     magnitude in the column, its row is swapped with row k across the
//     whole matrix, each multiplier is l = S(a_ik / a_kk) (an FP32
//     division), and each entry right of column k in the panel becomes
//     a_ij = S(a_ij - Acc(l_ik * a_kj)) (products and the subtraction in
//     FP32, Acc rounding the product when Acc is F).
//  2. The rows k0..k1-1 right of the panel (U12), once the panel is done,
//     get the rank-1 updates of the rows above them in the panel, in order:
//     what the unblocked algorithm does to those rows.
//  3. The trailing matrix: A22 = S(A22 - F(L21) F(U12)), the product
//     accumulated in Acc by the backend's GEMM (in FP32: Tensor Core
//     semantics, its order of summation the GEMM's; in F: rounded after
//     every addition, in order). BF16 and FP8 operands go to the GEMM as
//     BF16 codes, so a CPU with native BF16 dot products runs them natively
//     (exactly: every FP8 value is a BF16 value and the products are exact
//     in FP32).
// A block format (MXFP8, MXFP6, MXFP4, NVFP4) applies in Tensor Core mode
// only: F(L21) and F(U12) are block_quantize's values (blocks along the
// product's k: L21's rows, U12's columns), the GEMM reading their scales.
// With nb = 1 and S = F every step is a rank-1 update and the result is the
// textbook LU with every operation rounded to F. FP64 is the plain
// unblocked LU in double (the reference, not the fast path).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "numeric/format.h"
#include "solve/matrix.h"

namespace engine {

class Backend;

// A precision of the solver: FP64, or one of the lab's tensor formats.
struct SolveFormat {
  bool fp64 = true;
  Format format = Format::FP32;  // when !fp64
  static SolveFormat f64() { return {}; }
  static SolveFormat of(Format f) { return {false, f}; }
  bool operator==(const SolveFormat&) const = default;
  // Unit roundoff: 2^-53 for FP64, 2^-(mantissa bits + 1) for a format.
  double unit_roundoff() const;
};
// "fp64", "fp32", "tf32", "bf16", "fp16", "fp8-e4m3"/"e4m3", "fp8-e5m2"/"e5m2",
// and the block formats ("mxfp8", "mxfp6", "mxfp4", "nvfp4", ...).
std::optional<SolveFormat> parse_factor_format(std::string_view s);
// The CLI and CSV spelling: "fp64", "fp32", "tf32", "bf16", "fp16", "e4m3", "e5m2", "mxfp8", ...
std::string factor_key(SolveFormat f);

struct LuConfig {
  SolveFormat factor = SolveFormat::of(Format::FP16);
  // FP32, or the factor's own format when it is FP16 or BF16 (ignored for FP64).
  Format accumulate = Format::FP32;
  // Panel width nb; 0 picks one for the size (128 for n >= 1024, else 64).
  std::int64_t block = 0;
  // Scale FP16 and FP8 factorizations by a power of two (step 0 above).
  bool scale = true;
  // Where the LU is held: the factor format itself, or FP32 (Tensor Core
  // mode: only the trailing update's operands are rounded to the factor).
  enum class Storage : std::uint8_t { Factor, FP32 } storage = Storage::Factor;
};
// The problem with a config, or "" when it is usable (an unsupported
// factor format, an accumulation format the factor cannot take, a block < 0).
std::string lu_config_problem(const LuConfig& c);

struct LuFactors {
  std::int64_t n = 0;
  SolveFormat factor;
  Format accumulate = Format::FP32;
  std::int64_t block = 0;
  LuConfig::Storage storage = LuConfig::Storage::Factor;
  // Row-major n x n: U on and above the diagonal, L's multipliers below it
  // (L has a unit diagonal). Values of the storage format in FP32
  // containers; lu64 instead for FP64.
  std::vector<float> lu;
  std::vector<double> lu64;
  // LAPACK's ipiv, 0-based: at step k row k was swapped with row pivots[k].
  std::vector<std::int64_t> pivots;
  double scale = 1.0;  // mu: the factors are those of mu * A
  bool ok = true;      // false: the factorization broke down (failure says why)
  std::string failure;
  double flops = 0.0;  // 2n^3/3 - n^2/2 - n/6 (the multiplies and adds of LU)
};

// Factors A (not modified). `be` runs the trailing-matrix products (it
// must address host memory: the CPU backend); null: a CPU backend of the
// engine's threads is made for the call. Throws std::invalid_argument for a
// config with a problem. Any thread, one call at a time per backend.
LuFactors lu_factor(const Matrix& a, const LuConfig& config, Backend* be = nullptr);

// What a caller that factors one matrix after another keeps between calls,
// as LAPACK's callers keep WORK and cuSOLVER's their workspace: the
// factors' storage and the factorization's scratch. The first call of a
// size allocates them (and the system maps their pages in: at n = 4096,
// 64 MB for the factors alone); later ones of that size or smaller
// allocate nothing.
struct LuWorkspace {
  LuFactors factors;  // the last factorization, which lu_factor_into writes
  std::vector<float> panel, scratch, vals_l, vals_u, op_rows;
  std::vector<std::uint16_t> codes_l, codes_u;
};
// lu_factor into ws.factors, reusing ws's buffers; returns ws.factors.
const LuFactors& lu_factor_into(const Matrix& a, const LuConfig& config, LuWorkspace& ws, Backend* be = nullptr);

// x = A^-1 b with the factors (x may alias b): the row swaps, then the
// forward and backward substitutions, undoing the scale. `fp32`: in FP32
// arithmetic (b scaled by a power of two into FP32's range first, as the
// factors' values are FP32 values), else in double. FP64 factors always
// solve in double.
void lu_solve(const LuFactors& f, const double* b, double* x, bool fp32);
// The same in FP32 from FP32 (x may alias b), with no rescaling of b: for
// vectors of moderate size (FP32 GMRES's). FP64 factors solve in double.
void lu_solve_f32(const LuFactors& f, const float* b, float* x);

}  // namespace engine
