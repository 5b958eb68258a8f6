// Row-wise ops and losses of the CUDA backend: LayerNorm, softmax,
// softmax cross-entropy and MSE. FP32 rows run one warp per row (fixed
// butterfly sums: deterministic, not the CPU's order); the FP16/BF16
// "accumulate" modes run one thread per row through ops_math.cuh's
// sequential loops, the CPU's operations in the CPU's order (bit-exact).
// Sums over rows (dgamma/dbeta, the mean losses) are in double, in a fixed
// order (ops.cuh).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/context.cuh"
#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/fp_convert.cuh"
#include "backend/cuda/ops.cuh"
#include "backend/cuda/ops_math.cuh"
#include "backend/cuda_module.h"

namespace pl_cuda {

namespace {

// ---- one warp per row ----
inline constexpr int kWarpsPerBlock = kThreads / 32;
unsigned row_grid(std::int64_t rows) {
  const std::int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 ? 65535 : blocks));
}
__device__ __forceinline__ std::int64_t first_row() {
  return static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
}
__device__ __forceinline__ std::int64_t row_stride() {
  return static_cast<std::int64_t>(gridDim.x) * kWarpsPerBlock;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, v, o);
    v = other > v ? other : v;
  }
  return v;
}

// LayerNorm in f32: two passes (mean, then squared deviations), eps inside
// the square root; y = (x - mean) * rstd * gamma + beta, the CPU's
// operations (no FMA). y may alias x: each lane writes only what it read.
__global__ void __launch_bounds__(kThreads)
    layernorm_f32_kernel(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                         float* rstd, std::int64_t rows, std::int64_t cols, float eps) {
  const std::int64_t lane = threadIdx.x & 31;
  const float n = static_cast<float>(cols);
  for (std::int64_t i = first_row(); i < rows; i += row_stride()) {
    const float* xr = x + i * cols;
    float* yr = y + i * cols;
    float s = 0.0f;
    for (std::int64_t j = lane; j < cols; j += 32) s += xr[j];
    const float mu = div_rn(warp_sum(s), n);
    float v = 0.0f;
    for (std::int64_t j = lane; j < cols; j += 32) {
      const float d = sub_rn(xr[j], mu);
      v = add_rn(v, mul_rn(d, d));
    }
    const float r = div_rn(1.0f, sqrt_rn(add_rn(div_rn(warp_sum(v), n), eps)));
    for (std::int64_t j = lane; j < cols; j += 32)
      yr[j] = add_rn(mul_rn(mul_rn(sub_rn(xr[j], mu), r), gamma ? gamma[j] : 1.0f), beta ? beta[j] : 0.0f);
    if (lane == 0) {
      if (mean) mean[i] = mu;
      if (rstd) rstd[i] = r;
    }
  }
}

