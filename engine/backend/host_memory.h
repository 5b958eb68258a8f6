// Host memory for tensors and the CPU backend's buffers.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace engine {

// 64-byte aligned (full AVX-512 vectors, no false sharing between threads);
// a buffer of 4 MiB or more is 2 MiB aligned and asks for transparent huge
// pages, so its first touch costs one page fault per 2 MiB instead of one
// per 4 KiB. Released with std::free. Throws std::bad_alloc.
inline void* host_aligned_allocate(std::size_t bytes) {
  constexpr std::size_t kHuge = std::size_t{1} << 21;
  if (bytes >= 2 * kHuge) {
    const std::size_t size = (bytes + kHuge - 1) / kHuge * kHuge;
    void* p = std::aligned_alloc(kHuge, size);
    if (!p) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    madvise(p, size, MADV_HUGEPAGE);
#endif
    return p;
  }
  void* p = std::aligned_alloc(64, (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64);
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace engine
