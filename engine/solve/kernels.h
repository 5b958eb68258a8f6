// The solver's memory-bound inner products: each streams a row of a matrix
// against a vector. Written as 32 or 64 independent partial sums, added
// together in a fixed order at the end, so every CPU clone (AVX-512, AVX2,
// baseline) and every thread count gives the same bits, and a wide CPU
// keeps enough additions in flight to run at memory speed (a single
// running sum waits on each addition's latency).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace engine::solve_kernels {

// Vectors of one AVX-512 register (two AVX2 ones, four SSE ones in a
// baseline clone) for the solver's loops, loaded and stored at any
// element's alignment (GCC's vector extension: each clone of a function
// gets its own instructions, the same arithmetic lane by lane).
typedef double D8 __attribute__((vector_size(64), aligned(8)));
typedef float F8 __attribute__((vector_size(32), aligned(4)));
typedef float F16 __attribute__((vector_size(64), aligned(4)));

// sum_j a[j] * x[j], j < n: in FP32 (dot_ff), in double with FP32 matrix
// values (dot_fd: each product exact in double), and in double (dot_dd).
float dot_ff(const float* a, const float* x, std::int64_t n);
double dot_fd(const float* a, const double* x, std::int64_t n);
double dot_dd(const double* a, const double* x, std::int64_t n);
// The same for four rows at once (row r at a + r * lda, its sum in
// out[r]): each row's sum has the bits dot_xx gives it, but x is read once
// for the four and four rows stream at a time, which a memory-bound
// product needs to reach the memory's speed.
void dot4_ff(const float* a, std::int64_t lda, const float* x, std::int64_t n, float* out);
void dot4_fd(const float* a, std::int64_t lda, const double* x, std::int64_t n, double* out);
void dot4_dd(const double* a, std::int64_t lda, const double* x, std::int64_t n, double* out);

// y[i] = sum_j a[i * n + j] * x[j] for the n x n row-major a, the rows
// split among the engine's threads.
void matvec_ff(const float* a, std::int64_t n, const float* x, float* y);
void matvec_dd(const double* a, std::int64_t n, const double* x, double* y);

// v.resize(count), a fresh buffer on transparent huge pages where the
// kernel offers them on request: a first touch of n^2 floats on 4 KiB pages
// costs thousands of page faults, which measured 20-40% of an n = 2048
// BF16 factorization on a virtual machine.
template <class T>
void resize_huge(std::vector<T>& v, std::size_t count) {
  if (v.capacity() < count) {
    std::vector<T>().swap(v);
    v.reserve(count);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    constexpr std::uintptr_t kHuge = std::uintptr_t{1} << 21;
    const auto begin = reinterpret_cast<std::uintptr_t>(v.data());
    const std::uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1), end = begin + count * sizeof(T);
    if (end > first + kHuge) madvise(reinterpret_cast<void*>(first), (end - first) & ~(kHuge - 1), MADV_HUGEPAGE);
#endif
  }
  v.resize(count);
}

}  // namespace engine::solve_kernels
