// gather_batch(): row copies from a Dataset into batch buffers.
#include "data/batch.h"

#include <cstring>
#include <vector>

#include "backend/backend.h"
#include <stdexcept>
#include <string>

namespace engine {

void gather_batch(const Dataset& d, std::span<const std::uint32_t> indices, float* x,
                  std::int32_t* labels, float* targets) {
  if (!x) throw std::invalid_argument("gather_batch: input buffer is null");
  if (d.is_classification() && !labels) throw std::invalid_argument("gather_batch: label buffer is null");
  if (!d.is_classification() && d.target_width > 0 && !targets) {
    throw std::invalid_argument("gather_batch: target buffer is null");
  }
  const std::size_t f = d.shape.features;
  const std::size_t tw = d.target_width;
  for (std::size_t k = 0; k < indices.size(); ++k) {
    const std::size_t i = indices[k];
    if (i >= d.count) {
      throw std::invalid_argument("gather_batch: index " + std::to_string(i) + " outside " + d.name +
                                  " " + d.split + " (" + std::to_string(d.count) + " samples)");
    }
    std::memcpy(x + k * f, d.inputs.data() + i * f, f * sizeof(float));
    if (labels && d.is_classification()) labels[k] = d.labels[i];
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
  const std::size_t pitch = d.row_pitch ? d.row_pitch : f;
  const std::size_t L = d.labels_per_sample, lpitch = d.label_pitch ? d.label_pitch : L;
  if (pitch != f || L != 1 || lpitch != L) {
    // Overlapping windows: gathered on the host, then one upload each.
    std::vector<float> xs(indices.size() * f);
    std::vector<std::int32_t> ls(indices.size() * L);
    for (std::size_t k = 0; k < indices.size(); ++k) {
      std::memcpy(xs.data() + k * f, d.inputs.data() + indices[k] * pitch, f * sizeof(float));
      if (d.is_classification())
        std::memcpy(ls.data() + k * L, d.labels.data() + indices[k] * lpitch, L * sizeof(std::int32_t));
    }
    be.upload(x, xs.data(), xs.size() * sizeof(float));
    if (d.is_classification()) be.upload(labels, ls.data(), ls.size() * sizeof(std::int32_t));
    return;
  }
  be.upload_rows(x, d.inputs.data(), f * sizeof(float), indices.data(), indices.size());
  if (d.is_classification()) {
    be.upload_rows(labels, d.labels.data(), sizeof(std::int32_t), indices.data(), indices.size());
  } else if (d.target_width > 0) {
    be.upload_rows(targets, d.targets.data(), d.target_width * sizeof(float), indices.data(), indices.size());
  }
}

}  // namespace engine
