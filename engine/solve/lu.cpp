// LU with partial pivoting in a chosen format (blocked, right-looking; the
// trailing update on the backend's GEMM) and the triangular solves.
// Built with -ffp-contract=off: a fused multiply-add would round
// a - l * u once where the definition in lu.h rounds the product first.
#include "solve/lu.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>

#include "backend/backend.h"
#include "backend/registry.h"
#include "numeric/block.h"
#include "numeric/cast.h"
#include "numeric/clones.h"
#include "solve/kernels.h"

namespace engine {

using solve_kernels::resize_huge;

double SolveFormat::unit_roundoff() const {
  if (fp64) return 0x1p-53;
  return std::ldexp(1.0, -(format_info(format).man_bits + 1));
}

std::optional<SolveFormat> parse_factor_format(std::string_view s) {
  if (s == "fp64" || s == "FP64" || s == "double") return SolveFormat::f64();
  const auto f = parse_format(s);
  if (!f || !(is_tensor_format(*f) || is_block_format(*f))) return std::nullopt;
  return SolveFormat::of(*f);
}

std::string factor_key(SolveFormat f) { return f.fp64 ? "fp64" : format_key(f.format); }

std::string lu_config_problem(const LuConfig& c) {
  if (c.block < 0) return "the panel width must be >= 0";
  if (c.factor.fp64) return "";
  if (is_block_format(c.factor.format)) {
    if (c.storage != LuConfig::Storage::FP32)
      return std::string("a block format (") + format_name(c.factor.format) +
             ") rounds the trailing update's operands only: it needs --storage fp32";
    if (c.accumulate != Format::FP32) return "a block format accumulates in fp32";
    return "";
  }
  if (!is_tensor_format(c.factor.format))
    return std::string("factor format ") + format_name(c.factor.format) +
           " is not one of fp64, fp32, tf32, bf16, fp16, fp8-e4m3, fp8-e5m2, or a block format";
  if (c.accumulate == Format::FP32) return "";
  if (c.accumulate == c.factor.format && is_half_format(c.accumulate)) return "";
  return std::string("accumulation in ") + format_name(c.accumulate) + " does not go with the " +
         format_name(c.factor.format) + " factor: accumulate in fp32, or in the factor's own format when it is fp16 or bf16";
}

namespace {

bool needs_scale(Format f) { return f == Format::FP16 || is_fp8(f); }

// Rounds x[0..n) to the factor format in place (FP32: nothing to do).
struct Rounder {
  Format f;
  CastOptions opt;
  void operator()(float* x, std::int64_t n) const {
    if (f != Format::FP32 && n > 0) quantize_inplace(f, x, static_cast<std::size_t>(n), opt);
  }
};

// c[i] = F(c[i] - Acc(l[i] * u)) for i in [0, n): one column (or row) of a
// rank-1 update. tmp holds n floats when Acc is not FP32.
// The FP32 loops in AVX-512 / AVX2 / baseline clones (no contraction, so
// every clone gives the same bits).
PL_CPU_CLONES void axpy_neg(float* c, const float* l, float u, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) c[i] = c[i] - l[i] * u;
}
PL_CPU_CLONES void scale_into(float* tmp, const float* l, float u, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) tmp[i] = l[i] * u;
}
PL_CPU_CLONES void subtract(float* c, const float* tmp, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) c[i] = c[i] - tmp[i];
}

// c[i] = c[i] - l_k[i] * u[k] for k = 0, 1, ..., kn - 1 in turn (l_k at
// l + k * ld), each step rounded to FP32: what kn calls of axpy_neg do, four
// steps a pass over c so that c stays in registers.
PL_CPU_CLONES void update_rows(float* c, const float* l, std::int64_t ld, const float* u, std::int64_t kn,
                               std::int64_t n) {
  std::int64_t k = 0;
  for (; k + 4 <= kn; k += 4) {
    const float* l0 = l + k * ld;
    const float* l1 = l0 + ld;
    const float* l2 = l1 + ld;
    const float* l3 = l2 + ld;
    const float u0 = u[k], u1 = u[k + 1], u2 = u[k + 2], u3 = u[k + 3];
    for (std::int64_t i = 0; i < n; ++i) {
      float v = c[i] - l0[i] * u0;
      v = v - l1[i] * u1;
      v = v - l2[i] * u2;
      c[i] = v - l3[i] * u3;
    }
  }
  for (; k < kn; ++k) axpy_neg(c, l + k * ld, u[k], n);
}

