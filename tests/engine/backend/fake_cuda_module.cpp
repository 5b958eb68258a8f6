// Fake CUDA modules for test_cuda_module: what the loader must refuse (an
// ABI 1 module, a table of another version, a shorter table, a table
// without the module's own entries) and one it must accept (a conforming
// table on a machine without devices). Plain C++, no CUDA: built whether
// or not nvcc exists. PL_FAKE_KIND picks the module.
#include <cstddef>
#include <cstdio>

#include "backend/cuda_module.h"

#define PL_FAKE_ABI1 1          // per-symbol exports of ABI 1, pl_cuda_abi_version() == 1
#define PL_FAKE_NEWER 2         // a table with abi_version 3
#define PL_FAKE_SHORT 3         // a table that ends before the backend's ops
#define PL_FAKE_NO_ENTRIES 4    // the right version and size, every entry NULL
#define PL_FAKE_NO_DEVICE 5     // conforming; device_count finds none

#if PL_FAKE_KIND == PL_FAKE_ABI1

extern "C" PL_CUDA_API int pl_cuda_abi_version(void) { return 1; }

#else

namespace {

// Any entry: no device behind it.
template <class... Args>
PlCudaStatus no_device(Args...) {
  return PL_CUDA_NO_DEVICE;
}

[[maybe_unused]] PlCudaStatus zero_devices(int* count, char* message, std::size_t message_size) {
  if (count) *count = 0;
  if (message && message_size > 0) std::snprintf(message, message_size, "fake module: 0 devices");
  return PL_CUDA_NO_DEVICE;
}

PlCudaBackendTable make_table() {
  PlCudaBackendTable t{};
  t.abi_version = PL_CUDA_ABI_VERSION;
  t.table_size = sizeof(PlCudaBackendTable);
#if PL_FAKE_KIND == PL_FAKE_NEWER
  t.abi_version = PL_CUDA_ABI_VERSION + 1;
#elif PL_FAKE_KIND == PL_FAKE_SHORT
  t.table_size = offsetof(PlCudaBackendTable, gemm);
#endif
#if PL_FAKE_KIND != PL_FAKE_NO_ENTRIES
  t.device_count = zero_devices;
  t.device_properties = no_device;
  t.create_context = no_device;
  t.destroy_context = no_device;
  t.synchronize = no_device;
  t.memory_info = no_device;
  t.allocate = no_device;
  t.release = no_device;
  t.upload = no_device;
  t.download = no_device;
  t.copy = no_device;
  t.fill_zero = no_device;
  t.convert = no_device;
#endif
  return t;
}

const PlCudaBackendTable kTable = make_table();

}  // namespace

extern "C" PL_CUDA_API const PlCudaBackendTable* pl_cuda_backend_table(void) { return &kTable; }

#endif
