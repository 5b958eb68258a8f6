// Devices and contexts of the CUDA module: device count and properties,
// create/destroy a context (device + stream + memory pool), synchronize,
// memory info.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>

#include "backend/cuda/context.cuh"
#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda_module.h"

namespace pl_cuda {

namespace {

// Frees what a context holds (stream after its work, pool, the struct);
// reports the first failure but always finishes the teardown.
PlCudaStatus teardown(PlCudaContext* ctx, ErrorSink sink) {
  PlCudaStatus status = PL_CUDA_OK;
  auto note = [&](cudaError_t e, const char* expression, int line) {
    if (e != cudaSuccess && status == PL_CUDA_OK) status = report(e, expression, __FILE__, line, sink);
  };
  if (ctx->capturing) {  // an abandoned capture: end it so the stream can be used
    cudaGraph_t g = nullptr;
    cudaStreamEndCapture(ctx->stream, &g);
    if (g) cudaGraphDestroy(g);
    ctx->capturing = false;
  }
  if (ctx->stream) note(cudaStreamSynchronize(ctx->stream), "cudaStreamSynchronize(ctx->stream)", __LINE__);
  for (void* p : ctx->keep) cudaFree(p);
  ctx->keep.clear();
  destroy_marks(ctx);
  destroy_gemm_state(ctx);
  destroy_conv_state(ctx);
  if (ctx->scratch) {
    if (ctx->pool) note(cudaFreeAsync(ctx->scratch, ctx->stream), "cudaFreeAsync(ctx->scratch)", __LINE__);
    else note(cudaFree(ctx->scratch), "cudaFree(ctx->scratch)", __LINE__);
    if (ctx->stream) note(cudaStreamSynchronize(ctx->stream), "cudaStreamSynchronize(ctx->stream)", __LINE__);
  }
  // With allocations still outstanding the pool goes once they are freed
  // (cudaMemPoolDestroy's contract); its cached memory goes now.
  if (ctx->pool) note(cudaMemPoolDestroy(ctx->pool), "cudaMemPoolDestroy(ctx->pool)", __LINE__);
  if (ctx->stream) note(cudaStreamDestroy(ctx->stream), "cudaStreamDestroy(ctx->stream)", __LINE__);
  delete ctx;
  return status;
}

}  // namespace

PlCudaStatus device_count(int* count, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  clear(sink);
  if (!count) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "device_count: count is null");
  *count = 0;
  // Without a driver (or with one older than the runtime) this is where the
  // runtime says so: cudaErrorInsufficientDriver, cudaErrorNoDevice, ...
  int n = 0;
  PL_CUDA_CHECK(sink, cudaGetDeviceCount(&n));
  *count = n;
  if (n == 0) return fail(sink, PL_CUDA_NO_DEVICE, "cudaGetDeviceCount found 0 devices");
  return PL_CUDA_OK;
}

PlCudaStatus device_properties(int device, PlCudaDeviceProperties* props, char* message,
                               std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  clear(sink);
  if (!props) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "device_properties: props is null");
  std::memset(props, 0, sizeof *props);
  PL_CUDA_TRY(check_device_index(device, sink));

  cudaDeviceProp p{};
  PL_CUDA_CHECK(sink, cudaGetDeviceProperties(&p, device));
  std::snprintf(props->name, sizeof props->name, "%s", p.name);
  props->compute_major = p.major;
  props->compute_minor = p.minor;
  props->sm_count = p.multiProcessorCount;

  // Free memory is per device and needs that device current.
  DeviceScope scope;
  PL_CUDA_CHECK(sink, scope.enter(device));
  std::size_t free_bytes = 0, total_bytes = 0;
  PL_CUDA_CHECK(sink, cudaMemGetInfo(&free_bytes, &total_bytes));
  props->memory_total = total_bytes;
  props->memory_free = free_bytes;
  return PL_CUDA_OK;
}

