// Max pooling of the CUDA backend: k x k windows with stride k and no
// padding, forward with the argmax (flat index in the image plane) saved
// for backward. The window rule is the CPU's (ops_math.cuh's
// maxpool_window: first maximum in row-major window order, a NaN wins and
// stays), so y and argmax equal the CPU's bit for bit.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/context.cuh"
#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/ops.cuh"
#include "backend/cuda/ops_math.cuh"
#include "backend/cuda_module.h"

namespace pl_cuda {

namespace {

// One thread per output (plane, oy, ox).
struct MaxPoolForward {
  const float* x;
  float* y;
  std::int32_t* argmax;
  std::int64_t h, w, k, oh, ow;
  __device__ void operator()(std::size_t o) const {
    const auto e = static_cast<std::int64_t>(o);
    const std::int64_t plane = e / (oh * ow), r = e - plane * (oh * ow);
    const std::int64_t oy = r / ow, ox = r - oy * ow;
    float best = 0.0f;
    std::int64_t index = 0;
    maxpool_window(x + plane * h * w, w, k, oy, ox, &best, &index);
    y[o] = best;
    argmax[o] = static_cast<std::int32_t>(index);
  }
};

// One thread per input pixel: dy of its window where the window's argmax
// is this pixel, else +0 (pixels outside every window included). Equal to
// the CPU's zero-then-scatter (0 + dy, so -0 becomes +0) for the argmax
// forward writes, which lies inside its own window; windows do not overlap,
// so no pixel receives two gradients.
struct MaxPoolBackward {
  const float* dy;
  const std::int32_t* argmax;
  float* dx;
  std::int64_t h, w, k, oh, ow;
  __device__ void operator()(std::size_t idx) const {
    const auto e = static_cast<std::int64_t>(idx);
    const std::int64_t plane = e / (h * w), i = e - plane * (h * w);
    const std::int64_t yy = i / w, xx = i - yy * w;
    const std::int64_t oy = yy / k, ox = xx / k;
    float v = 0.0f;
    if (oy < oh && ox < ow) {
      const std::int64_t o = (plane * oh + oy) * ow + ox;
      if (argmax[o] == i) v = add_rn(0.0f, dy[o]);
    }
    dx[idx] = v;
  }
};

// The checks both directions share; *input_total = n * c * h * w.
PlCudaStatus check_pool(ErrorSink sink, const char* fn, std::int64_t n, std::int64_t c, std::int64_t h,
                        std::int64_t w, std::int64_t k, std::int64_t* input_total) {
  PL_CUDA_TRY(check_count(sink, fn, "n", n));
  PL_CUDA_TRY(check_count(sink, fn, "c", c));
  PL_CUDA_TRY(check_count(sink, fn, "h", h));
  PL_CUDA_TRY(check_count(sink, fn, "w", w));
  if (k <= 0) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "%s: window %lld not positive", fn, static_cast<long long>(k));
  std::int64_t plane = 0;
  PL_CUDA_TRY(check_product(sink, fn, "h * w", {h, w}, &plane));
  // argmax holds flat indices within the plane as int32.
  if (plane > 0x7fffffff)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "%s: plane of %lld pixels exceeds int32 indices", fn,
                static_cast<long long>(plane));
  return check_product(sink, fn, "n * c * h * w", {n, c, h, w}, input_total);
}

}  // namespace

PlCudaStatus maxpool2d_forward(PlCudaContext* ctx, std::int64_t n, std::int64_t c, std::int64_t h,
                               std::int64_t w, std::int64_t k, const float* x, float* y,
                               std::int32_t* argmax, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "maxpool2d_forward");
  std::int64_t input_total = 0;
  PL_CUDA_TRY(check_pool(sink, "maxpool2d_forward", n, c, h, w, k, &input_total));
  const std::int64_t oh = h / k, ow = w / k;
  const std::int64_t total = n * c * oh * ow;
  if (total == 0) return PL_CUDA_OK;
  PL_CUDA_TRY(check_pointer(sink, "maxpool2d_forward", "x", x));
  PL_CUDA_TRY(check_pointer(sink, "maxpool2d_forward", "y", y));
  PL_CUDA_TRY(check_pointer(sink, "maxpool2d_forward", "argmax", argmax));
  const auto count = static_cast<std::size_t>(total);
  for_each_kernel<<<grid_for(count), kThreads, 0, ctx->stream>>>(count,
                                                                  MaxPoolForward{x, y, argmax, h, w, k, oh, ow});
  PL_CUDA_CHECK_LAUNCH(sink, "maxpool2d_forward");
  return PL_CUDA_OK;
}

PlCudaStatus maxpool2d_backward(PlCudaContext* ctx, std::int64_t n, std::int64_t c, std::int64_t h,
                                std::int64_t w, std::int64_t k, const float* dy,
                                const std::int32_t* argmax, float* dx, char* message,
                                std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "maxpool2d_backward");
  std::int64_t total = 0;
  PL_CUDA_TRY(check_pool(sink, "maxpool2d_backward", n, c, h, w, k, &total));
  if (total == 0) return PL_CUDA_OK;
  PL_CUDA_TRY(check_pointer(sink, "maxpool2d_backward", "dx", dx));
  const std::int64_t oh = h / k, ow = w / k;
  if (n * c * oh * ow > 0) {
    PL_CUDA_TRY(check_pointer(sink, "maxpool2d_backward", "dy", dy));
    PL_CUDA_TRY(check_pointer(sink, "maxpool2d_backward", "argmax", argmax));
  }
  const auto count = static_cast<std::size_t>(total);
  for_each_kernel<<<grid_for(count), kThreads, 0, ctx->stream>>>(count,
                                                                  MaxPoolBackward{dy, argmax, dx, h, w, k, oh, ow});
  PL_CUDA_CHECK_LAUNCH(sink, "maxpool2d_backward");
  return PL_CUDA_OK;
}

}  // namespace pl_cuda
