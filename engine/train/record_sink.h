// RecordSink: where the trainer thread hands what its runs produce as they go (the run folder's journal).
#pragma once

#include <cstdint>

#include "records/metrics.h"
#include "train/commands.h"

namespace engine {

class Model;
class Run;

// Implemented above train (journal/journal.h writes a run folder); the
// trainer only knows this face, so the step loop does not depend on files.
// Called on the trainer's thread only. A throw is reported once as an Error
// event and the trainer goes on without the sink.
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  // One record, in the order the runs produced it.
  virtual void record(const Record& r) = 0;
  // A live change to run `run_id`, which took effect after step `after_step`.
  virtual void command(int run_id, std::int64_t after_step, const LiveChange& c) = 0;
  // After each batch of records: a chance to flush.
  virtual void tick() = 0;
  // Every run has ended.
  virtual void finish() = 0;
  // Run `run_id` ended (finished, or stopped) with `model` holding its
  // final weights: read them now (the trainer thread owns the model), before
  // the run's final status record arrives. Not called for a failed run.
  virtual void final_weights(int run_id, Model& model, std::int64_t steps) {
    (void)run_id, (void)model, (void)steps;
  }
  // Run `run_id` was built and has not stepped: its model holds the initial
  // weights, and its config and train_samples() fix its batch order. Called
  // once, only for runs whose config keeps them (keeps_initial_state).
  virtual void initial_state(int run_id, Run& run) { (void)run_id, (void)run; }
};

}  // namespace engine