PlCudaStatus create_context(int device, PlCudaContext** out, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  clear(sink);
  if (!out) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "create_context: out is null");
  *out = nullptr;
  PL_CUDA_TRY(check_device_index(device, sink));
  DeviceScope scope;
  PL_CUDA_CHECK(sink, scope.enter(device));
  int pools = 0;
  PL_CUDA_CHECK(sink, cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device));

  int major = 0, minor = 0;
  PL_CUDA_CHECK(sink, cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  PL_CUDA_CHECK(sink, cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));

  auto* ctx = new (std::nothrow) PlCudaContext;
  if (!ctx) return fail(sink, PL_CUDA_OUT_OF_MEMORY, "create_context: out of host memory");
  ctx->device = device;
  ctx->compute_major = major;
  ctx->compute_minor = minor;
  // From here on a failure tears down what was made (its own errors aside:
  // the first failure is the one reported).
  auto undo = [ctx](PlCudaStatus s) {
    teardown(ctx, ErrorSink{nullptr, 0});
    return s;
  };
  cudaError_t e = cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking);
  if (e != cudaSuccess)
    return undo(report(e, "cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking)", __FILE__,
                       __LINE__, sink));
  if (pools) {
    // The context's own pool: memory released to it stays cached for the
    // next allocation (release threshold: never trim), and goes back to
    // the device when the context is destroyed.
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    e = cudaMemPoolCreate(&ctx->pool, &props);
    if (e != cudaSuccess)
      return undo(report(e, "cudaMemPoolCreate(&ctx->pool, &props)", __FILE__, __LINE__, sink));
    std::uint64_t threshold = UINT64_MAX;
    e = cudaMemPoolSetAttribute(ctx->pool, cudaMemPoolAttrReleaseThreshold, &threshold);
    if (e != cudaSuccess)
      return undo(report(e, "cudaMemPoolSetAttribute(ctx->pool, cudaMemPoolAttrReleaseThreshold, &threshold)",
                         __FILE__, __LINE__, sink));
  }
  *out = ctx;
  return PL_CUDA_OK;
}

PlCudaStatus destroy_context(PlCudaContext* ctx, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  clear(sink);
  if (!ctx) return PL_CUDA_OK;
  DeviceScope scope;
  if (const cudaError_t e = scope.enter(ctx->device); e != cudaSuccess) {
    const PlCudaStatus s = report(e, "scope.enter(ctx->device)", __FILE__, __LINE__, sink);
    teardown(ctx, ErrorSink{nullptr, 0});
    return s;
  }
  return teardown(ctx, sink);
}

PlCudaStatus scratch(PlCudaContext* ctx, std::size_t bytes, void** out, ErrorSink sink) {
  if (bytes <= ctx->scratch_bytes) {
    *out = ctx->scratch;
    return PL_CUDA_OK;
  }
  PL_CUDA_TRY(refuse_in_capture(ctx, "scratch growth", sink));
  const std::size_t grown = (std::max(bytes, 2 * ctx->scratch_bytes) + kAlignment - 1) / kAlignment * kAlignment;
  if (ctx->scratch) {
    if (ctx->pool) PL_CUDA_CHECK(sink, cudaFreeAsync(ctx->scratch, ctx->stream));
    else {
      PL_CUDA_CHECK(sink, cudaStreamSynchronize(ctx->stream));
      PL_CUDA_CHECK(sink, cudaFree(ctx->scratch));
    }
    ctx->scratch = nullptr;
    ctx->scratch_bytes = 0;
  }
  void* p = nullptr;
  if (ctx->pool) PL_CUDA_CHECK(sink, cudaMallocFromPoolAsync(&p, grown, ctx->pool, ctx->stream));
  else PL_CUDA_CHECK(sink, cudaMalloc(&p, grown));
  ctx->scratch = p;
  ctx->scratch_bytes = grown;
  *out = p;
  return PL_CUDA_OK;
}

PlCudaStatus synchronize(PlCudaContext* ctx, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "synchronize");
  PL_CUDA_TRY(refuse_in_capture(ctx, "synchronize", sink));
  PL_CUDA_CHECK(sink, cudaStreamSynchronize(ctx->stream));
  return PL_CUDA_OK;
}

PlCudaStatus memory_info(PlCudaContext* ctx, std::uint64_t* free_bytes, std::uint64_t* total_bytes,
                         char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "memory_info");
  if (!free_bytes || !total_bytes)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "memory_info: free_bytes or total_bytes is null");
  std::size_t f = 0, t = 0;
  PL_CUDA_CHECK(sink, cudaMemGetInfo(&f, &t));
  *free_bytes = f;
  *total_bytes = t;
  return PL_CUDA_OK;
}

}  // namespace pl_cuda
