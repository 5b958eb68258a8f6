// BatchSampler and epoch_permutation: the reproducible data order.
#include "data/sampler.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

#include "data/rng.h"

namespace engine {

void epoch_permutation(std::uint64_t seed, std::uint64_t epoch, std::span<std::uint32_t> order) {
  std::iota(order.begin(), order.end(), std::uint32_t{0});
  // Stream 1000 + epoch: apart from the dataset generators' streams.
  SplitMix64 rng(derive_seed(seed, 1000 + epoch));
  for (std::size_t i = order.size(); i > 1; --i) {
    const auto j = static_cast<std::size_t>(rng.below(i));  // j in [0, i)
    std::swap(order[i - 1], order[j]);
  }
}

BatchSampler::BatchSampler(std::size_t count, std::size_t batch_size, std::uint64_t seed, bool shuffle,
                           bool drop_last)
    : m_batch(batch_size), m_seed(seed), m_shuffle(shuffle), m_drop_last(drop_last) {
  if (batch_size == 0) throw std::invalid_argument("batch size must be at least 1");
  if (count > std::numeric_limits<std::uint32_t>::max()) {
    throw std::invalid_argument("dataset of " + std::to_string(count) + " samples exceeds 2^32");
  }
  m_order.resize(count);
  set_epoch(0);
}

std::size_t BatchSampler::batches_per_epoch() const {
  const std::size_t n = m_order.size();
  return m_drop_last ? n / m_batch : (n + m_batch - 1) / m_batch;
}

void BatchSampler::set_epoch(std::uint64_t epoch) {
  m_epoch = epoch;
  if (m_shuffle) {
    epoch_permutation(m_seed, epoch, m_order);
  } else {
    std::iota(m_order.begin(), m_order.end(), std::uint32_t{0});
  }
}

std::span<const std::uint32_t> BatchSampler::batch(std::size_t b) const {
  if (b >= batches_per_epoch()) {
    throw std::out_of_range("batch " + std::to_string(b) + " of an epoch with " +
                            std::to_string(batches_per_epoch()) + " batches");
  }
  const std::size_t begin = b * m_batch;
  const std::size_t end = std::min(begin + m_batch, m_order.size());
  return std::span<const std::uint32_t>(m_order).subspan(begin, end - begin);
}

}  // namespace engine
