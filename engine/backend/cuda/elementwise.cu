// Elementwise ops and reductions of the CUDA backend: activations (f32 and
// FP16/BF16 patterns), add, scale, fill, rounding to a format, the
// non-finite count, amax, column/channel/error sums, and the layout ops
// (repeat_rows, patchify, per-channel bias). Per-element math lives in
// ops_math.cuh (shared with a host check); the elementwise results equal
// the CPU backend's bit for bit, GELU aside (double erfc/exp, a few ulps).
// Sums run in double in a fixed order (ops.cuh): deterministic.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <initializer_list>

#include "backend/cuda/context.cuh"
#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/fp_convert.cuh"
#include "backend/cuda/ops.cuh"
#include "backend/cuda/ops_math.cuh"
#include "backend/cuda_module.h"

namespace pl_cuda {

namespace {

// ---- per-element ops (for_each_kernel) ----
struct ReluForward {
  const float* x;
  float* y;
  __device__ void operator()(std::size_t i) const { y[i] = relu_value(x[i]); }
};
struct ReluBackward {
  const float* x;
  const float* dy;
  float* dx;
  __device__ void operator()(std::size_t i) const { dx[i] = relu_grad(x[i], dy[i]); }
};
struct Relu16Forward {
  const std::uint16_t* x;
  std::uint16_t* y;
  std::uint32_t inf_bits;
  __device__ void operator()(std::size_t i) const { y[i] = relu16_value(x[i], inf_bits); }
};
struct Relu16Backward {
  const std::uint16_t* x;
  const std::uint16_t* dy;
  std::uint16_t* dx;
  std::uint32_t inf_bits;
  __device__ void operator()(std::size_t i) const { dx[i] = relu16_grad(x[i], dy[i], inf_bits); }
};
struct GeluForward {
  const float* x;
  float* y;
  __device__ void operator()(std::size_t i) const { y[i] = gelu_value(x[i]); }
};
struct GeluBackward {
  const float* x;
  const float* dy;
  float* dx;
  __device__ void operator()(std::size_t i) const { dx[i] = gelu_grad(x[i], dy[i]); }
};
struct Add {
  const float* a;
  const float* b;
  float* y;
  __device__ void operator()(std::size_t i) const { y[i] = add_rn(a[i], b[i]); }
};
struct Scale {
  float* x;
  float s;
  __device__ void operator()(std::size_t i) const { x[i] = mul_rn(x[i], s); }
};
struct Fill {
  float* x;
  float value;
  __device__ void operator()(std::size_t i) const { x[i] = value; }
};
struct Quantize {
  PlCudaFormat f;
  float* x;
  bool saturate;
  __device__ void operator()(std::size_t i) const { x[i] = quantize_value(f, x[i], saturate); }
};
// dst[b, t, :] = src[b, :]
struct RepeatRows {
  const float* src;
  float* dst;
  std::int64_t T, C;
  __device__ void operator()(std::size_t i) const {
    const auto e = static_cast<std::int64_t>(i);
    const std::int64_t bt = e / C;
    dst[i] = src[(bt / T) * C + (e - bt * C)];
  }
};
// The row a token id names, or -1 for none (out of range, not an integer):
// the CPU's rule.
__device__ inline std::int64_t embedding_row(float id, std::int64_t vocab) {
  if (!(id >= 0.0f) || id >= static_cast<float>(vocab)) return -1;
  const auto v = static_cast<std::int64_t>(id);
  return static_cast<float>(v) == id ? v : -1;
}
// dst[i, c] = table[ids[i], c], or 0 for no token.
struct EmbeddingForward {
  const float* ids;
  const float* table;
  float* dst;
  std::int64_t vocab, dim;
  __device__ void operator()(std::size_t e) const {
    const auto i = static_cast<std::int64_t>(e) / dim, c = static_cast<std::int64_t>(e) - i * dim;
    const std::int64_t v = embedding_row(ids[i], vocab);
    dst[e] = v < 0 ? 0.0f : table[v * dim + c];
  }
};
// One thread per column: every token in increasing order adds its dy into
// its row (the fixed-order scatter-add; dst zeroed before).
struct EmbeddingBackward {
  const float* ids;
  const float* dy;
  float* dst;
  std::int64_t n, vocab, dim;
  __device__ void operator()(std::size_t e) const {
    const auto c = static_cast<std::int64_t>(e);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t v = embedding_row(ids[i], vocab);
      if (v >= 0) dst[v * dim + c] += dy[i * dim + c];
    }
  }
};
// z-loss forward, one thread per row: lse = m + log(sum exp(x - m)), the
// sum in double over the columns in order (the CPU's order).
struct ZLossRows {
  const float* x;
  float* lse;
  std::int64_t cols;
  __device__ void operator()(std::size_t i) const {
    const float* r = x + static_cast<std::int64_t>(i) * cols;
    float m = r[0];
    for (std::int64_t j = 1; j < cols; ++j) m = r[j] > m ? r[j] : m;
    double s = 0.0;
    for (std::int64_t j = 0; j < cols; ++j) s += exp(static_cast<double>(r[j]) - m);
    lse[i] = static_cast<float>(static_cast<double>(m) + log(s));
  }
};
// The mean of lse^2 by one thread, rows in order (a fixed order: the CPU's).
struct ZLossMean {
  const float* lse;
  double* z;
  std::int64_t rows;
  __device__ void operator()(std::size_t) const {
    double s = 0.0;
    for (std::int64_t i = 0; i < rows; ++i) s += static_cast<double>(lse[i]) * static_cast<double>(lse[i]);
    *z = s / static_cast<double>(rows);
  }
};
// grad[i, j] += (f * lse[i]) * probs[i, j]
struct ZLossGrad {
  const float* probs;
  const float* lse;
  float* grad;
  std::int64_t cols;
  float f;
  __device__ void operator()(std::size_t e) const {
    const float a = f * lse[static_cast<std::int64_t>(e) / cols];
    grad[e] = __fadd_rn(grad[e], __fmul_rn(a, probs[e]));
  }
};
// patches[((b * gh + ty) * gw + tx), (c * p + i) * p + jx] = x[b, c, ty * p + i, tx * p + jx]
struct Patchify {
  const float* x;
  float* patches;
  std::int64_t C, H, W, p, gh, gw;
  __device__ void operator()(std::size_t idx) const {
    std::int64_t e = static_cast<std::int64_t>(idx);
    const std::int64_t jx = e % p;
    e /= p;
    const std::int64_t i = e % p;
    e /= p;
    const std::int64_t c = e % C;
    e /= C;
    const std::int64_t tx = e % gw;
    e /= gw;
    const std::int64_t ty = e % gh;
    const std::int64_t b = e / gh;
    patches[idx] = x[((b * C + c) * H + ty * p + i) * W + tx * p + jx];
  }
};
// The inverse, one thread per pixel of x: pixels outside the grid get 0.
struct Unpatchify {
  const float* patches;
  float* x;
  std::int64_t C, H, W, p, gh, gw;
  __device__ void operator()(std::size_t idx) const {
    std::int64_t e = static_cast<std::int64_t>(idx);
    const std::int64_t xx = e % W;
    e /= W;
    const std::int64_t yy = e % H;
    e /= H;
    const std::int64_t c = e % C;
    const std::int64_t b = e / C;
    const std::int64_t ty = yy / p, tx = xx / p;
    float v = 0.0f;
    if (ty < gh && tx < gw)
      v = patches[((((b * gh + ty) * gw + tx) * C + c) * p + (yy - ty * p)) * p + (xx - tx * p)];
    x[idx] = v;
  }
};
struct BiasAddChannels {
  float* y;
  const float* bias;
  std::int64_t c, hw;
  __device__ void operator()(std::size_t i) const {
    y[i] = add_rn(y[i], bias[(static_cast<std::int64_t>(i) / hw) % c]);
  }
};

// ---- reductions ----
// *counter += the count of inf/NaN values: one integer atomic per warp
// that found any.
__global__ void count_nonfinite_kernel(const float* x, std::size_t n, unsigned long long* counter) {
  unsigned long long count = 0;
  for (std::size_t i = thread_index(); i < n; i += thread_stride()) count += is_nonfinite(x[i]) ? 1u : 0u;
  for (int o = 16; o > 0; o >>= 1) count += __shfl_xor_sync(0xffffffffu, count, o);
  if ((threadIdx.x & 31u) == 0 && count != 0) atomicAdd(counter, count);
}

// max |x| on the magnitude bits (NaN patterns order above inf, inf above
// every finite value), into *bits (zeroed first), one atomic per warp.
__global__ void amax_kernel(const float* x, std::size_t n, unsigned* bits) {
  unsigned m = 0;
  for (std::size_t i = thread_index(); i < n; i += thread_stride()) {
    const unsigned a = f32_bits(x[i]) & 0x7fffffffu;
    m = a > m ? a : m;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned other = __shfl_xor_sync(0xffffffffu, m, o);
    m = other > m ? other : m;
  }
  if ((threadIdx.x & 31u) == 0 && m != 0) atomicMax(bits, m);
}
// Any NaN magnitude becomes the canonical quiet NaN (the CPU backend's amax).
__global__ void amax_finish_kernel(float* out) {
  const unsigned m = f32_bits(*out);
  *out = f32_from_bits(m > 0x7f800000u ? 0x7fc00000u : m);
}

struct ColumnLoad {
  const float* dy;
  std::int64_t cols;
  __device__ void operator()(std::int64_t i, std::int64_t j, double* acc) const { acc[0] += dy[i * cols + j]; }
};
// Column loads of FP16/BF16 codes, decoded exactly (column_sums16).
struct ColumnLoadCodes {
  PlCudaFormat f;
  const void* dy;
  std::int64_t cols;
  __device__ void operator()(std::int64_t i, std::int64_t j, double* acc) const {
    acc[0] += load_value(f, dy, static_cast<std::size_t>(i * cols + j));
  }
};
struct StoreFloat {
  float* out;
  __device__ void operator()(std::int64_t j, const double* s) const { out[j] = static_cast<float>(s[0]); }
};

struct ErrorLoad {
  const float* a;
  const float* b;
  __device__ void operator()(std::size_t i, double* acc) const {
    const double bv = b[i];
    const double d = static_cast<double>(a[i]) - bv;
    acc[0] += d * d;
    acc[1] += bv * bv;
    acc[2] += d * bv;
  }
};
struct ErrorStore {
  double* out;
  __device__ void operator()(const double* s) const {
    out[0] += s[0];
    out[1] += s[1];
    out[2] += s[2];
  }
};

// Channel j's n * hw values (image i, pixel k at (i * c + j) * hw + k),
// block (j, s) summing elements [s * per, (s + 1) * per) of them; the
// partials in column_final_kernel's layout (split-major).
__global__ void __launch_bounds__(kThreads)
    channel_partials_kernel(const float* dy, std::int64_t c, std::int64_t hw, std::int64_t len,
                            std::int64_t per, double* partial) {
  const std::int64_t j = blockIdx.x;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.y) * per;
  const std::int64_t end = begin + per < len ? begin + per : len;
  double acc[1] = {0.0};
  std::int64_t t = begin + threadIdx.x;
  // (i, k) of t, stepped by blockDim.x without dividing in the loop.
  std::int64_t i = t / hw, k = t - (t / hw) * hw;
  const std::int64_t step = blockDim.x, step_i = step / hw, step_k = step - step_i * hw;
  for (; t < end; t += step) {
    acc[0] += dy[(i * c + j) * hw + k];
    i += step_i;
    k += step_k;
    if (k >= hw) {
      k -= hw;
      ++i;
    }
  }
  block_sum<1>(acc);
  if (threadIdx.x == 0) partial[static_cast<std::size_t>(blockIdx.y) * c + j] = acc[0];
}
inline constexpr std::int64_t kChannelSplitMin = 4096;
inline constexpr std::int64_t kMaxChannelSplits = 64;