// LayerNorm computed in format f, one thread per row (sequential, as the CPU).
__global__ void layernorm_lowp_kernel(PlCudaFormat f, const float* x, const float* gamma, const float* beta,
                                      float* y, float* mean, float* rstd, std::int64_t rows, std::int64_t cols,
                                      float eps) {
  for (std::size_t t = thread_index(); t < static_cast<std::size_t>(rows); t += thread_stride()) {
    const auto i = static_cast<std::int64_t>(t);
    float mu = 0.0f, r = 0.0f;
    layernorm_row_lowp(f, x + i * cols, gamma, beta, y + i * cols, cols, eps, &mu, &r);
    if (mean) mean[i] = mu;
    if (rstd) rstd[i] = r;
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma, the
// sums in f32 (as the CPU). dx may alias dy.
__global__ void __launch_bounds__(kThreads)
    layernorm_dx_kernel(const float* dy, const float* x, const float* mean, const float* rstd,
                        const float* gamma, float* dx, std::int64_t rows, std::int64_t cols) {
  const std::int64_t lane = threadIdx.x & 31;
  const float inv_n = div_rn(1.0f, static_cast<float>(cols));
  for (std::int64_t i = first_row(); i < rows; i += row_stride()) {
    const float* xr = x + i * cols;
    const float* dyr = dy + i * cols;
    float* dxr = dx + i * cols;
    const float mu = mean[i], r = rstd[i];
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (std::int64_t j = lane; j < cols; j += 32) {
      const float g = mul_rn(dyr[j], gamma ? gamma[j] : 1.0f);
      sum_g += g;
      sum_gx = add_rn(sum_gx, mul_rn(g, mul_rn(sub_rn(xr[j], mu), r)));
    }
    const float a = mul_rn(warp_sum(sum_g), inv_n), b = mul_rn(warp_sum(sum_gx), inv_n);
    for (std::int64_t j = lane; j < cols; j += 32) {
      const float g = mul_rn(dyr[j], gamma ? gamma[j] : 1.0f);
      const float xhat = mul_rn(sub_rn(xr[j], mu), r);
      dxr[j] = mul_rn(r, sub_rn(sub_rn(g, a), mul_rn(xhat, b)));
    }
  }
}

// dgamma[j] = sum_i dy * xhat (xhat in f32, the product in double), dbeta[j]
// = sum_i dy; overwritten, either may be null.
struct LayerNormParamLoad {
  const float* dy;
  const float* x;
  const float* mean;
  const float* rstd;
  std::int64_t cols;
  __device__ void operator()(std::int64_t i, std::int64_t j, double* acc) const {
    const std::int64_t k = i * cols + j;
    const float xhat = mul_rn(sub_rn(x[k], mean[i]), rstd[i]);
    acc[0] += static_cast<double>(dy[k]) * static_cast<double>(xhat);
    acc[1] += dy[k];
  }
};
struct LayerNormParamStore {
  float* dgamma;
  float* dbeta;
  __device__ void operator()(std::int64_t j, const double* s) const {
    if (dgamma) dgamma[j] = static_cast<float>(s[0]);
    if (dbeta) dbeta[j] = static_cast<float>(s[1]);
  }
};

// Softmax in f32: the maximum (NaN skipped, so a NaN makes the row NaN
// through the sum) subtracted, e = exp(x - max) into y, then y / sum.
__global__ void __launch_bounds__(kThreads)
    softmax_f32_kernel(const float* x, float* y, std::int64_t rows, std::int64_t cols) {
  const std::int64_t lane = threadIdx.x & 31;
  for (std::int64_t i = first_row(); i < rows; i += row_stride()) {
    const float* xr = x + i * cols;
    float* yr = y + i * cols;
    float m = f32_from_bits(0xff800000u);  // -inf
    for (std::int64_t j = lane; j < cols; j += 32) m = xr[j] > m ? xr[j] : m;
    m = warp_max(m);
    float s = 0.0f;
    for (std::int64_t j = lane; j < cols; j += 32) {
      const float e = expf(sub_rn(xr[j], m));
      yr[j] = e;
      s += e;
    }
    s = warp_sum(s);
    for (std::int64_t j = lane; j < cols; j += 32) yr[j] = div_rn(yr[j], s);
  }
}

__global__ void softmax_lowp_kernel(PlCudaFormat f, const float* x, float* y, std::int64_t rows,
                                    std::int64_t cols) {
  for (std::size_t t = thread_index(); t < static_cast<std::size_t>(rows); t += thread_stride()) {
    const auto i = static_cast<std::int64_t>(t);
    softmax_row_lowp(f, x + i * cols, y + i * cols, cols);
  }
}

// dx = y * (dy - sum(dy * y)) per row; dx may alias dy.
__global__ void __launch_bounds__(kThreads)
    softmax_backward_kernel(const float* y, const float* dy, float* dx, std::int64_t rows, std::int64_t cols) {
  const std::int64_t lane = threadIdx.x & 31;
  for (std::int64_t i = first_row(); i < rows; i += row_stride()) {
    const float* yr = y + i * cols;
    const float* dyr = dy + i * cols;
    float* dxr = dx + i * cols;
    float dot = 0.0f;
    for (std::int64_t j = lane; j < cols; j += 32) dot = add_rn(dot, mul_rn(dyr[j], yr[j]));
    dot = warp_sum(dot);
    for (std::int64_t j = lane; j < cols; j += 32) dxr[j] = mul_rn(yr[j], sub_rn(dyr[j], dot));
  }
}

// Softmax cross-entropy, one warp per row: the CPU's argmax (ops_math.cuh),
// log-softmax with the maximum subtracted in double, probs written, the
// row's loss into row_loss[i] (NaN for a label outside [0, classes)), and
// *correct += 1 where the argmax is the label.
__global__ void __launch_bounds__(kThreads)
    cross_entropy_kernel(const float* logits, const std::int32_t* labels, std::int64_t rows,
                         std::int64_t classes, float* probs, double* row_loss,
                         unsigned long long* correct) {
  const std::int64_t lane = threadIdx.x & 31;
  for (std::int64_t i = first_row(); i < rows; i += row_stride()) {
    const float* z = logits + i * classes;
    float* p = probs + i * classes;
    ArgMax best{0.0f, -1};
    for (std::int64_t j = lane; j < classes; j += 32)
      if (!is_nan(z[j])) best = argmax_take(best, ArgMax{z[j], j});
    for (int o = 16; o > 0; o >>= 1) {
      const ArgMax other{__shfl_xor_sync(0xffffffffu, best.value, o),
                         static_cast<std::int64_t>(__shfl_xor_sync(0xffffffffu, static_cast<long long>(best.index), o))};
      best = argmax_take(best, other);
    }
    // z[0] NaN: the CPU's running maximum starts there and stays NaN.
    const float z0 = z[0];
    const float m = is_nan(z0) ? z0 : best.value;
    const std::int64_t arg = is_nan(z0) ? 0 : best.index;
    const double md = m;
    double s = 0.0;
    for (std::int64_t j = lane; j < classes; j += 32) s += exp(static_cast<double>(z[j]) - md);
    const double log_s = log(warp_sum(s));
    for (std::int64_t j = lane; j < classes; j += 32)
      p[j] = static_cast<float>(exp(static_cast<double>(z[j]) - md - log_s));
    if (lane == 0) {
      const std::int32_t label = labels[i];
      double loss = __longlong_as_double(0x7ff8000000000000ll);  // NaN: a data error
      if (label >= 0 && label < classes) {
        loss = -(static_cast<double>(z[label]) - md - log_s);
        if (correct && arg == label) atomicAdd(correct, 1ull);
      }
      row_loss[i] = loss;
    }
  }
}

struct DoubleLoad {
  const double* v;
  __device__ void operator()(std::size_t i, double* acc) const { acc[0] += v[i]; }
};
struct SquaredErrorLoad {
  const float* pred;
  const float* target;
  __device__ void operator()(std::size_t i, double* acc) const {
    const double d = static_cast<double>(pred[i]) - static_cast<double>(target[i]);
    acc[0] += d * d;
  }
};
// *out = sum / count (the mean losses, overwritten).
struct MeanStore {
  double* out;
  double count;
  __device__ void operator()(const double* s) const { *out = s[0] / count; }
};

// The loss scale's factor: f, or with a step state (ABI 6) the state's
// loss scale * num / den as the host rounds it, read when the work runs.
__device__ __forceinline__ float scale_factor(float f, const PlCudaScaleState* state, float num, float den) {
  return state ? __fdiv_rn(__fmul_rn(num, state->loss_scale), den) : f;
}
struct CrossEntropyBackward {
  const float* probs;
  const std::int32_t* labels;
  std::int64_t classes;
  float f;
  float* dlogits;
  const PlCudaScaleState* state;
  float rows;
  __device__ void operator()(std::size_t idx) const {
    const auto k = static_cast<std::int64_t>(idx);
    const std::int64_t i = k / classes, j = k - i * classes;
    const float g = scale_factor(f, state, 1.0f, rows);
    dlogits[idx] = mul_rn(sub_rn(probs[idx], j == labels[i] ? 1.0f : 0.0f), g);
  }
};
struct MseBackward {
  const float* pred;
  const float* target;
  float f;
  float* dpred;
  const PlCudaScaleState* state;
  float n;
  __device__ void operator()(std::size_t i) const {
    dpred[i] = mul_rn(sub_rn(pred[i], target[i]), scale_factor(f, state, 2.0f, n));
  }
};

}  // namespace

PlCudaStatus layernorm_forward(PlCudaContext* ctx, const float* x, const float* gamma,
                               const float* beta, float* y, float* mean, float* rstd,
                               std::int64_t rows, std::int64_t cols, float eps,
                               PlCudaFormat accumulate, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "layernorm_forward");
  if (element_bytes(accumulate) == 0)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "layernorm_forward: unknown accumulate format %d",
                static_cast<int>(accumulate));
  PL_CUDA_TRY(check_count(sink, "layernorm_forward", "rows", rows));
  PL_CUDA_TRY(check_count(sink, "layernorm_forward", "cols", cols));
  std::int64_t total = 0;
  PL_CUDA_TRY(check_product(sink, "layernorm_forward", "rows * cols", {rows, cols}, &total));
  if (rows == 0) return PL_CUDA_OK;
  if (cols > 0) {
    PL_CUDA_TRY(check_pointer(sink, "layernorm_forward", "x", x));
    PL_CUDA_TRY(check_pointer(sink, "layernorm_forward", "y", y));
  }
  // FP32: sums in f32; any other format: the CPU's emulation in that format.
  if (accumulate == PL_CUDA_FP32) {
    layernorm_f32_kernel<<<row_grid(rows), kThreads, 0, ctx->stream>>>(x, gamma, beta, y, mean, rstd, rows,
                                                                         cols, eps);
    PL_CUDA_CHECK_LAUNCH(sink, "layernorm_f32_kernel");
  } else {
    layernorm_lowp_kernel<<<grid_for(static_cast<std::size_t>(rows)), kThreads, 0, ctx->stream>>>(
        accumulate, x, gamma, beta, y, mean, rstd, rows, cols, eps);
    PL_CUDA_CHECK_LAUNCH(sink, "layernorm_lowp_kernel");
  }
  return PL_CUDA_OK;
}