// The panel's columns in groups of kGroup (FP32 storage and accumulation):
// before a group's own left-looking LU, its rows below row j0 take the
// updates of the panel's columns 0..j0-1 all at once: c_i,jj = c_i,jj -
// l_i,k * u_k,jj for k = 0, 1, ..., j0 - 1 in turn (each product and each
// difference rounded to FP32), 16 rows a vector. Every entry gets its
// updates in the order update_rows gives them, but each column of L is
// read once for the whole group instead of once for each of its columns.
// c: the group's first column at its row r (column jj at c + jj * ld), l:
// the panel's column 0 at the same row, u: the group's first column at row
// 0 (u_k,jj at u[jj * ld + k]).
constexpr std::int64_t kGroup = 8;
using solve_kernels::F16;  // 16 floats (solve/kernels.h)
PL_CPU_CLONES void update_group(float* c, const float* l, const float* u, std::int64_t ld, std::int64_t kn,
                                std::int64_t rows) {
  std::int64_t i = 0;
  for (; i + 16 <= rows; i += 16) {
    F16 acc[kGroup];
    for (int jj = 0; jj < kGroup; ++jj) acc[jj] = *reinterpret_cast<const F16*>(c + jj * ld + i);
    for (std::int64_t k = 0; k < kn; ++k) {
      const F16 lv = *reinterpret_cast<const F16*>(l + k * ld + i);
      for (int jj = 0; jj < kGroup; ++jj) acc[jj] = acc[jj] - lv * u[jj * ld + k];
    }
    for (int jj = 0; jj < kGroup; ++jj) *reinterpret_cast<F16*>(c + jj * ld + i) = acc[jj];
  }
  for (; i < rows; ++i)
    for (int jj = 0; jj < kGroup; ++jj) {
      float a = c[jj * ld + i];
      for (std::int64_t k = 0; k < kn; ++k) a = a - l[k * ld + i] * u[jj * ld + k];
      c[jj * ld + i] = a;
    }
}

// Step 2 in FP32 (storage and accumulation): rows 1..rows-1 of the panel's
// rows right of it, each taking the updates of the rows above it in order,
// c_i,j = c_i,j - l_i,p * c_p,j for p = 0, 1, ..., i - 1 (each product and
// difference rounded to FP32): rank1_row's sequence for every entry, but in
// tiles of 64 columns that stay in registers through a row's updates. A
// tile's rows are copied to `pack` (rows x 64 floats) first: in place, rows
// a power of two apart fall on the same few L1 sets and evict each other.
// c: row 0 at its first column, l: row 0's L at column 0 (l_i,p at
// l[i * ld + p]), ld: the matrix's row length, cols: the columns to do.
PL_CPU_CLONES void update_u12(float* c, const float* l, std::int64_t ld, std::int64_t rows, std::int64_t cols,
                              float* pack) {
  constexpr int kT = 4;  // vectors of 16 a tile
  constexpr std::int64_t kW = 16 * kT;
  std::int64_t j = 0;
  for (; j + kW <= cols; j += kW) {
    for (std::int64_t i = 0; i < rows; ++i)
      for (int t = 0; t < kT; ++t)
        *reinterpret_cast<F16*>(pack + i * kW + 16 * t) = *reinterpret_cast<const F16*>(c + i * ld + j + 16 * t);
    for (std::int64_t i = 1; i < rows; ++i) {
      F16 acc[kT];
      float* ci = pack + i * kW;
      for (int t = 0; t < kT; ++t) acc[t] = *reinterpret_cast<const F16*>(ci + 16 * t);
      for (std::int64_t p = 0; p < i; ++p) {
        const float lip = l[i * ld + p];
        const float* cp = pack + p * kW;
        for (int t = 0; t < kT; ++t) acc[t] = acc[t] - *reinterpret_cast<const F16*>(cp + 16 * t) * lip;
      }
      for (int t = 0; t < kT; ++t) *reinterpret_cast<F16*>(c + i * ld + j + 16 * t) = acc[t];
      for (int t = 0; t < kT; ++t) *reinterpret_cast<F16*>(ci + 16 * t) = acc[t];
    }
  }
  if (j < cols)
    for (std::int64_t i = 1; i < rows; ++i)
      for (std::int64_t p = 0; p < i; ++p) axpy_neg(c + i * ld + j, c + p * ld + j, l[i * ld + p], cols - j);
}

