// Memory entries of the CUDA module: stream-ordered allocation from the
// context's pool, host <-> device transfers, device copies and zero fills,
// and the pool's live bytes (the memory chart's device line).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "backend/cuda/context.cuh"
#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda_module.h"

namespace pl_cuda {

PlCudaStatus allocate(PlCudaContext* ctx, std::size_t bytes, void** out, char* message,
                      std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "allocate");
  PL_CUDA_TRY(refuse_in_capture(ctx, "allocate", sink));
  if (!out) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "allocate: out is null");
  *out = nullptr;
  if (bytes == 0) return PL_CUDA_OK;
  if (bytes > SIZE_MAX - kAlignment)
    return fail(sink, PL_CUDA_OUT_OF_MEMORY, "allocate: %zu bytes is beyond any device", bytes);
  const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = nullptr;
  const cudaError_t e = ctx->pool ? cudaMallocFromPoolAsync(&p, rounded, ctx->pool, ctx->stream)
                                  : cudaMalloc(&p, rounded);
  if (e != cudaSuccess) {
    char what[96];
    std::snprintf(what, sizeof what, "%s of %zu bytes",
                  ctx->pool ? "cudaMallocFromPoolAsync" : "cudaMalloc", rounded);
    return report(e, what, __FILE__, __LINE__, sink);
  }
  // cudaMalloc guarantees 256 bytes; the pool's granularity is larger in
  // practice, but the ABI promises it, so check rather than assume.
  if (reinterpret_cast<std::uintptr_t>(p) % kAlignment != 0) {
    if (ctx->pool) cudaFreeAsync(p, ctx->stream); else cudaFree(p);
    return fail(sink, PL_CUDA_ERROR, "allocate: the allocator returned %p, not %zu-byte aligned", p,
                kAlignment);
  }
  *out = p;
  return PL_CUDA_OK;
}

PlCudaStatus release(PlCudaContext* ctx, void* ptr, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "release");
  PL_CUDA_TRY(refuse_in_capture(ctx, "release", sink));
  if (!ptr) return PL_CUDA_OK;
  if (ctx->pool)
    PL_CUDA_CHECK(sink, cudaFreeAsync(ptr, ctx->stream));
  else
    PL_CUDA_CHECK(sink, cudaFree(ptr));
  return PL_CUDA_OK;
}

PlCudaStatus upload(PlCudaContext* ctx, void* dst, const void* host_src, std::size_t bytes,
                    char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "upload");
  if (bytes == 0) return PL_CUDA_OK;
  if (!dst || !host_src) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "upload: null buffer");
  if (ctx->capturing) {
    // A captured copy reads its source when the graph runs: only
    // page-locked memory (host_allocate) the host refills before each launch.
    cudaPointerAttributes a{};
    PL_CUDA_CHECK(sink, cudaPointerGetAttributes(&a, host_src));
    if (a.type != cudaMemoryTypeHost)
      return fail(sink, PL_CUDA_INVALID_ARGUMENT,
                  "upload: during a capture the source must be host_allocate memory (a graph reads it at each launch)");
    PL_CUDA_CHECK(sink, cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, ctx->stream));
    return PL_CUDA_OK;
  }
  PL_CUDA_CHECK(sink, cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, ctx->stream));
  // From pageable memory the runtime has staged the data when the call
  // returns; from page-locked memory the copy is truly asynchronous, so
  // wait for it: the caller may reuse its buffer either way.
  cudaPointerAttributes attributes{};
  PL_CUDA_CHECK(sink, cudaPointerGetAttributes(&attributes, host_src));
  if (attributes.type != cudaMemoryTypeUnregistered)
    PL_CUDA_CHECK(sink, cudaStreamSynchronize(ctx->stream));
  return PL_CUDA_OK;
}

PlCudaStatus download(PlCudaContext* ctx, void* host_dst, const void* src, std::size_t bytes,
                      char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "download");
  PL_CUDA_TRY(refuse_in_capture(ctx, "download", sink));
  if (bytes > 0 && (!host_dst || !src))
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "download: null buffer");
  if (bytes > 0)
    PL_CUDA_CHECK(sink, cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, ctx->stream));
  // The read of the step: waits for everything queued before it and
  // reports the first error of that work (even for bytes == 0).
  PL_CUDA_CHECK(sink, cudaStreamSynchronize(ctx->stream));
  return PL_CUDA_OK;
}

PlCudaStatus copy(PlCudaContext* ctx, void* dst, const void* src, std::size_t bytes, char* message,
                  std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "copy");
  if (bytes == 0) return PL_CUDA_OK;
  if (!dst || !src) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "copy: null buffer");
  PL_CUDA_CHECK(sink, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
  return PL_CUDA_OK;
}

PlCudaStatus fill_zero(PlCudaContext* ctx, void* dst, std::size_t bytes, char* message,
                       std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "fill_zero");
  if (bytes == 0) return PL_CUDA_OK;
  if (!dst) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "fill_zero: null buffer");
  PL_CUDA_CHECK(sink, cudaMemsetAsync(dst, 0, bytes, ctx->stream));
  return PL_CUDA_OK;
}

PlCudaStatus memory_allocated(PlCudaContext* ctx, std::uint64_t* live_bytes, char* message,
                              std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "memory_allocated");
  if (!live_bytes) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "memory_allocated: live_bytes is null");
  *live_bytes = UINT64_MAX;
  if (!ctx->pool) return PL_CUDA_OK;  // cudaMalloc keeps no count
  // Used, not reserved: memory released to the pool stays reserved (the
  // release threshold keeps it cached) but is no longer the recipe's.
  std::uint64_t used = 0;
  PL_CUDA_CHECK(sink, cudaMemPoolGetAttribute(ctx->pool, cudaMemPoolAttrUsedMemCurrent, &used));
  *live_bytes = static_cast<std::uint64_t>(used);
  return PL_CUDA_OK;
}

// ---- ABI 6: pinned host memory and the asynchronous read ----

PlCudaStatus host_allocate(PlCudaContext* ctx, std::size_t bytes, void** out, char* message,
                           std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "host_allocate");
  PL_CUDA_TRY(refuse_in_capture(ctx, "host_allocate", sink));
  if (!out) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "host_allocate: out is null");
  *out = nullptr;
  if (bytes == 0) return PL_CUDA_OK;
  PL_CUDA_CHECK(sink, cudaHostAlloc(out, bytes, cudaHostAllocDefault));
  return PL_CUDA_OK;
}

PlCudaStatus host_release(PlCudaContext* ctx, void* ptr, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "host_release");
  PL_CUDA_TRY(refuse_in_capture(ctx, "host_release", sink));
  if (!ptr) return PL_CUDA_OK;
  // Queued copies may still read or write it.
  PL_CUDA_CHECK(sink, cudaStreamSynchronize(ctx->stream));
  PL_CUDA_CHECK(sink, cudaFreeHost(ptr));
  return PL_CUDA_OK;
}

PlCudaStatus download_async(PlCudaContext* ctx, void* host_dst, const void* src, std::size_t bytes,
                            char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "download_async");
  if (bytes == 0) return PL_CUDA_OK;
  if (!host_dst || !src) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "download_async: null buffer");
  cudaPointerAttributes a{};
  PL_CUDA_CHECK(sink, cudaPointerGetAttributes(&a, host_dst));
  if (a.type != cudaMemoryTypeHost)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "download_async: the destination must be host_allocate memory");
  PL_CUDA_CHECK(sink, cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, ctx->stream));
  return PL_CUDA_OK;
}

}  // namespace pl_cuda
