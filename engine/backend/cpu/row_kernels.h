// The FP32 arithmetic of the CPU's row ops (LayerNorm, column sums) over
// f32 buffers, one clone per ISA (PL_CPU_CLONES): rows.cpp and
// elementwise.cpp move the rows in and out and split them over the threads
// outside these calls. Row reductions run in 16 interleaved partial sums
// (value j into sum j % 16) folded in a fixed tree, and the file is built
// without contraction: the same bits on every CPU and clone.
#pragma once

#include <cstdint>

namespace engine::cpu {

// LayerNorm forward of `count` rows of `cols` values: mean, then the mean
// of squared deviations (two passes), rstd = 1 / sqrt(var + eps), and
// y = (x - mean) * rstd * gamma + beta (gamma, beta optional); mean and
// rstd (optional) per row.
void layernorm_rows_f32(const float* x, float* y, std::int64_t count, std::int64_t cols, const float* gamma,
                        const float* beta, float eps, float* mean, float* rstd);
// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma,
// xhat = (x - mean) * rstd, for `count` rows.
void layernorm_dx_rows_f32(const float* x, const float* dy, float* dx, std::int64_t count, std::int64_t cols,
                           const float* mean, const float* rstd, const float* gamma);
// pg[j] += dy * xhat and pb[j] += dy over `count` rows, row by row in
// double (the parameter gradients' partial sums).
void layernorm_param_rows(const float* x, const float* dy, std::int64_t count, std::int64_t cols,
                          const float* mean, const float* rstd, double* pg, double* pb);
// p[j] += r[i * ld + j] over `rows` rows, in double, row by row; whole
// blocks of kColumnBlock columns at a time, then the rest.
inline constexpr std::int64_t kColumnBlock = 64;
void column_accumulate(double* p, const float* r, std::int64_t rows, std::int64_t cols, std::int64_t ld);
// sums[j] += the sum in double of the plane of hw values at x + j * hw,
// for j < count (one image's run of an NCHW tensor's channels): each plane
// in 32 partial sums (value k of its whole blocks of 32 into sum k % 32,
// then its blocks of 8 into sums 0..7, 8..15, ...) folded in a fixed tree,
// then its last hw % 8 values in order. The same bits in every clone.
void add_plane_sums(const float* x, std::int64_t hw, std::int64_t count, double* sums);

// FP32 softmax of `count` (1 or kSoftmaxRows) consecutive rows of `cols`
// values (y may not alias x): each row's maximum and sum run over its
// columns in order, the exponentials are exp_row's. The same bits as one
// row at a time.
constexpr std::int64_t kSoftmaxRows = 8;
void softmax_rows_f32(const float* x, float* y, std::int64_t count, std::int64_t cols);
// y[j] = exp((double)y[j]) rounded to f32, in place (rows.cpp): libmvec's
// lanes where the CPU has them, libm's double exp for the rest.
void exp_row(float* y, std::int64_t n);

}  // namespace engine::cpu
