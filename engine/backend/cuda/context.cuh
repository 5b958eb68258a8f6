// The module's context (one device, its stream and memory pool) and the
// table entries the module implements, shared by device.cu, memory.cu,
// cast.cu and table.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda_module.h"

// The opaque handle of the ABI. Created by create_context, used by one
// thread at a time.
namespace pl_cuda {
struct GemmState;  // gemm.cu: the cuBLASLt handle, plans and workspace
struct ConvState;  // conv.cu: the cuDNN handle, descriptors and plans
}  // namespace pl_cuda

struct PlCudaContext {
  int device = 0;
  cudaStream_t stream = nullptr;  // non-blocking: no implicit sync with the legacy default stream
  cudaMemPool_t pool = nullptr;   // null: the device has no memory pools, cudaMalloc/cudaFree
  int compute_major = 0, compute_minor = 0;
  // One reusable device buffer for an entry's temporaries (partial sums,
  // decoded operands). Work is ordered on the one stream, so an entry may
  // reuse it freely; an entry must not hold it across a call of another
  // entry that also takes it.
  void* scratch = nullptr;
  std::size_t scratch_bytes = 0;
  pl_cuda::GemmState* gemm = nullptr;  // created on the first gemm
  pl_cuda::ConvState* conv = nullptr;  // created on the first convolution
  // The step on the device (ABI 6, capture.cu). step_state: set_step_state's
  // pointer, passed to the unscale and optimizer kernels queued after it.
  const PlCudaScaleState* step_state = nullptr;
  // While a capture runs: allocation, release, scratch growth, download and
  // synchronize are refused (the step is run once uncaptured first, so its
  // buffers and scratch exist), and device copies of host arguments go to
  // `keep`, which the graph owns.
  bool capturing = false;
  std::vector<void*> keep;
  // record_mark's events, a ring of PL_CUDA_MARKS; next_mark counts marks.
  cudaEvent_t marks[PL_CUDA_MARKS] = {};
  std::uint64_t next_mark = 0;
};

// An instantiated capture and the device memory its nodes read.
struct PlCudaGraph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  std::vector<void*> keep;
};

namespace pl_cuda {

// Every allocation is aligned to (and sized in multiples of) this.
inline constexpr std::size_t kAlignment = 256;

// The checks every context entry starts with: the message cleared, a
// context given, its device made current for the scope.
#define PL_CUDA_ENTER(sink, scope, ctx, fn)                                                \
  do {                                                                                     \
    ::pl_cuda::clear(sink);                                                                \
    if (!(ctx))                                                                            \
      return ::pl_cuda::fail((sink), PL_CUDA_INVALID_ARGUMENT, "%s: context is null", fn); \
    PL_CUDA_CHECK((sink), (scope).enter((ctx)->device));                                   \
  } while (0)

// Bytes of one element in a storage format; 0 for an unknown value.
inline std::size_t element_bytes(PlCudaFormat f) {
  switch (f) {
    case PL_CUDA_FP32:
    case PL_CUDA_TF32:
      return 4;
    case PL_CUDA_FP16:
    case PL_CUDA_BF16:
      return 2;
    case PL_CUDA_E4M3:
    case PL_CUDA_E5M2:
      return 1;
  }
  return 0;
}

// The context's scratch buffer, at least `bytes` long (grown, never
// shrunk; the old one freed stream-ordered). device.cu.
PlCudaStatus scratch(PlCudaContext* ctx, std::size_t bytes, void** out, ErrorSink sink);
// A copy of `bytes` of host arguments in device memory the kernels queued
// now may read later: the context's scratch outside a capture (the caller
// passes its offset there), a buffer the graph keeps during one. capture.cu.
PlCudaStatus stage_host_args(PlCudaContext* ctx, const void* host, std::size_t bytes, void* scratch_slot,
                             void** out, ErrorSink sink);
// Refuses (INVALID_ARGUMENT) what cannot happen during a capture. capture.cu.
PlCudaStatus refuse_in_capture(PlCudaContext* ctx, const char* fn, ErrorSink sink);
// Destroys the marks' events (teardown). capture.cu.
void destroy_marks(PlCudaContext* ctx);
// Frees the library state of gemm.cu and conv.cu (called by teardown).
void destroy_gemm_state(PlCudaContext* ctx);
void destroy_conv_state(PlCudaContext* ctx);

// Grid size for a grid-stride loop over n elements.
inline constexpr int kThreads = 256;
inline unsigned grid_for(std::size_t n, int threads = kThreads) {
  const std::size_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535u ? 65535u : blocks));
}

// ---- entries (device.cu) ----
PlCudaStatus device_count(int* count, char* message, std::size_t message_size);
PlCudaStatus device_properties(int device, PlCudaDeviceProperties* props, char* message,
                               std::size_t message_size);
PlCudaStatus create_context(int device, PlCudaContext** out, char* message, std::size_t message_size);
PlCudaStatus destroy_context(PlCudaContext* ctx, char* message, std::size_t message_size);
PlCudaStatus synchronize(PlCudaContext* ctx, char* message, std::size_t message_size);
PlCudaStatus memory_info(PlCudaContext* ctx, std::uint64_t* free_bytes, std::uint64_t* total_bytes,
                         char* message, std::size_t message_size);

// ---- entries (memory.cu) ----
PlCudaStatus allocate(PlCudaContext* ctx, std::size_t bytes, void** out, char* message,
                      std::size_t message_size);
PlCudaStatus release(PlCudaContext* ctx, void* ptr, char* message, std::size_t message_size);
PlCudaStatus upload(PlCudaContext* ctx, void* dst, const void* host_src, std::size_t bytes,
                    char* message, std::size_t message_size);
PlCudaStatus download(PlCudaContext* ctx, void* host_dst, const void* src, std::size_t bytes,
                      char* message, std::size_t message_size);
PlCudaStatus copy(PlCudaContext* ctx, void* dst, const void* src, std::size_t bytes, char* message,
                  std::size_t message_size);
PlCudaStatus fill_zero(PlCudaContext* ctx, void* dst, std::size_t bytes, char* message,
                       std::size_t message_size);
// gpupeer: the pool's live bytes (ABI 6).
PlCudaStatus memory_allocated(PlCudaContext* ctx, std::uint64_t* live_bytes, char* message,
                              std::size_t message_size);

// ---- entries (cast.cu) ----
PlCudaStatus convert(PlCudaContext* ctx, PlCudaFormat from, const void* src, PlCudaFormat to,
                     void* dst, std::int64_t n, std::int32_t saturate, std::int32_t stochastic,
                     std::uint64_t seed, std::uint64_t index_offset, char* message,
                     std::size_t message_size);

}  // namespace pl_cuda
