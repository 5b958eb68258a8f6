// The convert entry: casts between storage formats on device memory, one
// grid-stride kernel on the context's stream. Bit-exact with the CPU
// backend's convert (numeric/cast.h); the conversion rules live in
// fp_convert.cuh, which the tests also compile for the host.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/block_reduce.cuh"
#include "backend/cuda/context.cuh"
#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/fp_convert.cuh"
#include "backend/cuda/ops_math.cuh"
#include "backend/cuda/step_math.cuh"
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

// ---- FP8 delayed scaling's whole cast in one pass (ABI 6, gpufuse) ----

// q[i] = encode(x[i] * scale) and, where decoded is set, decoded[i] = q[i]'s
// value; each block's max |x| as bits. Per element the bits of its
// composition: decode (convert to FP32: exact), scale_amax's product
// (step_math::mul_rn, x86 NaN rules), convert's rounding with convert's
// random bits, and convert's decode; a max of bits does not depend on the
// grid.
// An activation the cast applies first (ActivationForwardEncodeOp: the
// activation's own per-element function, as its kernel computes it).
__device__ __forceinline__ float activated(std::int32_t act, float v) {
  return act == 1 ? relu_value(v) : act == 2 ? gelu_value(v) : v;
}

__global__ void scale_amax_encode_kernel(PlCudaFormat from, const void* x, std::size_t n, std::int32_t act,
                                         float scale, PlCudaFormat to, void* q, bool saturate, bool stochastic,
                                         std::uint64_t key, std::uint64_t index_offset, float* decoded,
                                         std::uint32_t* partial) {
  std::uint32_t m = 0;
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = activated(act, load_value(from, x, i));
    const std::uint32_t a = step_math::abs_bits_f32(v);
    m = a > m ? a : m;
    const std::uint32_t random = stochastic ? random_at(key, index_offset + i) : 0u;
    store_rounded(to, q, i, step_math::mul_rn(v, scale), saturate, stochastic, random);
    if (decoded) decoded[i] = load_value(to, q, i);
  }
  m = block_max_u32(m);
  if (threadIdx.x == 0) partial[blockIdx.x] = m;
}

// y = op(a, b) per element on decoded codes, encoded as convert encodes
// (pointwise_coded's ops: 0 GELU, 1 GELU's gradient, 2 add, 3 ReLU's
// gradient), each with the per-element function its own kernel uses.
__global__ void pointwise_coded_kernel(std::int32_t op, PlCudaFormat fa, const void* a, PlCudaFormat fb, const void* b,
                                       PlCudaFormat fy, void* y, std::size_t n, bool saturate, bool stochastic,
                                       std::uint64_t key, std::uint64_t index_offset) {
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float av = load_value(fa, a, i);
    const float bv = op == 0 ? 0.0f : load_value(fb, b, i);
    const float v = op == 0 ? gelu_value(av) : op == 1 ? gelu_grad(av, bv) : op == 2 ? add_rn(av, bv) : relu_grad(av, bv);
    const std::uint32_t random = stochastic ? random_at(key, index_offset + i) : 0u;
    store_rounded(fy, y, i, v, saturate, stochastic, random);
  }
}