std::uint32_t inf_bits16(PlCudaFormat f) { return f == PL_CUDA_BF16 ? 0x7f80u : 0x7c00u; }
bool is_16bit(PlCudaFormat f) { return f == PL_CUDA_FP16 || f == PL_CUDA_BF16; }

// The entry of a plain elementwise op: the context, n >= 0 (0: nothing to
// do), every named pointer non-null, then one grid-stride launch of `op`.
struct Named {
  const char* name;
  const void* p;
};
template <class Op>
PlCudaStatus for_each_entry(PlCudaContext* ctx, char* message, std::size_t message_size, const char* fn,
                            std::int64_t n, std::initializer_list<Named> pointers, const Op& op) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, fn);
  PL_CUDA_TRY(check_count(sink, fn, "n", n));
  if (n == 0) return PL_CUDA_OK;
  for (const Named& a : pointers) PL_CUDA_TRY(check_pointer(sink, fn, a.name, a.p));
  const auto count = static_cast<std::size_t>(n);
  for_each_kernel<<<grid_for(count), kThreads, 0, ctx->stream>>>(count, op);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
    char what[96];
    std::snprintf(what, sizeof what, "launch of %s", fn);
    return report(e, what, __FILE__, __LINE__, sink);
  }
  return PL_CUDA_OK;
}

}  // namespace

