// Row-wise ops of the CPU backend: LayerNorm and softmax, each with an FP32
// path and an emulated FP16/BF16-accumulation path (built with
// -ffp-contract=off so the emulation rounds exactly where it says).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/gelu_simd.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/lowp.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/row_kernels.h"
#include "backend/cpu/step_kernels.h"
#include "numeric/cast.h"
#include "numeric/format.h"

namespace engine::cpu {

// row_kernels.h. libm's double exp for what the lanes leave: the same
// formula.
void exp_row(float* y, std::int64_t n) {
  std::int64_t done = 0;
  switch (mvec_isa()) {
    case MvecIsa::Avx512: done = exp_avx512(y, y, n); break;
    case MvecIsa::Avx2: done = exp_avx2(y, y, n); break;
    case MvecIsa::Scalar: break;
  }
  for (std::int64_t j = done; j < n; ++j) y[j] = static_cast<float>(std::exp(static_cast<double>(y[j])));
}

// kernels.h. Not inlined: every caller (softmax_backward_rows, the fused
// attention) runs this one compiled loop, so the bits cannot differ by call
// site.
[[gnu::noinline]] void softmax_backward_block(const float* y, const float* dy, float* dx, std::int64_t count,
                                              std::int64_t cols) {
  for (std::int64_t r = 0; r < count; ++r) {
    const float* yr = y + r * cols;
    const float* dyr = dy + r * cols;
    float* dxr = dx + r * cols;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (std::int64_t j = 0; j < cols; ++j) dot += dyr[j] * yr[j];
    for (std::int64_t j = 0; j < cols; ++j) dxr[j] = yr[j] * (dyr[j] - dot);
  }
}

namespace {

// What a LayerNorm computed entirely in FP16/BF16 does: the same two-pass
// algorithm, but every partial sum and every intermediate (sum, mean,
// difference, square, variance, sqrt, reciprocal, normalized value) is
// rounded to the format, in the order written, left to right. With FP16,
// a row of a few hundred values around 300 overflows the running sum
// (65504), and a deviation above 256 overflows its square: inf/NaN out of
// finite inputs, the demonstration the recipe table is about.
void layernorm_row_lowp(Format f, const float* x, const float* gamma, const float* beta, float* y,
                        std::int64_t cols, float eps, float& mean_out, float& rstd_out) {
  float s = 0.0f;
  for (std::int64_t j = 0; j < cols; ++j) s = round_to(f, s + x[j]);
  const float mean = round_to(f, s / static_cast<float>(cols));
  float v = 0.0f;
  for (std::int64_t j = 0; j < cols; ++j) {
    const float d = round_to(f, x[j] - mean);
    v = round_to(f, v + round_to(f, d * d));
  }
  const float var = round_to(f, v / static_cast<float>(cols));
  const float rstd = round_to(f, 1.0f / round_to(f, std::sqrt(round_to(f, var + eps))));
  for (std::int64_t j = 0; j < cols; ++j) {
    const float xhat = round_to(f, round_to(f, x[j] - mean) * rstd);
    y[j] = xhat * (gamma ? gamma[j] : 1.0f) + (beta ? beta[j] : 0.0f);
  }
  mean_out = mean;
  rstd_out = rstd;
}

}  // namespace

namespace {

// LayerNorm's rows come from f32 memory or from FP16/BF16 codes decoded
// into the caller's buffer, and go to f32 memory or to codes encoded from a
// buffer (stochastic rounding at the rows' index offset), so the f32 and
// code paths share one kernel below: the same arithmetic in the same order,
// the bits of decode, norm, encode. Rows travel in blocks of up to
// kNormBlock values (one cast call per block: a call per 64-value row cost
// more than the row's arithmetic).
constexpr std::int64_t kNormBlock = 2048;

// Rows [i0, i0 + count) as one span of f32 values.
struct F32In {
  const float* p;
  const float* rows(std::int64_t i0, std::int64_t count, std::int64_t cols, float*) const { return p + i0 * cols; }
};
struct CodesIn {
  Format f;
  const std::byte* p;
  std::size_t es;  // bytes per code: 2 (FP16, BF16) or 1 (FP8)
  const float* rows(std::int64_t i0, std::int64_t count, std::int64_t cols, float* buf) const {
    cast_to_f32(f, p + static_cast<std::size_t>(i0 * cols) * es, buf, static_cast<std::size_t>(count * cols));
    return buf;
  }
};
struct F32Out {
  float* p;
  float* rows(std::int64_t i0, std::int64_t, std::int64_t cols, float*) const { return p + i0 * cols; }
  void done(std::int64_t, std::int64_t, std::int64_t, const float*) const {}
};
struct CodesOut {
  Format f;
  std::uint16_t* p;
  CastOptions opt;
  float* rows(std::int64_t, std::int64_t, std::int64_t, float* buf) const { return buf; }
  void done(std::int64_t i0, std::int64_t count, std::int64_t cols, const float* buf) const {
    CastOptions o = opt;
    o.index_offset += static_cast<std::uint64_t>(i0 * cols);
    cast_from_f32(f, buf, p + i0 * cols, static_cast<std::size_t>(count * cols), o);
  }
};

// LayerNorm's dx meeting a residual: the block's dx written to f32 memory,
// then r added (add()'s kernel: r + dx) and the sum encoded to codes (RNE,
// convert's cast) while the block is in L1.
struct F32AddOut {
  float* p;
  const float* r;
  Format f;
  std::uint16_t* codes;
  float* rows(std::int64_t i0, std::int64_t, std::int64_t cols, float*) const { return p + i0 * cols; }
  void done(std::int64_t i0, std::int64_t count, std::int64_t cols, const float*) const {
    float* d = p + i0 * cols;
    add_run(r + i0 * cols, d, d, count * cols);
    if (codes) cast_from_f32(f, d, codes + i0 * cols, static_cast<std::size_t>(count * cols), {});
  }
};

// Rows per block (cols <= kNormBlock) and the number of blocks.
inline std::int64_t norm_block_rows(std::int64_t cols) { return std::max<std::int64_t>(1, kNormBlock / cols); }

// FP32 accumulation.
template <class In, class Out>
void layernorm_forward_rows(In x, const float* gamma, const float* beta, Out y, float* mean, float* rstd,
                            std::int64_t rows, std::int64_t cols, float eps) {
  const std::int64_t rb = norm_block_rows(cols), blocks = (rows + rb - 1) / rb;
#pragma omp parallel for schedule(static) if (rows > 1 && worth_parallel(rows * cols))
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    alignas(64) float bx[kNormBlock];
    alignas(64) float by[kNormBlock];
    const std::int64_t i0 = blk * rb, count = std::min(rb, rows - i0);
    const float* xb = x.rows(i0, count, cols, bx);
    float* yb = y.rows(i0, count, cols, by);
    layernorm_rows_f32(xb, yb, count, cols, gamma, beta, eps, mean ? mean + i0 : nullptr, rstd ? rstd + i0 : nullptr);
    y.done(i0, count, cols, yb);
  }
}

template <class Dy, class X, class Dx>
void layernorm_backward_rows(Dy dy, X x, const float* mean, const float* rstd, const float* gamma, Dx* dx,
                             float* dgamma, float* dbeta, std::int64_t rows, std::int64_t cols, Workspace& ws) {
  const std::int64_t rb = norm_block_rows(cols);
  // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma.
  if (dx) {
    const std::int64_t blocks = (rows + rb - 1) / rb;
#pragma omp parallel for schedule(static) if (rows > 1 && worth_parallel(rows * cols))
    for (std::int64_t blk = 0; blk < blocks; ++blk) {
      alignas(64) float bdy[kNormBlock];
      alignas(64) float bx[kNormBlock];
      alignas(64) float bdx[kNormBlock];
      const std::int64_t i0 = blk * rb, count = std::min(rb, rows - i0);
      const float* xb = x.rows(i0, count, cols, bx);
      const float* dyb = dy.rows(i0, count, cols, bdy);
      float* dxb = dx->rows(i0, count, cols, bdx);
      layernorm_dx_rows_f32(xb, dyb, dxb, count, cols, mean + i0, rstd + i0, gamma);
      dx->done(i0, count, cols, dxb);
    }
  }
  if (!dgamma && !dbeta) return;
  // Parameter gradients sum over rows: per fixed row chunk in double, then
  // the chunks in order (independent of the thread count). Rows are read
  // in blocks within a chunk, in order.
  const std::int64_t chunk = chunk_size(rows, std::max<std::int64_t>(1, kParallelMin / std::max<std::int64_t>(cols, 1)));
  const auto nchunks = static_cast<int>(rows > 0 ? (rows + chunk - 1) / chunk : 0);
  double* part = ws.get<double>(2 * static_cast<std::size_t>(std::max(nchunks, 1)) *
                                static_cast<std::size_t>(cols));
#pragma omp parallel for schedule(static) if (nchunks > 1)
  for (int c = 0; c < nchunks; ++c) {
    alignas(64) float bdy[kNormBlock];
    alignas(64) float bx[kNormBlock];
    double* pg = part + 2 * static_cast<std::int64_t>(c) * cols;
    double* pb = pg + cols;
    for (std::int64_t j = 0; j < cols; ++j) pg[j] = pb[j] = 0.0;
    const std::int64_t end = std::min(rows, (c + 1) * chunk);
    for (std::int64_t i0 = c * chunk; i0 < end; i0 += rb) {
      const std::int64_t count = std::min(rb, end - i0);
      const float* xb = x.rows(i0, count, cols, bx);
      const float* dyb = dy.rows(i0, count, cols, bdy);
      layernorm_param_rows(xb, dyb, count, cols, mean + i0, rstd + i0, pg, pb);
    }
  }
  for (std::int64_t j = 0; j < cols; ++j) {
    double g = 0.0, b = 0.0;
    for (int c = 0; c < nchunks; ++c) {
      g += part[2 * static_cast<std::int64_t>(c) * cols + j];
      b += part[(2 * static_cast<std::int64_t>(c) + 1) * cols + j];
    }
    if (dgamma) dgamma[j] = static_cast<float>(g);
    if (dbeta) dbeta[j] = static_cast<float>(b);
  }
}

}  // namespace

