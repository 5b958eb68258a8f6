// Records a run produces: one StepMetrics per step, evaluations, events,
// gradient statistics and a final summary. Plain values: they cross the
// engine/UI thread boundary by copy.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "numeric/precision.h"

namespace engine {

// Bytes per category, from the real storage width of every tensor: what the
// recipe would hold on a device (docs/numerics.md "What the numbers mean").
struct MemoryBytes {
  std::int64_t weights = 0;      // weights in their storage format
  std::int64_t master = 0;       // FP32 master weights
  std::int64_t grads = 0;        // gradients in their storage format
  std::int64_t optimizer = 0;    // momentum / Adam moments in the state format
  std::int64_t activations = 0;  // saved for backward
  std::int64_t workspace = 0;    // the step's own buffers: batch, logits, loss gradient
  // f32 copies that exist only because the CPU emulates a format (decoded
  // FP16 gradients and weights the optimizer updates in f32). Reported
  // apart and NOT part of total(): a device holding the recipe has none.
  std::int64_t emulation = 0;
  std::int64_t total() const { return weights + master + grads + optimizer + activations + workspace; }
};

struct StepMetrics {
  int run_id = 0;
  std::int64_t step = 0;         // 1-based count of steps taken (skipped included)
  std::int64_t epoch = 0;        // 0-based epoch the batch came from
  double loss = 0.0;             // true, unscaled loss (FP32/double), NaN when it diverged
  // With RunConfig::z_loss C > 0: the mean of log^2 Z over the rows (the
  // objective adds C times it; `loss` stays the cross-entropy alone, in nats).
  double z_term = 0.0;
  double loss_scale = 1.0;       // the scale used for this step
  bool overflow = false;         // non-finite values in the gradients
  bool skipped = false;          // the optimizer step was skipped
  double grad_norm = 0.0;        // global L2 norm after unscaling, before clipping
  double lr = 0.0;
  MemoryBytes mem;
  std::int64_t rss = 0;          // process resident set size (bytes)
  // The device's own figure (cudaMemGetInfo: everything in use on the GPU,
  // the CUDA context and library workspaces included), bytes; 0 on the CPU.
  std::int64_t device_used = 0;
  std::int64_t device_total = 0;
  // What the backend's own allocator holds live after the step
  // (Backend::allocated_bytes(): on CUDA the memory pool's used bytes, the
  // run's tensors and its context's workspaces: each run of a trainer has
  // a context of its own on a GPU), bytes; 0
  // where the backend reports none (the CPU backend). steps.csv's last
  // column, device_allocated.
  std::int64_t device_allocated = 0;
  double wall_ms = 0.0;          // wall time of this step
  double samples_per_second = 0.0;
  double train_accuracy = -1.0;  // batch accuracy (classification), -1 otherwise
};

// A loss that is a mean over tokens (a text data set's cross-entropy, nats)
// read as bits per token and as perplexity, the figures language models
// are compared by.
inline double bits_per_token(double loss_nats) { return loss_nats / std::numbers::ln2; }
inline double perplexity(double loss_nats) { return std::exp(loss_nats); }

struct EvalMetrics {
  int run_id = 0;
  std::int64_t step = 0;
  std::int64_t epoch = 0;
  double val_loss = 0.0;
  double val_accuracy = -1.0;  // -1 for regression
  // val_loss is a mean over tokens (the data set is text): bits per token
  // and perplexity below mean something (evals.csv writes them only then).
  bool per_token = false;
  double val_bits_per_token() const { return bits_per_token(val_loss); }
  double val_perplexity() const { return perplexity(val_loss); }
};

// What happened (events.csv's `kind` column is event_kind_name()).
enum class EventKind : std::uint8_t {
  Overflow,         // non-finite values in a layer's tensor (layer, tensor, count)
  NanLoss,          // the loss is NaN or inf
  Skipped,          // the optimizer step was skipped (count: non-finite gradient values)
  ScaleChange,      // the loss scale changed (tensor: "backoff"/"growth", value: the new scale)
  PrecisionChange,  // a live change of a layer's precision (layer, precision)
  Error,            // a command the engine could not apply (tensor: the message)
};
const char* event_kind_name(EventKind k);  // "overflow", "nan_loss", ...
std::optional<EventKind> parse_event_kind(std::string_view s);

// An event on the timeline. Typed: the UI reads the fields, never a string
// split apart again.
struct Event {
  Event() = default;
  Event(int run, std::int64_t at, EventKind k, std::string layer_name, std::string tensor_name, std::int64_t n)
      : run_id(run), step(at), kind(k), layer(std::move(layer_name)), tensor(std::move(tensor_name)), count(n) {}