PlCudaStatus relu_forward(PlCudaContext* ctx, const float* x, float* y, std::int64_t n, char* message,
                          std::size_t message_size) {
  return for_each_entry(ctx, message, message_size, "relu_forward", n, {{"x", x}, {"y", y}}, ReluForward{x, y});
}

PlCudaStatus relu_backward(PlCudaContext* ctx, const float* x, const float* dy, float* dx,
                           std::int64_t n, char* message, std::size_t message_size) {
  return for_each_entry(ctx, message, message_size, "relu_backward", n, {{"x", x}, {"dy", dy}, {"dx", dx}},
                        ReluBackward{x, dy, dx});
}

PlCudaStatus relu16_forward(PlCudaContext* ctx, PlCudaFormat f, const void* x, void* y,
                            std::int64_t n, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "relu16_forward");
  if (!is_16bit(f))
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "relu16_forward: format %d is not FP16 or BF16", static_cast<int>(f));
  PL_CUDA_TRY(check_count(sink, "relu16_forward", "n", n));
  if (n == 0) return PL_CUDA_OK;
  PL_CUDA_TRY(check_pointer(sink, "relu16_forward", "x", x));
  PL_CUDA_TRY(check_pointer(sink, "relu16_forward", "y", y));
  const auto count = static_cast<std::size_t>(n);
  for_each_kernel<<<grid_for(count), kThreads, 0, ctx->stream>>>(
      count, Relu16Forward{static_cast<const std::uint16_t*>(x), static_cast<std::uint16_t*>(y), inf_bits16(f)});
  PL_CUDA_CHECK_LAUNCH(sink, "relu16_forward");
  return PL_CUDA_OK;
}

