// The step entries: the loss scaler's fused unscale, SGD and Adam/AdamW,
// FP8 delayed scaling's scale and amax, block quantization (MX, NVFP4) and
// the gradient census, on the context's stream. The math is step_math.cuh's
// (held to the CPU backend by a host test); reductions are deterministic:
// partials per fixed chunk in the context's scratch, then one block
// reducing them in a fixed order (max and integer counts need no order).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cuda/block_reduce.cuh"
#include "backend/cuda/context.cuh"
#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/step_math.cuh"
#include "backend/cuda/step_ops.cuh"
#include "backend/cuda_module.h"

namespace pl_cuda {

using namespace step_math;

namespace {

constexpr std::size_t aligned(std::size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

// Blocks of a max reduction's first pass (one partial each).
constexpr unsigned kReduceBlocks = 1024;
unsigned reduce_grid(std::size_t n) {
  const unsigned g = grid_for(n);
  return g < kReduceBlocks ? g : kReduceBlocks;
}

bool overlap(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
  return pa < pb + b_bytes && pb < pa + a_bytes;
}

// ---- block-wide reductions (blockDim.x == kThreads); result in thread 0 ----

// A fixed tree over the threads: the same bits on every run.
__device__ double block_sum_f64(double v) {
  __shared__ double s[kThreads];
  s[threadIdx.x] = v;
  __syncthreads();
  for (unsigned half = kThreads / 2; half > 0; half >>= 1) {
    if (threadIdx.x < half) s[threadIdx.x] = dadd_rn(s[threadIdx.x], s[threadIdx.x + half]);
    __syncthreads();
  }
  const double total = s[0];
  __syncthreads();
  return total;
}

__device__ unsigned long long block_sum_u64(unsigned long long v) {
  __shared__ unsigned long long warp_sum[kThreads / 32];
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  if ((threadIdx.x & 31u) == 0) warp_sum[threadIdx.x >> 5] = v;
  __syncthreads();
  v = threadIdx.x < kThreads / 32 ? warp_sum[threadIdx.x] : 0ull;
  if (threadIdx.x < 32)
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  __syncthreads();
  return v;
}

__device__ __forceinline__ std::size_t thread_index() {
  return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::size_t grid_stride() { return static_cast<std::size_t>(blockDim.x) * gridDim.x; }

// ---- unscale_grads ----

// One gradient on the device: its chunks are [first_chunk, first_chunk +
// ceil(n / kUnscaleChunk)) of the pass.
struct UnscaleDesc {
  float* data;
  std::int64_t n;
  std::int64_t* nonfinite;
  std::int64_t first_chunk;
};
// Elements of one chunk: its sum of squares is one partial (the CPU's block).
constexpr std::int64_t kUnscaleChunk = std::int64_t{1} << 14;

// One thread block per chunk at a time; each thread takes a fixed stride of
// the chunk, so a chunk's partial does not depend on the grid.
__global__ void unscale_kernel(const UnscaleDesc* descs, std::int64_t count, std::int64_t chunks, float inv_arg,
                               const PlCudaScaleState* state, double* part_sq, std::int64_t* part_bad) {
  // The step state's 1/scale when there is one: read as the work runs, so a
  // replayed graph unscales by the scale the device holds now.
  const float inv = state ? state->inv_scale : inv_arg;
  for (std::int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    // The gradient holding chunk c: the last with first_chunk <= c (one
    // without elements shares its first_chunk with the next).
    std::int64_t lo = 0, hi = count - 1;
    while (lo < hi) {
      const std::int64_t mid = (lo + hi + 1) / 2;
      if (descs[mid].first_chunk <= c) lo = mid;
      else hi = mid - 1;
    }
    const UnscaleDesc d = descs[lo];
    const std::int64_t i0 = (c - d.first_chunk) * kUnscaleChunk;
    const std::int64_t i1 = d.n < i0 + kUnscaleChunk ? d.n : i0 + kUnscaleChunk;
    double sq = 0.0;
    unsigned long long bad = 0;
    for (std::int64_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
      const float v = unscale_value(d.data[i], inv);
      d.data[i] = v;
      bad += nonfinite_f32(v) ? 1u : 0u;
      sq = dadd_rn(sq, square_f64(v));
    }
    sq = block_sum_f64(sq);
    bad = block_sum_u64(bad);
    if (threadIdx.x == 0) {
      part_sq[c] = sq;
      part_bad[c] = static_cast<std::int64_t>(bad);
    }
  }
}

// One block: the partials summed in a fixed order, each counter written.
__global__ void unscale_finish_kernel(const UnscaleDesc* descs, std::int64_t count, std::int64_t chunks,
                                      const double* part_sq, const std::int64_t* part_bad, double* sum_squares) {
  double sq = 0.0;
  for (std::int64_t c = threadIdx.x; c < chunks; c += blockDim.x) sq = dadd_rn(sq, part_sq[c]);
  sq = block_sum_f64(sq);
  if (threadIdx.x == 0 && sum_squares) *sum_squares = sq;
  for (std::int64_t k = threadIdx.x; k < count; k += blockDim.x) {
    const UnscaleDesc d = descs[k];
    if (!d.nonfinite) continue;
    const std::int64_t end = d.first_chunk + (d.n + kUnscaleChunk - 1) / kUnscaleChunk;
    std::int64_t bad = 0;
    for (std::int64_t c = d.first_chunk; c < end; ++c) bad += part_bad[c];
    *d.nonfinite = bad;
  }
}

// ---- optimizers ----

__global__ void sgd_kernel(float* value, const float* grad, float* buf, std::size_t n, SgdParams s,
                           const PlCudaScaleState* guard) {
  if (!step_taken(guard)) return;  // found inf: value and state untouched
  s.lr = step_lr(guard, s.lr);     // the schedule's rate the host wrote before the replay
  for (std::size_t i = thread_index(); i < n; i += grid_stride()) {
    float p = value[i];
    const float g = grad[i];
    if (buf) {
      float b = s.first ? 0.0f : buf[i];
      sgd_momentum(s, p, g, b);
      buf[i] = b;
    } else {
      p = sgd_plain(s, p, g);
    }
    value[i] = p;
  }
}

__global__ void adam_kernel(float* value, const float* grad, float* exp_avg, float* exp_avg_sq, std::size_t n,
                            AdamParams a, const PlCudaScaleState* guard) {
  if (!step_taken(guard)) return;  // found inf: value and state untouched
  for (std::size_t i = thread_index(); i < n; i += grid_stride()) {
    float p = value[i], m = exp_avg[i], v = exp_avg_sq[i];
    adam_element(a, p, grad[i], m, v);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    value[i] = p;
  }
}

// ---- amax ----

// y = x * scale (y may alias x), and each block's max |x| as bits.
__global__ void scale_amax_kernel(const float* x, float scale, float* y, std::size_t n, std::uint32_t* partial) {
  std::uint32_t m = 0;
  for (std::size_t i = thread_index(); i < n; i += grid_stride()) {
    const float v = x[i];
    const std::uint32_t a = abs_bits_f32(v);
    m = a > m ? a : m;
    y[i] = step_math::mul_rn(v, scale);  // x86 NaN rules, as the CPU
  }
  m = block_max_u32(m);
  if (threadIdx.x == 0) partial[blockIdx.x] = m;
}

__global__ void amax_final_kernel(const std::uint32_t* partial, unsigned count, float* amax) {
  std::uint32_t m = 0;
  for (unsigned k = threadIdx.x; k < count; k += blockDim.x) m = partial[k] > m ? partial[k] : m;
  m = block_max_u32(m);
  if (threadIdx.x == 0) *amax = amax_from_bits(m);
}

// ---- block_quantize ----

struct BlockState {
  float s_enc;       // NVFP4's tensor scale; MX: 1
  int min_exponent;  // MX: the least X of the blocks that are not NaN (127: none)
};

// Each block's largest finite |x| as bits (NVFP4's tensor amax).
__global__ void finite_amax_kernel(const float* x, std::size_t n, std::uint32_t* partial) {
  std::uint32_t m = 0;
  for (std::size_t i = thread_index(); i < n; i += grid_stride()) {
    const std::uint32_t a = finite_abs_bits_f32(x[i]);
    m = a > m ? a : m;
  }
  m = block_max_u32(m);
  if (threadIdx.x == 0) partial[blockIdx.x] = m;
}

__global__ void block_setup_kernel(const std::uint32_t* partial, unsigned count, bool tensor_scale,
                                   BlockState* state) {
  std::uint32_t m = 0;
  for (unsigned k = threadIdx.x; k < count; k += blockDim.x) m = partial[k] > m ? partial[k] : m;
  m = block_max_u32(m);
  if (threadIdx.x == 0) {
    state->s_enc = tensor_scale ? nvfp4_tensor_scale(f32_from_bits(m)) : 1.0f;
    state->min_exponent = 127;
  }
}

// g.bc lanes (1, 16 or 32: within one warp) per block of the matrix: each
// lane's amax, their max by shuffles, then each lane quantizes its own
// elements (it alone reads and writes them, so dst may alias src).
__global__ void block_quantize_kernel(const float* src, float* dst, BlockGrid g, BlockFormat f, bool stochastic,
                                      std::uint64_t key, BlockState* state) {
  const float s_enc = state->s_enc;
  const unsigned lanes = static_cast<unsigned>(g.bc);
  const std::size_t tid = thread_index();
  const int lane = static_cast<int>(tid % lanes);
  const unsigned warp_lane = threadIdx.x & 31u;
  const unsigned mask = lanes >= 32 ? 0xffffffffu : ((1u << lanes) - 1u) << (warp_lane & ~(lanes - 1u));
  const std::size_t blocks = static_cast<std::size_t>(g.nbr * g.nbc);
  int min_exponent = 127;
  for (std::size_t b = tid / lanes; b < blocks; b += grid_stride() / lanes) {
    const auto block = static_cast<std::int64_t>(b);
    std::uint32_t m = lane_amax_bits(src, g, block, lane);
    for (unsigned off = lanes >> 1; off > 0; off >>= 1) {
      const std::uint32_t o = __shfl_xor_sync(mask, m, off);
      m = o > m ? o : m;
    }
    const BlockScale s = block_scale(f, m, s_enc);
    if (!s.nan && s.exponent < min_exponent) min_exponent = s.exponent;
    lane_quantize(src, dst, g, block, lane, f, s, stochastic, key);
  }
  if (f.tensor_scale) return;
  __shared__ int block_min;
  if (threadIdx.x == 0) block_min = 127;
  __syncthreads();
  if (min_exponent < 127) atomicMin(&block_min, min_exponent);
  __syncthreads();
  if (threadIdx.x == 0 && block_min < 127) atomicMin(&state->min_exponent, block_min);
}

__global__ void block_finish_kernel(BlockFormat f, const BlockState* state, PlCudaBlockQuantized* info) {
  *info = block_result(f, state->s_enc, state->min_exponent);
}

__global__ void write_info_kernel(PlCudaBlockQuantized q, PlCudaBlockQuantized* info) { *info = q; }

// ---- gradient_census ----

__global__ void census_kernel(const float* values, const float* own, const float* block, std::size_t n,
                              CensusParams c, unsigned long long* out) {
  __shared__ unsigned long long counts[kCensusSlots];
  for (int s = threadIdx.x; s < kCensusSlots; s += blockDim.x) counts[s] = 0;
  __syncthreads();
  for (std::size_t i = thread_index(); i < n; i += grid_stride()) {
    const CensusHit h = census_hit(c, values[i], own != nullptr, own ? own[i] : 0.0f, block != nullptr,
                                   block ? block[i] : 0.0f);
    if (h.bin >= 0) atomicAdd(&counts[h.bin], 1ull);
    if (h.scaled >= 0) atomicAdd(&counts[h.scaled], 1ull);
    if (h.unscaled >= 0) atomicAdd(&counts[h.unscaled], 1ull);
  }
  __syncthreads();
  for (int s = threadIdx.x; s < kCensusSlots; s += blockDim.x)
    if (counts[s]) atomicAdd(&out[s], counts[s]);
}

// ---- update_scale ----

// One thread: the counts summed in order, then the scale's update.
__global__ void update_scale_kernel(const std::int64_t* counts, std::int64_t count, ScaleRule rule,
                                    PlCudaScaleState* state) {
  std::int64_t total = 0;
  for (std::int64_t k = 0; k < count; ++k) total += counts[k];
  PlCudaScaleState s = *state;
  update_scale(rule, total, s);
  *state = s;
}

PlCudaStatus check_count(ErrorSink sink, const char* fn, std::int64_t n) {
  if (n < 0)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "%s: negative count %lld", fn, static_cast<long long>(n));
  return PL_CUDA_OK;
}

}  // namespace

PlCudaStatus unscale_grads(PlCudaContext* ctx, const PlCudaGradBuffer* grads, std::size_t count,
                           float inv_scale, double* sum_squares, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "unscale_grads");
  if (count > 0 && !grads) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "unscale_grads: grads is null");
  // The descriptors, uploaded with the partials' room behind them. An
  // asynchronous copy from pageable memory is staged before it returns, so
  // the host vector may go when this call does.
  std::vector<UnscaleDesc> descs(count);
  std::int64_t chunks = 0;
  for (std::size_t k = 0; k < count; ++k) {
    const PlCudaGradBuffer& g = grads[k];
    if (g.n < 0)
      return fail(sink, PL_CUDA_INVALID_ARGUMENT, "unscale_grads: gradient %zu has negative count %lld", k,
                  static_cast<long long>(g.n));
    if (g.n > 0 && !g.data)
      return fail(sink, PL_CUDA_INVALID_ARGUMENT, "unscale_grads: gradient %zu has null data", k);
    descs[k] = {g.data, g.n, g.nonfinite, chunks};
    chunks += (g.n + kUnscaleChunk - 1) / kUnscaleChunk;
  }
  if (count == 0) {
    if (sum_squares) PL_CUDA_CHECK(sink, cudaMemsetAsync(sum_squares, 0, sizeof(double), ctx->stream));
    return PL_CUDA_OK;
  }
  const std::size_t desc_bytes = aligned(count * sizeof(UnscaleDesc));
  const std::size_t sq_bytes = aligned(static_cast<std::size_t>(chunks) * sizeof(double));
  const std::size_t bad_bytes = static_cast<std::size_t>(chunks) * sizeof(std::int64_t);
  void* base = nullptr;
  PL_CUDA_TRY(scratch(ctx, desc_bytes + sq_bytes + bad_bytes, &base, sink));
  auto* bytes = static_cast<unsigned char*>(base);
  auto* d_descs = reinterpret_cast<UnscaleDesc*>(bytes);
  auto* part_sq = reinterpret_cast<double*>(bytes + desc_bytes);
  auto* part_bad = reinterpret_cast<std::int64_t*>(bytes + desc_bytes + sq_bytes);
  void* staged = nullptr;
  PL_CUDA_TRY(stage_host_args(ctx, descs.data(), count * sizeof(UnscaleDesc), d_descs, &staged, sink));
  d_descs = static_cast<UnscaleDesc*>(staged);
  const auto n_descs = static_cast<std::int64_t>(count);
  if (chunks > 0) {
    const unsigned grid = static_cast<unsigned>(chunks < 65535 ? chunks : 65535);
    unscale_kernel<<<grid, kThreads, 0, ctx->stream>>>(d_descs, n_descs, chunks, inv_scale, ctx->step_state,
                                                                 part_sq, part_bad);
    PL_CUDA_CHECK_LAUNCH(sink, "unscale_kernel");
  }
  unscale_finish_kernel<<<1, kThreads, 0, ctx->stream>>>(d_descs, n_descs, chunks, part_sq, part_bad, sum_squares);
  PL_CUDA_CHECK_LAUNCH(sink, "unscale_finish_kernel");
  return PL_CUDA_OK;
}