// The first row of the largest magnitude in x[0..n) (the pivot's), and the
// division of a column by its pivot: vectorized in the clones (no
// contraction to change: the same bits).
// As the scalar search: NaNs never win, except a NaN in row 0, which wins.
PL_CPU_CLONES std::int64_t first_max_abs(const float* x, std::int64_t n) {
  if (n <= 0 || std::isnan(x[0])) return 0;
  typedef std::int32_t I16 __attribute__((vector_size(64)));
  const I16 abs_mask = I16{} + 0x7fffffff;
  F16 bv = F16{};
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const F16 a = (F16)((I16)(*reinterpret_cast<const F16*>(x + i)) & abs_mask);
    bv = bv < a ? a : bv;
  }
  float best = 0.0f;
  for (int v = 0; v < 16; ++v) best = best < bv[v] ? bv[v] : best;
  for (; i < n; ++i) best = best < std::fabs(x[i]) ? std::fabs(x[i]) : best;
  for (i = 0; i < n; ++i)
    if (std::fabs(x[i]) == best) return i;
  return 0;
}
PL_CPU_CLONES void divide(float* x, float d, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x[i] = x[i] / d;
}

void rank1(float* c, const float* l, float u, std::int64_t n, const Rounder& round, const Rounder* acc, float* tmp) {
  if (!acc) {
    axpy_neg(c, l, u, n);
  } else {
    scale_into(tmp, l, u, n);
    (*acc)(tmp, n);
    subtract(c, tmp, n);
  }
  round(c, n);
}

// A row of U times one multiplier: the same products as rank1 (a product
// of two floats rounds the same either way round).
void rank1_row(float* c, float l, const float* u, std::int64_t n, const Rounder& round, const Rounder* acc,
               float* tmp) {
  rank1(c, u, l, n, round, acc, tmp);
}

void lu_factor_fp64(const Matrix& a, LuFactors& out) {
  const std::int64_t n = a.n;
  resize_huge(out.lu64, a.a.size());
  std::copy(a.a.begin(), a.a.end(), out.lu64.begin());
  double* w = out.lu64.data();
  for (std::int64_t k = 0; k < n; ++k) {
    std::int64_t p = k;
    double best = std::fabs(w[k * n + k]);
    for (std::int64_t i = k + 1; i < n; ++i)
      if (std::fabs(w[i * n + k]) > best) best = std::fabs(w[i * n + k]), p = i;
    out.pivots[static_cast<std::size_t>(k)] = p;
    if (p != k)
      for (std::int64_t j = 0; j < n; ++j) std::swap(w[k * n + j], w[p * n + j]);
    const double pivot = w[k * n + k];
    if (pivot == 0.0 || !std::isfinite(pivot)) {
      out.ok = false;
      out.failure = (pivot == 0.0 ? "zero pivot in column " : "non-finite pivot in column ") + std::to_string(k + 1);
      return;
    }
    const double* uk = w + k * n;
#pragma omp parallel for schedule(static) if ((n - k) * (n - k) > 65536)
    for (std::int64_t i = k + 1; i < n; ++i) {
      double* row = w + i * n;
      const double l = row[k] / pivot;
      row[k] = l;
      for (std::int64_t j = k + 1; j < n; ++j) row[j] = row[j] - l * uk[j];
    }
  }
}

// The operand formats the GEMM reads the factor format's values in: BF16
// codes where every value is a BF16 value (BF16, FP8), so native BF16 dot
// products run; FP32 containers otherwise (FP16 values are multiplied
// exactly in FP32, TF32's are already rounded).
bool gemm_as_bf16(Format f) { return f == Format::BF16 || is_fp8(f); }

