// Run-time loader of the CUDA module (libpl_cuda.so): finds and dlopens it,
// resolves its C ABI, and wraps it for the engine. No CUDA header here, so
// engine_cpu builds and the app starts on machines without CUDA.
#include "backend/cuda_module.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

// File name of the module; CMake passes the real one.
#ifndef PL_CUDA_MODULE_NAME
#define PL_CUDA_MODULE_NAME "libpl_cuda.so"
#endif
// PL_CUDA_MODULE_BUILD_PATH (optional): its full path in the build tree.

namespace engine {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kMessageSize = 512;

struct Api {
  decltype(&pl_cuda_abi_version) abi_version = nullptr;
  decltype(&pl_cuda_device_count) device_count = nullptr;
  decltype(&pl_cuda_device_properties) device_properties = nullptr;
  decltype(&pl_cuda_cast_from_fp32) cast_from_fp32 = nullptr;
  decltype(&pl_cuda_cast_to_fp32) cast_to_fp32 = nullptr;
};

struct Module {
  CudaModuleInfo info;
  Api api;  // all set when info.loaded
};

std::string last_dl_error() {
  const char* e = dlerror();
  return e ? e : "unknown error";
}

template <class Fn>
bool resolve(void* handle, const char* name, Fn& fn, std::string& missing) {
  fn = reinterpret_cast<Fn>(dlsym(handle, name));
  if (!fn && missing.empty()) missing = name;
  return fn != nullptr;
}

// dlopens `path` (a full path, or a bare name for the library path),
// resolves the ABI, checks its version and counts devices. The handle is
// kept open when the module loads (its functions are used for the life of
// the process) and closed otherwise.
Module open_module(const std::string& path) {
  Module m;
  m.info.path = path;
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    m.info.reason = "cannot load " + path + ": " + last_dl_error();
    return m;
  }
  std::string missing;
  resolve(handle, "pl_cuda_abi_version", m.api.abi_version, missing);
  resolve(handle, "pl_cuda_device_count", m.api.device_count, missing);
  resolve(handle, "pl_cuda_device_properties", m.api.device_properties, missing);
  resolve(handle, "pl_cuda_cast_from_fp32", m.api.cast_from_fp32, missing);
  resolve(handle, "pl_cuda_cast_to_fp32", m.api.cast_to_fp32, missing);
  if (!missing.empty()) {
    m.info.reason = path + " lacks the symbol " + missing + " (not a Precision Lab CUDA module?)";
    m.api = {};
    dlclose(handle);
    return m;
  }
  if (const int v = m.api.abi_version(); v != PL_CUDA_ABI_VERSION) {
    m.info.reason = path + " has ABI version " + std::to_string(v) + ", this build expects " +
                    std::to_string(PL_CUDA_ABI_VERSION) + " (rebuild the module)";
    m.api = {};
    dlclose(handle);
    return m;
  }
  m.info.loaded = true;

  char message[kMessageSize] = {};
  int count = 0;
  const PlCudaStatus s = m.api.device_count(&count, message, sizeof message);
  if (s != PL_CUDA_OK || count <= 0) {
    m.info.device_count = 0;
    m.info.reason = std::string("no CUDA device: ") + (message[0] ? message : "0 devices");
  } else {
    m.info.device_count = count;
  }
  return m;
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// The search of cuda_module.h, first loadable candidate wins. When a
// candidate exists but does not load, that failure is the reason reported
// (it is the actionable one: e.g. libcudart.so.13 missing).
Module find_module() {
  if (const char* env = std::getenv("PL_CUDA_MODULE"); env && *env) {
    if (!is_file(env)) {
      Module m;
      m.info.path = env;
      m.info.reason = std::string(PL_CUDA_MODULE_NAME) + " not found: PL_CUDA_MODULE=" + env +
                      " is not a file";
      return m;
    }
    return open_module(env);
  }

  std::vector<fs::path> candidates;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path() / PL_CUDA_MODULE_NAME);
    candidates.push_back(exe.parent_path().parent_path() / "lib" / PL_CUDA_MODULE_NAME);
  }
#ifdef PL_CUDA_MODULE_BUILD_PATH
  candidates.emplace_back(PL_CUDA_MODULE_BUILD_PATH);
#endif

  Module first_failure;
  bool failed = false;
  for (const fs::path& c : candidates) {
    if (!is_file(c)) continue;
    Module m = open_module(c.string());
    if (m.info.loaded) return m;
    if (!failed) {
      first_failure = std::move(m);
      failed = true;
    }
  }
  if (failed) return first_failure;

  // Last, the dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache).
  Module m = open_module(PL_CUDA_MODULE_NAME);
  if (!m.info.loaded && m.info.reason.find(std::string(PL_CUDA_MODULE_NAME) + ":") != std::string::npos) {
    // dlopen could not find the file itself (rather than one of its
    // dependencies): say where we looked, on one line.
    std::string where;
    if (!ec) where += "next to the executable (" + exe.parent_path().string() + "), ";
#ifdef PL_CUDA_MODULE_BUILD_PATH
    where += "in the build tree (" PL_CUDA_MODULE_BUILD_PATH "), ";
#endif
    m.info.reason = std::string(PL_CUDA_MODULE_NAME) + " not found (looked " + where +
                    "and on the library path)";
  }
  return m;
}

