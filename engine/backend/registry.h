// The backend registry: the one place that knows which backends exist and
// builds them (docs/ARCHITECTURE.md "The backend contract").
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace engine {

class Backend;

struct BackendChoice {
  std::unique_ptr<Backend> backend;
  std::string name;  // what was built: "cpu", "guarded" ...
  std::string note;  // one line for "auto": what it chose and why ("cpu: no CUDA device (...)")
};

// "auto": CUDA when a device is present and the CUDA backend is built,
// else the CPU one (note says why). "cpu": oneDNN. "cuda": throws
// std::runtime_error with one line saying why it cannot be used here (no
// module, no driver, no device, or the backend not built yet). "guarded":
// the CPU backend behind page protection (tests; see
// backend/guarded/guarded_backend.h). threads <= 0: all cores. Any other
// name throws std::invalid_argument listing the names.
BackendChoice make_backend(const std::string& name, int threads = 0);

// What make_backend(name) would build, in one line, without building it
// (BackendChoice::note's text): "cpu", "cuda: NVIDIA H100 80GB HBM3
// (sm_90)", or for auto without CUDA "cpu: no CUDA device: ...".
std::string describe_backend_choice(const std::string& name);

struct BackendAvailability {
  std::string name;    // "cpu", "cuda"
  bool available = false;
  std::string reason;  // one line when not available
};
// The backends a user can choose (not "guarded", a test backend), in order.
std::vector<BackendAvailability> available_backends();

}  // namespace engine
