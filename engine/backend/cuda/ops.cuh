// The CUDA Backend's own kernels (elementwise.cu, rows.cu, pool.cu): their
// table entries, and what the three files share: argument checks and the
// deterministic reductions (fixed per-block partials in double, summed in
// a fixed order by a second pass; grids depend on the shape only, so the
// same inputs give the same bits on every run and every device).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "backend/cuda/context.cuh"
#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda_module.h"

namespace pl_cuda {

// ---- entries (pool.cu) ----
PlCudaStatus maxpool2d_forward(PlCudaContext* ctx, std::int64_t n, std::int64_t c, std::int64_t h,
                               std::int64_t w, std::int64_t k, const float* x, float* y,
                               std::int32_t* argmax, char* message, std::size_t message_size);
PlCudaStatus maxpool2d_backward(PlCudaContext* ctx, std::int64_t n, std::int64_t c, std::int64_t h,
                                std::int64_t w, std::int64_t k, const float* dy,
                                const std::int32_t* argmax, float* dx, char* message,
                                std::size_t message_size);

// ---- entries (elementwise.cu) ----
PlCudaStatus relu_forward(PlCudaContext* ctx, const float* x, float* y, std::int64_t n, char* message,
                          std::size_t message_size);
PlCudaStatus relu_backward(PlCudaContext* ctx, const float* x, const float* dy, float* dx,
                           std::int64_t n, char* message, std::size_t message_size);
PlCudaStatus gelu_forward(PlCudaContext* ctx, const float* x, float* y, std::int64_t n, char* message,
                          std::size_t message_size);
PlCudaStatus gelu_backward(PlCudaContext* ctx, const float* x, const float* dy, float* dx,
                           std::int64_t n, char* message, std::size_t message_size);
PlCudaStatus add(PlCudaContext* ctx, const float* a, const float* b, float* y, std::int64_t n,
                 char* message, std::size_t message_size);
PlCudaStatus scale(PlCudaContext* ctx, float* x, float s, std::int64_t n, char* message,
                   std::size_t message_size);
PlCudaStatus fill(PlCudaContext* ctx, float* x, float value, std::int64_t n, char* message,
                  std::size_t message_size);
PlCudaStatus quantize(PlCudaContext* ctx, PlCudaFormat f, float* x, std::int64_t n,
                      std::int32_t saturate, char* message, std::size_t message_size);
PlCudaStatus count_nonfinite(PlCudaContext* ctx, const float* x, std::int64_t n, std::int64_t* counter,
                             char* message, std::size_t message_size);
PlCudaStatus amax(PlCudaContext* ctx, const float* x, std::int64_t n, float* out, char* message,
                  std::size_t message_size);
PlCudaStatus column_sums(PlCudaContext* ctx, const float* dy, std::int64_t rows, std::int64_t cols,
                         float* db, char* message, std::size_t message_size);
PlCudaStatus error_sums(PlCudaContext* ctx, const float* a, const float* b, std::int64_t n,
                        double* out, char* message, std::size_t message_size);
// ABI 6 (gpufuse): column_sums of FP16/BF16 codes (elementwise.cu) and FP8
// delayed scaling's one-pass cast (cast.cu); see cuda_module.h.
PlCudaStatus column_sums16(PlCudaContext* ctx, PlCudaFormat f, const void* dy, std::int64_t rows, std::int64_t cols,
                           float* db, char* message, std::size_t message_size);
PlCudaStatus scale_amax_encode(PlCudaContext* ctx, PlCudaFormat x_format, const void* x, std::int64_t n,
                               std::int32_t activation, float scale, PlCudaFormat q_format, void* q, std::int32_t saturate,
                               std::int32_t stochastic, std::uint64_t seed, std::uint64_t index_offset, float* amax,
                               float* decoded, char* message, std::size_t message_size);
PlCudaStatus pointwise_coded(PlCudaContext* ctx, std::int32_t op, PlCudaFormat fa, const void* a, PlCudaFormat fb,
                             const void* b, PlCudaFormat fy, void* y, std::int64_t n, std::int32_t saturate,
                             std::int32_t stochastic, std::uint64_t seed, std::uint64_t index_offset, char* message,
                             std::size_t message_size);
PlCudaStatus relu16_forward(PlCudaContext* ctx, PlCudaFormat f, const void* x, void* y,
                            std::int64_t n, char* message, std::size_t message_size);
PlCudaStatus relu16_backward(PlCudaContext* ctx, PlCudaFormat f, const void* x, PlCudaFormat g,
                             const void* dy, void* dx, std::int64_t n, char* message,
                             std::size_t message_size);
PlCudaStatus embedding(PlCudaContext* ctx, std::int32_t pass, const float* ids, const float* src, float* dst,
                       std::int64_t n, std::int64_t vocab, std::int64_t dim, char* message,
                       std::size_t message_size);
PlCudaStatus z_loss(PlCudaContext* ctx, std::int32_t pass, const float* logits, const float* probs, float* lse,
                    double* z, float* grad, std::int64_t rows, std::int64_t cols, float coef, float scale,
                    char* message, std::size_t message_size);
PlCudaStatus repeat_rows(PlCudaContext* ctx, const float* src, float* dst, std::int64_t B,
                         std::int64_t T, std::int64_t C, char* message, std::size_t message_size);
PlCudaStatus patchify(PlCudaContext* ctx, const float* x, float* patches, std::int64_t B,
                      std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t p, char* message,
                      std::size_t message_size);
PlCudaStatus unpatchify(PlCudaContext* ctx, const float* patches, float* x, std::int64_t B,
                        std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t p, char* message,
                        std::size_t message_size);
PlCudaStatus bias_add_channels(PlCudaContext* ctx, float* y, const float* bias, std::int64_t n,
                               std::int64_t c, std::int64_t hw, char* message,
                               std::size_t message_size);
PlCudaStatus channel_sums(PlCudaContext* ctx, const float* dy, float* db, std::int64_t n,
                          std::int64_t c, std::int64_t hw, char* message, std::size_t message_size);

// ---- entries (rows.cu) ----
PlCudaStatus layernorm_forward(PlCudaContext* ctx, const float* x, const float* gamma,
                               const float* beta, float* y, float* mean, float* rstd,
                               std::int64_t rows, std::int64_t cols, float eps,
                               PlCudaFormat accumulate, char* message, std::size_t message_size);
PlCudaStatus layernorm_backward(PlCudaContext* ctx, const float* dy, const float* x,
                                const float* mean, const float* rstd, const float* gamma, float* dx,
                                float* dgamma, float* dbeta, std::int64_t rows, std::int64_t cols,
                                char* message, std::size_t message_size);
PlCudaStatus softmax_forward(PlCudaContext* ctx, const float* x, float* y, std::int64_t rows,
                             std::int64_t cols, PlCudaFormat accumulate, char* message,
                             std::size_t message_size);
PlCudaStatus softmax_backward(PlCudaContext* ctx, const float* y, const float* dy, float* dx,
                              std::int64_t rows, std::int64_t cols, char* message,
                              std::size_t message_size);
PlCudaStatus cross_entropy_forward(PlCudaContext* ctx, const float* logits,
                                   const std::int32_t* labels, std::int64_t rows,
                                   std::int64_t classes, float* probs, double* loss,
                                   std::int64_t* correct, char* message, std::size_t message_size);
PlCudaStatus cross_entropy_backward(PlCudaContext* ctx, const float* probs,
                                    const std::int32_t* labels, std::int64_t rows,
                                    std::int64_t classes, float scale, float* dlogits,
                                    char* message, std::size_t message_size);
PlCudaStatus mse_forward(PlCudaContext* ctx, const float* pred, const float* target, std::int64_t n,
                         double* loss, char* message, std::size_t message_size);
PlCudaStatus mse_backward(PlCudaContext* ctx, const float* pred, const float* target,
                          std::int64_t n, float scale, float* dpred, char* message,
                          std::size_t message_size);

// ===========================================================================
// Shared by elementwise.cu, rows.cu and pool.cu.
// ===========================================================================

// ---- argument checks: one line naming the entry and the argument ----
inline PlCudaStatus check_count(ErrorSink sink, const char* fn, const char* name, std::int64_t v) {
  if (v < 0)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "%s: negative %s %lld", fn, name, static_cast<long long>(v));
  return PL_CUDA_OK;
}
inline PlCudaStatus check_pointer(ErrorSink sink, const char* fn, const char* name, const void* p) {
  if (!p) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "%s: %s is null", fn, name);
  return PL_CUDA_OK;
}
// a * b (and * c) as an element count, refused past 2^62 (no index overflow).
inline PlCudaStatus check_product(ErrorSink sink, const char* fn, const char* what,
                                  std::initializer_list<std::int64_t> factors, std::int64_t* out) {
  constexpr std::int64_t kLimit = std::int64_t{1} << 62;
  std::int64_t p = 1;
  for (std::int64_t f : factors) {
    if (f != 0 && p > kLimit / f)
      return fail(sink, PL_CUDA_INVALID_ARGUMENT, "%s: %s too large", fn, what);
    p *= f;
  }
  *out = p;
  return PL_CUDA_OK;
}