// Loaded once, on first use; C++ guarantees the initialisation of a
// function-local static is thread-safe.
const Module& module() {
  static const Module m = find_module();
  return m;
}

CudaStatus from_c(PlCudaStatus s) {
  switch (s) {
    case PL_CUDA_OK: return CudaStatus::Ok;
    case PL_CUDA_NO_DEVICE: return CudaStatus::NoDevice;
    case PL_CUDA_INVALID_ARGUMENT: return CudaStatus::InvalidArgument;
    case PL_CUDA_OUT_OF_MEMORY: return CudaStatus::OutOfMemory;
    case PL_CUDA_ERROR: return CudaStatus::Error;
  }
  return CudaStatus::Error;
}

CudaResult result_of(PlCudaStatus s, const char* message) {
  CudaResult r;
  r.status = from_c(s);
  if (!r.ok()) r.message = message[0] ? message : cuda_status_name(r.status);
  return r;
}

CudaResult not_loaded() { return {CudaStatus::NotLoaded, module().info.reason}; }

// engine::Format -> the ABI's format; false for formats without a CUDA cast.
bool to_c_format(Format f, PlCudaFormat& out) {
  switch (f) {
    case Format::FP16: out = PL_CUDA_FP16; return true;
    case Format::BF16: out = PL_CUDA_BF16; return true;
    case Format::E4M3: out = PL_CUDA_E4M3; return true;
    case Format::E5M2: out = PL_CUDA_E5M2; return true;
    default: break;  // FP32/TF32 need no cast; FP6/FP4/E8M0 and block formats have none
  }
  return false;
}

CudaResult unsupported_format(const char* fn, Format f) {
  return {CudaStatus::InvalidArgument,
          std::string(fn) + ": no CUDA cast for " + format_name(f) + " (FP16, BF16, FP8 only)"};
}

}  // namespace

const char* cuda_status_name(CudaStatus s) {
  switch (s) {
    case CudaStatus::Ok: return "ok";
    case CudaStatus::NotLoaded: return "module not loaded";
    case CudaStatus::NoDevice: return "no device";
    case CudaStatus::InvalidArgument: return "invalid argument";
    case CudaStatus::OutOfMemory: return "out of device memory";
    case CudaStatus::Error: return "CUDA error";
  }
  return "unknown";
}

const CudaModuleInfo& cuda_module_info() { return module().info; }

bool cuda_available() { return module().info.loaded && module().info.device_count > 0; }

const std::string& cuda_unavailable_reason() { return module().info.reason; }

CudaModuleInfo cuda_probe_module(const std::string& path) {
  if (!is_file(path)) {
    CudaModuleInfo info;
    info.path = path;
    info.reason = path + " not found";
    return info;
  }
  return open_module(path).info;
}

CudaResult cuda_device_count(int& count) {
  count = 0;
  const Module& m = module();
  if (!m.info.loaded) return not_loaded();
  char message[kMessageSize] = {};
  return result_of(m.api.device_count(&count, message, sizeof message), message);
}

CudaResult cuda_device_info(int device, CudaDeviceInfo& info) {
  info = {};
  const Module& m = module();
  if (!m.info.loaded) return not_loaded();
  char message[kMessageSize] = {};
  PlCudaDeviceProperties p{};
  const CudaResult r = result_of(m.api.device_properties(device, &p, message, sizeof message), message);
  if (!r.ok()) return r;
  info.index = device;
  info.name = p.name;
  info.compute_major = p.compute_major;
  info.compute_minor = p.compute_minor;
  info.memory_total = p.memory_total;
  info.memory_free = p.memory_free;
  info.sm_count = p.sm_count;
  return r;
}

CudaResult cuda_cast_from_f32(int device, Format to, const float* src, void* dst, std::size_t n,
                              bool saturate) {
  const Module& m = module();
  if (!m.info.loaded) return not_loaded();
  PlCudaFormat f{};
  if (!to_c_format(to, f)) return unsupported_format("cuda_cast_from_f32", to);
  char message[kMessageSize] = {};
  return result_of(m.api.cast_from_fp32(device, f, src, dst, n, saturate ? 1 : 0, message, sizeof message),
                   message);
}

CudaResult cuda_cast_to_f32(int device, Format from, const void* src, float* dst, std::size_t n) {
  const Module& m = module();
  if (!m.info.loaded) return not_loaded();
  PlCudaFormat f{};
  if (!to_c_format(from, f)) return unsupported_format("cuda_cast_to_f32", from);
  char message[kMessageSize] = {};
  return result_of(m.api.cast_to_fp32(device, f, src, dst, n, message, sizeof message), message);
}

}  // namespace engine