PlCudaStatus sgd_update(PlCudaContext* ctx, float* value, const float* grad, float* momentum_buf,
                        std::int64_t n, float lr, float momentum, float keep, float weight_decay,
                        std::int32_t nesterov, std::int32_t first, PlCudaFormat state_format, char* message,
                        std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "sgd_update");
  PL_CUDA_TRY(check_count(sink, "sgd_update", n));
  if (element_bytes(state_format) == 0)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "sgd_update: unknown state format %d", static_cast<int>(state_format));
  if (n == 0) return PL_CUDA_OK;
  if (!value || !grad) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "sgd_update: null buffer");
  const SgdParams s{lr, momentum, keep, weight_decay, nesterov != 0, first != 0, state_format};
  const auto count = static_cast<std::size_t>(n);
  sgd_kernel<<<grid_for(count), kThreads, 0, ctx->stream>>>(value, grad, momentum_buf, count, s, ctx->step_state);
  PL_CUDA_CHECK_LAUNCH(sink, "sgd_kernel");
  return PL_CUDA_OK;
}

PlCudaStatus adam_update(PlCudaContext* ctx, float* value, const float* grad, float* exp_avg, float* exp_avg_sq,
                         std::int64_t n, float step_size, float bc2_sqrt, float one_minus_beta1, float beta2,
                         float one_minus_beta2, float eps, float l2, float shrink, PlCudaFormat state_format,
                         char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "adam_update");
  PL_CUDA_TRY(check_count(sink, "adam_update", n));
  if (element_bytes(state_format) == 0)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "adam_update: unknown state format %d",
                static_cast<int>(state_format));
  if (n == 0) return PL_CUDA_OK;
  if (!value || !grad || !exp_avg || !exp_avg_sq)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "adam_update: null buffer");
  const AdamParams a{step_size, bc2_sqrt, one_minus_beta1, beta2, one_minus_beta2, eps, l2, shrink, state_format};
  const auto count = static_cast<std::size_t>(n);
  adam_kernel<<<grid_for(count), kThreads, 0, ctx->stream>>>(value, grad, exp_avg, exp_avg_sq, count, a,
                                                                      ctx->step_state);
  PL_CUDA_CHECK_LAUNCH(sink, "adam_kernel");
  return PL_CUDA_OK;
}

