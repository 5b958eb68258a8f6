// Row-op arithmetic of the CPU backend, one clone per ISA (row_kernels.h).
#include "backend/cpu/row_kernels.h"

#include <cmath>
#include <cstring>

#include "backend/cpu/lanes.h"
#include "numeric/clones.h"

namespace engine::cpu {
namespace {

[[gnu::always_inline]] inline v16f load16(const float* p) {
  v16f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// sum over j < n of f(j) (f(j) a float), value j into partial sum j % 16.
template <class V, class S>
[[gnu::always_inline]] inline float lane_sum(std::int64_t n, V&& vec, S&& scalar) {
  v16f acc = {};
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) acc += vec(j);
  if (j == n) return fold_lanes(acc);
  float a[kLanes];
  std::memcpy(a, &acc, sizeof a);
  // A tail value joins its partial sum last, as the next block would have.
  for (int l = 0; j + l < n; ++l) a[l] += scalar(j + l);
  return fold_lanes(a);
}

}  // namespace

PL_CPU_CLONES void layernorm_rows_f32(const float* x, float* y, std::int64_t count, std::int64_t cols,
                                      const float* gamma, const float* beta, float eps, float* mean, float* rstd) {
  const float n = static_cast<float>(cols);
  for (std::int64_t r = 0; r < count; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    const float mu = lane_sum(cols, [xr](std::int64_t j) { return load16(xr + j); },
                              [xr](std::int64_t j) { return xr[j]; }) / n;
    const float var = lane_sum(
        cols,
        [xr, mu](std::int64_t j) {
          const v16f d = load16(xr + j) - mu;
          return d * d;
        },
        [xr, mu](std::int64_t j) {
          const float d = xr[j] - mu;
          return d * d;
        });
    // eps inside the square root, as torch.nn.LayerNorm.
    const float rs = 1.0f / std::sqrt(var / n + eps);
    for (std::int64_t j = 0; j < cols; ++j)
      yr[j] = (xr[j] - mu) * rs * (gamma ? gamma[j] : 1.0f) + (beta ? beta[j] : 0.0f);
    if (mean) mean[r] = mu;
    if (rstd) rstd[r] = rs;
  }
}

PL_CPU_CLONES void layernorm_dx_rows_f32(const float* x, const float* dy, float* dx, std::int64_t count,
                                         std::int64_t cols, const float* mean, const float* rstd,
                                         const float* gamma) {
  const float inv_n = 1.0f / static_cast<float>(cols);
  for (std::int64_t r = 0; r < count; ++r) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    float* dxr = dx + r * cols;
    const float mu = mean[r], rs = rstd[r];
    auto g16 = [dyr, gamma](std::int64_t j) { return gamma ? load16(dyr + j) * load16(gamma + j) : load16(dyr + j); };
    auto g1 = [dyr, gamma](std::int64_t j) { return dyr[j] * (gamma ? gamma[j] : 1.0f); };
    const float sum_g = lane_sum(cols, g16, g1);
    const float sum_gx = lane_sum(
        cols, [&](std::int64_t j) { return g16(j) * ((load16(xr + j) - mu) * rs); },
        [&](std::int64_t j) { return g1(j) * ((xr[j] - mu) * rs); });
    const float a = sum_g * inv_n, b = sum_gx * inv_n;
    for (std::int64_t j = 0; j < cols; ++j) {
      const float g = dyr[j] * (gamma ? gamma[j] : 1.0f);
      const float xhat = (xr[j] - mu) * rs;
      dxr[j] = rs * (g - a - xhat * b);
    }
  }
}

namespace {

// Columns summed in double 64 at a time in registers: the chunk's running
// sums would otherwise go through memory once a row, each row's add waiting
// on the store of the row before (store forwarding: column_sums of a
// 2048 x 64 gradient took 10 us hot). Per column the same adds in the same
// order (rows in order, from the value in p), so the same bits.
constexpr std::int64_t kSumCols = 64;
constexpr int kSumVecs = kSumCols / 8;

[[gnu::always_inline]] inline v8d widen8(const float* p) {
  v8f v;
  std::memcpy(&v, p, sizeof v);
  return __builtin_convertvector(v, v8d);
}

[[gnu::always_inline]] inline void load_sums(v8d* acc, const double* p) {
  for (int v = 0; v < kSumVecs; ++v) std::memcpy(&acc[v], p + 8 * v, sizeof(v8d));
}

[[gnu::always_inline]] inline void store_sums(double* p, const v8d* acc) {
  for (int v = 0; v < kSumVecs; ++v) std::memcpy(p + 8 * v, &acc[v], sizeof(v8d));
}

}  // namespace

