// Elementwise ops and reductions of the CPU backend: activations, residual
// add, scaling, rounding to a format, the non-finite check and the norms.
#include <bit>
#include <cmath>
#include <cstring>

#include <omp.h>

#include "backend/cpu/gelu_simd.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/row_kernels.h"
#include "backend/cpu/step_kernels.h"
#include "numeric/cast.h"

namespace engine::cpu {

void relu_run(const float* x, float* y, std::int64_t n) {
  // x < 0 ? 0 : x lets NaN through (as torch.relu does), so an overflow in
  // the layer below is not hidden by the activation.
  for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

void relu_forward(const float* x, float* y, std::int64_t n) {
  for_chunks(n, [=](std::int64_t b, std::int64_t e) { relu_run(x + b, y + b, e - b); });
}

void relu_backward(const float* x, const float* dy, float* dx, std::int64_t n) {
  for_chunks(n, [=](std::int64_t b, std::int64_t e) {
    // dy read unconditionally: a load under the sign test compiles to a
    // branch (the sign of an activation is a coin flip for the predictor)
    // instead of a vector blend.
    for (std::int64_t i = b; i < e; ++i) {
      const float d = dy[i];
      dx[i] = x[i] > 0.0f ? d : 0.0f;
    }
  });
}

namespace {

// GELU in f32 lanes where the CPU has AVX-512 or AVX2, else element by
// element here (gelu_simd.h: the same inline code, so the same bits).
// Runs vec(begin, count) over parallel chunks, or one(i) per element on
// a CPU without the lanes.
template <class Vec, class One>
void gelu_apply(std::int64_t n, Vec&& vec, One&& one) {
  const bool lanes = mvec_isa() != MvecIsa::Scalar;
  for_chunks(n, [&](std::int64_t b, std::int64_t e) {
    if (lanes) {
      vec(b, e - b);
    } else {
      for (std::int64_t i = b; i < e; ++i) one(i);
    }
  });
}

}  // namespace

void gelu_forward(const float* x, float* y, std::int64_t n) {
  // Exact form x * Phi(x) (PyTorch's approximate='none').
  gelu_apply(
      n,
      [=](std::int64_t i, std::int64_t m) {
        return mvec_isa() == MvecIsa::Avx512 ? gelu_forward_avx512(x + i, y + i, m) : gelu_forward_avx2(x + i, y + i, m);
      },
      [=](std::int64_t i) { y[i] = gelu_value(x[i]); });
}

void gelu_backward(const float* x, const float* dy, float* dx, std::int64_t n) {
  // d/dx [x Phi(x)] = Phi(x) + x phi(x).
  gelu_apply(
      n,
      [=](std::int64_t i, std::int64_t m) {
        return mvec_isa() == MvecIsa::Avx512 ? gelu_backward_avx512(x + i, dy + i, dx + i, m)
                                             : gelu_backward_avx2(x + i, dy + i, dx + i, m);
      },
      [=](std::int64_t i) { dx[i] = gelu_grad(x[i], dy[i]); });
}

void add(const float* a, const float* b, float* y, std::int64_t n) {
  for_chunks(n, [=](std::int64_t s, std::int64_t e) { add_run(a + s, b + s, y + s, e - s); });
}

void scale(float* x, float s, std::int64_t n) {
  for_chunks(n, [=](std::int64_t b, std::int64_t e) { scale_run(x + b, s, e - b); });
}

void quantize(Format f, float* x, std::int64_t n, bool saturate) {
  if (f == Format::FP32) return;
  CastOptions opt;
  opt.saturate = saturate;
  for_chunks(n, [=](std::int64_t b, std::int64_t e) {
    quantize_inplace(f, x + b, static_cast<std::size_t>(e - b), opt);
  });
}

std::int64_t count_nonfinite(const float* x, std::int64_t n) {
  // inf and NaN are exactly the patterns with an all-ones exponent: an
  // integer test, vectorizable, immune to -ffast-math and FTZ/DAZ.
  return reduce_chunks<std::int64_t>(n, kParallelMin, [x](std::int64_t b, std::int64_t e) {
    std::int64_t count = 0;
#pragma omp simd reduction(+ : count)
    for (std::int64_t i = b; i < e; ++i) {
      std::uint32_t u;
      std::memcpy(&u, x + i, sizeof u);
      count += (u & 0x7F800000u) == 0x7F800000u ? 1 : 0;
    }
    return count;
  });
}

double sum_squares(const float* x, std::int64_t n) {
  // Double: a gradient norm over millions of values must neither overflow
  // (f32 squares of 1e20) nor lose the small terms.
  return reduce_chunks<double>(n, kParallelMin, [x](std::int64_t b, std::int64_t e) {
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (std::int64_t i = b; i < e; ++i) {
      const double v = x[i];
      s += v * v;
    }
    return s;
  });
}

namespace {

// column_sums over rows delivered by rows_at(i0, i1, scratch) -> pointer to
// rows [i0, i1) as floats (i1 - i0 <= block rows at a time).
template <class RowsAt>
void column_sums_with(std::int64_t rows, std::int64_t cols, std::int64_t block, float* db, Workspace& ws,
                      RowsAt&& rows_at) {
  if (cols <= 0) return;
  if (rows <= 0) {
    for (std::int64_t j = 0; j < cols; ++j) db[j] = 0.0f;
    return;
  }
  // Row chunks fixed by the shape (not the thread count), summed in double
  // per chunk and then in chunk order: the same bits for any thread count.
  const std::int64_t chunk = chunk_size(rows, std::max<std::int64_t>(1, kParallelMin / cols));
  const auto nchunks = static_cast<int>((rows + chunk - 1) / chunk);
  double* part = ws.get<double>(static_cast<std::size_t>(nchunks) * static_cast<std::size_t>(cols));
#pragma omp parallel for schedule(static) if (nchunks > 1)
  for (int c = 0; c < nchunks; ++c) {
    double* p = part + static_cast<std::int64_t>(c) * cols;
    for (std::int64_t j = 0; j < cols; ++j) p[j] = 0.0;
    const std::int64_t end = std::min(rows, (c + 1) * chunk);
    for (std::int64_t i0 = c * chunk; i0 < end; i0 += block) {
      const std::int64_t i1 = std::min(end, i0 + block);
      column_accumulate(p, rows_at(i0, i1), i1 - i0, cols, cols);
    }
  }
  for (std::int64_t j = 0; j < cols; ++j) {
    double s = 0.0;
    for (int c = 0; c < nchunks; ++c) s += part[static_cast<std::int64_t>(c) * cols + j];
    db[j] = static_cast<float>(s);
  }
}

// Floats of FP16/BF16 rows decoded on a thread's stack, at most this many.
constexpr std::int64_t kRowsBlockFloats = 4096;

// Values from which column sums of rows too few to split (one chunk) share
// the columns out over the threads.
constexpr std::int64_t kColumnSplitMin = kParallelMin / 4;

// column_sums_visiting of FP32 values (visit may be null) for rows too few
// for a second chunk (the mlp's batch of 128) and at least two blocks of
// columns: the threads take the rows to visit and whole blocks of columns
// to sum, each column summed in double row by row as the single chunk sums
// it: the same bits as column_sums_with. false, with nothing done, where
// that does not apply. (128 x 256 on 2 threads: 4.1 -> 2.6 us; the mlp
// fp8 dy cast with its sums, bench_ops per-op minimum: 11.5 -> 7.2 us.
// FP16/BF16 codes stay on one thread: decoding them on the rows' threads
// and summing across a barrier measured slower than one thread for
// 128 x 256.)
bool column_sums_split(const float* x, std::int64_t rows, std::int64_t cols, float* db, Workspace& ws,
                       ColumnVisit visit, void* ctx) {
  const std::int64_t col_blocks = cols / kColumnBlock;
  const int nt = static_cast<int>(std::min<std::int64_t>(omp_get_max_threads(), col_blocks));
  if (nt < 2 || rows * cols < kColumnSplitMin ||
      chunk_size(rows, std::max<std::int64_t>(1, kParallelMin / cols)) < rows)
    return false;
  double* part = ws.get<double>(static_cast<std::size_t>(cols));
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num();
    const std::int64_t r0 = rows * t / nt, r1 = rows * (t + 1) / nt;
    if (visit && r1 > r0) visit(ctx, r0, r1, x + r0 * cols);
    const std::int64_t j0 = col_blocks * t / nt * kColumnBlock;
    const std::int64_t j1 = t + 1 == nt ? cols : col_blocks * (t + 1) / nt * kColumnBlock;
    double* p = part + j0;
    for (std::int64_t j = 0; j < j1 - j0; ++j) p[j] = 0.0;
    column_accumulate(p, x + j0, rows, j1 - j0, cols);
    for (std::int64_t j = j0; j < j1; ++j) {
      double s = 0.0;  // column_sums_with's sum over its one chunk
      s += part[j];
      db[j] = static_cast<float>(s);
    }
  }
  return true;
}

}  // namespace

void column_sums(const float* dy, std::int64_t rows, std::int64_t cols, float* db, Workspace& ws) {
  if (column_sums_split(dy, rows, cols, db, ws, nullptr, nullptr)) return;
  column_sums_with(rows, cols, std::max<std::int64_t>(rows, 1), db, ws,
                   [dy, cols](std::int64_t i0, std::int64_t) { return dy + i0 * cols; });
}

bool column_sums_visiting(Format f, const void* dy, std::int64_t rows, std::int64_t cols, float* db, Workspace& ws,
                          ColumnVisit visit, void* ctx) {
  const std::int64_t block = std::max<std::int64_t>(1, kRowsBlockFloats / std::max<std::int64_t>(cols, 1));
  if (f == Format::FP32) {
    const auto* x = static_cast<const float*>(dy);
    if (column_sums_split(x, rows, cols, db, ws, visit, ctx)) return true;
    column_sums_with(rows, cols, block, db, ws, [=](std::int64_t i0, std::int64_t i1) {
      if (visit) visit(ctx, i0, i1, x + i0 * cols);
      return x + i0 * cols;
    });
    return true;
  }
  if (!is_half_format(f) || cols > kRowsBlockFloats) return false;
  const auto* codes = static_cast<const std::uint16_t*>(dy);
  column_sums_with(rows, cols, block, db, ws, [=](std::int64_t i0, std::int64_t i1) {
    // One buffer per thread: the rows are summed before the next block.
    thread_local float buf[kRowsBlockFloats];
    cast_to_f32(f, codes + i0 * cols, buf, static_cast<std::size_t>((i1 - i0) * cols));
    if (visit) visit(ctx, i0, i1, buf);
    return static_cast<const float*>(buf);
  });
  return true;
}

bool column_sums16(Format f, const void* dy, std::int64_t rows, std::int64_t cols, float* db, Workspace& ws) {
  return is_half_format(f) && column_sums_visiting(f, dy, rows, cols, db, ws, nullptr, nullptr);
}

}  // namespace engine::cpu
