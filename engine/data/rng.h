// SplitMix64: the data layer's portable random numbers (same bits on every platform).
#pragma once

#include <cstdint>

namespace engine {

// Why not std::mt19937_64 + std::uniform_*_distribution: the engines are
// specified bit for bit but the distributions are implementation-defined, so
// libstdc++, libc++ and MSVC would shuffle differently. Everything here is
// integer arithmetic with a fixed mapping to doubles, so a seed means the same
// data and the same batch order everywhere. Not thread-safe per instance.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : m_state(seed) {}

  std::uint64_t next() {
    std::uint64_t z = (m_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Uniform in [0, 1) with 53 random bits (exact: k * 2^-53).
  double uniform01() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Uniform in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform01(); }

  // Uniform integer in [0, bound), bound > 0, without modulo bias: Lemire's
  // multiply-shift with rejection (deterministic given the seed).
  std::uint64_t below(std::uint64_t bound) {
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * bound;
    auto low = static_cast<std::uint64_t>(m);
    if (low < bound) {
      const std::uint64_t threshold = (0 - bound) % bound;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next()) * bound;
        low = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::uint64_t>(m >> 64);
  }

 private:
  std::uint64_t m_state;
};

// Derives independent seeds for named streams (dataset split, epoch, ...) from
// one user seed, so each stream can be regenerated on its own.
inline std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream) {
  SplitMix64 a(seed ^ (stream * 0xD1B54A32D192ED03ull));
  a.next();
  return a.next();
}

}  // namespace engine