PlCudaStatus layernorm_backward(PlCudaContext* ctx, const float* dy, const float* x,
                                const float* mean, const float* rstd, const float* gamma, float* dx,
                                float* dgamma, float* dbeta, std::int64_t rows, std::int64_t cols,
                                char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "layernorm_backward");
  PL_CUDA_TRY(check_count(sink, "layernorm_backward", "rows", rows));
  PL_CUDA_TRY(check_count(sink, "layernorm_backward", "cols", cols));
  std::int64_t total = 0;
  PL_CUDA_TRY(check_product(sink, "layernorm_backward", "rows * cols", {rows, cols}, &total));
  if (total == 0) {
    // No rows: the parameter gradients are empty sums.
    const std::size_t bytes = static_cast<std::size_t>(cols) * sizeof(float);
    if (bytes && dgamma) PL_CUDA_CHECK(sink, cudaMemsetAsync(dgamma, 0, bytes, ctx->stream));
    if (bytes && dbeta) PL_CUDA_CHECK(sink, cudaMemsetAsync(dbeta, 0, bytes, ctx->stream));
    return PL_CUDA_OK;
  }
  if (!dx && !dgamma && !dbeta) return PL_CUDA_OK;
  PL_CUDA_TRY(check_pointer(sink, "layernorm_backward", "dy", dy));
  PL_CUDA_TRY(check_pointer(sink, "layernorm_backward", "x", x));
  PL_CUDA_TRY(check_pointer(sink, "layernorm_backward", "mean", mean));
  PL_CUDA_TRY(check_pointer(sink, "layernorm_backward", "rstd", rstd));
  // dgamma/dbeta first: they read dy, which dx may overwrite.
  if (dgamma || dbeta)
    PL_CUDA_TRY(launch_column_sums<2>(ctx, rows, cols, LayerNormParamLoad{dy, x, mean, rstd, cols},
                                      LayerNormParamStore{dgamma, dbeta}, sink));
  if (dx) {
    layernorm_dx_kernel<<<row_grid(rows), kThreads, 0, ctx->stream>>>(dy, x, mean, rstd, gamma, dx, rows, cols);
    PL_CUDA_CHECK_LAUNCH(sink, "layernorm_dx_kernel");
  }
  return PL_CUDA_OK;
}

