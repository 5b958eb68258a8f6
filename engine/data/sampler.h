// Seeded, reproducible batch order: one Fisher-Yates permutation per (seed, epoch).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace engine {

// Fills `order` with a permutation of 0..order.size()-1 that depends only on
// (seed, epoch): Fisher-Yates over the identity driven by SplitMix64 with
// Lemire's unbiased bounded integers, so every platform and standard library
// gives the same order (std::shuffle would not). Any epoch can be produced
// directly, without replaying earlier ones (resuming a run is exact).
// Any thread; no allocation.
void epoch_permutation(std::uint64_t seed, std::uint64_t epoch, std::span<std::uint32_t> order);

// Splits an epoch into batches. The last partial batch is KEPT by default,
// as PyTorch's DataLoader does (drop_last=False): an epoch of 60000 samples
// with batch 64 is 937 full batches and one of 32. drop_last=true drops it.
// shuffle=false gives 0..count-1 every epoch (evaluation).
// One thread at a time per instance (the training thread); set_epoch does
// not allocate.
class BatchSampler {
 public:
  BatchSampler(std::size_t count, std::size_t batch_size, std::uint64_t seed, bool shuffle = true,
               bool drop_last = false);

  std::size_t count() const { return m_order.size(); }
  std::size_t batch_size() const { return m_batch; }
  bool drop_last() const { return m_drop_last; }
  std::size_t batches_per_epoch() const;

  // Selects the epoch whose order batch() returns (epoch 0 after construction).
  void set_epoch(std::uint64_t epoch);
  std::uint64_t epoch() const { return m_epoch; }

  // Sample indices of batch b (b < batches_per_epoch()) of the current epoch;
  // size batch_size(), or less for a kept last batch.
  std::span<const std::uint32_t> batch(std::size_t b) const;
  // The whole order of the current epoch.
  std::span<const std::uint32_t> order() const { return m_order; }

 private:
  std::vector<std::uint32_t> m_order;
  std::size_t m_batch;
  std::uint64_t m_seed;
  std::uint64_t m_epoch = 0;
  bool m_shuffle;
  bool m_drop_last;
};

}  // namespace engine