PlCudaStatus relu16_backward(PlCudaContext* ctx, PlCudaFormat f, const void* x, PlCudaFormat g,
                             const void* dy, void* dx, std::int64_t n, char* message,
                             std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "relu16_backward");
  if (!is_16bit(f))
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "relu16_backward: format f %d is not FP16 or BF16", static_cast<int>(f));
  if (!is_16bit(g))
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "relu16_backward: format g %d is not FP16 or BF16", static_cast<int>(g));
  PL_CUDA_TRY(check_count(sink, "relu16_backward", "n", n));
  if (n == 0) return PL_CUDA_OK;
  PL_CUDA_TRY(check_pointer(sink, "relu16_backward", "x", x));
  PL_CUDA_TRY(check_pointer(sink, "relu16_backward", "dy", dy));
  PL_CUDA_TRY(check_pointer(sink, "relu16_backward", "dx", dx));
  const auto count = static_cast<std::size_t>(n);
  // dy is copied or replaced by +0 as a pattern: g only has to be 16-bit.
  for_each_kernel<<<grid_for(count), kThreads, 0, ctx->stream>>>(
      count, Relu16Backward{static_cast<const std::uint16_t*>(x), static_cast<const std::uint16_t*>(dy),
                            static_cast<std::uint16_t*>(dx), inf_bits16(f)});
  PL_CUDA_CHECK_LAUNCH(sink, "relu16_backward");
  return PL_CUDA_OK;
}

PlCudaStatus gelu_forward(PlCudaContext* ctx, const float* x, float* y, std::int64_t n, char* message,
                          std::size_t message_size) {
  return for_each_entry(ctx, message, message_size, "gelu_forward", n, {{"x", x}, {"y", y}}, GeluForward{x, y});
}

PlCudaStatus gelu_backward(PlCudaContext* ctx, const float* x, const float* dy, float* dx,
                           std::int64_t n, char* message, std::size_t message_size) {
  return for_each_entry(ctx, message, message_size, "gelu_backward", n, {{"x", x}, {"dy", dy}, {"dx", dx}},
                        GeluBackward{x, dy, dx});
}

PlCudaStatus add(PlCudaContext* ctx, const float* a, const float* b, float* y, std::int64_t n,
                 char* message, std::size_t message_size) {
  return for_each_entry(ctx, message, message_size, "add", n, {{"a", a}, {"b", b}, {"y", y}}, Add{a, b, y});
}

PlCudaStatus scale(PlCudaContext* ctx, float* x, float s, std::int64_t n, char* message,
                   std::size_t message_size) {
  return for_each_entry(ctx, message, message_size, "scale", n, {{"x", x}}, Scale{x, s});
}

PlCudaStatus fill(PlCudaContext* ctx, float* x, float value, std::int64_t n, char* message,
                  std::size_t message_size) {
  return for_each_entry(ctx, message, message_size, "fill", n, {{"x", x}}, Fill{x, value});
}

