// Trainer: runs one or more Runs on its own thread, step by step, with
// cooperative controls and a bounded queue of records for the UI or CLI.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <thread>
#include <utility>
#include <vector>

#include "amp/loss_scaler.h"
#include "numeric/precision.h"
#include "train/commands.h"
#include "train/record_sink.h"
#include "records/metrics.h"
#include "train/run_config.h"

namespace engine {

class RoundPool;

class Backend;
class Run;
struct DatasetPair;

// Usage (any one controlling thread):
//   Trainer t;
//   t.add_run(cfg_a); t.add_run(cfg_b);   // validated now; built on the thread
//   t.start();
//   while (t.active()) { t.drain(records); ... }   // or wait()
//
// Several runs advance round-robin, one step each in turn, so a comparison
// is side by side. Runs with the same dataset and seed share the loaded data
// and see the same initial weights and batch order.
//
// Controls (any thread; they never block on the engine): pause() and stop()
// take effect at the next step boundary — within one step's time; step_once()
// advances every unfinished run by one step while paused. Precision and
// loss-scaler changes are queued and applied at the next step boundary.
// The engine thread never blocks on the consumer: when the queue is full the
// oldest records are dropped and counted (dropped()) — never a status
// record, and never for the journal, which the engine thread writes before
// anything is queued. Every run also keeps its full history, readable after
// wait().
// (StepInspection records are produced only on request.)
class Trainer {
 public:
  explicit Trainer(std::size_t queue_capacity = std::size_t{1} << 20);
  ~Trainer();  // stops and joins
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Before start(). Validates the config (throws std::runtime_error naming
  // the field) and returns the run id (0, 1, ...).
  int add_run(const RunConfig& config);
  // Before start(): data already loaded for the runs whose dataset and seed
  // match, so the engine thread does not load it again (the GUI loads the
  // selected set in the background while the user sets up, and a run's
  // first step follows Start at once). `data` must be what
  // load_dataset(dataset, seed, context) returns; `context` counts only for
  // a text set (whose windows it cuts), as in the trainer's own cache.
  void provide_data(const std::string& dataset, std::uint64_t seed, std::shared_ptr<const DatasetPair> data,
                    std::size_t context = 64);
  // Before start(): where the records also go as the runs produce them (a
  // run folder: attach_journal in journal/journal.h).
  void set_sink(std::unique_ptr<RecordSink> sink);
  // Before start(): replay. `change` is applied to its run right before the
  // run's step after_step + 1, as it was live; a run with a stop step ends
  // there as a stopped run (the step it was stopped or interrupted at).
  void schedule(const StampedChange& change);
  void stop_run_at(int run_id, std::int64_t steps);
  // Before start(): the engine's threads run `niceness` steps below the
  // caller's priority (Linux per-thread nice; 0: the same). The app sets it
  // so that its UI thread, and the display server, get a core at once
  // while the engine keeps every core busy.
  void set_background(int niceness) { m_niceness = niceness; }
  void start();

  void pause();
  void resume();
  void step_once();
  // At most `steps_per_second` steps of each run per second (a class
  // watching a 3-second lesson unfold); 0: as fast as possible. Any time,
  // any thread; takes effect at the next step boundary.
  void set_step_rate(double steps_per_second);
  double step_rate() const { return m_step_rate.load(std::memory_order_relaxed); }
  void stop();
  // Blocks until the engine thread has finished (all runs done, stopped, or failed).
  void wait();
  bool active() const { return m_active.load(std::memory_order_acquire); }
  bool paused() const { return m_paused.load(std::memory_order_acquire); }

  void set_layer_precision(int run_id, const std::string& layer, const LayerPrecision& p);
  // The run's loss scaler from its next step on (the setup panel): a new
  // mode restarts the scale at c.init_scale, the same mode keeps the
  // current scale and takes the new factors and interval. Throws
  // std::invalid_argument for out-of-range settings (validate()).
  void set_loss_scaler(int run_id, const LossScalerConfig& c);
  // A NaN (or inf) in `layer`'s weights, output or weight gradient, or in
  // the loss, at the run's next step (the robustness lesson and tests).
  void inject_fault(int run_id, FaultTarget target, const std::string& layer, bool inf = false);
  // The next step of every run also produces a StepInspection record (the
  // step inspector: call it, then step_once()).
  void inspect_next_step();

  // Moves up to `max` queued records into `out` (appends). Any thread;
  // holds the queue lock only for the move.
  std::size_t drain(std::vector<Record>& out, std::size_t max = SIZE_MAX);
  std::uint64_t dropped() const { return m_dropped.load(std::memory_order_relaxed); }

  // After wait(): the runs (history, summary). Null for a run that failed to build.
  const Run* run(int id) const;
  int run_count() const { return static_cast<int>(m_configs.size()); }
  const RunConfig& config(int id) const { return m_configs[static_cast<std::size_t>(id)]; }

 private:
  void thread_main();
  void push(std::vector<Record>& batch);
  void apply_commands();
  void queue_command(int run_id, const LiveChange& c);
  // Applies a change to run `id` and journals it; errors become Error events.
  void apply_change(int id, const LiveChange& c, std::vector<Record>& out);
  void sink_failed(const std::exception& e, std::vector<Record>& out);

  std::vector<RunConfig> m_configs;
  // Loaded data by (spec, seed, context): the context is 0 for a set that
  // is not text, so runs of every context share an image set.
  using DataKey = std::tuple<std::string, std::uint64_t, std::size_t>;
  std::map<DataKey, std::shared_ptr<const DatasetPair>> m_provided;
  // The backend outlives the runs whose buffers it holds (members are
  // destroyed in reverse order).
  std::unique_ptr<Backend> m_backend;
  // Runs stepped in parallel (several runs, two or more CPU threads): each
  // run's own single-threaded CPU backend, and the pool of the rounds.
  std::vector<std::unique_ptr<Backend>> m_run_backends;
  std::unique_ptr<RoundPool> m_pool;
  int m_niceness = 0;
  std::vector<std::unique_ptr<Run>> m_runs;
  std::thread m_thread;

  std::atomic<bool> m_active{false};
  std::atomic<bool> m_paused{false};
  std::atomic<bool> m_stop{false};
  std::atomic<std::int64_t> m_step_budget{0};
  std::atomic<double> m_step_rate{0.0};
  std::mutex m_control_mutex;
  std::condition_variable m_control_cv;

  struct Command {
    int run_id;
    LiveChange change;
  };
  std::mutex m_command_mutex;
  std::vector<Command> m_commands;
  std::unique_ptr<RecordSink> m_sink;
  std::vector<std::vector<StampedChange>> m_scheduled;  // per run, in order
  std::vector<std::int64_t> m_stop_at;                   // per run; 0: none

  std::mutex m_queue_mutex;
  std::deque<Record> m_queue;
  std::size_t m_capacity;
  std::atomic<std::uint64_t> m_dropped{0};
};

}  // namespace engine