// ---- grid-stride loops ----
__device__ __forceinline__ std::size_t thread_index() {
  return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::size_t thread_stride() {
  return static_cast<std::size_t>(blockDim.x) * gridDim.x;
}

// One op per element: op(i) for i in [0, n).
template <class Op>
__global__ void for_each_kernel(std::size_t n, Op op) {
  for (std::size_t i = thread_index(); i < n; i += thread_stride()) op(i);
}

// ---- fixed-order reductions ----
// Butterfly sum over a full warp: every lane ends with the same bits
// (IEEE addition is commutative), a fixed tree for a fixed warp.
__device__ __forceinline__ double warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// K sums over a 1-D block (blockDim.x a multiple of 32, at most 1024): the
// result in thread 0. Called at most once per kernel (static shared).
template <int K>
__device__ void block_sum(double (&v)[K]) {
  __shared__ double warp_part[K][32];
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  for (int k = 0; k < K; ++k) v[k] = warp_sum(v[k]);
  if (lane == 0)
    for (int k = 0; k < K; ++k) warp_part[k][warp] = v[k];
  __syncthreads();
  if (warp == 0) {
    const unsigned warps = blockDim.x >> 5;
    for (int k = 0; k < K; ++k) v[k] = warp_sum(lane < warps ? warp_part[k][lane] : 0.0);
  }
}

// Whole-array sums, pass 1: block b accumulates load(i, acc) (acc: K
// doubles) over its grid-stride elements and writes partial[b * K + k].
// The block count comes from sum_blocks(n), a function of n only.
inline constexpr unsigned kMaxSumBlocks = 1024;
inline unsigned sum_blocks(std::size_t n) {
  const unsigned g = grid_for(n);
  return g < kMaxSumBlocks ? g : kMaxSumBlocks;
}
template <int K, class Load>
__global__ void __launch_bounds__(kThreads) sum_partials_kernel(std::size_t n, Load load, double* partial) {
  double acc[K];
  for (int k = 0; k < K; ++k) acc[k] = 0.0;
  for (std::size_t i = thread_index(); i < n; i += thread_stride()) load(i, acc);
  block_sum<K>(acc);
  if (threadIdx.x == 0)
    for (int k = 0; k < K; ++k) partial[static_cast<std::size_t>(blockIdx.x) * K + k] = acc[k];
}
// Pass 2, one block: the partials summed in a fixed tree, store(sums) by
// thread 0.
template <int K, class Store>
__global__ void __launch_bounds__(kThreads) sum_final_kernel(const double* partial, unsigned blocks, Store store) {
  double acc[K];
  for (int k = 0; k < K; ++k) acc[k] = 0.0;
  for (unsigned b = threadIdx.x; b < blocks; b += blockDim.x)
    for (int k = 0; k < K; ++k) acc[k] += partial[static_cast<std::size_t>(b) * K + k];
  block_sum<K>(acc);
  if (threadIdx.x == 0) store(acc);
}

// Column sums of a [rows x cols] matrix, pass 1: blocks of 32 columns x 8
// row lanes over a split of rows; load(i, j, acc) adds row i, column j to
// acc (K doubles); partial[(split * cols + j) * K + k]. Splits of at least
// kColumnSplitRows rows, about kColumnBlocks blocks in all (fewer splits
// for wide matrices: the partials stay ~kColumnBlocks * 32 * K doubles).
inline constexpr int kColumnTile = 32, kColumnLanes = 8;
inline constexpr std::int64_t kColumnSplitRows = 256;
inline constexpr std::int64_t kColumnBlocks = 2048;
inline std::int64_t column_split_rows(std::int64_t rows, std::int64_t cols) {
  const std::int64_t tiles = (cols + kColumnTile - 1) / kColumnTile;
  const std::int64_t want = tiles >= kColumnBlocks ? 1 : kColumnBlocks / tiles;
  const std::int64_t even = (rows + want - 1) / want;
  return even > kColumnSplitRows ? even : kColumnSplitRows;
}
template <int K, class Load>
__global__ void __launch_bounds__(kColumnTile * kColumnLanes)
    column_partials_kernel(std::int64_t rows, std::int64_t cols, std::int64_t split_rows, Load load,
                           double* partial) {
  __shared__ double part[K][kColumnLanes][kColumnTile];
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * kColumnTile + threadIdx.x;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.y) * split_rows;
  const std::int64_t end = begin + split_rows < rows ? begin + split_rows : rows;
  double acc[K];
  for (int k = 0; k < K; ++k) acc[k] = 0.0;
  if (j < cols)
    for (std::int64_t i = begin + threadIdx.y; i < end; i += kColumnLanes) load(i, j, acc);
  for (int k = 0; k < K; ++k) part[k][threadIdx.y][threadIdx.x] = acc[k];
  __syncthreads();
  if (threadIdx.y == 0 && j < cols)
    for (int k = 0; k < K; ++k) {
      double s = part[k][0][threadIdx.x];
      for (int l = 1; l < kColumnLanes; ++l) s += part[k][l][threadIdx.x];
      partial[(static_cast<std::size_t>(blockIdx.y) * cols + j) * K + k] = s;
    }
}
// Pass 2: column j's splits summed in order, store(j, sums).
template <int K, class Store>
__global__ void column_final_kernel(std::int64_t cols, std::int64_t splits, const double* partial,
                                    Store store) {
  for (std::size_t j = thread_index(); j < static_cast<std::size_t>(cols); j += thread_stride()) {
    double acc[K];
    for (int k = 0; k < K; ++k) acc[k] = 0.0;
    for (std::int64_t s = 0; s < splits; ++s)
      for (int k = 0; k < K; ++k) acc[k] += partial[(static_cast<std::size_t>(s) * cols + j) * K + k];
    store(static_cast<std::int64_t>(j), acc);
  }
}