PlCudaStatus softmax_forward(PlCudaContext* ctx, const float* x, float* y, std::int64_t rows,
                             std::int64_t cols, PlCudaFormat accumulate, char* message,
                             std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "softmax_forward");
  if (element_bytes(accumulate) == 0)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "softmax_forward: unknown accumulate format %d",
                static_cast<int>(accumulate));
  PL_CUDA_TRY(check_count(sink, "softmax_forward", "rows", rows));
  PL_CUDA_TRY(check_count(sink, "softmax_forward", "cols", cols));
  std::int64_t total = 0;
  PL_CUDA_TRY(check_product(sink, "softmax_forward", "rows * cols", {rows, cols}, &total));
  if (total == 0) return PL_CUDA_OK;
  PL_CUDA_TRY(check_pointer(sink, "softmax_forward", "x", x));
  PL_CUDA_TRY(check_pointer(sink, "softmax_forward", "y", y));
  if (accumulate == PL_CUDA_FP32) {
    softmax_f32_kernel<<<row_grid(rows), kThreads, 0, ctx->stream>>>(x, y, rows, cols);
    PL_CUDA_CHECK_LAUNCH(sink, "softmax_f32_kernel");
  } else {
    softmax_lowp_kernel<<<grid_for(static_cast<std::size_t>(rows)), kThreads, 0, ctx->stream>>>(accumulate, x, y,
                                                                                               rows, cols);
    PL_CUDA_CHECK_LAUNCH(sink, "softmax_lowp_kernel");
  }
  return PL_CUDA_OK;
}

