// The backend registry: make_backend and available_backends.
#include "backend/registry.h"

#include <stdexcept>

#include "backend/backend.h"
#include "backend/cuda_module.h"
#include "backend/guarded/guarded_backend.h"

namespace engine {

namespace {

// Why the CUDA backend cannot train here (empty: it could). The module has
// the device query and casts; the training ops are the next issue's.
std::string cuda_unusable_reason() {
  if (!cuda_available()) return cuda_unavailable_reason();
  return "the CUDA backend's training ops are not built yet (libpl_cuda.so has the device query, memory "
         "and casts only)";
}

}  // namespace

BackendChoice make_backend(const std::string& name, int threads) {
  BackendChoice c;
  if (name == "cpu" || name == "auto") {
    c.backend = make_cpu_backend(threads);
    c.name = "cpu";
    if (name == "auto") c.note = "cpu: " + cuda_unusable_reason();
    return c;
  }
  if (name == "cuda") throw std::runtime_error("backend 'cuda': " + cuda_unusable_reason());
  if (name == "guarded") {
    c.backend = make_guarded_backend(make_cpu_backend(threads));
    c.name = "guarded";
    return c;
  }
  throw std::invalid_argument("backend '" + name + "': unknown (auto, cpu, cuda)");
}

std::vector<BackendAvailability> available_backends() {
  std::vector<BackendAvailability> out;
  out.push_back({"cpu", true, ""});
  const std::string why = cuda_unusable_reason();
  out.push_back({"cuda", why.empty(), why});
  return out;
}

}  // namespace engine
