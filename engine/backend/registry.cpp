// The backend registry: make_backend and available_backends.
#include "backend/registry.h"

#include <stdexcept>

#include "backend/backend.h"
#include "backend/cuda_backend.h"
#include "backend/cuda_module.h"
#include "backend/guarded/guarded_backend.h"

namespace engine {

BackendChoice make_backend(const std::string& name, int threads) {
  BackendChoice c;
  if (name == "auto") {
    const std::string why = cuda_backend_unusable_reason();
    if (why.empty()) {
      try {
        c.backend = make_cuda_backend();
        c.name = "cuda";
        c.note = "cuda: " + c.backend->info().device;
        return c;
      } catch (const std::exception& e) {
        c.note = std::string("cpu: the CUDA backend failed to start (") + e.what() + ")";
      }
    } else {
      c.note = "cpu: " + why;
    }
    c.backend = make_cpu_backend(threads);
    c.name = "cpu";
    return c;
  }
  if (name == "cpu") {
    c.backend = make_cpu_backend(threads);
    c.name = "cpu";
    return c;
  }
  if (name == "cuda") {
    if (const std::string why = cuda_backend_unusable_reason(); !why.empty())
      throw std::runtime_error("backend 'cuda': " + why);
    c.backend = make_cuda_backend();
    c.name = "cuda";
    c.note = "cuda: " + c.backend->info().device;
    return c;
  }
  if (name == "guarded") {
    c.backend = make_guarded_backend(make_cpu_backend(threads));
    c.name = "guarded";
    return c;
  }
  throw std::invalid_argument("backend '" + name + "': unknown (auto, cpu, cuda)");
}

std::string describe_backend_choice(const std::string& name) {
  if (name == "cuda" || name == "auto") {
    const std::string why = cuda_backend_unusable_reason();
    if (why.empty()) {
      CudaDeviceInfo dev;
      if (cuda_device_info(0, dev).ok())
        return "cuda: " + dev.name + " (sm_" + std::to_string(dev.compute_major) + std::to_string(dev.compute_minor) + ")";
      return "cuda";
    }
    if (name == "auto") return "cpu (auto: " + why + ")";
    return "cuda unavailable: " + why;
  }
  return name;
}

std::vector<BackendAvailability> available_backends() {
  std::vector<BackendAvailability> out;
  out.push_back({"cpu", true, ""});
  const std::string why = cuda_backend_unusable_reason();
  out.push_back({"cuda", why.empty(), why});
  return out;
}

}  // namespace engine