PlCudaStatus softmax_backward(PlCudaContext* ctx, const float* y, const float* dy, float* dx,
                              std::int64_t rows, std::int64_t cols, char* message,
                              std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "softmax_backward");
  PL_CUDA_TRY(check_count(sink, "softmax_backward", "rows", rows));
  PL_CUDA_TRY(check_count(sink, "softmax_backward", "cols", cols));
  std::int64_t total = 0;
  PL_CUDA_TRY(check_product(sink, "softmax_backward", "rows * cols", {rows, cols}, &total));
  if (total == 0) return PL_CUDA_OK;
  PL_CUDA_TRY(check_pointer(sink, "softmax_backward", "y", y));
  PL_CUDA_TRY(check_pointer(sink, "softmax_backward", "dy", dy));
  PL_CUDA_TRY(check_pointer(sink, "softmax_backward", "dx", dx));
  softmax_backward_kernel<<<row_grid(rows), kThreads, 0, ctx->stream>>>(y, dy, dx, rows, cols);
  PL_CUDA_CHECK_LAUNCH(sink, "softmax_backward_kernel");
  return PL_CUDA_OK;
}

PlCudaStatus cross_entropy_forward(PlCudaContext* ctx, const float* logits,
                                   const std::int32_t* labels, std::int64_t rows,
                                   std::int64_t classes, float* probs, double* loss,
                                   std::int64_t* correct, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "cross_entropy_forward");
  PL_CUDA_TRY(check_count(sink, "cross_entropy_forward", "rows", rows));
  PL_CUDA_TRY(check_count(sink, "cross_entropy_forward", "classes", classes));
  std::int64_t total = 0;
  PL_CUDA_TRY(check_product(sink, "cross_entropy_forward", "rows * classes", {rows, classes}, &total));
  PL_CUDA_TRY(check_pointer(sink, "cross_entropy_forward", "loss", loss));
  // *loss and *correct are overwritten (0 without rows), as on the CPU.
  if (correct) PL_CUDA_CHECK(sink, cudaMemsetAsync(correct, 0, sizeof(std::int64_t), ctx->stream));
  if (rows == 0) {
    PL_CUDA_CHECK(sink, cudaMemsetAsync(loss, 0, sizeof(double), ctx->stream));
    return PL_CUDA_OK;
  }
  if (classes == 0) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "cross_entropy_forward: no classes");
  PL_CUDA_TRY(check_pointer(sink, "cross_entropy_forward", "logits", logits));
  PL_CUDA_TRY(check_pointer(sink, "cross_entropy_forward", "labels", labels));
  PL_CUDA_TRY(check_pointer(sink, "cross_entropy_forward", "probs", probs));
  // Scratch: the rows' losses, then the partial sums over them.
  const auto count = static_cast<std::size_t>(rows);
  void* buffer = nullptr;
  PL_CUDA_TRY(scratch(ctx, (count + sum_blocks(count)) * sizeof(double), &buffer, sink));
  auto* row_loss = static_cast<double*>(buffer);
  cross_entropy_kernel<<<row_grid(rows), kThreads, 0, ctx->stream>>>(
      logits, labels, rows, classes, probs, row_loss, reinterpret_cast<unsigned long long*>(correct));
  PL_CUDA_CHECK_LAUNCH(sink, "cross_entropy_kernel");
  return launch_sum<1>(ctx, count, DoubleLoad{row_loss}, MeanStore{loss, static_cast<double>(rows)},
                       row_loss + count, sink);
}

