// LossScaler: dynamic/static loss scaling with PyTorch GradScaler's semantics.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace engine {

class Backend;
class GradSet;

enum class ScalingMode : std::uint8_t { None, Static, Dynamic };
const char* scaling_mode_key(ScalingMode m);  // "none", "static", "dynamic"

// Defaults are GradScaler's (torch/amp/grad_scaler.py):
//   init_scale 2^16, growth_factor 2.0, backoff_factor 0.5, growth_interval 2000.
struct LossScalerConfig {
  ScalingMode mode = ScalingMode::Dynamic;
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
};

// Throws std::invalid_argument naming the field ("loss_scale.growth_factor
// must be > 1") for out-of-range values.
void validate(const LossScalerConfig& c);

// Misuse of the ready -> unscaled -> counted -> stepped -> ready cycle.
class ScalerStateError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// One training step with a scaler, as with PyTorch's GradScaler:
//   loss_scale = scaler.scale();        // multiply the loss (its gradient seed) by this
//   ... backward ...
//   grads.bind(params, counts, &sum);   // the step's gradients (GradSet)
//   scaler.unscale(be, grads);          // grads *= 1/scale in FP32, inf/NaN counted
//   ... read the counts back (the step reads them with its loss) ...
//   scaler.record_nonfinite(total);     // what unscale found
//   if (scaler.should_step()) optimizer.step();   // else the step is skipped
//   scaler.update();                    // backoff on overflow, growth after N clean steps
//
// unscale() issues the backend's fused pass and does not wait for it: like
// GradScaler's found_inf, its result lives in backend memory until the
// caller's one read of the step, which hands the total to
// record_nonfinite(). The cycle is ready -> unscaled -> (counted) ->
// stepped -> ready; a call out of order is a ScalerStateError saying which.
//
// Mode None is a no-op scaler (scale 1, the unscale multiplies by 1, every
// step is taken, the scale never changes), so the trainer never branches on
// it. As in PyTorch without a GradScaler, non-finite gradients are then
// applied: the weights go NaN and the run diverges, which is what the fp16
// recipe demonstrates. They are still counted (overflow attribution).
// Static keeps the scale fixed and, like Dynamic, skips steps with
// non-finite gradients.
//
// Not thread-safe: the trainer thread owns it. Settings may be replaced
// between steps with set_config() (live changes from the UI).
class LossScaler {
 public:
  explicit LossScaler(const LossScalerConfig& c = {});

  const LossScalerConfig& config() const { return m_config; }
  // Takes effect at the next step; a new init_scale resets the scale only
  // when the mode changes or reset_scale is true.
  void set_config(const LossScalerConfig& c, bool reset_scale = false);

  // The scale the current step's loss is multiplied by (1 with mode None).
  float scale() const { return m_config.mode == ScalingMode::None ? 1.0f : m_scale; }
  std::int64_t growth_tracker() const { return m_growth_tracker; }

  // 1 / scale as GradScaler computes it (the reciprocal taken in double,
  // then rounded to float); 1 with mode None.
  float inverse_scale() const { return static_cast<float>(1.0 / static_cast<double>(scale())); }

  // Issues the backend's fused unscale-and-check over every gradient of
  // `grads` (coded ones decoded into their FP32 views on the way): each
  // multiplied by inverse_scale(), its non-finite count into its count
  // slot, the sum of the squared unscaled values into grads.sum_squares().
  // Nothing is read back. ready -> unscaled.
  void unscale(Backend& be, const GradSet& grads);
  // The gradients recomputed after unscale() (the overflow attribution
  // re-run, same batch and scale): decoded and multiplied by the same
  // 1/scale again, without counting. Only between unscale() and update().
  void unscale_again(Backend& be, GradSet& grads) const;
  // The total non-finite count unscale() found, once the caller has read
  // its slots back. Once per unscale().
  void record_nonfinite(std::int64_t count);

  // A step whose unscale ran on the device with update_scale deciding
  // there (a captured CUDA step): the count read back takes the scaler from
  // ready to counted, as unscale() and record_nonfinite() would, without
  // issuing the pass. should_step() and update() then mirror on the host
  // what the device did (the same rule, held bit for bit by the step-math
  // test), so the scale the host reports is the device's.
  void record_device_unscale(std::int64_t count);

  // True when the optimizer may step (no inf/NaN found, or mode None).
  // -> stepped.
  bool should_step();
  // Adjusts the scale: backoff on overflow, growth after growth_interval
  // consecutive clean steps (if the grown scale is finite). -> ready.
  void update();

 private:
  enum class State : std::uint8_t { Ready, Unscaled, Counted, Stepped };
  LossScalerConfig m_config;
  float m_scale;
  std::int64_t m_growth_tracker = 0;
  std::int64_t m_found = 0;
  State m_state = State::Ready;
};

}  // namespace engine
