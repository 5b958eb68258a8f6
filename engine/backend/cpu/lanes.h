// Fixed-lane reductions for the CPU's cloned kernels (step_kernels.cpp,
// row_kernels.cpp): value j of a run goes into partial sum j % kLanes, and
// the partial sums fold in one fixed tree, so a sum has the same bits in
// every clone (AVX-512, AVX2, baseline) whatever vector width the compiler
// picks for the lanes.
#pragma once

#include <cstdint>
#include <cstring>

namespace engine::cpu {

inline constexpr int kLanes = 16;

// GCC vector types: each clone lowers them to its own registers (one zmm,
// two ymm or four xmm per 16 lanes), lane by lane the same arithmetic.
typedef float v16f __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));
typedef double v8d __attribute__((vector_size(64)));
typedef std::uint32_t v16u __attribute__((vector_size(64)));
typedef std::int32_t v16i __attribute__((vector_size(64)));

// The kLanes partial sums a[0..15] folded pairwise: (0+8, 1+9, ...), then
// (0+4, ...), ...; returns the total.
template <class T>
[[gnu::always_inline]] inline T fold_lanes(T* a) {
  for (int h = kLanes / 2; h > 0; h /= 2)
    for (int l = 0; l < h; ++l) a[l] += a[l + h];
  return a[0];
}

// fold_lanes of the 16 lanes of a register, in registers: the same adds in
// the same tree (halves, then quarters, ...). Storing the vector and
// reading its lanes back as narrower loads stalls on store forwarding,
// and a LayerNorm row of 64 values folds twice per pass.
[[gnu::always_inline]] inline float fold_lanes(v16f v) {
  typedef float v4f __attribute__((vector_size(16)));
  typedef float v2f __attribute__((vector_size(8)));
  const v8f h8 = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                 __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const v4f h4 = __builtin_shufflevector(h8, h8, 0, 1, 2, 3) + __builtin_shufflevector(h8, h8, 4, 5, 6, 7);
  const v2f h2 = __builtin_shufflevector(h4, h4, 0, 1) + __builtin_shufflevector(h4, h4, 2, 3);
  return h2[0] + h2[1];
}

// 1 for inf and NaN (the all-ones exponent), as an integer.
[[gnu::always_inline]] inline std::uint32_t nonfinite_bit(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  return (u & 0x7F800000u) == 0x7F800000u;
}

}  // namespace engine::cpu
