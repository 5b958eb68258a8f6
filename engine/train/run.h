// Run: one training run (model, data, recipe, optimizer, loss scaler) and its
// step loop; the Trainer drives one or more of them on its thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "amp/recipe.h"
#include "train/commands.h"
#include "records/metrics.h"
#include "train/run_config.h"

namespace engine {

class Backend;
class Layer;
class Model;
class Optimizer;
class BatchSampler;
struct DatasetPair;

// Not thread-safe: built and stepped by one thread (the trainer's). After the
// trainer has joined, any thread may read the history.
class Run {
 public:
  Run(int id, const RunConfig& config, std::shared_ptr<const DatasetPair> data, Backend& backend);
  ~Run();

  int id() const { return m_id; }
  const RunConfig& config() const { return m_config; }
  const Recipe& recipe() const { return m_recipe; }
  Model& model() { return *m_model; }
  std::int64_t steps_done() const { return m_step; }
  std::int64_t total_steps() const { return m_total_steps; }
  std::int64_t steps_per_epoch() const { return m_steps_per_epoch; }
  bool finished() const { return m_step >= m_total_steps; }
  bool is_classification() const;
  // Samples in the training split (what the batch order draws from).
  std::size_t train_samples() const;

  // One training step. Appends its StepMetrics (and any events, gradient
  // statistics) to `out` and to the history.
  void step(std::vector<Record>& out);
  // Whether an evaluation is due after the step just taken.
  bool eval_due() const;
  // Loss and accuracy on the test split; appended to `out` and history.
  // A text run then also writes its continuation of the evaluation prompt
  // (train/sample.h: a TextSample after the EvalMetrics), unless turned
  // off; the sampling touches no training state (the training numbers are
  // the same with it as without).
  EvalMetrics evaluate(std::vector<Record>& out);
  void set_eval_samples(bool on) { m_eval_samples = on; }
  RunSummary summary() const;

  // Step-boundary changes (the trainer calls them between steps).
  void set_layer_precision(const std::string& layer, const LayerPrecision& p);
  void set_loss_scaler(const LossScalerConfig& c);
  // The next step also produces a StepInspection (and gradient statistics).
  void request_inspection() { m_inspect_next = true; }
  // The next step gets a NaN (or inf) in `layer`'s weights, output or
  // weight gradient, or in the loss (layer ignored). Throws
  // std::invalid_argument naming an unknown layer, or one without weights
  // for weights and gradients.
  void inject_fault(FaultTarget target, const std::string& layer, bool inf);

  // History (full, for CSV export).
  const RunHistory& history() const { return m_history; }
  const std::vector<StepMetrics>& steps() const { return m_history.steps; }
  const std::vector<EvalMetrics>& evals() const { return m_history.evals; }
  const std::vector<Event>& events() const { return m_history.events; }
  // Every GradStats taken (each layer with parameters, every stats_every steps).
  const std::vector<GradStats>& grad_stats() const { return m_history.grads; }
  // Whether the last evaluation was taken after the last step (a stopped
  // run evaluates once more at its end when not).
  bool evaluated_at_end() const { return !m_history.evals.empty() && m_history.evals.back().step == m_step; }

  std::string backend_name() const;
  MemoryBytes memory() const;

  // On a CUDA backend whose module has the step entries (ABI 6), ordinary
  // steps are captured once as a CUDA graph and replayed (on by default;
  // the CPU and guarded backends are not affected). Captured and
  // uncaptured steps give the same bits. Steps captured so far: for tests.
  void set_graph_capture(bool on);
  std::int64_t captured_steps() const { return m_captured_steps; }

 private:
  struct Impl;
  struct StepState;
  struct Fault {
    FaultTarget target;
    Layer* layer;
    float value;
  };

  // The phases of step(), in order (run.cpp).
  StepState begin_step();
  void load_batch(StepState& st);
  void forward_backward(const StepState& st);
  void unscale_and_check(StepState& st);
  void step_or_skip(StepState& st);
  void record(StepState& st, double wall_ms, std::vector<Record>& out);
  void update_parameters(double lr, std::int64_t step);
  // The captured step (run.cpp): false when this step must run uncaptured
  // (nothing of it has run then).
  bool captured_step(StepState& st, std::vector<Record>& out);
  bool capturable(const StepState& st) const;
  void drop_graph();
  // The results slots' host copy into st (unscale_and_check's read, the captured step's).
  void take_results(StepState& st, const std::int64_t* r, std::size_t params);
  // Measuring phases (run_statistics.cpp). Overflow attribution: the step
  // recomputed with per-layer counting on, one event per layer and tensor.
  void attribute_overflow(const StepState& st, std::vector<Record>& out);
  // A statistics step's GradStats (and StepInspection when requested).
  void measure(StepState& st, std::vector<Record>& out);
  void gradient_statistics(std::int64_t step, float loss_scale, std::vector<Record>& out);
  // The FP32 shadow pass of a statistics step: the same batch through an
  // FP32 copy of the model with the same (master) weights; fills the
  // reference gradients per parameter and outputs per leaf. False when the
  // model runs in FP32 throughout (its own gradients are the reference).
  bool shadow_pass();
  StepInspection inspect_layers(std::size_t first_stats);
  void emit(const Event& e, std::vector<Record>& out);

  int m_id;
  RunConfig m_config;
  Recipe m_recipe;
  std::shared_ptr<const DatasetPair> m_data;
  Backend& m_backend;
  std::unique_ptr<Model> m_model;
  std::unique_ptr<Impl> m_impl;
  std::int64_t m_step = 0;
  std::int64_t m_total_steps = 0;
  std::int64_t m_steps_per_epoch = 0;
  std::int64_t m_last_rss = 0;
  std::int64_t m_device_used = 0, m_device_total = 0;
  bool m_inspect_next = false;
  bool m_eval_samples = true;
  std::optional<Fault> m_fault;
  std::optional<Fault> m_spike;  // RunConfig::spike, injected at m_spike_step
  std::int64_t m_spike_step = 0;
  std::int64_t m_nan_loss_run = 0;
  bool m_graphs = true;
  std::int64_t m_graph_epoch = 0;  // bumped by every change a graph bakes in
  std::int64_t m_captured_steps = 0;  // consecutive steps with a non-finite loss
  RunHistory m_history;
};

// Process resident set size in bytes (Linux /proc/self/statm), 0 if unknown.
std::int64_t process_rss_bytes();

}  // namespace engine
