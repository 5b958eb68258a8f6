// Records a run produces: one StepMetrics per step, evaluations, events,
// gradient statistics and a final summary. Plain values: they cross the
// engine/UI thread boundary by copy.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace engine {

// Bytes per category, from the real storage width of every tensor.
struct MemoryBytes {
  std::int64_t weights = 0;      // weights in their compute format
  std::int64_t master = 0;       // FP32 master weights
  std::int64_t grads = 0;
  std::int64_t optimizer = 0;    // momentum / Adam moments
  std::int64_t activations = 0;  // saved for backward
  std::int64_t workspace = 0;    // scratch: casts, decoded copies, batch buffers
  std::int64_t total() const { return weights + master + grads + optimizer + activations + workspace; }
};

struct StepMetrics {
  int run_id = 0;
  std::int64_t step = 0;         // 1-based count of steps taken (skipped included)
  std::int64_t epoch = 0;        // 0-based epoch the batch came from
  double loss = 0.0;             // true, unscaled loss (FP32/double), NaN when it diverged
  double loss_scale = 1.0;       // the scale used for this step
  bool overflow = false;         // non-finite values in the gradients
  bool skipped = false;          // the optimizer step was skipped
  double grad_norm = 0.0;        // global L2 norm after unscaling, before clipping
  double lr = 0.0;
  MemoryBytes mem;
  std::int64_t rss = 0;          // process resident set size (bytes)
  double wall_ms = 0.0;          // wall time of this step
  double samples_per_second = 0.0;
  double train_accuracy = -1.0;  // batch accuracy (classification), -1 otherwise
};

struct EvalMetrics {
  int run_id = 0;
  std::int64_t step = 0;
  std::int64_t epoch = 0;
  double val_loss = 0.0;
  double val_accuracy = -1.0;  // -1 for regression
};

// An event on the timeline: kind "overflow" (non-finite values in a
// layer's tensor), "nan_loss", "skipped", "precision_change", "scale_change".
struct Event {
  int run_id = 0;
  std::int64_t step = 0;
  std::string kind;
  std::string layer;   // layer name, or "" for run-wide events
  std::string tensor;  // "activation", "activation_grad", "weight_grad", or detail
  std::int64_t count = 0;
};

// Gradient statistics of one layer's weight gradients at one step:
// histogram of log2|g| in unit bins [log2_lo, log2_lo + bins), with the
// fractions that are zero, subnormal or overflow in the layer's grad format,
// both as computed (scaled by the loss scale) and after unscaling.
struct GradStats {
  int run_id = 0;
  std::int64_t step = 0;
  std::string layer;
  std::string format;            // the grad format the fractions refer to
  int log2_lo = -40;
  std::vector<std::int64_t> histogram;  // counts of finite, non-zero |g| (unscaled)
  std::int64_t zeros = 0;        // exact zeros in the (unscaled) gradient
  std::int64_t total = 0;
  double underflow_unscaled = 0.0;  // fraction that would flush to 0 in the format without scaling
  double subnormal_unscaled = 0.0;
  double overflow_unscaled = 0.0;
  double underflow_scaled = 0.0;    // same, for the gradients as scaled by the loss scale
  double subnormal_scaled = 0.0;
  double overflow_scaled = 0.0;
};

struct RunSummary {
  int run_id = 0;
  std::string recipe, model, dataset, backend;
  std::int64_t steps = 0;
  double final_loss = 0.0;
  double val_accuracy = -1.0;
  double val_loss = 0.0;
  std::int64_t overflow_steps = 0;
  std::int64_t skipped_steps = 0;
  double final_loss_scale = 1.0;
  std::int64_t peak_memory_bytes = 0;
  double wall_seconds = 0.0;
  double samples_per_second = 0.0;
};

// Run lifecycle, for the runs list.
enum class RunState : std::uint8_t { Pending, Running, Paused, Finished, Stopped, Failed };
const char* run_state_name(RunState s);
struct RunStatus {
  int run_id = 0;
  RunState state = RunState::Pending;
  std::string message;  // failure reason, or ""
  std::int64_t total_steps = 0;  // known once the run is built
};

using Record = std::variant<StepMetrics, EvalMetrics, Event, GradStats, RunSummary, RunStatus>;

}  // namespace engine