void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                       float* rstd, std::int64_t rows, std::int64_t cols, float eps,
                       Format accumulate) {
  if (accumulate == Format::FP32) {
    layernorm_forward_rows(F32In{x}, gamma, beta, F32Out{y}, mean, rstd, rows, cols, eps);
    return;
  }
#pragma omp parallel for schedule(static) if (rows > 1 && worth_parallel(rows * cols))
  for (std::int64_t i = 0; i < rows; ++i) {
    float mu = 0.0f, r = 0.0f;
    layernorm_row_lowp(accumulate, x + i * cols, gamma, beta, y + i * cols, cols, eps, mu, r);
    if (mean) mean[i] = mu;
    if (rstd) rstd[i] = r;
  }
}

void layernorm_backward(const float* dy, const float* x, const float* mean, const float* rstd,
                        const float* gamma, float* dx, float* dgamma, float* dbeta,
                        std::int64_t rows, std::int64_t cols, Workspace& ws) {
  F32Out out{dx};
  layernorm_backward_rows(F32In{dy}, F32In{x}, mean, rstd, gamma, dx ? &out : nullptr, dgamma, dbeta, rows, cols, ws);
}

namespace {

// Calls k(source) with x's row source for its format: FP32 memory or
// FP16, BF16, E4M3 or E5M2 codes (decoded exactly); false for other formats.
template <class K>
bool with_rows_in(Format f, const void* p, K&& k) {
  if (f == Format::FP32) {
    k(F32In{static_cast<const float*>(p)});
    return true;
  }
  if (!is_half_format(f) && !is_fp8(f)) return false;
  k(CodesIn{f, static_cast<const std::byte*>(p), storage_bytes(f)});
  return true;
}

template <class K>
bool with_rows_out(Format f, void* p, const CastOptions& opt, K&& k) {
  if (f == Format::FP32) {
    k(F32Out{static_cast<float*>(p)});
    return true;
  }
  if (!is_half_format(f)) return false;
  k(CodesOut{f, static_cast<std::uint16_t*>(p), opt});
  return true;
}

}  // namespace