void lu_factor_lowp(const Matrix& a, LuFactors& out, bool scale, Backend& be, LuWorkspace& ws) {
  const std::int64_t n = a.n;
  const Format F = out.factor.format;
  const bool tensor_core = out.storage == LuConfig::Storage::FP32;
  const std::int64_t nb = out.block;
  // The storage's rounding, and the trailing update's operands' (Tensor Core mode).
  Rounder round{tensor_core ? Format::FP32 : F, {}};
  round.opt.saturate = F == Format::E4M3;
  Rounder operand{F, {}};
  operand.opt.saturate = F == Format::E4M3;
  const Rounder acc_round{out.accumulate, {}};
  const Rounder* acc = out.accumulate == Format::FP32 ? nullptr : &acc_round;

  // Step 0: the scale and the rounding of mu * A.
  out.scale = 1.0;
  if (scale && needs_scale(F)) {
    double amax = 0.0;
#pragma omp parallel for schedule(static) reduction(max : amax) if (n >= 256)
    for (std::int64_t i = 0; i < n * n; ++i) amax = std::max(amax, std::fabs(a.a[static_cast<std::size_t>(i)]));
    if (amax > 0.0) {
      const double target = (F == Format::E4M3 ? 0x1p-1 : 0x1p-6) * format_info(F).max;
      out.scale = std::ldexp(1.0, static_cast<int>(std::floor(std::log2(target / amax))));
    }
  }
  resize_huge(out.lu, static_cast<std::size_t>(n * n));
  float* w = out.lu.data();
  const double mu = out.scale;
#pragma omp parallel for schedule(static) if (n >= 256)
  for (std::int64_t i = 0; i < n; ++i) {
    const double* src = a.a.data() + i * n;
    float* dst = w + i * n;
    for (std::int64_t j = 0; j < n; ++j) dst[j] = static_cast<float>(src[j] * mu);
    round(dst, n);
  }

  std::vector<float>& panel = ws.panel;
  resize_huge(panel, static_cast<std::size_t>(((n + 15) / 16 * 16 + 16) * nb));
  // A thread's scratch: a column of n, or update_u12's tile of nb x 64.
  const std::size_t tmp_each = static_cast<std::size_t>(std::max(n, nb * 64));
  std::vector<float>& tmp_cols = ws.scratch;
  tmp_cols.resize(static_cast<std::size_t>(omp_get_max_threads()) * tmp_each);
  std::vector<std::uint16_t>&l_codes = ws.codes_l, &u_codes = ws.codes_u;
  std::vector<float>&l_vals = ws.vals_l, &u_vals = ws.vals_u, &op_rows = ws.op_rows;
  for (std::int64_t k0 = 0; k0 < n; k0 += nb) {
    const std::int64_t k1 = std::min(n, k0 + nb), wdt = k1 - k0, m = n - k0;
    // Its columns ldp apart: m rounded up to 16 floats and one vector more,
    // so that the entries of a row (a swap, a group's update) do not all
    // fall on the same L1 sets, as they would 2^k floats apart.
    const std::int64_t ldp = (m + 15) / 16 * 16 + 16;
    // The panel, column-major (column j at panel[j * ldp]): its columns are
    // contiguous for the pivot search and the column updates.
    // Tiles of 64 rows: a tile's rows stay in cache while its columns are
    // written out.
#pragma omp parallel for schedule(static) if (m * wdt > 65536)
    for (std::int64_t i0 = 0; i0 < m; i0 += 64) {
      const std::int64_t i1 = std::min(m, i0 + 64);
      for (std::int64_t i = i0; i < i1; ++i)
        for (std::int64_t j = 0; j < wdt; ++j) panel[static_cast<std::size_t>(j * ldp + i)] = w[(k0 + i) * n + k0 + j];
    }
    // Step 1: the unblocked LU of the panel, column by column (left-looking):
    // column j first gets the updates of columns 0..j-1 in order, then its
    // pivot, the row swap across the panel and its multipliers. Every entry
    // sees the same operations in the same order as in the right-looking
    // form of lu.h, so the bits are the same; but a column is updated while
    // it sits in cache, instead of the whole panel being rewritten for each
    // column. Its rows below the diagonal are split among the threads.
    // In FP32 (storage and accumulation) the columns go in groups of
    // kGroup: a group's rows below its first column take the updates of
    // the columns before the group at once (update_group), then each of its
    // columns the updates of the group's columns before it. The same
    // operations on every entry in the same order again.
    const bool fp32_panel = !acc && round.f == Format::FP32;
    float* const pn = panel.data();
    for (std::int64_t j = 0; j < wdt; ++j) {
      float* cj = pn + j * ldp;
      // A whole group after the first: its columns have had the updates of
      // the columns before it (`done`) once its first column is reached.
      // The first group and a last, short one go column by column.
      const std::int64_t j0 = j - j % kGroup;
      const bool grouped = fp32_panel && j0 > 0 && j0 + kGroup <= wdt;
      const std::int64_t done = grouped ? j0 : 0;
      if (grouped && j == j0) {
        // The group's rows above row j0 (U's), column by column in order,
        // then its rows from j0 down in one pass over columns 0..j0-1.
        for (std::int64_t jj = j0; jj < j0 + kGroup; ++jj)
          for (std::int64_t k = 0; k + 1 < j0; ++k)
            rank1(pn + jj * ldp + k + 1, pn + k * ldp + k + 1, pn[jj * ldp + k], j0 - k - 1, round, acc, nullptr);
        const std::int64_t rows = m - j0;
        const int parts = rows * j0 * kGroup > 65536 ? omp_get_max_threads() : 1;
        const std::int64_t chunk = ((rows + parts - 1) / parts + 15) / 16 * 16;
#pragma omp parallel for schedule(static) num_threads(parts) if (parts > 1)
        for (int t = 0; t < parts; ++t) {
          const std::int64_t r0 = j0 + t * chunk, r1 = std::min(m, r0 + chunk);
          if (r0 < r1) update_group(cj + r0, pn + r0, cj, ldp, j0, r1 - r0);
        }
      }
      // The rows above the diagonal (U's column), in order.
      for (std::int64_t k = done; k + 1 < j; ++k)
        rank1(cj + k + 1, pn + k * ldp + k + 1, cj[k], j - k - 1, round, acc, tmp_cols.data());
      // The rows from the diagonal down: each row's updates in order of k.
      if (j > done) {
        const std::int64_t rows = m - j, kn = j - done;
        const int parts = rows * kn > 65536 ? omp_get_max_threads() : 1;
        const std::int64_t chunk = (rows + parts - 1) / parts;
#pragma omp parallel for schedule(static) num_threads(parts) if (parts > 1)
        for (int t = 0; t < parts; ++t) {
          const std::int64_t r0 = j + t * chunk, r1 = std::min(m, r0 + chunk);
          if (r0 >= r1) continue;
          float* tmp = tmp_cols.data() + static_cast<std::size_t>(omp_get_thread_num()) * tmp_each;
          if (fp32_panel) {
            update_rows(cj + r0, pn + done * ldp + r0, ldp, cj + done, kn, r1 - r0);
          } else {
            for (std::int64_t k = 0; k < j; ++k) rank1(cj + r0, pn + k * ldp + r0, cj[k], r1 - r0, round, acc, tmp);
          }
        }
      }
      const std::int64_t p = j + first_max_abs(cj + j, m - j);
      out.pivots[static_cast<std::size_t>(k0 + j)] = k0 + p;
      if (p != j)
        for (std::int64_t c = 0; c < wdt; ++c) std::swap(panel[static_cast<std::size_t>(c * ldp + j)],
                                                         panel[static_cast<std::size_t>(c * ldp + p)]);
      const float pivot = cj[j];
      if (pivot == 0.0f || !std::isfinite(pivot)) {
        out.ok = false;
        out.failure = (pivot == 0.0f ? std::string("zero pivot in column ") : std::string("non-finite pivot in column ")) +
                      std::to_string(k0 + j + 1) + " (" + factor_key(out.factor) + ")";
        return;
      }
      divide(cj + j + 1, pivot, m - j - 1);
      round(cj + j + 1, m - j - 1);
    }
    // The panel's row swaps on the columns outside it (L to the left, A to the right).
    // The swaps in order, each thread on its own range of columns.
    const std::int64_t outside = n - wdt;
    const int sparts = outside * wdt > 65536 ? omp_get_max_threads() : 1;
    const std::int64_t schunk = (outside + sparts - 1) / sparts;
#pragma omp parallel for schedule(static) num_threads(sparts) if (sparts > 1)
    for (int t = 0; t < sparts; ++t) {
      const std::int64_t c0 = t * schunk, c1 = std::min(outside, c0 + schunk);
      for (std::int64_t k = k0; k < k1; ++k) {
        const std::int64_t p = out.pivots[static_cast<std::size_t>(k)];
        if (p == k) continue;
        float* rk = w + k * n;
        float* rp = w + p * n;
        // Column c of the columns outside the panel: c, or c + wdt past it.
        for (std::int64_t c = c0; c < c1; ++c) {
          const std::int64_t j = c < k0 ? c : c + wdt;
          std::swap(rk[j], rp[j]);
        }
      }
    }
#pragma omp parallel for schedule(static) if (m * wdt > 65536)
    for (std::int64_t i0 = 0; i0 < m; i0 += 64) {
      const std::int64_t i1 = std::min(m, i0 + 64);
      for (std::int64_t i = i0; i < i1; ++i)
        for (std::int64_t j = 0; j < wdt; ++j) w[(k0 + i) * n + k0 + j] = panel[static_cast<std::size_t>(j * ldp + i)];
    }
    if (k1 == n) break;
    // Step 2: U12, the panel rows right of it, by the panel's rank-1
    // updates in order; threads own column ranges.
    const std::int64_t rest = n - k1;
    const std::int64_t chunk = std::max<std::int64_t>(256, (rest + omp_get_max_threads() - 1) / omp_get_max_threads());
#pragma omp parallel for schedule(static) if (rest * wdt > 32768)
    for (std::int64_t c0 = k1; c0 < n; c0 += chunk) {
      const std::int64_t len = std::min(chunk, n - c0);
      float* tmp = tmp_cols.data() + static_cast<std::size_t>(omp_get_thread_num()) * tmp_each;
      if (fp32_panel) {
        update_u12(w + k0 * n + c0, w + k0 * n + k0, n, wdt, len, tmp);
        continue;
      }
      for (std::int64_t i = k0 + 1; i < k1; ++i)
        for (std::int64_t p = k0; p < i; ++p) rank1_row(w + i * n + c0, w[i * n + p], w + p * n + c0, len, round, acc, tmp);
    }
    // Step 3: A22 = F(A22 - L21 U12) on the backend's GEMM.
    GemmArgs g;
    g.m = rest;
    g.n = rest;
    g.k = wdt;
    g.c = w + k1 * n + k1;
    g.ldc = n;
    g.alpha = -1.0f;
    g.beta = 1.0f;
    g.accumulate = out.accumulate;
    BlockQuantized l_block, u_block;
    if (is_block_format(F)) {
      // Block-scaled operands (numeric/block.h): L21's blocks run along its
      // rows and U12's down its columns, both along the product's k.
      l_vals.resize(static_cast<std::size_t>(rest * wdt));
      u_vals.resize(static_cast<std::size_t>(wdt * rest));
      for (std::int64_t i = 0; i < rest; ++i)
        std::memcpy(l_vals.data() + i * wdt, w + (k1 + i) * n + k0, static_cast<std::size_t>(wdt) * sizeof(float));
      for (std::int64_t i = 0; i < wdt; ++i)
        std::memcpy(u_vals.data() + i * rest, w + (k0 + i) * n + k1, static_cast<std::size_t>(rest) * sizeof(float));
      l_block = block_quantize(F, l_vals.data(), l_vals.data(), rest, wdt, BlockLayout::Rows);
      u_block = block_quantize(F, u_vals.data(), u_vals.data(), wdt, rest, BlockLayout::Columns);
      g.a = {l_vals.data(), Format::FP32, false, wdt, &l_block};
      g.b = {u_vals.data(), Format::FP32, false, rest, &u_block};
    } else if (gemm_as_bf16(F)) {
      // BF16 codes: exact for BF16 and FP8 values (FP8 operands of Tensor
      // Core mode rounded to FP8 first).
      l_codes.resize(static_cast<std::size_t>(rest * wdt));
      u_codes.resize(static_cast<std::size_t>(wdt * rest));
      // A row of op_rows a thread (FP8 operands rounded before their codes).
      const std::size_t row_each = static_cast<std::size_t>(std::max(rest, wdt));
      op_rows.resize(static_cast<std::size_t>(omp_get_max_threads()) * row_each);
      auto encode = [&](const float* src, std::uint16_t* dst, std::int64_t len) {
        if (tensor_core && F != Format::BF16) {
          float* row = op_rows.data() + static_cast<std::size_t>(omp_get_thread_num()) * row_each;
          std::memcpy(row, src, static_cast<std::size_t>(len) * sizeof(float));
          operand(row, len);
          src = row;
        }
        cast_from_f32(Format::BF16, src, dst, static_cast<std::size_t>(len));
      };
#pragma omp parallel if (rest * wdt > 65536)
      {
#pragma omp for schedule(static) nowait
        for (std::int64_t i = 0; i < rest; ++i) encode(w + (k1 + i) * n + k0, l_codes.data() + i * wdt, wdt);
#pragma omp for schedule(static)
        for (std::int64_t i = 0; i < wdt; ++i) encode(w + (k0 + i) * n + k1, u_codes.data() + i * rest, rest);
      }
      g.a = {l_codes.data(), Format::BF16, false, wdt};
      g.b = {u_codes.data(), Format::BF16, false, rest};
    } else if (tensor_core && F != Format::FP32) {
      // FP16 or TF32 operands: their values in FP32 copies (the GEMM
      // multiplies them exactly in FP32).
      l_vals.resize(static_cast<std::size_t>(rest * wdt));
      u_vals.resize(static_cast<std::size_t>(wdt * rest));
      for (std::int64_t i = 0; i < rest; ++i)
        std::memcpy(l_vals.data() + i * wdt, w + (k1 + i) * n + k0, static_cast<std::size_t>(wdt) * sizeof(float));
      for (std::int64_t i = 0; i < wdt; ++i)
        std::memcpy(u_vals.data() + i * rest, w + (k0 + i) * n + k1, static_cast<std::size_t>(rest) * sizeof(float));
      operand(l_vals.data(), rest * wdt);
      operand(u_vals.data(), wdt * rest);
      g.a = {l_vals.data(), Format::FP32, false, wdt};
      g.b = {u_vals.data(), Format::FP32, false, rest};
    } else {
      g.a = {w + k1 * n + k0, Format::FP32, false, n};
      g.b = {w + k0 * n + k1, Format::FP32, false, n};
    }
    be.gemm(g);
#pragma omp parallel for schedule(static) if (rest * rest > 65536)
    for (std::int64_t i = k1; i < n; ++i) round(w + i * n + k1, rest);
  }
}

}  // namespace

