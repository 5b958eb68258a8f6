// Gathering a batch: copy the chosen samples into the training step's buffers.
#pragma once

#include <cstdint>
#include <span>

#include "data/dataset.h"
#include "data/sampler.h"

namespace engine {

class Backend;

// Copies samples indices[0..k) of d into caller-owned buffers:
//   x       k x d.shape.features floats (required),
//   labels  k x d.labels_per_sample int32 (classification; may be null for regression),
//   targets k x d.target_width floats (regression; may be null for classification).
// Samples are read at d's pitches (text: overlapping windows).
// Throws std::invalid_argument if a buffer the data set needs is null or an
// index is out of range. Any thread; no allocation.
void gather_batch(const Dataset& d, std::span<const std::uint32_t> indices, float* x,
                  std::int32_t* labels, float* targets);

// gather_batch into backend memory (Backend::upload_rows): x holds
// indices.size() rows of features, labels labels_per_sample int32 per row
// (classification), targets floats (regression). Throws
// std::invalid_argument for an index out of range. Trainer thread (any
// thread: the scratch of a pitched set's row numbers is per thread).
void upload_batch(Backend& be, const Dataset& d, std::span<const std::uint32_t> indices, void* x, void* labels,
                  void* targets);

// Batch b of the sampler's current epoch: gather_batch(d, sampler.batch(b), ...).
// Returns the number of samples written (batch_size, or less for a kept last
// batch). Buffers must hold batch_size() rows. Same thread rules as above.
inline std::size_t fill_batch(const Dataset& d, const BatchSampler& sampler, std::size_t b, float* x,
                              std::int32_t* labels, float* targets) {
  const auto indices = sampler.batch(b);
  gather_batch(d, indices, x, labels, targets);
  return indices.size();
}

}  // namespace engine