PlCudaStatus quantize(PlCudaContext* ctx, PlCudaFormat f, float* x, std::int64_t n,
                      std::int32_t saturate, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "quantize");
  if (element_bytes(f) == 0)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "quantize: unknown format %d", static_cast<int>(f));
  PL_CUDA_TRY(check_count(sink, "quantize", "n", n));
  if (n == 0 || f == PL_CUDA_FP32) return PL_CUDA_OK;
  PL_CUDA_TRY(check_pointer(sink, "quantize", "x", x));
  const auto count = static_cast<std::size_t>(n);
  for_each_kernel<<<grid_for(count), kThreads, 0, ctx->stream>>>(count, Quantize{f, x, saturate != 0});
  PL_CUDA_CHECK_LAUNCH(sink, "quantize");
  return PL_CUDA_OK;
}

PlCudaStatus count_nonfinite(PlCudaContext* ctx, const float* x, std::int64_t n, std::int64_t* counter,
                             char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "count_nonfinite");
  PL_CUDA_TRY(check_count(sink, "count_nonfinite", "n", n));
  if (n == 0) return PL_CUDA_OK;
  PL_CUDA_TRY(check_pointer(sink, "count_nonfinite", "x", x));
  PL_CUDA_TRY(check_pointer(sink, "count_nonfinite", "counter", counter));
  const auto count = static_cast<std::size_t>(n);
  // int64 += in two's complement is the unsigned 64-bit addition.
  count_nonfinite_kernel<<<grid_for(count), kThreads, 0, ctx->stream>>>(
      x, count, reinterpret_cast<unsigned long long*>(counter));
  PL_CUDA_CHECK_LAUNCH(sink, "count_nonfinite_kernel");
  return PL_CUDA_OK;
}

PlCudaStatus amax(PlCudaContext* ctx, const float* x, std::int64_t n, float* out, char* message,
                  std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "amax");
  PL_CUDA_TRY(check_count(sink, "amax", "n", n));
  PL_CUDA_TRY(check_pointer(sink, "amax", "out", out));
  // *out is the running maximum's bits (0 = +0.0f, the result for n == 0).
  PL_CUDA_CHECK(sink, cudaMemsetAsync(out, 0, sizeof(float), ctx->stream));
  if (n == 0) return PL_CUDA_OK;
  PL_CUDA_TRY(check_pointer(sink, "amax", "x", x));
  const auto count = static_cast<std::size_t>(n);
  amax_kernel<<<grid_for(count), kThreads, 0, ctx->stream>>>(x, count, reinterpret_cast<unsigned*>(out));
  PL_CUDA_CHECK_LAUNCH(sink, "amax_kernel");
  amax_finish_kernel<<<1, 1, 0, ctx->stream>>>(out);
  PL_CUDA_CHECK_LAUNCH(sink, "amax_finish_kernel");
  return PL_CUDA_OK;
}

PlCudaStatus column_sums(PlCudaContext* ctx, const float* dy, std::int64_t rows, std::int64_t cols,
                         float* db, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "column_sums");
  PL_CUDA_TRY(check_count(sink, "column_sums", "rows", rows));
  PL_CUDA_TRY(check_count(sink, "column_sums", "cols", cols));
  std::int64_t total = 0;
  PL_CUDA_TRY(check_product(sink, "column_sums", "rows * cols", {rows, cols}, &total));
  if (cols == 0) return PL_CUDA_OK;
  PL_CUDA_TRY(check_pointer(sink, "column_sums", "db", db));
  if (rows == 0) {
    PL_CUDA_CHECK(sink, cudaMemsetAsync(db, 0, static_cast<std::size_t>(cols) * sizeof(float), ctx->stream));
    return PL_CUDA_OK;
  }
  PL_CUDA_TRY(check_pointer(sink, "column_sums", "dy", dy));
  return launch_column_sums<1>(ctx, rows, cols, ColumnLoad{dy, cols}, StoreFloat{db}, sink);
}

// ABI 6 (gpufuse): column_sums of FP16/BF16 codes read as they are: the same
// partials and order as column_sums of their decoded values.
PlCudaStatus column_sums16(PlCudaContext* ctx, PlCudaFormat f, const void* dy, std::int64_t rows, std::int64_t cols,
                           float* db, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "column_sums16");
  if (f != PL_CUDA_FP16 && f != PL_CUDA_BF16)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "column_sums16: format %d is not FP16 or BF16", static_cast<int>(f));
  PL_CUDA_TRY(check_count(sink, "column_sums16", "rows", rows));
  PL_CUDA_TRY(check_count(sink, "column_sums16", "cols", cols));
  std::int64_t total = 0;
  PL_CUDA_TRY(check_product(sink, "column_sums16", "rows * cols", {rows, cols}, &total));
  if (cols == 0) return PL_CUDA_OK;
  PL_CUDA_TRY(check_pointer(sink, "column_sums16", "db", db));
  if (rows == 0) {
    PL_CUDA_CHECK(sink, cudaMemsetAsync(db, 0, static_cast<std::size_t>(cols) * sizeof(float), ctx->stream));
    return PL_CUDA_OK;
  }
  PL_CUDA_TRY(check_pointer(sink, "column_sums16", "dy", dy));
  return launch_column_sums<1>(ctx, rows, cols, ColumnLoadCodes{f, dy, cols}, StoreFloat{db}, sink);
}

