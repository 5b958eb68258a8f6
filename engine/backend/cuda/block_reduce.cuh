// Block-wide reductions shared by the kernels (blockDim.x == kThreads).
#pragma once

#include <cstdint>

#include "backend/cuda/context.cuh"

namespace pl_cuda {

// The block's max of v, in thread 0 (the others get a partial max): for
// amaxes of non-negative floats compared as their bits.
__device__ inline std::uint32_t block_max_u32(std::uint32_t v) {
  __shared__ std::uint32_t warp_max[kThreads / 32];
  for (int off = 16; off > 0; off >>= 1) {
    const std::uint32_t o = __shfl_xor_sync(0xffffffffu, v, off);
    v = o > v ? o : v;
  }
  if ((threadIdx.x & 31u) == 0) warp_max[threadIdx.x >> 5] = v;
  __syncthreads();
  v = threadIdx.x < kThreads / 32 ? warp_max[threadIdx.x] : 0u;
  if (threadIdx.x < 32) {
    for (int off = 16; off > 0; off >>= 1) {
      const std::uint32_t o = __shfl_xor_sync(0xffffffffu, v, off);
      v = o > v ? o : v;
    }
  }
  __syncthreads();
  return v;
}

}  // namespace pl_cuda
