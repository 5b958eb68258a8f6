// The convert entry: casts between storage formats on device memory, one
// grid-stride kernel on the context's stream. Bit-exact with the CPU
// backend's convert (numeric/cast.h); the conversion rules live in
// fp_convert.cuh, which the tests also compile for the host.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/context.cuh"
#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/fp_convert.cuh"
#include "backend/cuda/ops_math.cuh"
#include "backend/cuda_module.h"

namespace pl_cuda {

namespace {

// x rounded to `to` into element i of dst; `random` is used when stochastic.
__device__ __forceinline__ void store_rounded(PlCudaFormat to, void* dst, std::size_t i, float x,
                                              bool saturate, bool stochastic, std::uint32_t random) {
  switch (to) {
    case PL_CUDA_FP32: static_cast<float*>(dst)[i] = x; return;
    case PL_CUDA_TF32:
      static_cast<float*>(dst)[i] = stochastic ? fp32_round_tf32_sr(x, random) : fp32_round_tf32(x);
      return;
    case PL_CUDA_FP16:
      static_cast<std::uint16_t*>(dst)[i] = stochastic ? fp32_to_fp16_sr(x, random) : fp32_to_fp16(x);
      return;
    case PL_CUDA_BF16:
      static_cast<std::uint16_t*>(dst)[i] = stochastic ? fp32_to_bf16_sr(x, random) : fp32_to_bf16(x);
      return;
    case PL_CUDA_E4M3:
      static_cast<std::uint8_t*>(dst)[i] =
          stochastic ? fp32_to_e4m3_sr(x, random, saturate) : fp32_to_e4m3(x, saturate);
      return;
    case PL_CUDA_E5M2:
      static_cast<std::uint8_t*>(dst)[i] =
          stochastic ? fp32_to_e5m2_sr(x, random, saturate) : fp32_to_e5m2(x, saturate);
      return;
  }
}

// Formats are uniform across the grid, so the switches cost no divergence.
// Each element is read before it is written by the same thread: dst may
// equal src when both widths are the same. No __restrict__ for that reason.
__global__ void convert_kernel(PlCudaFormat from, const void* src, PlCudaFormat to, void* dst,
                               std::size_t n, bool saturate, bool stochastic, std::uint64_t key,
                               std::uint64_t index_offset) {
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float x = load_value(from, src, i);
    const std::uint32_t random = stochastic ? random_at(key, index_offset + i) : 0u;
    store_rounded(to, dst, i, x, saturate, stochastic, random);
  }
}

bool overlap(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
  return pa < pb + b_bytes && pb < pa + a_bytes;
}

}  // namespace

PlCudaStatus convert(PlCudaContext* ctx, PlCudaFormat from, const void* src, PlCudaFormat to,
                     void* dst, std::int64_t n, std::int32_t saturate, std::int32_t stochastic,
                     std::uint64_t seed, std::uint64_t index_offset, char* message,
                     std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "convert");
  const std::size_t from_bytes = element_bytes(from), to_bytes = element_bytes(to);
  if (from_bytes == 0 || to_bytes == 0)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "convert: unknown format %d",
                static_cast<int>(from_bytes == 0 ? from : to));
  if (n < 0) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "convert: negative count %lld",
                         static_cast<long long>(n));
  if (n == 0) return PL_CUDA_OK;
  if (!src || !dst) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "convert: null buffer");
  const auto count = static_cast<std::size_t>(n);
  const bool in_place = src == dst && from_bytes == to_bytes;
  if (!in_place && overlap(src, count * from_bytes, dst, count * to_bytes))
    return fail(sink, PL_CUDA_INVALID_ARGUMENT,
                "convert: source and destination overlap (in place only for formats of one width)");

  // FP32 to itself, and a narrow format to itself without options, are
  // copies (as on the CPU: decoding and re-encoding would quiet signalling
  // FP16 NaNs). TF32 to itself rounds, as the CPU's quantize does.
  const bool narrow = from != PL_CUDA_FP32 && from != PL_CUDA_TF32;
  if (from == to && (from == PL_CUDA_FP32 || (narrow && !saturate && !stochastic))) {
    if (!in_place)
      PL_CUDA_CHECK(sink, cudaMemcpyAsync(dst, src, count * to_bytes, cudaMemcpyDeviceToDevice, ctx->stream));
    return PL_CUDA_OK;
  }
  convert_kernel<<<grid_for(count), kThreads, 0, ctx->stream>>>(
      from, src, to, dst, count, saturate != 0, stochastic != 0, stream_key(seed), index_offset);
  PL_CUDA_CHECK_LAUNCH(sink, "convert_kernel");
  return PL_CUDA_OK;
}

}  // namespace pl_cuda