const LuFactors& lu_factor_into(const Matrix& a, const LuConfig& config, LuWorkspace& ws, Backend* be) {
  const std::string problem = lu_config_problem(config);
  if (!problem.empty()) throw std::invalid_argument(problem);
  LuFactors& out = ws.factors;
  out.n = a.n;
  out.factor = config.factor;
  out.accumulate = config.factor.fp64 ? Format::FP32 : config.accumulate;
  out.block = config.block > 0 ? config.block : (a.n >= 1024 ? 128 : 64);
  out.storage = config.factor.fp64 ? LuConfig::Storage::Factor : config.storage;
  out.scale = 1.0;
  out.ok = true;
  out.failure.clear();
  out.pivots.resize(static_cast<std::size_t>(a.n));
  for (std::int64_t i = 0; i < a.n; ++i) out.pivots[static_cast<std::size_t>(i)] = i;
  const double n = static_cast<double>(a.n);
  out.flops = 2.0 * n * n * n / 3.0 - n * n / 2.0 - n / 6.0;
  // Only the storage this factorization uses stays (a workspace's FP64
  // factors do not linger beside FP32 ones, nor the other way round).
  if (config.factor.fp64 || a.n == 0) std::vector<float>().swap(out.lu);
  if (!config.factor.fp64 || a.n == 0) std::vector<double>().swap(out.lu64);
  if (a.n == 0) return out;
  if (config.factor.fp64) {
    lu_factor_fp64(a, out);
    return out;
  }
  BackendChoice own;
  if (!be) {
    own = make_backend("cpu", 0);
    be = own.backend.get();
  }
  lu_factor_lowp(a, out, config.scale, *be, ws);
  return out;
}