PlCudaStatus error_sums(PlCudaContext* ctx, const float* a, const float* b, std::int64_t n,
                        double* out, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "error_sums");
  PL_CUDA_TRY(check_count(sink, "error_sums", "n", n));
  if (n == 0) return PL_CUDA_OK;
  PL_CUDA_TRY(check_pointer(sink, "error_sums", "a", a));
  PL_CUDA_TRY(check_pointer(sink, "error_sums", "b", b));
  PL_CUDA_TRY(check_pointer(sink, "error_sums", "out", out));
  const auto count = static_cast<std::size_t>(n);
  void* buffer = nullptr;
  PL_CUDA_TRY(scratch(ctx, sum_blocks(count) * 3 * sizeof(double), &buffer, sink));
  return launch_sum<3>(ctx, count, ErrorLoad{a, b}, ErrorStore{out}, static_cast<double*>(buffer), sink);
}

PlCudaStatus repeat_rows(PlCudaContext* ctx, const float* src, float* dst, std::int64_t B,
                         std::int64_t T, std::int64_t C, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "repeat_rows");
  PL_CUDA_TRY(check_count(sink, "repeat_rows", "B", B));
  PL_CUDA_TRY(check_count(sink, "repeat_rows", "T", T));
  PL_CUDA_TRY(check_count(sink, "repeat_rows", "C", C));
  std::int64_t total = 0;
  PL_CUDA_TRY(check_product(sink, "repeat_rows", "B * T * C", {B, T, C}, &total));
  if (total == 0) return PL_CUDA_OK;
  PL_CUDA_TRY(check_pointer(sink, "repeat_rows", "src", src));
  PL_CUDA_TRY(check_pointer(sink, "repeat_rows", "dst", dst));
  const auto count = static_cast<std::size_t>(total);
  for_each_kernel<<<grid_for(count), kThreads, 0, ctx->stream>>>(count, RepeatRows{src, dst, T, C});
  PL_CUDA_CHECK_LAUNCH(sink, "repeat_rows");
  return PL_CUDA_OK;
}

PlCudaStatus embedding(PlCudaContext* ctx, std::int32_t pass, const float* ids, const float* src, float* dst,
                       std::int64_t n, std::int64_t vocab, std::int64_t dim, char* message,
                       std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "embedding");
  if (pass != 0 && pass != 1) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "embedding: unknown pass %d", pass);
  PL_CUDA_TRY(check_count(sink, "embedding", "n", n));
  PL_CUDA_TRY(check_count(sink, "embedding", "vocab", vocab));
  PL_CUDA_TRY(check_count(sink, "embedding", "dim", dim));
  std::int64_t rows = 0, table = 0;
  PL_CUDA_TRY(check_product(sink, "embedding", "n * dim", {n, dim}, &rows));
  PL_CUDA_TRY(check_product(sink, "embedding", "vocab * dim", {vocab, dim}, &table));
  if (pass == 1 && table > 0) {
    PL_CUDA_TRY(check_pointer(sink, "embedding", "dst", dst));
    PL_CUDA_CHECK(sink, cudaMemsetAsync(dst, 0, static_cast<std::size_t>(table) * sizeof(float), ctx->stream));
  }
  if (rows == 0) return PL_CUDA_OK;
  PL_CUDA_TRY(check_pointer(sink, "embedding", "ids", ids));
  PL_CUDA_TRY(check_pointer(sink, "embedding", "src", src));
  PL_CUDA_TRY(check_pointer(sink, "embedding", "dst", dst));
  if (pass == 0) {
    const auto count = static_cast<std::size_t>(rows);
    for_each_kernel<<<grid_for(count), kThreads, 0, ctx->stream>>>(count, EmbeddingForward{ids, src, dst, vocab, dim});
  } else {
    const auto count = static_cast<std::size_t>(dim);
    for_each_kernel<<<grid_for(count), kThreads, 0, ctx->stream>>>(count, EmbeddingBackward{ids, src, dst, n, vocab, dim});
  }
  PL_CUDA_CHECK_LAUNCH(sink, "embedding");
  return PL_CUDA_OK;
}