PlCudaStatus scale_amax(PlCudaContext* ctx, const float* x, float scale, float* y, std::int64_t n, float* amax,
                        char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "scale_amax");
  PL_CUDA_TRY(check_count(sink, "scale_amax", n));
  if (!amax) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "scale_amax: amax is null");
  if (n == 0) {
    PL_CUDA_CHECK(sink, cudaMemsetAsync(amax, 0, sizeof(float), ctx->stream));
    return PL_CUDA_OK;
  }
  if (!x || !y) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "scale_amax: null buffer");
  const auto count = static_cast<std::size_t>(n);
  const unsigned grid = reduce_grid(count);
  void* partial = nullptr;
  PL_CUDA_TRY(scratch(ctx, grid * sizeof(std::uint32_t), &partial, sink));
  auto* part = static_cast<std::uint32_t*>(partial);
  scale_amax_kernel<<<grid, kThreads, 0, ctx->stream>>>(x, scale, y, count, part);
  PL_CUDA_CHECK_LAUNCH(sink, "scale_amax_kernel");
  amax_final_kernel<<<1, kThreads, 0, ctx->stream>>>(part, grid, amax);
  PL_CUDA_CHECK_LAUNCH(sink, "amax_final_kernel");
  return PL_CUDA_OK;
}

PlCudaStatus block_quantize(PlCudaContext* ctx, PlCudaBlockFormat f, const float* src, float* dst,
                            std::int64_t rows, std::int64_t cols, PlCudaBlockLayout layout,
                            std::int32_t stochastic, std::uint64_t seed, PlCudaBlockQuantized* info,
                            char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "block_quantize");
  BlockFormat bf{};
  if (!block_format(f, bf))
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "block_quantize: unknown block format %d", static_cast<int>(f));
  if (layout != PL_CUDA_BLOCK_ROWS && layout != PL_CUDA_BLOCK_COLUMNS && layout != PL_CUDA_BLOCK_TILES)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "block_quantize: unknown layout %d", static_cast<int>(layout));
  if (layout == PL_CUDA_BLOCK_TILES && !bf.tensor_scale)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "block_quantize: square tiles are NVFP4's weight layout only");
  if (rows <= 0 || cols <= 0) {
    if (info) {
      write_info_kernel<<<1, 1, 0, ctx->stream>>>(PlCudaBlockQuantized{1.0f, 1, {0, 0, 0}}, info);
      PL_CUDA_CHECK_LAUNCH(sink, "write_info_kernel");
    }
    return PL_CUDA_OK;
  }
  if (!src || !dst) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "block_quantize: null buffer");
  const auto n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  if (src != dst && overlap(src, n * sizeof(float), dst, n * sizeof(float)))
    return fail(sink, PL_CUDA_INVALID_ARGUMENT,
                "block_quantize: source and destination overlap (in place only when they are equal)");

  const unsigned amax_grid = bf.tensor_scale ? reduce_grid(n) : 0u;
  const std::size_t state_bytes = aligned(sizeof(BlockState));
  void* base = nullptr;
  PL_CUDA_TRY(scratch(ctx, state_bytes + amax_grid * sizeof(std::uint32_t), &base, sink));
  auto* state = static_cast<BlockState*>(base);
  auto* partial = reinterpret_cast<std::uint32_t*>(static_cast<unsigned char*>(base) + state_bytes);
  if (bf.tensor_scale) {
    finite_amax_kernel<<<amax_grid, kThreads, 0, ctx->stream>>>(src, n, partial);
    PL_CUDA_CHECK_LAUNCH(sink, "finite_amax_kernel");
  }
  block_setup_kernel<<<1, kThreads, 0, ctx->stream>>>(partial, amax_grid, bf.tensor_scale, state);
  PL_CUDA_CHECK_LAUNCH(sink, "block_setup_kernel");
  const BlockGrid g = block_grid(rows, cols, layout, bf.block);
  const auto threads = static_cast<std::size_t>(g.nbr * g.nbc) * static_cast<std::size_t>(g.bc);
  block_quantize_kernel<<<grid_for(threads), kThreads, 0, ctx->stream>>>(src, dst, g, bf, stochastic != 0,
                                                                         stream_key(seed), state);
  PL_CUDA_CHECK_LAUNCH(sink, "block_quantize_kernel");
  if (info) {
    block_finish_kernel<<<1, 1, 0, ctx->stream>>>(bf, state, info);
    PL_CUDA_CHECK_LAUNCH(sink, "block_finish_kernel");
  }
  return PL_CUDA_OK;
}

