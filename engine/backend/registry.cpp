// The backend registry: make_backend and available_backends.
#include "backend/registry.h"

#include <stdexcept>

#include "backend/backend.h"
#include "backend/cuda_backend.h"
#include "backend/cuda_module.h"
#include "backend/guarded/guarded_backend.h"

namespace engine {

std::string describe_backend_choice(const std::string& name) {
  if (name != "cuda" && name != "auto") return name;
  const std::string why = cuda_backend_unusable_reason();
  if (!why.empty()) return (name == "auto" ? "cpu: " : "cuda unavailable: ") + why;
  CudaDeviceInfo dev;
  return cuda_device_info(0, dev).ok() ? "cuda: " + dev.label() : "cuda";
}

BackendChoice make_backend(const std::string& name, int threads) {
  BackendChoice c;
  if (name == "auto" || name == "cuda") {
    const std::string why = cuda_backend_unusable_reason();
    if (name == "cuda" && !why.empty()) throw std::runtime_error("backend 'cuda': " + why);
    c.note = describe_backend_choice(name);
    if (why.empty()) {
      try {
        c.backend = make_cuda_backend();
        c.name = "cuda";
        return c;
      } catch (const std::exception& e) {
        if (name == "cuda") throw;
        c.note = std::string("cpu: the CUDA backend failed to start (") + e.what() + ")";
      }
    }
  }
  if (name == "cpu" || name == "auto") {
    c.backend = make_cpu_backend(threads);
    c.name = "cpu";
    return c;
  }
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
  const std::string why = cuda_backend_unusable_reason();
  out.push_back({"cuda", why.empty(), why});
  return out;
}

}  // namespace engine
