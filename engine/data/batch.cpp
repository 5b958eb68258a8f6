// gather_batch(): row copies from a Dataset into batch buffers.
#include "data/batch.h"

#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace engine {

namespace {

// Uploads `width` elements of `elem` bytes per sample, sample i starting at
// element i * pitch of `base`. Contiguous samples (pitch == width, every set
// but text) are one upload_rows over the indices, as they always were.
// Overlapping ones (text's windows at pitch 1) are cut into pieces of
// gcd(width, pitch) elements, each a row upload_rows gathers, so the
// backends need no pitched copy of their own: a window of T tokens at pitch
// 1 is T rows of one element, at pitch T one row.
void upload_pitched(Backend& be, void* dst, const void* base, std::size_t elems_in_base, std::size_t elem,
                    std::size_t width, std::size_t pitch, std::span<const std::uint32_t> indices) {
  if (pitch == width) {
    be.upload_rows(dst, base, width * elem, indices.data(), indices.size());
    return;
  }
  const std::size_t piece = std::gcd(width, pitch);
  const std::size_t per_sample = width / piece;
  const std::size_t step = pitch / piece;
  if (elems_in_base / piece > std::numeric_limits<std::uint32_t>::max())
    throw std::invalid_argument("upload_batch: a pitched data set of more than 2^32 rows");
  thread_local std::vector<std::uint32_t> rows;
  rows.resize(indices.size() * per_sample);
  std::uint32_t* r = rows.data();
  for (const std::uint32_t i : indices) {
    const auto first = static_cast<std::uint32_t>(i * step);
    for (std::size_t k = 0; k < per_sample; ++k) *r++ = first + static_cast<std::uint32_t>(k);
  }
  be.upload_rows(dst, base, piece * elem, rows.data(), rows.size());
}

}  // namespace

void gather_batch(const Dataset& d, std::span<const std::uint32_t> indices, float* x,
                  std::int32_t* labels, float* targets) {
  if (!x) throw std::invalid_argument("gather_batch: input buffer is null");
  if (d.is_classification() && !labels) throw std::invalid_argument("gather_batch: label buffer is null");
  if (!d.is_classification() && d.target_width > 0 && !targets) {
    throw std::invalid_argument("gather_batch: target buffer is null");
  }
  const std::size_t f = d.shape.features;
  const std::size_t xp = d.input_stride();
  const std::size_t lw = d.labels_per_sample;
  const std::size_t lp = d.label_stride();
  const std::size_t tw = d.target_width;
  for (std::size_t k = 0; k < indices.size(); ++k) {
    const std::size_t i = indices[k];
    if (i >= d.count) {
      throw std::invalid_argument("gather_batch: index " + std::to_string(i) + " outside " + d.name +
                                  " " + d.split + " (" + std::to_string(d.count) + " samples)");
    }
    std::memcpy(x + k * f, d.inputs.data() + i * xp, f * sizeof(float));
    if (labels && d.is_classification()) {
      if (lw == 1) labels[k] = d.labels[i * lp];
      else std::memcpy(labels + k * lw, d.labels.data() + i * lp, lw * sizeof(std::int32_t));
    }
    if (targets && tw > 0) std::memcpy(targets + k * tw, d.targets.data() + i * tw, tw * sizeof(float));
  }
}

void upload_batch(Backend& be, const Dataset& d, std::span<const std::uint32_t> indices, void* x, void* labels,
                  void* targets) {
  for (std::uint32_t i : indices)
    if (i >= d.count)
      throw std::invalid_argument("upload_batch: index " + std::to_string(i) + " outside " + d.name + " " + d.split +
                                  " (" + std::to_string(d.count) + " samples)");
  const std::size_t f = d.shape.features;
  upload_pitched(be, x, d.inputs.data(), d.inputs.size(), sizeof(float), f, d.input_stride(), indices);
  if (d.is_classification()) {
    upload_pitched(be, labels, d.labels.data(), d.labels.size(), sizeof(std::int32_t), d.labels_per_sample,
                   d.label_stride(), indices);
  } else if (d.target_width > 0) {
    be.upload_rows(targets, d.targets.data(), d.target_width * sizeof(float), indices.data(), indices.size());
  }
}

}  // namespace engine