  int run_id = 0;
  std::int64_t step = 0;
  EventKind kind = EventKind::Overflow;
  std::string layer;   // layer name, or "" for run-wide events
  std::string tensor;  // "activation", "activation_grad", "weight_grad", or detail
  std::int64_t count = 0;
  double value = 0.0;         // ScaleChange: the new loss scale
  LayerPrecision precision;   // PrecisionChange: the layer's new precision
};

// Gradient statistics of one layer's weight gradients at one step:
// histogram of log2|g| in unit bins [log2_lo, log2_lo + bins), with the
// fractions that underflow, are subnormal or overflow in the layer's grad
// format, measured on the gradient as exact arithmetic has it:
// the layer's own when it runs in FP32, else the FP32 shadow pass's.
// `_scaled`: as the run computed it, with its loss scale (an entry that is
// nonzero in exact arithmetic but came out zero counts as underflow);
// `_unscaled`: without loss scaling (for an unscaled run, the same).
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
  // Whether the histogram and fractions come from an FP32 shadow pass (the
  // layer computes in low precision: its own gradient has already lost what
  // the format flushed, so the exact one is measured instead).
  bool shadow = false;
  // Relative L2 error against the FP32 shadow pass: ||y - y32|| / ||y32|| of
  // the layer's output, and likewise of its (unscaled) weight gradient. 0
  // for a layer that runs in FP32 throughout.
  double output_error = 0.0;
  double grad_error = 0.0;
  // <g - g32, g32> / ||g32||^2 of the unscaled weight gradient: how much of
  // the exact gradient the run's gradient lacks (negative: shrunk, as a
  // rounding that flushes small values to zero does) or has in excess,
  // along the exact gradient's own direction. Random rounding errors are
  // almost orthogonal to it and average out here; a bias does not.
  double grad_bias = 0.0;
};

struct RunSummary {
  int run_id = 0;
  std::string recipe, model, dataset, backend;
  std::int64_t steps = 0;
  double final_loss = 0.0;
  double val_accuracy = -1.0;
  double val_loss = 0.0;
  bool per_token = false;  // the last evaluation's (EvalMetrics::per_token)
  double val_bits_per_token() const { return bits_per_token(val_loss); }
  double val_perplexity() const { return perplexity(val_loss); }
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

// What one step did, layer by layer (the step inspector): asked for with
// Trainer::inspect_next_step(), produced by the next step of each run.
struct LayerInspection {
  std::string layer;
  std::string grad_format;         // the format the layer's gradients are rounded to
  bool has_weights = false;
  std::int64_t nonfinite_activation = 0;       // inf/NaN in the layer's output
  std::int64_t nonfinite_activation_grad = 0;  // in the gradient it passed back
  std::int64_t nonfinite_weight_grad = 0;      // in its weight gradients
  double underflow = 0.0;     // weight gradients that underflowed in grad_format, as the run computed them
  double max_abs_grad = 0.0;  // largest |weight gradient|, unscaled (0 without weights)
  // A live block for the explorer's block view: the 64 consecutive values
  // (along a row of the layer's first parameter, its weight) that hold the
  // largest |value|, as FP32 values (the master copy where there is one),
  // and the same 64 positions of its unscaled gradient; fewer when the row
  // is shorter. The tensors' largest |value| (for a per-tensor scale).
  std::vector<float> weight_block, grad_block;
  double weight_amax = 0.0, grad_amax = 0.0;
};
struct StepInspection {
  int run_id = 0;
  std::int64_t step = 0;
  double loss = 0.0;           // unscaled
  double scale_before = 1.0;   // the loss scale the step used
  double scale_after = 1.0;    // after the scaler's update
  bool overflow = false;
  bool skipped = false;
  std::vector<LayerInspection> layers;  // every leaf, forward order
};

// What a language model writes at an evaluation (a text run's): its
// continuation of a prompt the same for every run on the data set, taken
// after the evaluation at `step` (engine/train/sample.h). UTF-8.
struct TextSample {
  int run_id = 0;
  std::int64_t step = 0;
  std::string prompt;
  std::string text;  // the continuation, without the prompt
};

using Record =
    std::variant<StepMetrics, EvalMetrics, Event, GradStats, RunSummary, RunStatus, StepInspection, TextSample>;

// One run's history: every record it produced, in order, and the counters
// the summary needs. The one history the Run, the UI's store, the CLI and
// the CSV export share.
struct RunHistory {
  std::vector<StepMetrics> steps;
  std::vector<EvalMetrics> evals;
  std::vector<Event> events;
  std::vector<GradStats> grads;  // every GradStats record, in arrival order
  std::vector<TextSample> texts;  // a text run's continuations, one per evaluation

  std::int64_t overflow_steps = 0;
  std::int64_t skipped_steps = 0;
  std::int64_t peak_memory = 0;  // largest MemoryBytes::total() so far
  double wall_seconds = 0.0;     // sum of the steps' wall times
  double samples = 0.0;          // samples trained (sum of batch sizes)

  void add(const StepMetrics& m);
  void add(const EvalMetrics& e) { evals.push_back(e); }
  void add(const Event& e) { events.push_back(e); }
  void add(const GradStats& g) { grads.push_back(g); }
  void add(const TextSample& t) { texts.push_back(t); }
  // Adds a step, eval, event, gradient or text sample record; false for the others
  // (summaries and statuses are not history).
  bool add(const Record& r);

  // The latest GradStats of `layer`, or null.
  const GradStats* latest_grad(const std::string& layer) const;
  // Layers with gradient statistics, in the order they first arrived.
  std::vector<std::string> grad_layers() const;
  // The loss scale used at `step` (1 when unknown).
  double loss_scale_at(std::int64_t step) const;
  // The summary's figures from the history: steps, final loss, last
  // evaluation, overflow/skipped counts, final loss scale (after the last
  // step's update when known), peak memory, time and speed. Names (recipe,
  // model, ...) are the caller's.
  RunSummary summarize(double final_loss_scale) const;
};

}  // namespace engine