PlCudaStatus z_loss(PlCudaContext* ctx, std::int32_t pass, const float* logits, const float* probs, float* lse,
                    double* z, float* grad, std::int64_t rows, std::int64_t cols, float coef, float scale,
                    char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "z_loss");
  if (pass != 0 && pass != 1) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "z_loss: unknown pass %d", pass);
  PL_CUDA_TRY(check_count(sink, "z_loss", "rows", rows));
  PL_CUDA_TRY(check_count(sink, "z_loss", "cols", cols));
  std::int64_t total = 0;
  PL_CUDA_TRY(check_product(sink, "z_loss", "rows * cols", {rows, cols}, &total));
  if (pass == 0) {
    PL_CUDA_TRY(check_pointer(sink, "z_loss", "z", z));
    if (rows == 0) {
      PL_CUDA_CHECK(sink, cudaMemsetAsync(z, 0, sizeof(double), ctx->stream));
      return PL_CUDA_OK;
    }
    if (cols == 0) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "z_loss: rows without columns");
    PL_CUDA_TRY(check_pointer(sink, "z_loss", "logits", logits));
    PL_CUDA_TRY(check_pointer(sink, "z_loss", "lse", lse));
    const auto n = static_cast<std::size_t>(rows);
    for_each_kernel<<<grid_for(n), kThreads, 0, ctx->stream>>>(n, ZLossRows{logits, lse, cols});
    for_each_kernel<<<1, 1, 0, ctx->stream>>>(std::size_t{1}, ZLossMean{lse, z, rows});
  } else {
    if (total == 0) return PL_CUDA_OK;
    PL_CUDA_TRY(check_pointer(sink, "z_loss", "probs", probs));
    PL_CUDA_TRY(check_pointer(sink, "z_loss", "lse", lse));
    PL_CUDA_TRY(check_pointer(sink, "z_loss", "grad", grad));
    const float f = 2.0f * coef * scale / static_cast<float>(rows);
    const auto n = static_cast<std::size_t>(total);
    for_each_kernel<<<grid_for(n), kThreads, 0, ctx->stream>>>(n, ZLossGrad{probs, lse, grad, cols, f});
  }
  PL_CUDA_CHECK_LAUNCH(sink, "z_loss");
  return PL_CUDA_OK;
}

namespace {

// The checks patchify and unpatchify share; *patch_total: B * gh * gw *
// C * p * p, *image_total: B * C * H * W.
PlCudaStatus check_patches(ErrorSink sink, const char* fn, std::int64_t B, std::int64_t C, std::int64_t H,
                           std::int64_t W, std::int64_t p, std::int64_t* patch_total, std::int64_t* image_total) {
  PL_CUDA_TRY(check_count(sink, fn, "B", B));
  PL_CUDA_TRY(check_count(sink, fn, "C", C));
  PL_CUDA_TRY(check_count(sink, fn, "H", H));
  PL_CUDA_TRY(check_count(sink, fn, "W", W));
  if (p <= 0) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "%s: patch size %lld not positive", fn, static_cast<long long>(p));
  PL_CUDA_TRY(check_product(sink, fn, "B * C * H * W", {B, C, H, W}, image_total));
  PL_CUDA_TRY(check_product(sink, fn, "the patch tensor", {B, H / p, W / p, C, p, p}, patch_total));
  return PL_CUDA_OK;
}

}  // namespace

PlCudaStatus patchify(PlCudaContext* ctx, const float* x, float* patches, std::int64_t B,
                      std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t p, char* message,
                      std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "patchify");
  std::int64_t total = 0, image_total = 0;
  PL_CUDA_TRY(check_patches(sink, "patchify", B, C, H, W, p, &total, &image_total));
  if (total == 0) return PL_CUDA_OK;
  PL_CUDA_TRY(check_pointer(sink, "patchify", "x", x));
  PL_CUDA_TRY(check_pointer(sink, "patchify", "patches", patches));
  const auto count = static_cast<std::size_t>(total);
  for_each_kernel<<<grid_for(count), kThreads, 0, ctx->stream>>>(
      count, Patchify{x, patches, C, H, W, p, H / p, W / p});
  PL_CUDA_CHECK_LAUNCH(sink, "patchify");
  return PL_CUDA_OK;
}

