// LossScaler: dynamic/static loss scaling with PyTorch GradScaler's semantics.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

namespace engine {

class Backend;

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

// Misuse of the ready -> unscaled -> stepped -> ready cycle.
class ScalerStateError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// One training step with a scaler:
//   loss_scale = scaler.scale();             // multiply the loss (its gradient seed) by this
//   ... backward ...
//   scaler.unscale(be, grads);               // grads *= 1/scale in FP32; finds inf/NaN
//   if (scaler.should_step()) optimizer.step();   // else the step is skipped
//   scaler.update();                         // backoff on overflow, growth after N clean steps
//
// Mode None is a no-op scaler (scale 1, nothing to unscale, every step is
// taken), so the trainer never branches on it. As in PyTorch without a
// GradScaler, non-finite gradients are then applied: the weights go NaN and
// the run diverges — which is what the fp16 recipe demonstrates. They are
// still counted (overflow attribution). Static keeps the scale fixed and,
// like Dynamic, skips steps with non-finite gradients.
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

  // Multiplies every gradient (backend memory) by inverse_scale() and counts
  // the non-finite values, through the backend's fused unscale_grads, then
  // reads the count back (one read) and records it. Returns that count.
  // ready -> unscaled. Calling it twice before update() is a
  // ScalerStateError. The training step issues unscale_grads itself and
  // records the count from its one read (record_nonfinite).
  struct GradSpan {
    float* data;
    std::int64_t n;
  };
  // When `sum_squares` is non-null it receives the sum of the squared
  // unscaled gradients (double accumulation), from the same pass.
  std::int64_t unscale(Backend& be, std::span<const GradSpan> grads, double* sum_squares = nullptr);
  // The unscale multiply alone (grads *= float(1 / double(scale))), for
  // gradients recomputed after unscale() — the overflow attribution re-run.
  static void multiply_by_inverse(Backend& be, std::span<const GradSpan> grads, float scale);
  // Records the non-finite count found by the backend's unscale_grads (read
  // with the step's results). ready -> unscaled.
  void record_nonfinite(std::int64_t count);

  // True when the optimizer may step (no inf/NaN found). unscaled -> stepped.
  bool should_step();
  // Adjusts the scale: backoff on overflow, growth after growth_interval
  // consecutive clean steps (if the grown scale is finite). -> ready.
  void update();

  bool found_nonfinite() const { return m_found > 0; }

 private:
  enum class State : std::uint8_t { Ready, Unscaled, Stepped };
  LossScalerConfig m_config;
  float m_scale;
  std::int64_t m_growth_tracker = 0;
  std::int64_t m_found = 0;
  State m_state = State::Ready;
};

}  // namespace engine
