// The optimizer updates' blocks (sgd_update, adam_update and the unscale
// pass lined up with them): loops that go parallel (OpenMP) only for large spans.
#pragma once

#include <omp.h>

#include <cstddef>

#include "backend/cpu/parallel.h"

namespace engine::cpu {

// An update does little work a value: its loops go parallel from twice the
// kernels' kParallelMin (below that the fork costs more than it saves, and
// the GUI thread competes for the 2 cores).
inline constexpr std::size_t kUpdateParallelMin = 2 * static_cast<std::size_t>(kParallelMin);
// Block length: state rounding happens per block, while the block is in L1.
inline constexpr std::size_t kBlock = 2048;

// The first of `blocks` blocks that thread t of nt takes: consecutive runs,
// the first blocks % nt threads one block more. Stated rather than left to
// OpenMP's static schedule (whose split is the implementation's), because
// the unscale pass lines its own blocks up with it, so that a
// thread unscales the gradients its update reads next.
inline std::size_t first_block(std::size_t blocks, std::size_t t, std::size_t nt) {
  const std::size_t q = blocks / nt, r = blocks % nt;
  return q * t + (t < r ? t : r);
}

// Calls body(begin, end) for consecutive blocks covering [0, n). Blocks are
// independent; for n >= kUpdateParallelMin they run on OpenMP threads, each its
// first_block run. No allocation.
template <class Body>
void for_blocks(std::size_t n, Body&& body) {
  const std::size_t blocks = (n + kBlock - 1) / kBlock;
  auto run = [&](std::size_t b0, std::size_t b1) {
    for (std::size_t b = b0; b < b1; ++b) body(b * kBlock, b + 1 == blocks ? n : (b + 1) * kBlock);
  };
  if (n < kUpdateParallelMin) {
    run(0, blocks);
    return;
  }
#pragma omp parallel
  {
    const auto t = static_cast<std::size_t>(omp_get_thread_num()), nt = static_cast<std::size_t>(omp_get_num_threads());
    run(first_block(blocks, t, nt), first_block(blocks, t + 1, nt));
  }
}

}  // namespace engine::cpu