PlCudaStatus unpatchify(PlCudaContext* ctx, const float* patches, float* x, std::int64_t B,
                        std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t p, char* message,
                        std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "unpatchify");
  std::int64_t patch_total = 0, total = 0;
  PL_CUDA_TRY(check_patches(sink, "unpatchify", B, C, H, W, p, &patch_total, &total));
  if (total == 0) return PL_CUDA_OK;
  PL_CUDA_TRY(check_pointer(sink, "unpatchify", "x", x));
  if (patch_total > 0) PL_CUDA_TRY(check_pointer(sink, "unpatchify", "patches", patches));
  const auto count = static_cast<std::size_t>(total);
  for_each_kernel<<<grid_for(count), kThreads, 0, ctx->stream>>>(
      count, Unpatchify{patches, x, C, H, W, p, H / p, W / p});
  PL_CUDA_CHECK_LAUNCH(sink, "unpatchify");
  return PL_CUDA_OK;
}

PlCudaStatus bias_add_channels(PlCudaContext* ctx, float* y, const float* bias, std::int64_t n,
                               std::int64_t c, std::int64_t hw, char* message,
                               std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "bias_add_channels");
  PL_CUDA_TRY(check_count(sink, "bias_add_channels", "n", n));
  PL_CUDA_TRY(check_count(sink, "bias_add_channels", "c", c));
  PL_CUDA_TRY(check_count(sink, "bias_add_channels", "hw", hw));
  std::int64_t total = 0;
  PL_CUDA_TRY(check_product(sink, "bias_add_channels", "n * c * hw", {n, c, hw}, &total));
  if (total == 0) return PL_CUDA_OK;
  PL_CUDA_TRY(check_pointer(sink, "bias_add_channels", "y", y));
  PL_CUDA_TRY(check_pointer(sink, "bias_add_channels", "bias", bias));
  const auto count = static_cast<std::size_t>(total);
  for_each_kernel<<<grid_for(count), kThreads, 0, ctx->stream>>>(count, BiasAddChannels{y, bias, c, hw});
  PL_CUDA_CHECK_LAUNCH(sink, "bias_add_channels");
  return PL_CUDA_OK;
}

PlCudaStatus channel_sums(PlCudaContext* ctx, const float* dy, float* db, std::int64_t n,
                          std::int64_t c, std::int64_t hw, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "channel_sums");
  PL_CUDA_TRY(check_count(sink, "channel_sums", "n", n));
  PL_CUDA_TRY(check_count(sink, "channel_sums", "c", c));
  PL_CUDA_TRY(check_count(sink, "channel_sums", "hw", hw));
  std::int64_t total = 0;
  PL_CUDA_TRY(check_product(sink, "channel_sums", "n * c * hw", {n, c, hw}, &total));
  if (c == 0) return PL_CUDA_OK;
  PL_CUDA_TRY(check_pointer(sink, "channel_sums", "db", db));
  if (total == 0) {
    PL_CUDA_CHECK(sink, cudaMemsetAsync(db, 0, static_cast<std::size_t>(c) * sizeof(float), ctx->stream));
    return PL_CUDA_OK;
  }
  PL_CUDA_TRY(check_pointer(sink, "channel_sums", "dy", dy));
  if (c > 0x7fffffff) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "channel_sums: c %lld too large", static_cast<long long>(c));
  // Splits of at least kChannelSplitMin values, at most kMaxChannelSplits
  // per channel: a function of the shape only.
  const std::int64_t len = n * hw;
  const std::int64_t even = (len + kMaxChannelSplits - 1) / kMaxChannelSplits;
  const std::int64_t per = even > kChannelSplitMin ? even : kChannelSplitMin;
  const std::int64_t splits = (len + per - 1) / per;
  void* buffer = nullptr;
  PL_CUDA_TRY(scratch(ctx, static_cast<std::size_t>(splits * c) * sizeof(double), &buffer, sink));
  auto* partial = static_cast<double*>(buffer);
  channel_partials_kernel<<<dim3(static_cast<unsigned>(c), static_cast<unsigned>(splits)), kThreads, 0,
                            ctx->stream>>>(dy, c, hw, len, per, partial);
  PL_CUDA_CHECK_LAUNCH(sink, "channel_partials_kernel");
  column_final_kernel<1><<<grid_for(static_cast<std::size_t>(c)), kThreads, 0, ctx->stream>>>(
      c, splits, partial, StoreFloat{db});
  PL_CUDA_CHECK_LAUNCH(sink, "column_final_kernel");
  return PL_CUDA_OK;
}

}  // namespace pl_cuda
