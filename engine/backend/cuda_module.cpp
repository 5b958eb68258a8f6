// Run-time loader of the CUDA module (libpl_cuda.so): finds and dlopens it,
// takes its table of functions, checks the table's version and size, and
// wraps it for the engine. No CUDA header here, so the engine builds and
// the app starts on machines without CUDA.
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

struct Module {
  CudaModuleInfo info;
  const PlCudaBackendTable* table = nullptr;  // set when info.loaded
};

std::string last_dl_error() {
  const char* e = dlerror();
  return e ? e : "unknown error";
}

// Why a module's table is unusable by this build; empty when it is usable.
std::string table_mismatch(const std::string& path, const PlCudaBackendTable* t) {
  if (!t) return path + ": pl_cuda_backend_table() returned no table";
  if (t->abi_version != PL_CUDA_ABI_VERSION)
    return path + " has ABI " + std::to_string(t->abi_version) + ", this build needs " +
           std::to_string(PL_CUDA_ABI_VERSION) + " (rebuild the module)";
  if (t->table_size < sizeof(PlCudaBackendTable))
    return path + " has a function table of " + std::to_string(t->table_size) + " bytes, this build needs " +
           std::to_string(sizeof(PlCudaBackendTable)) + " (rebuild the module)";
  // The entries every module implements (the loader and CudaContext use them).
  if (!t->device_count || !t->device_properties || !t->create_context || !t->destroy_context ||
      !t->synchronize || !t->memory_info || !t->allocate || !t->release || !t->upload || !t->download ||
      !t->copy || !t->fill_zero || !t->convert)
    return path + "'s function table lacks a device, context, memory or convert entry";
  return {};
}

// dlopens `path` (a full path, or a bare name for the library path), takes
// its table, checks its version and size and counts devices. The handle is
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
  const auto entry = reinterpret_cast<PlCudaBackendTableFn>(dlsym(handle, "pl_cuda_backend_table"));
  if (!entry) {
    // ABI 1 modules exported one symbol per function and their version
    // through pl_cuda_abi_version(): name the version they have.
    using AbiVersionFn = int (*)();
    if (const auto v1 = reinterpret_cast<AbiVersionFn>(dlsym(handle, "pl_cuda_abi_version")))
      m.info.reason = path + " has ABI " + std::to_string(v1()) + ", this build needs " +
                      std::to_string(PL_CUDA_ABI_VERSION) + " (rebuild the module)";
    else
      m.info.reason = path + " lacks the symbol pl_cuda_backend_table (not a Precision Lab CUDA module?)";
    dlclose(handle);
    return m;
  }
  const PlCudaBackendTable* table = entry();
  if (std::string why = table_mismatch(path, table); !why.empty()) {
    m.info.reason = std::move(why);
    dlclose(handle);
    return m;
  }
  m.table = table;
  m.info.loaded = true;

  char message[kMessageSize] = {};
  int count = 0;
  const PlCudaStatus s = table->device_count(&count, message, sizeof message);
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

const PlCudaBackendTable* cuda_table() { return module().table; }

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
  return result_of(m.table->device_count(&count, message, sizeof message), message);
}

CudaResult cuda_device_info(int device, CudaDeviceInfo& info) {
  info = {};
  const Module& m = module();
  if (!m.info.loaded) return not_loaded();
  char message[kMessageSize] = {};
  PlCudaDeviceProperties p{};
  const CudaResult r = result_of(m.table->device_properties(device, &p, message, sizeof message), message);
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

bool cuda_format(Format f, PlCudaFormat& out) {
  switch (f) {
    case Format::FP32: out = PL_CUDA_FP32; return true;
    case Format::TF32: out = PL_CUDA_TF32; return true;
    case Format::FP16: out = PL_CUDA_FP16; return true;
    case Format::BF16: out = PL_CUDA_BF16; return true;
    case Format::E4M3: out = PL_CUDA_E4M3; return true;
    case Format::E5M2: out = PL_CUDA_E5M2; return true;
    default: break;  // element formats (FP6/FP4/E8M0) and block formats: no storage format
  }
  return false;
}

// ---- CudaContext ----------------------------------------------------------------

namespace {

// Calls one table entry with a message buffer and turns its status into a
// CudaResult.
template <class Entry, class... Args>
CudaResult call(Entry entry, Args... args) {
  char message[kMessageSize] = {};
  return result_of(entry(args..., message, sizeof message), message);
}

}  // namespace

CudaResult CudaContext::create(int device, std::unique_ptr<CudaContext>& out) {
  out.reset();
  const Module& m = module();
  if (!m.info.loaded) return not_loaded();
  PlCudaContext* ctx = nullptr;
  CudaResult r = call(module().table->create_context, device, &ctx);
  if (r.ok()) out.reset(new CudaContext(ctx, device));
  return r;
}

CudaContext::~CudaContext() {
  // Errors cannot be returned from here; synchronize() first to see them.
  char message[kMessageSize] = {};
  module().table->destroy_context(m_ctx, message, sizeof message);
}

CudaResult CudaContext::synchronize() { return call(module().table->synchronize, m_ctx); }

CudaResult CudaContext::memory_info(std::uint64_t& free_bytes, std::uint64_t& total_bytes) {
  free_bytes = total_bytes = 0;
  uint64_t f = 0, t = 0;
  CudaResult r = call(module().table->memory_info, m_ctx, &f, &t);
  free_bytes = f;
  total_bytes = t;
  return r;
}

CudaResult CudaContext::allocate(std::size_t bytes, void** out) {
  return call(module().table->allocate, m_ctx, bytes, out);
}

CudaResult CudaContext::release(void* ptr) { return call(module().table->release, m_ctx, ptr); }

CudaResult CudaContext::upload(void* dst, const void* host_src, std::size_t bytes) {
  return call(module().table->upload, m_ctx, dst, host_src, bytes);
}

CudaResult CudaContext::download(void* host_dst, const void* src, std::size_t bytes) {
  return call(module().table->download, m_ctx, host_dst, src, bytes);
}

CudaResult CudaContext::copy(void* dst, const void* src, std::size_t bytes) {
  return call(module().table->copy, m_ctx, dst, src, bytes);
}

CudaResult CudaContext::fill_zero(void* dst, std::size_t bytes) {
  return call(module().table->fill_zero, m_ctx, dst, bytes);
}

CudaResult CudaContext::convert(Format from, const void* src, Format to, void* dst, std::size_t n,
                                const CastOptions& opt) {
  PlCudaFormat f{}, t{};
  const bool from_ok = cuda_format(from, f), to_ok = cuda_format(to, t);
  if (!from_ok || !to_ok)
    return {CudaStatus::InvalidArgument,
            std::string("CudaContext::convert: ") + format_name(from_ok ? to : from) + " is not a tensor format"};
  return call(module().table->convert, m_ctx, f, src, t, dst, static_cast<std::int64_t>(n),
              std::int32_t{opt.saturate}, std::int32_t{opt.stochastic}, std::uint64_t{opt.seed},
              std::uint64_t{opt.index_offset});
}

}  // namespace engine