PlCudaStatus gradient_census(PlCudaContext* ctx, const float* values, const float* own, const float* block,
                             std::int64_t n, double underflow, double subnormal_hi, double overflow,
                             std::int32_t tie_overflows, double scale, std::int32_t log2_lo, std::int64_t* out,
                             char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "gradient_census");
  PL_CUDA_TRY(check_count(sink, "gradient_census", n));
  if (!out) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "gradient_census: out is null");
  if (n == 0) return PL_CUDA_OK;
  if (!values) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "gradient_census: values is null");
  const CensusParams c{underflow, subnormal_hi, overflow, tie_overflows != 0, scale, log2_lo};
  const auto count = static_cast<std::size_t>(n);
  // int64 counters added as unsigned: the same two's complement sum.
  census_kernel<<<grid_for(count), kThreads, 0, ctx->stream>>>(values, own, block, count, c,
                                                               reinterpret_cast<unsigned long long*>(out));
  PL_CUDA_CHECK_LAUNCH(sink, "census_kernel");
  return PL_CUDA_OK;
}

PlCudaStatus update_scale(PlCudaContext* ctx, const std::int64_t* counts, std::int64_t count, std::int32_t mode,
                          double growth_factor, double backoff_factor, std::int64_t growth_interval,
                          PlCudaScaleState* state, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "update_scale");
  PL_CUDA_TRY(check_count(sink, "update_scale", count));
  if (!state) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "update_scale: state is null");
  if (count > 0 && !counts) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "update_scale: counts is null");
  if (mode != PL_CUDA_SCALE_NONE && mode != PL_CUDA_SCALE_STATIC && mode != PL_CUDA_SCALE_DYNAMIC)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "update_scale: unknown mode %d", static_cast<int>(mode));
  if (growth_interval < 1)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "update_scale: growth_interval %lld < 1",
                static_cast<long long>(growth_interval));
  const ScaleRule rule{static_cast<PlCudaScaleMode>(mode), growth_factor, backoff_factor, growth_interval};
  update_scale_kernel<<<1, 1, 0, ctx->stream>>>(counts, count, rule, state);
  PL_CUDA_CHECK_LAUNCH(sink, "update_scale_kernel");
  return PL_CUDA_OK;
}

PlCudaStatus set_step_state(PlCudaContext* ctx, const PlCudaScaleState* state, char* message,
                            std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "set_step_state");
  ctx->step_state = state;
  return PL_CUDA_OK;
}

}  // namespace pl_cuda
