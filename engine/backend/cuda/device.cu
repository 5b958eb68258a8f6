// Device queries of the CUDA module: ABI version, device count, properties.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda_module.h"

using pl_cuda::ErrorSink;

extern "C" PL_CUDA_API int pl_cuda_abi_version(void) { return PL_CUDA_ABI_VERSION; }

extern "C" PL_CUDA_API PlCudaStatus pl_cuda_device_count(int* count, char* message,
                                                         std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  pl_cuda::clear(sink);
  if (!count) return pl_cuda::fail(sink, PL_CUDA_INVALID_ARGUMENT, "pl_cuda_device_count: count is null");
  *count = 0;
  // Without a driver (or with one older than the runtime) this is where the
  // runtime says so: cudaErrorInsufficientDriver, cudaErrorNoDevice, ...
  int n = 0;
  PL_CUDA_CHECK(sink, cudaGetDeviceCount(&n));
  *count = n;
  if (n == 0) return pl_cuda::fail(sink, PL_CUDA_NO_DEVICE, "cudaGetDeviceCount found 0 devices");
  return PL_CUDA_OK;
}

extern "C" PL_CUDA_API PlCudaStatus pl_cuda_device_properties(int device,
                                                              PlCudaDeviceProperties* props,
                                                              char* message,
                                                              std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  pl_cuda::clear(sink);
  if (!props)
    return pl_cuda::fail(sink, PL_CUDA_INVALID_ARGUMENT, "pl_cuda_device_properties: props is null");
  std::memset(props, 0, sizeof *props);
  if (const PlCudaStatus s = pl_cuda::check_device_index(device, sink); s != PL_CUDA_OK) return s;

  cudaDeviceProp p{};
  PL_CUDA_CHECK(sink, cudaGetDeviceProperties(&p, device));
  std::snprintf(props->name, sizeof props->name, "%s", p.name);
  props->compute_major = p.major;
  props->compute_minor = p.minor;
  props->sm_count = p.multiProcessorCount;

  // Free memory is per device and needs that device current.
  pl_cuda::DeviceScope scope;
  PL_CUDA_CHECK(sink, scope.enter(device));
  std::size_t free_bytes = 0, total_bytes = 0;
  PL_CUDA_CHECK(sink, cudaMemGetInfo(&free_bytes, &total_bytes));
  props->memory_total = total_bytes;
  props->memory_free = free_bytes;
  return PL_CUDA_OK;
}
