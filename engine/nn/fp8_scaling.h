// FP8 per-tensor delayed scaling: an amax history and the scale it gives (Transformer Engine's DelayedScaling).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "numeric/precision.h"
#include "tensor/tensor.h"

namespace engine {

// One FP8 GEMM operand's scale, as Transformer Engine's DelayedScaling
// recipe keeps it (transformer_engine/pytorch/fp8.py, with the defaults
// amax_compute_algo "max" and _default_sf_compute):
//
//   scale = fp8_max / max(amax_history) / 2^margin
//
// kept at its previous value when that max is 0 or not finite. The operand
// is cast as saturate(x * scale) and the GEMM result multiplied by
// 1 / (scale_a * scale_b). "Delayed": the scale a step uses comes from the
// amaxes of earlier steps only; after the op the step's own amax is
// recorded (record()), which computes the scale for the next step. The
// history starts as zeros and the scale as 1, so a fresh tensor's first
// cast is a plain saturating FP8 cast.
//
// A spike stays in the history for amax_history_len records: the scales of
// the next amax_history_len steps all see it.
//
// Not thread-safe; owned by a layer or a parameter (trainer thread).
class DelayedScale {
 public:
  DelayedScale() = default;
  // format: E4M3 (fp8_max 448) or E5M2 (57344); anything else throws
  // std::invalid_argument. config.amax_history_len must be >= 1.
  DelayedScale(Format format, const DelayedScaling& config);

  // Whether this was built for an FP8 format (a default-constructed one was not).
  bool active() const { return !m_history.empty(); }
  Format format() const { return m_format; }
  // The scale the next cast uses.
  float scale() const { return m_scale; }
  // Appends one step's amax (dropping the oldest once the history is full)
  // and recomputes the scale.
  void record(float amax);
  // max over the history (0 when empty); inf or NaN when a recorded amax was.
  float history_max() const;
  std::int64_t records() const { return m_records; }
  const DelayedScaling& config() const { return m_config; }

  // Where an op writes this step's amax (backend memory, allocated from
  // current_backend() on first use); the slot is then pending until the
  // step's one read records it (take_pending).
  float* amax_slot();
  bool pending() const { return m_pending; }
  const float* pending_slot() const { return m_amax.as<float>(); }
  // Records `amax` read from the pending slot and clears the pending mark.
  void take_pending(float amax);

 private:
  Format m_format = Format::FP32;
  DelayedScaling m_config;
  float m_fp8_max = 0.0f;
  std::vector<float> m_history;  // ring; m_next is where the next amax goes
  std::size_t m_next = 0;
  std::int64_t m_records = 0;
  float m_scale = 1.0f;
  Buffer m_amax;
  bool m_pending = false;
};


// A layer's delayed scale for FP8 format f: `s` itself, (re)started first
// when it is inactive or was made for another format (a layer's precision
// changed since set_delayed_scaling).
inline DelayedScale& delayed_scale_for(DelayedScale& s, Format f, const DelayedScaling& c) {
  if (!s.active() || s.format() != f) s = DelayedScale(f, c);
  return s;
}

}  // namespace engine
