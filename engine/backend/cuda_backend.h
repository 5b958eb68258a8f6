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