bool layernorm_coded_forward(Format fx, const void* x, const float* gamma, const float* beta, Format fy, void* y,
                             float* mean, float* rstd, std::int64_t rows, std::int64_t cols, float eps,
                             const CastOptions& opt) {
  if (cols > kNormBlock) return false;
  bool ok = false;
  with_rows_in(fx, x, [&](auto in) {
    ok = with_rows_out(fy, y, opt, [&](auto out) {
      layernorm_forward_rows(in, gamma, beta, out, mean, rstd, rows, cols, eps);
    });
  });
  return ok;
}

bool layernorm_coded_backward(Format fdy, const void* dy, Format fx, const void* x, const float* mean,
                              const float* rstd, const float* gamma, Format fdx, void* dx, float* dgamma,
                              float* dbeta, std::int64_t rows, std::int64_t cols, Workspace& ws) {
  if (cols > kNormBlock || !dx) return false;
  bool ok = false;
  with_rows_in(fdy, dy, [&](auto dyin) {
    with_rows_in(fx, x, [&](auto xin) {
      ok = with_rows_out(fdx, dx, {}, [&](auto out) {
        layernorm_backward_rows(dyin, xin, mean, rstd, gamma, &out, dgamma, dbeta, rows, cols, ws);
      });
    });
  });
  return ok;
}

