// Bulk casts FP32 <-> FP16/BF16/FP8 between host buffers: copy in, one
// grid-stride kernel, copy out. Bit-exact with engine/numeric/convert.h
// (the conversion rules live in fp_convert.cuh, shared with the tests).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/fp_convert.cuh"
#include "backend/cuda_module.h"

using pl_cuda::ErrorSink;

namespace {

// Elements per round trip: bounds device memory at 64 MiB of FP32 plus the
// narrow side, whatever n the caller passes.
constexpr std::size_t kChunk = std::size_t{1} << 24;
constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 1u << 16;

std::size_t element_bytes(PlCudaFormat f) {
  switch (f) {
    case PL_CUDA_FP16:
    case PL_CUDA_BF16:
      return 2;
    case PL_CUDA_E4M3:
    case PL_CUDA_E5M2:
      return 1;
  }
  return 0;
}

// The format is uniform across the grid, so the switch costs no divergence.
__global__ void cast_from_fp32_kernel(PlCudaFormat to, const float* __restrict__ src,
                                      void* __restrict__ dst, std::size_t n, bool saturate) {
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float x = src[i];
    switch (to) {
      case PL_CUDA_FP16: static_cast<std::uint16_t*>(dst)[i] = pl_cuda::fp32_to_fp16(x); break;
      case PL_CUDA_BF16: static_cast<std::uint16_t*>(dst)[i] = pl_cuda::fp32_to_bf16(x); break;
      case PL_CUDA_E4M3: static_cast<std::uint8_t*>(dst)[i] = pl_cuda::fp32_to_e4m3(x, saturate); break;
      case PL_CUDA_E5M2: static_cast<std::uint8_t*>(dst)[i] = pl_cuda::fp32_to_e5m2(x, saturate); break;
    }
  }
}

__global__ void cast_to_fp32_kernel(PlCudaFormat from, const void* __restrict__ src,
                                    float* __restrict__ dst, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    float y = 0.0f;
    switch (from) {
      case PL_CUDA_FP16: y = pl_cuda::fp16_to_fp32(static_cast<const std::uint16_t*>(src)[i]); break;
      case PL_CUDA_BF16: y = pl_cuda::bf16_to_fp32(static_cast<const std::uint16_t*>(src)[i]); break;
      case PL_CUDA_E4M3: y = pl_cuda::e4m3_to_fp32(static_cast<const std::uint8_t*>(src)[i]); break;
      case PL_CUDA_E5M2: y = pl_cuda::e5m2_to_fp32(static_cast<const std::uint8_t*>(src)[i]); break;
    }
    dst[i] = y;
  }
}

unsigned blocks_for(std::size_t n) {
  const std::size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::min<std::size_t>(blocks, kMaxBlocks));
}

// Checks shared by both directions.
PlCudaStatus check_args(const char* fn, int device, PlCudaFormat format, const void* src,
                        const void* dst, std::size_t n, ErrorSink sink) {
  if (element_bytes(format) == 0)
    return pl_cuda::fail(sink, PL_CUDA_INVALID_ARGUMENT, "%s: unknown format %d", fn,
                         static_cast<int>(format));
  if (n > 0 && (!src || !dst))
    return pl_cuda::fail(sink, PL_CUDA_INVALID_ARGUMENT, "%s: null buffer", fn);
  return pl_cuda::check_device_index(device, sink);
}

}  // namespace

// Synchronous by design: pageable host buffers, the default stream, and a
// device-to-host copy that waits for the kernel (and reports its errors).
// The trainer will keep tensors on the device; this path serves the
// conformance tests and host-side conversions.
extern "C" PL_CUDA_API PlCudaStatus pl_cuda_cast_from_fp32(int device, PlCudaFormat to,
                                                           const float* src, void* dst,
                                                           std::size_t n, int saturate,
                                                           char* message,
                                                           std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  pl_cuda::clear(sink);
  if (const PlCudaStatus s = check_args("pl_cuda_cast_from_fp32", device, to, src, dst, n, sink);
      s != PL_CUDA_OK)
    return s;
  if (n == 0) return PL_CUDA_OK;

  pl_cuda::DeviceScope scope;
  PL_CUDA_CHECK(sink, scope.enter(device));
  const std::size_t out_bytes = element_bytes(to);
  const std::size_t chunk = std::min(n, kChunk);
  pl_cuda::DeviceBuffer d_src, d_dst;
  PL_CUDA_CHECK(sink, d_src.allocate(chunk * sizeof(float)));
  PL_CUDA_CHECK(sink, d_dst.allocate(chunk * out_bytes));
  for (std::size_t offset = 0; offset < n; offset += chunk) {
    const std::size_t m = std::min(chunk, n - offset);
    PL_CUDA_CHECK(sink, cudaMemcpy(d_src.as<float>(), src + offset, m * sizeof(float),
                                   cudaMemcpyHostToDevice));
    cast_from_fp32_kernel<<<blocks_for(m), kThreads>>>(to, d_src.as<float>(), d_dst.as<void>(), m,
                                                       saturate != 0);
    PL_CUDA_CHECK(sink, cudaGetLastError());
    PL_CUDA_CHECK(sink, cudaMemcpy(static_cast<unsigned char*>(dst) + offset * out_bytes,
                                   d_dst.as<void>(), m * out_bytes, cudaMemcpyDeviceToHost));
  }
  return PL_CUDA_OK;
}

extern "C" PL_CUDA_API PlCudaStatus pl_cuda_cast_to_fp32(int device, PlCudaFormat from,
                                                         const void* src, float* dst,
                                                         std::size_t n, char* message,
                                                         std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  pl_cuda::clear(sink);
  if (const PlCudaStatus s = check_args("pl_cuda_cast_to_fp32", device, from, src, dst, n, sink);
      s != PL_CUDA_OK)
    return s;
  if (n == 0) return PL_CUDA_OK;

  pl_cuda::DeviceScope scope;
  PL_CUDA_CHECK(sink, scope.enter(device));
  const std::size_t in_bytes = element_bytes(from);
  const std::size_t chunk = std::min(n, kChunk);
  pl_cuda::DeviceBuffer d_src, d_dst;
  PL_CUDA_CHECK(sink, d_src.allocate(chunk * in_bytes));
  PL_CUDA_CHECK(sink, d_dst.allocate(chunk * sizeof(float)));
  for (std::size_t offset = 0; offset < n; offset += chunk) {
    const std::size_t m = std::min(chunk, n - offset);
    PL_CUDA_CHECK(sink, cudaMemcpy(d_src.as<void>(),
                                   static_cast<const unsigned char*>(src) + offset * in_bytes,
                                   m * in_bytes, cudaMemcpyHostToDevice));
    cast_to_fp32_kernel<<<blocks_for(m), kThreads>>>(from, d_src.as<void>(), d_dst.as<float>(), m);
    PL_CUDA_CHECK(sink, cudaGetLastError());
    PL_CUDA_CHECK(sink, cudaMemcpy(dst + offset, d_dst.as<float>(), m * sizeof(float),
                                   cudaMemcpyDeviceToHost));
  }
  return PL_CUDA_OK;
}