LuFactors lu_factor(const Matrix& a, const LuConfig& config, Backend* be) {
  LuWorkspace ws;
  lu_factor_into(a, config, ws, be);
  return std::move(ws.factors);
}

namespace {

// The substitutions in blocks of rows: each block's sums over the columns
// before it (after it, going back) are a matrix-vector product that the
// threads split by rows, four rows at a time; then one thread runs the
// block's own triangle in order. One parallel region for the whole solve,
// a barrier between the parts. Each row's sum is one thread's, in a fixed
// order (solve/kernels.h): the same bits on any thread count and CPU.
float row_dot(const float* a, const float* v, std::int64_t n) { return solve_kernels::dot_ff(a, v, n); }
double row_dot(const float* a, const double* v, std::int64_t n) { return solve_kernels::dot_fd(a, v, n); }
double row_dot(const double* a, const double* v, std::int64_t n) { return solve_kernels::dot_dd(a, v, n); }
void row_dot4(const float* a, std::int64_t lda, const float* v, std::int64_t n, float* out) {
  solve_kernels::dot4_ff(a, lda, v, n, out);
}
void row_dot4(const float* a, std::int64_t lda, const double* v, std::int64_t n, double* out) {
  solve_kernels::dot4_fd(a, lda, v, n, out);
}
void row_dot4(const double* a, std::int64_t lda, const double* v, std::int64_t n, double* out) {
  solve_kernels::dot4_dd(a, lda, v, n, out);
}

template <class T, class F>
void substitute(const F* lu, const std::int64_t* piv, std::int64_t n, T* v) {
  constexpr std::int64_t kRows = 128;
  std::vector<T> part(static_cast<std::size_t>(kRows));
  for (std::int64_t i = 0; i < n; ++i)
    if (piv[i] != i) std::swap(v[i], v[piv[i]]);
  // part[i - r0] = row i's sum over columns [c0, c0 + len), for this
  // thread's share of rows [i0, i1) (whole fours from i0).
  auto sums = [&](std::int64_t i0, std::int64_t i1, std::int64_t c0, std::int64_t len) {
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    const std::int64_t quads = (i1 - i0 + 3) / 4;
    const std::int64_t r0 = i0 + 4 * (quads * t / nt), r1 = std::min(i1, i0 + 4 * (quads * (t + 1) / nt));
    std::int64_t i = r0;
    for (; i + 4 <= r1; i += 4) row_dot4(lu + i * n + c0, n, v + c0, len, part.data() + (i - i0));
    for (; i < r1; ++i) part[static_cast<std::size_t>(i - i0)] = row_dot(lu + i * n + c0, v + c0, len);
  };
#pragma omp parallel if (n >= 512)
  {
    for (std::int64_t i0 = 0; i0 < n; i0 += kRows) {
      const std::int64_t i1 = std::min(n, i0 + kRows);
      sums(i0, i1, 0, i0);
#pragma omp barrier
#pragma omp single
      for (std::int64_t i = i0; i < i1; ++i)
        v[i] = v[i] - (part[static_cast<std::size_t>(i - i0)] + row_dot(lu + i * n + i0, v + i0, i - i0));
    }
    for (std::int64_t i1 = n; i1 > 0; i1 -= kRows) {
      const std::int64_t i0 = std::max<std::int64_t>(0, i1 - kRows);
      sums(i0, i1, i1, n - i1);
#pragma omp barrier
#pragma omp single
      for (std::int64_t i = i1 - 1; i >= i0; --i) {
        const F* row = lu + i * n;
        v[i] = (v[i] - (part[static_cast<std::size_t>(i - i0)] + row_dot(row + i + 1, v + i + 1, i1 - i - 1))) /
               static_cast<T>(row[i]);
      }
    }
  }
}

}  // namespace