bool layernorm_backward_add(Format fdy, const void* dy, Format fx, const void* x, const float* mean, const float* rstd,
                            const float* gamma, const float* r, float* dx, Format fc, void* codes, float* dgamma,
                            float* dbeta, std::int64_t rows, std::int64_t cols, Workspace& ws) {
  if (cols > kNormBlock || !dx || !r || (codes && !is_half_format(fc))) return false;
  bool ok = false;
  with_rows_in(fdy, dy, [&](auto dyin) {
    ok = with_rows_in(fx, x, [&](auto xin) {
      F32AddOut out{dx, r, fc, static_cast<std::uint16_t*>(codes)};
      layernorm_backward_rows(dyin, xin, mean, rstd, gamma, &out, dgamma, dbeta, rows, cols, ws);
    });
  });
  return ok;
}

namespace {

// FP32 softmax over rows read from `x` (F32In or CodesIn), kSoftmaxRows at
// a time (row_kernels.cpp).
template <class In>
void softmax_forward_rows(In x, float* y, std::int64_t rows, std::int64_t cols) {
  const std::int64_t blocks = rows / kSoftmaxRows;
#pragma omp parallel for schedule(static) if (blocks > 1 && worth_parallel(rows * cols))
  for (std::int64_t b = 0; b < blocks; ++b) {
    alignas(64) float buf[kNormBlock];
    const std::int64_t i0 = b * kSoftmaxRows;
    softmax_rows_f32(x.rows(i0, kSoftmaxRows, cols, buf), y + i0 * cols, kSoftmaxRows, cols);
  }
  for (std::int64_t i = blocks * kSoftmaxRows; i < rows; ++i) {
    alignas(64) float buf[kNormBlock];
    softmax_rows_f32(x.rows(i, 1, cols, buf), y + i * cols, 1, cols);
  }
}

// softmax_backward_block over all rows, dy read from `dy` (F32In or
// CodesIn) in blocks of rows.
template <class Dy>
void softmax_backward_rows(const float* y, Dy dy, float* dx, std::int64_t rows, std::int64_t cols) {
  const std::int64_t rb = norm_block_rows(cols), blocks = (rows + rb - 1) / rb;
#pragma omp parallel for schedule(static) if (rows > 1 && worth_parallel(rows * cols))
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    alignas(64) float buf[kNormBlock];
    const std::int64_t i0 = blk * rb, count = std::min(rb, rows - i0);
    softmax_backward_block(y + i0 * cols, dy.rows(i0, count, cols, buf), dx + i0 * cols, count, cols);
  }
}

}  // namespace

