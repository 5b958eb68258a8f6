// GradSet: a model's gradients as one training step reads them (the fused
// unscale-and-check, clipping, statistics, the optimizer): one FP32 view per
// parameter, with the slots the unscale pass writes its counts into.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/fused.h"
#include "tensor/tensor.h"

namespace engine {

struct Parameter;

// Reused step after step: bind() keeps the scratch tensors, so a step of
// the same model allocates nothing new.
class GradSet {
 public:
  // Views `params`' gradients for this step. An FP32 gradient is viewed in
  // place; any other is given an FP32 scratch of its size which the fused
  // unscale (LossScaler::unscale) fills by decoding the codes as it goes.
  // counts[i] (backend memory) receives parameter i's non-finite count and
  // *sum_squares the sum of the squared unscaled gradients, so that the
  // caller can read them with its other results in one transfer.
  void bind(std::span<Parameter* const> params, std::int64_t* counts, double* sum_squares);
  // Decodes every coded gradient into its scratch, as the unscale pass did:
  // for gradients recomputed after it (the overflow attribution re-run).
  void decode(Backend& be);

  std::size_t size() const { return m_views.size(); }
  Parameter& param(std::size_t i) const { return *m_params[i]; }
  // Parameter i's gradient in FP32 (backend memory): unscaled once the
  // scaler's unscale has run.
  float* values(std::size_t i) const { return m_views[i].data; }
  std::int64_t numel(std::size_t i) const { return m_views[i].n; }
  bool coded(std::size_t i) const { return m_codes[i].data != nullptr; }
  std::span<const GradBuffer> views() const { return m_views; }
  std::span<const GradCodes> codes() const { return m_codes; }
  double* sum_squares() const { return m_sum_squares; }
  // Bytes of the FP32 scratch of coded gradients (CPU emulation memory).
  std::int64_t scratch_bytes() const;

 private:
  std::vector<Parameter*> m_params;
  std::vector<GradBuffer> m_views;
  std::vector<GradCodes> m_codes;
  std::vector<Tensor> m_scratch;
  double* m_sum_squares = nullptr;
};

}  // namespace engine