PlCudaStatus cross_entropy_backward(PlCudaContext* ctx, const float* probs,
                                    const std::int32_t* labels, std::int64_t rows,
                                    std::int64_t classes, float scale, float* dlogits,
                                    char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "cross_entropy_backward");
  PL_CUDA_TRY(check_count(sink, "cross_entropy_backward", "rows", rows));
  PL_CUDA_TRY(check_count(sink, "cross_entropy_backward", "classes", classes));
  std::int64_t total = 0;
  PL_CUDA_TRY(check_product(sink, "cross_entropy_backward", "rows * classes", {rows, classes}, &total));
  if (total == 0) return PL_CUDA_OK;
  PL_CUDA_TRY(check_pointer(sink, "cross_entropy_backward", "probs", probs));
  PL_CUDA_TRY(check_pointer(sink, "cross_entropy_backward", "labels", labels));
  PL_CUDA_TRY(check_pointer(sink, "cross_entropy_backward", "dlogits", dlogits));
  // (p - onehot) * (scale / rows), the factor rounded once as on the CPU.
  const float f = scale / static_cast<float>(rows);
  const auto count = static_cast<std::size_t>(total);
  for_each_kernel<<<grid_for(count), kThreads, 0, ctx->stream>>>(
      count, CrossEntropyBackward{probs, labels, classes, f, dlogits, ctx->step_state, static_cast<float>(rows)});
  PL_CUDA_CHECK_LAUNCH(sink, "cross_entropy_backward");
  return PL_CUDA_OK;
}

PlCudaStatus mse_forward(PlCudaContext* ctx, const float* pred, const float* target, std::int64_t n,
                         double* loss, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "mse_forward");
  PL_CUDA_TRY(check_count(sink, "mse_forward", "n", n));
  PL_CUDA_TRY(check_pointer(sink, "mse_forward", "loss", loss));
  if (n == 0) {
    PL_CUDA_CHECK(sink, cudaMemsetAsync(loss, 0, sizeof(double), ctx->stream));
    return PL_CUDA_OK;
  }
  PL_CUDA_TRY(check_pointer(sink, "mse_forward", "pred", pred));
  PL_CUDA_TRY(check_pointer(sink, "mse_forward", "target", target));
  const auto count = static_cast<std::size_t>(n);
  void* buffer = nullptr;
  PL_CUDA_TRY(scratch(ctx, sum_blocks(count) * sizeof(double), &buffer, sink));
  return launch_sum<1>(ctx, count, SquaredErrorLoad{pred, target}, MeanStore{loss, static_cast<double>(n)},
                       static_cast<double*>(buffer), sink);
}

PlCudaStatus mse_backward(PlCudaContext* ctx, const float* pred, const float* target,
                          std::int64_t n, float scale, float* dpred, char* message,
                          std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "mse_backward");
  PL_CUDA_TRY(check_count(sink, "mse_backward", "n", n));
  if (n == 0) return PL_CUDA_OK;
  PL_CUDA_TRY(check_pointer(sink, "mse_backward", "pred", pred));
  PL_CUDA_TRY(check_pointer(sink, "mse_backward", "target", target));
  PL_CUDA_TRY(check_pointer(sink, "mse_backward", "dpred", dpred));
  // 2 * scale / n, rounded as the CPU's expression.
  const float f = 2.0f * scale / static_cast<float>(n);
  const auto count = static_cast<std::size_t>(n);
  for_each_kernel<<<grid_for(count), kThreads, 0, ctx->stream>>>(
      count, MseBackward{pred, target, f, dpred, ctx->step_state, static_cast<float>(n)});
  PL_CUDA_CHECK_LAUNCH(sink, "mse_backward");
  return PL_CUDA_OK;
}

}  // namespace pl_cuda