// Runs both passes of the column sums on ctx's stream (partials in the
// scratch buffer); rows > 0, cols > 0.
template <int K, class Load, class Store>
PlCudaStatus launch_column_sums(PlCudaContext* ctx, std::int64_t rows, std::int64_t cols, Load load,
                                Store store, ErrorSink sink) {
  const std::int64_t split_rows = column_split_rows(rows, cols);
  const std::int64_t splits = (rows + split_rows - 1) / split_rows;
  void* buffer = nullptr;
  PL_CUDA_TRY(scratch(ctx, static_cast<std::size_t>(splits * cols * K) * sizeof(double), &buffer, sink));
  auto* partial = static_cast<double*>(buffer);
  const dim3 grid(static_cast<unsigned>((cols + kColumnTile - 1) / kColumnTile), static_cast<unsigned>(splits));
  column_partials_kernel<K><<<grid, dim3(kColumnTile, kColumnLanes), 0, ctx->stream>>>(rows, cols, split_rows,
                                                                                      load, partial);
  PL_CUDA_CHECK_LAUNCH(sink, "column_partials_kernel");
  column_final_kernel<K><<<grid_for(static_cast<std::size_t>(cols)), kThreads, 0, ctx->stream>>>(
      cols, splits, partial, store);
  PL_CUDA_CHECK_LAUNCH(sink, "column_final_kernel");
  return PL_CUDA_OK;
}

// Both passes of a whole-array sum over n > 0 elements; `partial` (device)
// holds sum_blocks(n) * K doubles (the caller's part of the scratch buffer).
template <int K, class Load, class Store>
PlCudaStatus launch_sum(PlCudaContext* ctx, std::size_t n, Load load, Store store, double* partial,
                        ErrorSink sink) {
  const unsigned blocks = sum_blocks(n);
  sum_partials_kernel<K><<<blocks, kThreads, 0, ctx->stream>>>(n, load, partial);
  PL_CUDA_CHECK_LAUNCH(sink, "sum_partials_kernel");
  sum_final_kernel<K><<<1, kThreads, 0, ctx->stream>>>(partial, blocks, store);
  PL_CUDA_CHECK_LAUNCH(sink, "sum_final_kernel");
  return PL_CUDA_OK;
}

}  // namespace pl_cuda