__global__ void scale_amax_final_kernel(const std::uint32_t* partial, unsigned count, float* amax) {
  std::uint32_t m = 0;
  for (unsigned k = threadIdx.x; k < count; k += blockDim.x) m = partial[k] > m ? partial[k] : m;
  m = block_max_u32(m);
  if (threadIdx.x == 0) *amax = step_math::amax_from_bits(m);
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

PlCudaStatus scale_amax_encode(PlCudaContext* ctx, PlCudaFormat x_format, const void* x, std::int64_t n,
                               std::int32_t activation, float scale, PlCudaFormat q_format, void* q, std::int32_t saturate,
                               std::int32_t stochastic, std::uint64_t seed, std::uint64_t index_offset, float* amax,
                               float* decoded, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "scale_amax_encode");
  if (x_format != PL_CUDA_FP32 && x_format != PL_CUDA_FP16 && x_format != PL_CUDA_BF16)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "scale_amax_encode: x must be FP32, FP16 or BF16 (format %d)",
                static_cast<int>(x_format));
  const std::size_t q_bytes = element_bytes(q_format);
  if (q_bytes == 0) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "scale_amax_encode: unknown format %d",
                                static_cast<int>(q_format));
  if (activation < 0 || activation > 2)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "scale_amax_encode: unknown activation %d", static_cast<int>(activation));
  if (n < 0) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "scale_amax_encode: negative count %lld",
                         static_cast<long long>(n));
  if (!amax) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "scale_amax_encode: amax is null");
  if (n == 0) {
    PL_CUDA_CHECK(sink, cudaMemsetAsync(amax, 0, sizeof(float), ctx->stream));
    return PL_CUDA_OK;
  }
  if (!x || !q) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "scale_amax_encode: null buffer");
  const auto count = static_cast<std::size_t>(n);
  if (overlap(x, count * element_bytes(x_format), q, count * q_bytes) ||
      (decoded && overlap(q, count * q_bytes, decoded, count * sizeof(float))))
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "scale_amax_encode: q overlaps x or decoded");
  constexpr unsigned kMaxBlocks = 1024;
  const unsigned grid = std::min(grid_for(count), kMaxBlocks);
  void* partial = nullptr;
  PL_CUDA_TRY(scratch(ctx, grid * sizeof(std::uint32_t), &partial, sink));
  auto* part = static_cast<std::uint32_t*>(partial);
  scale_amax_encode_kernel<<<grid, kThreads, 0, ctx->stream>>>(x_format, x, count, activation, scale, q_format, q,
                                                               saturate != 0,
                                                               stochastic != 0, stream_key(seed), index_offset,
                                                               decoded, part);
  PL_CUDA_CHECK_LAUNCH(sink, "scale_amax_encode_kernel");
  scale_amax_final_kernel<<<1, kThreads, 0, ctx->stream>>>(part, grid, amax);
  PL_CUDA_CHECK_LAUNCH(sink, "scale_amax_final_kernel");
  return PL_CUDA_OK;
}

PlCudaStatus pointwise_coded(PlCudaContext* ctx, std::int32_t op, PlCudaFormat fa, const void* a, PlCudaFormat fb,
                             const void* b, PlCudaFormat fy, void* y, std::int64_t n, std::int32_t saturate,
                             std::int32_t stochastic, std::uint64_t seed, std::uint64_t index_offset, char* message,
                             std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "pointwise_coded");
  if (op < 0 || op > 3) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "pointwise_coded: unknown op %d", static_cast<int>(op));
  const bool binary = op != 0;
  if (element_bytes(fa) == 0 || element_bytes(fy) == 0 || (binary && element_bytes(fb) == 0))
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "pointwise_coded: unknown format");
  if (n < 0) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "pointwise_coded: negative count %lld",
                         static_cast<long long>(n));
  if (n == 0) return PL_CUDA_OK;
  if (!a || !y || (binary && !b)) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "pointwise_coded: null buffer");
  const auto count = static_cast<std::size_t>(n);
  // y may be an input itself (element i read before it is written), not a
  // shifted view of one.
  const std::size_t yb = count * element_bytes(fy);
  if ((y != a && overlap(y, yb, a, count * element_bytes(fa))) ||
      (binary && y != b && overlap(y, yb, b, count * element_bytes(fb))) ||
      (y == a && element_bytes(fa) != element_bytes(fy)) || (binary && y == b && element_bytes(fb) != element_bytes(fy)))
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "pointwise_coded: y overlaps an input");
  pointwise_coded_kernel<<<grid_for(count), kThreads, 0, ctx->stream>>>(op, fa, a, fb, b, fy, y, count, saturate != 0,
                                                                       stochastic != 0, stream_key(seed), index_offset);
  PL_CUDA_CHECK_LAUNCH(sink, "pointwise_coded_kernel");
  return PL_CUDA_OK;
}

}  // namespace pl_cuda
