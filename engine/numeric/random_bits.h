// The counter-based random bits of stochastic rounding (numeric/cast.h's
// stochastic_bits): element `index` of a stream `seed` gets
// random_at(stream_key(seed), index). Inline so vectorized loops (the
// block formats' stochastic path) compute the same bits as the scalar one.
#pragma once

#include <cstdint>

namespace engine::random_bits {

// splitmix64's finaliser: a bijection on 64 bits with full avalanche.
inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
inline constexpr std::uint64_t kGamma = 0x9E3779B97F4A7C15ull;  // 2^64 / golden ratio, odd

inline std::uint64_t stream_key(std::uint64_t seed) { return mix64(seed + kGamma); }
// The seed is hashed into a key first, so seeds s and s+1 do not give
// shifted copies of one sequence (as mixing seed ^ index or seed + index
// directly would).
inline std::uint32_t random_at(std::uint64_t key, std::uint64_t index) {
  return static_cast<std::uint32_t>(mix64(key + index * kGamma) >> 32);
}

}  // namespace engine::random_bits