PL_CPU_CLONES void layernorm_param_rows(const float* x, const float* dy, std::int64_t count, std::int64_t cols,
                                        const float* mean, const float* rstd, double* pg, double* pb) {
  // Whole blocks of 64 columns in registers (as column_accumulate), then
  // the columns past them.
  std::int64_t j0 = 0;
  for (; j0 + kSumCols <= cols; j0 += kSumCols) {
    v8d g[kSumVecs], b[kSumVecs];
    load_sums(g, pg + j0);
    load_sums(b, pb + j0);
    for (std::int64_t r = 0; r < count; ++r) {
      const float* xr = x + r * cols + j0;
      const float* dyr = dy + r * cols + j0;
      const float mu = mean[r], rs = rstd[r];
      for (int v = 0; v < kSumVecs; ++v) {
        v8f xv, dv;
        std::memcpy(&xv, xr + 8 * v, sizeof xv);
        std::memcpy(&dv, dyr + 8 * v, sizeof dv);
        const v8f xhat = (xv - mu) * rs;
        g[v] += __builtin_convertvector(dv, v8d) * __builtin_convertvector(xhat, v8d);
        b[v] += __builtin_convertvector(dv, v8d);
      }
    }
    store_sums(pg + j0, g);
    store_sums(pb + j0, b);
  }
  for (std::int64_t r = 0; r < count && j0 < cols; ++r) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    const float mu = mean[r], rs = rstd[r];
    for (std::int64_t j = j0; j < cols; ++j) {
      pg[j] += static_cast<double>(dyr[j]) * static_cast<double>((xr[j] - mu) * rs);
      pb[j] += dyr[j];
    }
  }
}

PL_CPU_CLONES void column_accumulate(double* p, const float* r, std::int64_t rows, std::int64_t cols,
                                     std::int64_t ld) {
  static_assert(kSumCols == kColumnBlock);
  std::int64_t j0 = 0;
  for (; j0 + kSumCols <= cols; j0 += kSumCols) {
    v8d acc[kSumVecs];
    load_sums(acc, p + j0);
    for (std::int64_t i = 0; i < rows; ++i)
      for (int v = 0; v < kSumVecs; ++v) acc[v] += widen8(r + i * ld + j0 + 8 * v);
    store_sums(p + j0, acc);
  }
  if (j0 == cols) return;
  // The columns past the last whole 64 (all of them when cols < 64).
  const std::int64_t w = cols - j0;
  p += j0;
  r += j0;
  for (std::int64_t i = 0; i < rows; ++i, r += ld)
    for (std::int64_t j = 0; j < w; ++j) p[j] += r[j];
}

namespace {

// One plane of add_plane_sums: 32 partial sums in four registers.
[[gnu::always_inline]] inline double plane_sum(const float* p, std::int64_t hw) {
  v8d acc[4] = {};
  std::int64_t k = 0;
  for (; k + 32 <= hw; k += 32)
    for (int v = 0; v < 4; ++v) acc[v] += widen8(p + k + 8 * v);
  for (int v = 0; k + 8 <= hw; k += 8, ++v) acc[v] += widen8(p + k);
  const v8d s8 = (acc[0] + acc[2]) + (acc[1] + acc[3]);
  typedef double v4d __attribute__((vector_size(32)));
  typedef double v2d __attribute__((vector_size(16)));
  const v4d s4 = __builtin_shufflevector(s8, s8, 0, 1, 2, 3) + __builtin_shufflevector(s8, s8, 4, 5, 6, 7);
  const v2d s2 = __builtin_shufflevector(s4, s4, 0, 1) + __builtin_shufflevector(s4, s4, 2, 3);
  double s = s2[0] + s2[1];
  for (; k < hw; ++k) s += p[k];
  return s;
}

}  // namespace

PL_CPU_CLONES void add_plane_sums(const float* x, std::int64_t hw, std::int64_t count, double* sums) {
  for (std::int64_t j = 0; j < count; ++j) sums[j] += plane_sum(x + j * hw, hw);
}

namespace {

// R rows' chains interleave (j outer, r inner), so the compares and adds
// do not wait on each other; the exponentials of all R rows are one run of
// exp_row.
template <int R>
[[gnu::always_inline]] inline void softmax_block(const float* x, float* y, std::int64_t cols) {
  float m[R], s[R];
  for (int r = 0; r < R; ++r) m[r] = -INFINITY;
  for (std::int64_t j = 0; j < cols; ++j)
    for (int r = 0; r < R; ++r) {
      const float v = x[r * cols + j];
      m[r] = v > m[r] ? v : m[r];
    }
  for (int r = 0; r < R; ++r)
    for (std::int64_t j = 0; j < cols; ++j) y[r * cols + j] = x[r * cols + j] - m[r];
  exp_row(y, R * cols);
  for (int r = 0; r < R; ++r) s[r] = 0.0f;
  for (std::int64_t j = 0; j < cols; ++j)
    for (int r = 0; r < R; ++r) s[r] += y[r * cols + j];
  for (int r = 0; r < R; ++r)
    for (std::int64_t j = 0; j < cols; ++j) y[r * cols + j] = y[r * cols + j] / s[r];
}

}  // namespace

PL_CPU_CLONES void softmax_rows_f32(const float* x, float* y, std::int64_t count, std::int64_t cols) {
  if (count == kSoftmaxRows) {
    softmax_block<kSoftmaxRows>(x, y, cols);
    return;
  }
  for (std::int64_t r = 0; r < count; ++r) softmax_block<1>(x + r * cols, y + r * cols, cols);
}

}  // namespace engine::cpu
