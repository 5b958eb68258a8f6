// Threading helpers of the CPU backend: the size threshold for OpenMP and a
// reduction whose result does not depend on the thread count.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace engine::cpu {

// Below this much work (elements, or rows * cols) a kernel runs on the
// calling thread: an OpenMP fork/join costs a few microseconds, as much as
// the whole op on a small tensor.
inline constexpr std::int64_t kParallelMin = 32 * 1024;

inline bool worth_parallel(std::int64_t work) { return work >= kParallelMin; }

// Splits [0, n) into at most kMaxChunks chunks of at least `min_chunk` items
// whose boundaries depend on n only, reduces each chunk with
// f(begin, end) -> T, and adds the chunk results in order. The result is
// therefore the same for any thread count (reproducible runs), and small
// inputs take a single chunk on the calling thread.
inline constexpr int kMaxChunks = 64;

inline std::int64_t chunk_size(std::int64_t n, std::int64_t min_chunk) {
  return std::max<std::int64_t>(std::max<std::int64_t>(min_chunk, 1), (n + kMaxChunks - 1) / kMaxChunks);
}

template <class T, class F>
T reduce_chunks(std::int64_t n, std::int64_t min_chunk, F&& f) {
  if (n <= 0) return T{};
  const std::int64_t chunk = chunk_size(n, min_chunk);
  const int nchunks = static_cast<int>((n + chunk - 1) / chunk);
  if (nchunks == 1) return f(std::int64_t{0}, n);
  T part[kMaxChunks];
#pragma omp parallel for schedule(static)
  for (int c = 0; c < nchunks; ++c) {
    const std::int64_t begin = c * chunk;
    part[c] = f(begin, std::min(n, begin + chunk));
  }
  T total{};
  for (int c = 0; c < nchunks; ++c) total += part[c];
  return total;
}

// Runs f(begin, end) over [0, n) in parallel chunks when n is large enough
// (elementwise work: no result to combine, so the chunks follow the thread
// count: one a thread, of at least kParallelMin / 8 values. Fixed 16Ki
// chunks gave a 2048 x 64 activation to 8 of 16 threads; on 2 threads the
// split is the same as theirs).
template <class F>
void for_chunks(std::int64_t n, F&& f) {
  if (n <= 0) return;
  if (!worth_parallel(n)) {
    f(std::int64_t{0}, n);
    return;
  }
  const std::int64_t nt = omp_get_max_threads();
  const std::int64_t chunk = std::max<std::int64_t>(kParallelMin / 8, (n + nt - 1) / nt);
  const int nchunks = static_cast<int>((n + chunk - 1) / chunk);
#pragma omp parallel for schedule(static)
  for (int c = 0; c < nchunks; ++c) {
    const std::int64_t begin = c * chunk;
    f(begin, std::min(n, begin + chunk));
  }
}

}  // namespace engine::cpu
