// The backends engine tests run on.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/registry.h"

namespace test {

// The CPU backend, one per test binary, for tests that hand it host memory
// of their own (vectors, tensors built outside any BackendScope).
inline engine::Backend& cpu_backend() {
  static const std::unique_ptr<engine::Backend> be = engine::make_cpu_backend(1);
  return *be;
}

// The backend the training tests run on: "cpu", or "guarded" when ctest
// runs them again with PL_TEST_BACKEND=guarded (docs/ARCHITECTURE.md "The backend contract": the
// proof that the step touches backend memory only through Backend calls).
inline std::string run_backend_name() {
  const char* e = std::getenv("PL_TEST_BACKEND");
  return e && *e ? std::string(e) : std::string("cpu");
}

// The backend of run_backend_name(), one per test binary (one thread), for
// tests that train whole runs on it.
inline engine::Backend& run_backend() {
  static const std::unique_ptr<engine::Backend> be = engine::make_backend(run_backend_name(), 1).backend;
  return *be;
}

}  // namespace test