void lu_solve(const LuFactors& f, const double* b, double* x, bool fp32) {
  const std::int64_t n = f.n;
  if (f.factor.fp64) {
    if (x != b) std::memmove(x, b, static_cast<std::size_t>(n) * sizeof(double));
    substitute<double, double>(f.lu64.data(), f.pivots.data(), n, x);
    return;
  }
  if (!fp32) {
    if (x != b) std::memmove(x, b, static_cast<std::size_t>(n) * sizeof(double));
    substitute<double, float>(f.lu.data(), f.pivots.data(), n, x);
    for (std::int64_t i = 0; i < n; ++i) x[i] *= f.scale;
    return;
  }
  // FP32: b scaled by a power of two so its largest entry is about 1 (the
  // residual of a converging refinement falls far below FP32's range).
  double bmax = 0.0;
  for (std::int64_t i = 0; i < n; ++i) bmax = std::max(bmax, std::fabs(b[i]));
  const int e = bmax > 0.0 && std::isfinite(bmax) ? std::ilogb(bmax) : 0;
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<float>(std::ldexp(b[i], -e));
  substitute<float, float>(f.lu.data(), f.pivots.data(), n, v.data());
  const double back = std::ldexp(f.scale, e);
  for (std::int64_t i = 0; i < n; ++i) x[i] = static_cast<double>(v[static_cast<std::size_t>(i)]) * back;
}

void lu_solve_f32(const LuFactors& f, const float* b, float* x) {
  const std::int64_t n = f.n;
  if (f.factor.fp64) {
    std::vector<double> v(b, b + n);
    substitute<double, double>(f.lu64.data(), f.pivots.data(), n, v.data());
    for (std::int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(v[static_cast<std::size_t>(i)]);
    return;
  }
  if (x != b) std::memmove(x, b, static_cast<std::size_t>(n) * sizeof(float));
  substitute<float, float>(f.lu.data(), f.pivots.data(), n, x);
  if (f.scale != 1.0)
    for (std::int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(static_cast<double>(x[i]) * f.scale);
}

}  // namespace engine
