// The CUDA module's C ABI (implemented in backend/cuda/, libpl_cuda.so) and
// the run-time loader the CPU side uses to reach it without CUDA headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "numeric/format.h"

// ---------------------------------------------------------------------------
// C ABI. libpl_cuda.so exports exactly these symbols; the loader resolves
// them with dlsym. Plain C types only, so the module and the app may be
// built by different compilers. Bump PL_CUDA_ABI_VERSION on any change.
// ---------------------------------------------------------------------------
extern "C" {

#define PL_CUDA_ABI_VERSION 1
// The module is built with hidden visibility; only these are exported.
#define PL_CUDA_API __attribute__((visibility("default")))

// Every entry point returns a status; on failure it writes one line into
// `message` (truncated to message_size, always NUL-terminated when
// message_size > 0) that names the failing CUDA call, file and line.
typedef enum PlCudaStatus {
  PL_CUDA_OK = 0,
  PL_CUDA_NO_DEVICE = 1,         // driver missing or too old, or zero devices
  PL_CUDA_INVALID_ARGUMENT = 2,  // bad device index, format, null pointer
  PL_CUDA_OUT_OF_MEMORY = 3,
  PL_CUDA_ERROR = 4,             // any other CUDA runtime error
} PlCudaStatus;

// Stored formats the cast kernels handle. Numbered independently of
// engine::Format so the ABI does not move when the engine enum does.
typedef enum PlCudaFormat {
  PL_CUDA_FP16 = 1,
  PL_CUDA_BF16 = 2,
  PL_CUDA_E4M3 = 3,
  PL_CUDA_E5M2 = 4,
} PlCudaFormat;

typedef struct PlCudaDeviceProperties {
  char name[256];
  int compute_major;
  int compute_minor;
  std::uint64_t memory_total;  // bytes, cudaMemGetInfo
  std::uint64_t memory_free;   // bytes, at the time of the query
  int sm_count;                // streaming multiprocessors
} PlCudaDeviceProperties;

PL_CUDA_API int pl_cuda_abi_version(void);

// Number of devices the runtime sees. With no driver or no device, returns
// PL_CUDA_NO_DEVICE, *count = 0, and the runtime's error in `message`.
PL_CUDA_API PlCudaStatus pl_cuda_device_count(int* count, char* message, std::size_t message_size);

// Properties of device `device` (0-based).
PL_CUDA_API PlCudaStatus pl_cuda_device_properties(int device, PlCudaDeviceProperties* props, char* message,
                                       std::size_t message_size);

// Bulk casts between host buffers through device `device`: copy in, one
// kernel, copy out, synchronous. Rounding is round-to-nearest-even with
// the rules of engine/numeric/convert.h (subnormals kept, NaN stays NaN,
// IEEE formats overflow to inf, E4M3 to NaN). `saturate` applies to FP8
// only: E4M3 finite overflow and inf become +-448, E5M2 finite overflow
// +-57344. `dst` holds n elements in the format's storage width (2 bytes
// for FP16/BF16, 1 for FP8). Large n are processed in chunks.
PL_CUDA_API PlCudaStatus pl_cuda_cast_from_fp32(int device, PlCudaFormat to, const float* src, void* dst,
                                    std::size_t n, int saturate, char* message,
                                    std::size_t message_size);
PL_CUDA_API PlCudaStatus pl_cuda_cast_to_fp32(int device, PlCudaFormat from, const void* src, float* dst,
                                  std::size_t n, char* message, std::size_t message_size);

}  // extern "C"

// ---------------------------------------------------------------------------
// Loader (engine_cpu, no CUDA headers). The module is searched, in order:
//   1. $PL_CUDA_MODULE (a full path), when set;
//   2. next to the executable (/proc/self/exe's directory, then ../lib);
//   3. the build tree (the path CMake compiled in);
//   4. the dynamic loader's library path (dlopen of the bare file name).
// Loading happens once, lazily, on the first call of any function below
// (thread-safe); the module stays loaded for the life of the process.
// ---------------------------------------------------------------------------
namespace engine {

enum class CudaStatus : std::uint8_t {
  Ok = 0,
  NotLoaded,        // libpl_cuda.so missing, unloadable, or ABI mismatch
  NoDevice,
  InvalidArgument,
  OutOfMemory,
  Error,
};
const char* cuda_status_name(CudaStatus s);

struct CudaResult {
  CudaStatus status = CudaStatus::Ok;
  std::string message;  // one line; empty on success
  bool ok() const { return status == CudaStatus::Ok; }
};

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  std::uint64_t memory_total = 0;
  std::uint64_t memory_free = 0;
  int sm_count = 0;
};

// What happened when the module was looked for. Any thread.
struct CudaModuleInfo {
  bool loaded = false;     // found, dlopen'ed, every symbol resolved, ABI matches
  std::string path;        // the file that was loaded (or last tried)
  int device_count = 0;    // 0 when not loaded or no device
  std::string reason;      // one line when !cuda_available(), else empty
};
const CudaModuleInfo& cuda_module_info();

// True when the module is loaded and sees at least one device. Any thread.
bool cuda_available();
// One line saying why CUDA cannot be used ("libpl_cuda.so not found ...",
// "no CUDA device: cudaGetDeviceCount returned ..."); empty when available.
const std::string& cuda_unavailable_reason();

// Tries one explicit module path without touching the process-wide state:
// for tests and diagnostics. The library stays loaded when it loads.
CudaModuleInfo cuda_probe_module(const std::string& path);

// Wrappers over the C ABI; when the module is not loaded they return
// CudaStatus::NotLoaded with the loader's reason. Any thread; calls are
// synchronous and serialised by the CUDA runtime.
CudaResult cuda_device_count(int& count);
CudaResult cuda_device_info(int device, CudaDeviceInfo& info);

// FP16, BF16, E4M3, E5M2 only (others: InvalidArgument). dst/src hold n
// elements in the format's storage width.
CudaResult cuda_cast_from_f32(int device, Format to, const float* src, void* dst, std::size_t n,
                              bool saturate = false);
CudaResult cuda_cast_to_f32(int device, Format from, const void* src, float* dst, std::size_t n);

}  // namespace engine
