// The CUDA Backend: engine::Backend over the CUDA module's table
// (libpl_cuda.so, loaded at run time; no CUDA header here). Every op is one
// table call on the backend's context (one device, one stream); a failing
// call throws std::runtime_error with the module's one-line message
// (expression, file and line).
#pragma once

#include <memory>
#include <string>

namespace engine {

class Backend;

// Why a CUDA Backend cannot be made here (no module, no driver, no device,
// or a module without the training ops); empty when it can.
std::string cuda_backend_unusable_reason();

// A CUDA Backend on `device`; throws std::runtime_error with the reason when
// it cannot be made.
std::unique_ptr<Backend> make_cuda_backend(int device = 0);

}  // namespace engine

extern "C" {
struct PlCudaBackendTable;
struct PlCudaContext;
}

namespace engine {

// The CUDA Backend over any table and context (the context is destroyed
// with the backend through table.destroy_context): for tests that run the
// backend's own code over a table of host functions where there is no GPU.
std::unique_ptr<Backend> make_cuda_backend_over(const PlCudaBackendTable& table, PlCudaContext* ctx,
                                                const std::string& device_name);

}  // namespace engine