void softmax_forward(const float* x, float* y, std::int64_t rows, std::int64_t cols,
                     Format accumulate) {
  // Subtracting the row maximum keeps exp() <= 1: no overflow for any
  // finite logits. A NaN in the row makes the whole row NaN (the maximum
  // skips it; its shifted value and so the sum are NaN).
  if (accumulate == Format::FP32) {
    // The exponentials on libmvec's vector lanes (double exp, rounded to
    // f32), kSoftmaxRows rows at a time, then each row's sum in column order.
    softmax_forward_rows(F32In{x}, y, rows, cols);
    return;
  }
#pragma omp parallel for schedule(static) if (rows > 1 && worth_parallel(rows * cols))
  for (std::int64_t i = 0; i < rows; ++i) {
    const float* xr = x + i * cols;
    float* yr = y + i * cols;
    float m = -INFINITY;
    for (std::int64_t j = 0; j < cols; ++j) m = xr[j] > m ? xr[j] : m;
    // Reduced precision: the shifted logits, the exponentials and every
    // partial sum rounded to the format. FP16's 11 bits stop adding
    // small terms to a large sum (the sum stalls at 2048 for ones).
    float s = 0.0f;
    for (std::int64_t j = 0; j < cols; ++j) {
      const float e = round_to(accumulate, std::exp(round_to(accumulate, xr[j] - m)));
      yr[j] = e;
      s = round_to(accumulate, s + e);
    }
    for (std::int64_t j = 0; j < cols; ++j) yr[j] = yr[j] / s;
  }
}

void softmax_backward(const float* y, const float* dy, float* dx, std::int64_t rows,
                      std::int64_t cols) {
  softmax_backward_rows(y, F32In{dy}, dx, rows, cols);
}

void copy_columns(const float* src, std::int64_t src_ld, float* dst, std::int64_t dst_ld, std::int64_t rows,
                  std::int64_t cols) {
  if (cols <= 0) return;
#pragma omp parallel for schedule(static) if (rows > 1 && worth_parallel(rows * cols))
  for (std::int64_t r = 0; r < rows; ++r)
    std::memcpy(dst + r * dst_ld, src + r * src_ld, static_cast<std::size_t>(cols) * sizeof(float));
}

void causal_zero(float* x, std::int64_t rows, std::int64_t T) {
#pragma omp parallel for schedule(static) if (rows > 1 && worth_parallel(rows * T))
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t seen = r % T + 1;
    std::fill(x + r * T + seen, x + (r + 1) * T, 0.0f);
  }
}

void causal_softmax(bool forward, const float* in, const float* dy, float* out, std::int64_t rows, std::int64_t T,
                    Format accumulate) {
#pragma omp parallel for schedule(static) if (rows > 1 && worth_parallel(rows * T))
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t seen = r % T + 1;
    if (forward) softmax_forward(in + r * T, out + r * T, 1, seen, accumulate);
    else softmax_backward(in + r * T, dy + r * T, out + r * T, 1, seen);
    std::fill(out + r * T + seen, out + (r + 1) * T, 0.0f);
  }
}

bool softmax_coded_forward(Format fx, const void* x, float* y, std::int64_t rows, std::int64_t cols) {
  if (cols * kSoftmaxRows > kNormBlock) return false;
  return with_rows_in(fx, x, [&](auto in) { softmax_forward_rows(in, y, rows, cols); });
}

bool softmax_coded_backward(const float* y, Format fdy, const void* dy, float* dx, std::int64_t rows,
                            std::int64_t cols) {
  if (cols > kNormBlock) return false;
  return with_rows_in(fdy, dy, [&](auto in) { softmax_backward_rows(y, in, dx, rows, cols); });
}

}  // namespace engine::cpu
