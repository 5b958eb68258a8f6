// Workspace: a grow-only, 64-byte aligned scratch buffer owned by the CPU backend.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

namespace engine::cpu {

// Grows on demand and never shrinks, so once every shape of a training step
// has been seen, steady-state calls allocate nothing. Contents are not kept
// across growth. One owner (the backend), used from the trainer thread; the
// OpenMP workers of a call may write disjoint parts of it.
class Workspace {
 public:
  Workspace() = default;
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  ~Workspace() { std::free(m_data); }

  void* get(std::size_t bytes) {
    if (bytes > m_capacity) {
      std::free(m_data);
      m_data = nullptr;
      m_capacity = 0;
      // Round up to whole 4 KiB pages: fewer regrowths for shapes that
      // differ by a little, and aligned_alloc needs a multiple of 64.
      const std::size_t cap = (bytes + 4095) / 4096 * 4096;
      m_data = std::aligned_alloc(64, cap);
      if (!m_data) throw std::bad_alloc();
      m_capacity = cap;
    }
    return m_data;
  }
  template <class T>
  T* get(std::size_t count) {
    return static_cast<T*>(get(count * sizeof(T)));
  }
  std::size_t capacity() const { return m_capacity; }

 private:
  void* m_data = nullptr;
  std::size_t m_capacity = 0;
};

}  // namespace engine::cpu
