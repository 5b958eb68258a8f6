// Internal to engine/optim: block loops that go parallel (OpenMP) only for large spans.
#pragma once

#include <cstddef>

namespace engine::optim_detail {

// Below this many elements a parallel region costs more than it saves (and
// the GUI thread competes for the 2 cores): run on the calling thread.
inline constexpr std::size_t kParallelMin = std::size_t{1} << 16;
// Block length: state rounding happens per block, while the block is in L1.
inline constexpr std::size_t kBlock = 2048;

// Calls body(begin, end) for consecutive blocks covering [0, n). Blocks are
// independent; for n >= kParallelMin they run on OpenMP threads (static
// schedule). No allocation.
template <class Body>
void for_blocks(std::size_t n, Body&& body) {
  const std::size_t blocks = (n + kBlock - 1) / kBlock;
  if (n < kParallelMin) {
    for (std::size_t b = 0; b < blocks; ++b) body(b * kBlock, b + 1 == blocks ? n : (b + 1) * kBlock);
    return;
  }
#pragma omp parallel for schedule(static)
  for (std::size_t b = 0; b < blocks; ++b) body(b * kBlock, b + 1 == blocks ? n : (b + 1) * kBlock);
}

}  // namespace engine::optim_detail
