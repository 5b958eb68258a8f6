// Error handling of the CUDA module: every CUDA runtime call is checked, and
// a failure becomes one line ("<expression> returned <error> (<text>) at
// <file>:<line>") in the caller's message buffer and a status returned from
// the table entry. Nothing here aborts the process.
#pragma once

#include <cuda_runtime.h>

#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "backend/cuda_module.h"

// Evaluates a CUDA runtime call; on failure writes "<expr> returned <name>
// (<text>) at <file>:<line>" to the sink and returns the mapped status.
#define PL_CUDA_CHECK(sink, expr)                                                  \
  do {                                                                             \
    const cudaError_t pl_cuda_err_ = (expr);                                       \
    if (pl_cuda_err_ != cudaSuccess)                                               \
      return ::pl_cuda::report(pl_cuda_err_, #expr, __FILE__, __LINE__, (sink));   \
  } while (0)

// After a kernel launch: a launch error (bad configuration, no kernel image
// for the device) reported as "launch of <kernel> returned ...". Errors of
// the running kernel surface at the next synchronize or download.
#define PL_CUDA_CHECK_LAUNCH(sink, kernel_name)                                                  \
  do {                                                                                           \
    const cudaError_t pl_cuda_err_ = cudaGetLastError();                                         \
    if (pl_cuda_err_ != cudaSuccess)                                                             \
      return ::pl_cuda::report(pl_cuda_err_, "launch of " kernel_name, __FILE__, __LINE__, (sink)); \
  } while (0)

// Returns the status of a sub-step when it is not PL_CUDA_OK.
#define PL_CUDA_TRY(expr)                                \
  do {                                                   \
    const PlCudaStatus pl_cuda_status_ = (expr);         \
    if (pl_cuda_status_ != PL_CUDA_OK) return pl_cuda_status_; \
  } while (0)

namespace pl_cuda {

// The caller's one-line message buffer (may be null / zero-sized).
struct ErrorSink {
  char* message;
  std::size_t size;
};

inline void clear(ErrorSink sink) {
  if (sink.message && sink.size > 0) sink.message[0] = '\0';
}

// printf into the sink, truncating; always NUL-terminated.
inline PlCudaStatus fail(ErrorSink sink, PlCudaStatus status, const char* format, ...)
    __attribute__((format(printf, 3, 4)));
inline PlCudaStatus fail(ErrorSink sink, PlCudaStatus status, const char* format, ...) {
  if (sink.message && sink.size > 0) {
    va_list args;
    va_start(args, format);
    std::vsnprintf(sink.message, sink.size, format, args);
    va_end(args);
  }
  return status;
}

inline PlCudaStatus status_of(cudaError_t e) {
  switch (e) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorStubLibrary:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInitializationError:
      return PL_CUDA_NO_DEVICE;
    case cudaErrorMemoryAllocation:
      return PL_CUDA_OUT_OF_MEMORY;
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidValue:
      return PL_CUDA_INVALID_ARGUMENT;
    default:
      return PL_CUDA_ERROR;
  }
}

inline const char* base_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

inline PlCudaStatus report(cudaError_t e, const char* expression, const char* file, int line,
                           ErrorSink sink) {
  // Clear a non-sticky error so it does not resurface in the next check.
  (void)cudaGetLastError();
  return fail(sink, status_of(e), "%s returned %s (%s) at %s:%d", expression, cudaGetErrorName(e),
              cudaGetErrorString(e), base_name(file), line);
}

// Makes `device` current for the scope and restores the caller's device,
// so a module call never changes which device the calling thread uses.
// Sets nothing when the device is already current (the common case).
class DeviceScope {
 public:
  DeviceScope() = default;
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  ~DeviceScope() {
    if (m_previous >= 0) cudaSetDevice(m_previous);
  }
  cudaError_t enter(int device) {
    int previous = 0;
    if (const cudaError_t e = cudaGetDevice(&previous); e != cudaSuccess) return e;
    if (previous == device) return cudaSuccess;
    if (const cudaError_t e = cudaSetDevice(device); e != cudaSuccess) return e;
    m_previous = previous;
    return cudaSuccess;
  }

 private:
  int m_previous = -1;
};

// Validates a device index against the runtime's count (one check, at the
// entry point).
inline PlCudaStatus check_device_index(int device, ErrorSink sink) {
  int count = 0;
  PL_CUDA_CHECK(sink, cudaGetDeviceCount(&count));
  if (device < 0 || device >= count)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "device %d out of range: %d CUDA device(s)", device,
                count);
  return PL_CUDA_OK;
}

}  // namespace pl_cuda
