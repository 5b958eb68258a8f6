// GuardedBackend: a test instrument, the proof that layers touch backend
// memory only through Backend calls (what a GPU demands). It wraps another
// backend (the CPU one) and allocates every buffer from one arena that is
// inaccessible (PROT_NONE) except while one of its own calls runs: host code
// that reads or writes backend memory outside a Backend call crashes at once
// instead of working by accident, as it would on a GPU. It also checks that
// every pointer an op gets is its own memory, and counts the host's reads
// (downloads). Fused ops pass through one generic forwarder (run_fused:
// each op lists its buffers), so a new fused op needs no change here.
//
// It lives in the product library, not the tests, because it must run the
// product's own paths: the registry offers it as the "guarded" backend, so
// whole training runs (the trainer, the CLI, the guarded test suites) go
// through it unchanged, and a run that passes there is one that needs no
// host access to device memory.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/backend.h"

namespace engine {

struct GuardedCounters {
  std::int64_t downloads = 0;       // host reads (Backend::download)
  std::int64_t download_bytes = 0;
  std::int64_t uploads = 0;
  std::int64_t calls = 0;           // every op, transfers included
  std::int64_t allocations = 0;
};

// `inner` must use host memory (the CPU backend). Throws std::runtime_error
// when the arena cannot be reserved. Misuse (a pointer that is not the
// arena's, an allocation beyond it) throws std::logic_error naming the op.
std::unique_ptr<Backend> make_guarded_backend(std::unique_ptr<Backend> inner);
// The counters of a backend made by make_guarded_backend (null for any other).
const GuardedCounters* guarded_counters(const Backend& be);

}  // namespace engine
