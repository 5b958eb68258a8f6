// Trainer: the engine thread, its controls and the record queue.
#include "train/trainer.h"

#include <omp.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <iterator>
#include <map>
#include <stdexcept>
#include <tuple>

#include "backend/backend.h"
#include "backend/registry.h"
#include "data/dataset.h"
#include "data/text.h"
#include "train/round_pool.h"
#include "train/run.h"

namespace engine {

namespace {

// Lowers the calling thread's priority by `niceness` (Linux: nice is per
// thread). Raising it back needs privileges, so only ever lower.
void lower_thread_priority(int niceness) {
  if (niceness <= 0) return;
  const auto tid = static_cast<id_t>(syscall(SYS_gettid));
  errno = 0;
  const int now = getpriority(PRIO_PROCESS, tid);
  if (errno == 0) setpriority(PRIO_PROCESS, tid, std::min(19, now + niceness));
}

}  // namespace

const char* run_state_name(RunState s) {
  switch (s) {
    case RunState::Pending: return "pending";
    case RunState::Running: return "running";
    case RunState::Paused: return "paused";
    case RunState::Finished: return "finished";
    case RunState::Stopped: return "stopped";
    case RunState::Failed: return "failed";
  }
  return "?";
}

Trainer::Trainer(std::size_t queue_capacity) : m_capacity(queue_capacity) {}

Trainer::~Trainer() {
  stop();
  if (m_thread.joinable()) m_thread.join();
}

void Trainer::set_sink(std::unique_ptr<RecordSink> sink) {
  if (m_thread.joinable()) throw std::logic_error("Trainer::set_sink after start()");
  m_sink = std::move(sink);
}

void Trainer::schedule(const StampedChange& change) {
  if (m_thread.joinable()) throw std::logic_error("Trainer::schedule after start()");
  if (change.run_id < 0 || static_cast<std::size_t>(change.run_id) >= m_configs.size())
    throw std::invalid_argument("schedule: no run " + std::to_string(change.run_id));
  m_scheduled.resize(m_configs.size());
  auto& list = m_scheduled[static_cast<std::size_t>(change.run_id)];
  // Stable by step: changes at the same step keep their order.
  auto at = std::upper_bound(list.begin(), list.end(), change.after_step,
                             [](std::int64_t s, const StampedChange& c) { return s < c.after_step; });
  list.insert(at, change);
}

void Trainer::stop_run_at(int run_id, std::int64_t steps) {
  if (m_thread.joinable()) throw std::logic_error("Trainer::stop_run_at after start()");
  if (run_id < 0 || static_cast<std::size_t>(run_id) >= m_configs.size())
    throw std::invalid_argument("stop_run_at: no run " + std::to_string(run_id));
  m_stop_at.resize(m_configs.size(), 0);
  m_stop_at[static_cast<std::size_t>(run_id)] = steps;
}

int Trainer::add_run(const RunConfig& config) {
  if (m_thread.joinable()) throw std::logic_error("Trainer::add_run after start()");
  validate(config, "run " + std::to_string(m_configs.size()));
  if (config.backend == "cuda") {
    for (const BackendAvailability& b : available_backends())
      if (b.name == "cuda" && !b.available) throw std::runtime_error("backend 'cuda': " + b.reason + "; use --backend cpu or auto");
  }
  m_configs.push_back(config);
  return static_cast<int>(m_configs.size()) - 1;
}

void Trainer::provide_data(const std::string& dataset, std::uint64_t seed, std::shared_ptr<const DatasetPair> data,
                           std::size_t context) {
  if (m_thread.joinable()) throw std::logic_error("Trainer::provide_data after start()");
  if (data) m_provided[{dataset, seed, is_text_spec(dataset) ? context : 0}] = std::move(data);
}

void Trainer::start() {
  if (m_thread.joinable()) throw std::logic_error("Trainer::start called twice");
  m_active.store(true, std::memory_order_release);
  m_thread = std::thread([this] { thread_main(); });
}

void Trainer::pause() { m_paused.store(true, std::memory_order_release); }

void Trainer::resume() {
  {
    std::lock_guard<std::mutex> lk(m_control_mutex);
    m_paused.store(false, std::memory_order_release);
  }
  m_control_cv.notify_all();
}

void Trainer::step_once() {
  {
    std::lock_guard<std::mutex> lk(m_control_mutex);
    m_paused.store(true, std::memory_order_release);
    m_step_budget.fetch_add(1, std::memory_order_acq_rel);
  }
  m_control_cv.notify_all();
}

void Trainer::stop() {
  {
    std::lock_guard<std::mutex> lk(m_control_mutex);
    m_stop.store(true, std::memory_order_release);
  }
  m_control_cv.notify_all();
}

void Trainer::wait() {
  if (m_thread.joinable()) m_thread.join();
}

void Trainer::queue_command(int run_id, const LiveChange& c) {
  std::lock_guard<std::mutex> lk(m_command_mutex);
  m_commands.push_back({run_id, c});
}

void Trainer::set_layer_precision(int run_id, const std::string& layer, const LayerPrecision& p) {
  LiveChange c;
  c.kind = LiveChange::Kind::LayerPrecision;
  c.layer = layer;
  c.precision = p;
  queue_command(run_id, c);
}

void Trainer::inject_fault(int run_id, FaultTarget target, const std::string& layer, bool inf) {
  LiveChange c;
  c.kind = LiveChange::Kind::InjectFault;
  c.fault = target;
  c.layer = layer;
  c.fault_inf = inf;
  queue_command(run_id, c);
}

void Trainer::set_step_rate(double steps_per_second) {
  m_step_rate.store(steps_per_second > 0 ? steps_per_second : 0.0, std::memory_order_relaxed);
  m_control_cv.notify_all();
}

void Trainer::inspect_next_step() {
  LiveChange c;
  c.kind = LiveChange::Kind::Inspect;
  for (std::size_t i = 0; i < m_configs.size(); ++i) queue_command(static_cast<int>(i), c);
}

void Trainer::set_loss_scaler(int run_id, const LossScalerConfig& c) {
  validate(c);
  LiveChange change;
  change.kind = LiveChange::Kind::LossScaler;
  change.scaler = c;
  queue_command(run_id, change);
}

std::size_t Trainer::drain(std::vector<Record>& out, std::size_t max) {
  std::lock_guard<std::mutex> lk(m_queue_mutex);
  std::size_t n = 0;
  while (!m_queue.empty() && n < max) {
    out.push_back(std::move(m_queue.front()));
    m_queue.pop_front();
    ++n;
  }
  return n;
}

const Run* Trainer::run(int id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= m_runs.size()) return nullptr;
  return m_runs[static_cast<std::size_t>(id)].get();
}

void Trainer::sink_failed(const std::exception& e, std::vector<Record>& out) {
  // A folder that cannot be written (disk full, removed) must not stop
  // training: say so once, and go on without it.
  m_sink.reset();
  out.emplace_back(Event{0, 0, EventKind::Error, "", std::string("journal: ") + e.what(), 0});
}

void Trainer::push(std::vector<Record>& batch) {
  if (batch.empty()) return;
  if (m_sink) {
    try {
      for (const Record& r : batch) m_sink->record(r);
      m_sink->tick();
    } catch (const std::exception& e) {
      sink_failed(e, batch);
    }
  }
  {
    std::lock_guard<std::mutex> lk(m_queue_mutex);
    for (Record& r : batch) {
      if (m_queue.size() >= m_capacity) {
        // Drop the oldest record that is not a status: the consumer must
        // always learn how each run ended.
        auto victim = std::find_if(m_queue.begin(), m_queue.end(),
                                   [](const Record& q) { return !std::holds_alternative<RunStatus>(q); });
        if (victim != m_queue.end()) {
          m_queue.erase(victim);
          m_dropped.fetch_add(1, std::memory_order_relaxed);
        } else if (!std::holds_alternative<RunStatus>(r)) {
          m_dropped.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
      }
      m_queue.push_back(std::move(r));
    }
  }
  batch.clear();
}

void Trainer::apply_change(int id, const LiveChange& c, std::vector<Record>& out) {
  Run& r = *m_runs[static_cast<std::size_t>(id)];
  try {
    const std::size_t events_before = r.events().size();
    apply_live_change(r, c);
    // The events the change recorded (a precision change), once.
    for (std::size_t k = events_before; k < r.events().size(); ++k) out.emplace_back(r.events()[k]);
    if (m_sink) {
      try {
        m_sink->command(id, r.steps_done(), c);
      } catch (const std::exception& e) {
        sink_failed(e, out);
      }
    }
  } catch (const std::exception& e) {
    out.emplace_back(Event{id, r.steps_done(), EventKind::Error, "", e.what(), 0});
  }
}

void Trainer::apply_commands() {
  std::vector<Command> cmds;
  {
    std::lock_guard<std::mutex> lk(m_command_mutex);
    cmds.swap(m_commands);
  }
  std::vector<Record> out;
  for (Command& c : cmds) {
    if (c.run_id < 0 || static_cast<std::size_t>(c.run_id) >= m_runs.size() || !m_runs[static_cast<std::size_t>(c.run_id)])
      continue;
    apply_change(c.run_id, c.change, out);
  }
  push(out);
}

void Trainer::thread_main() {
  lower_thread_priority(m_niceness);
  std::vector<Record> out;
  std::vector<RunState> state(m_configs.size(), RunState::Pending);
  m_scheduled.resize(m_configs.size());
  m_stop_at.resize(m_configs.size(), 0);
  std::vector<std::size_t> next_scheduled(m_configs.size(), 0);
  // A run that ended (finished or stopped) hands its final weights to the
  // sink here, on this thread, before its status says it ended.
  auto final_weights = [&](std::size_t i) {
    if (!m_sink || !m_runs[i]) return;
    try {
      m_sink->final_weights(static_cast<int>(i), m_runs[i]->model(), m_runs[i]->steps_done());
    } catch (const std::exception& e) {
      sink_failed(e, out);
    }
  };
  // A run ends (stopped) with an evaluation where it stopped and its summary.
  auto end_stopped = [&](std::size_t i) {
    if (m_runs[i] && m_runs[i]->steps_done() > 0 && !m_runs[i]->evaluated_at_end()) {
      try {
        m_runs[i]->evaluate(out);
      } catch (const std::exception&) {
        // The summary below still reports the steps taken.
      }
    }
    final_weights(i);
    if (m_runs[i]) out.emplace_back(m_runs[i]->summary());
    out.emplace_back(RunStatus{static_cast<int>(i), RunState::Stopped, ""});
    state[i] = RunState::Stopped;
  };
  // Build: backend, data (shared between runs with the same dataset and seed), runs.
  try {
    int threads = 0;
    for (const auto& c : m_configs) threads = std::max<int>(threads, static_cast<int>(c.threads));
    // Every run of a trainer shares one backend: the first run's choice
    // ("guarded" for the device-readiness tests).
    BackendChoice choice = make_backend(m_configs.empty() ? std::string("cpu") : m_configs.front().backend, threads);
    m_backend = std::move(choice.backend);
    // On the CPU, several runs with two or more threads step side by side,
    // each on one worker with a backend of its own (round_pool.h).
    const int cores = std::max(1, omp_get_num_procs());
    const int total = threads > 0 ? threads : cores;
    const int workers = std::min<int>(total, static_cast<int>(m_configs.size()));
    if (choice.name == "cpu" && workers >= 2) {
      const int per_run = std::max(1, total / workers);
      for (std::size_t i = 0; i < m_configs.size(); ++i) m_run_backends.push_back(make_cpu_backend(per_run));
      // Host-side OpenMP loops outside backend calls use the same count.
      m_pool = std::make_unique<RoundPool>(workers, [per_run, nice = m_niceness] {
        omp_set_num_threads(per_run);
        lower_thread_priority(nice);
      });
      omp_set_num_threads(per_run);  // this thread is a worker too
    } else if (choice.name == "cuda" && m_configs.size() >= 2) {
      // On a GPU each run gets a context of its own (its stream, library
      // handles and memory pool): the device memory a run reports
      // (allocated_bytes) is then its own, not the comparison's.
      for (std::size_t i = 0; i < m_configs.size(); ++i) m_run_backends.push_back(make_backend("cuda", threads).backend);
    }
  } catch (const std::exception& e) {
    for (std::size_t i = 0; i < m_configs.size(); ++i)
      out.emplace_back(RunStatus{static_cast<int>(i), RunState::Failed, e.what()});
    push(out);
    // The run folder's final state: failed, and why.
    if (m_sink) {
      try {
        m_sink->finish();
      } catch (const std::exception& sink_error) {
        sink_failed(sink_error, out);
        push(out);
      }
    }
    m_active.store(false, std::memory_order_release);
    return;
  }
  std::map<DataKey, std::shared_ptr<const DatasetPair>> data_cache = m_provided;
  m_runs.resize(m_configs.size());
  for (std::size_t i = 0; i < m_configs.size(); ++i) {
    const RunConfig& c = m_configs[i];
    try {
      // A text set's windows are cut at the run's context.
      const auto context = static_cast<std::size_t>(c.context);
      const DataKey key{c.dataset, c.seed, is_text_spec(c.dataset) ? context : 0};
      auto it = data_cache.find(key);
      if (it == data_cache.end())
        it = data_cache.emplace(key, std::make_shared<const DatasetPair>(load_dataset(c.dataset, c.seed, context)))
                 .first;
      m_runs[i] = std::make_unique<Run>(static_cast<int>(i), c, it->second,
                                        m_run_backends.empty() ? *m_backend : *m_run_backends[i]);
      state[i] = RunState::Running;
      out.emplace_back(RunStatus{static_cast<int>(i), RunState::Running, "", m_runs[i]->total_steps()});
    } catch (const std::exception& e) {
      state[i] = RunState::Failed;
      out.emplace_back(RunStatus{static_cast<int>(i), RunState::Failed, e.what()});
    }
    // The run's starting point (initial weights, batch order) into its
    // folder before the first step changes the weights.
    if (m_sink && m_runs[i] && keeps_initial_state(c, m_runs[i]->total_steps())) {
      try {
        m_sink->initial_state(static_cast<int>(i), *m_runs[i]);
      } catch (const std::exception& e) {
        sink_failed(e, out);
      }
    }
  }
  push(out);

  bool was_paused = false;
  auto next_round = std::chrono::steady_clock::now();
  std::vector<std::vector<Record>> round_records;  // side by side: each run's records of the round
  std::vector<std::size_t> due;                      // the runs a round steps side by side
  for (;;) {
    if (m_stop.load(std::memory_order_acquire)) break;
    apply_commands();
    // Pause: wait at the step boundary until resumed, stepped or stopped.
    if (m_paused.load(std::memory_order_acquire) && m_step_budget.load(std::memory_order_acquire) == 0) {
      if (!was_paused) {
        for (std::size_t i = 0; i < m_runs.size(); ++i)
          if (state[i] == RunState::Running) out.emplace_back(RunStatus{static_cast<int>(i), RunState::Paused, ""});
        push(out);
        was_paused = true;
      }
      std::unique_lock<std::mutex> lk(m_control_mutex);
      m_control_cv.wait_for(lk, std::chrono::milliseconds(50), [this] {
        return m_stop.load() || !m_paused.load() || m_step_budget.load() > 0;
      });
      continue;
    }
    if (was_paused) {
      for (std::size_t i = 0; i < m_runs.size(); ++i)
        if (state[i] == RunState::Running) out.emplace_back(RunStatus{static_cast<int>(i), RunState::Running, ""});
      was_paused = false;
    }
    const bool single = m_paused.load(std::memory_order_acquire);
    bool any = false;
    // One step of run i (and its evaluation when due) into `records`; the
    // run's state changes when it finishes or fails.
    auto step_run = [&](std::size_t i, std::vector<Record>& records) {
      Run& r = *m_runs[i];
      try {
        r.step(records);
        if (r.eval_due()) r.evaluate(records);
        if (r.finished()) {
          state[i] = RunState::Finished;
          records.emplace_back(r.summary());
          records.emplace_back(RunStatus{static_cast<int>(i), RunState::Finished, ""});
        }
      } catch (const std::exception& e) {
        // A failed run (a diverged one) stays inspectable: its history and
        // summary up to the step that failed, and the reason.
        state[i] = RunState::Failed;
        if (r.steps_done() > 0) records.emplace_back(r.summary());
        records.emplace_back(RunStatus{static_cast<int>(i), RunState::Failed, e.what()});
      }
    };
    due.clear();
    for (std::size_t i = 0; i < m_runs.size(); ++i) {
      if (state[i] != RunState::Running) continue;
      Run& r = *m_runs[i];
      if (r.finished()) continue;
      if (m_stop_at[i] > 0 && r.steps_done() >= m_stop_at[i]) {
        end_stopped(i);
        push(out);
        continue;
      }
      any = true;
      // Replay: the changes stamped at this step, as they came live.
      for (auto& list = m_scheduled[i]; next_scheduled[i] < list.size() &&
                                         list[next_scheduled[i]].after_step <= r.steps_done();
           ++next_scheduled[i])
        apply_change(static_cast<int>(i), list[next_scheduled[i]].change, out);
      if (m_pool) {
        due.push_back(i);
        continue;
      }
      step_run(i, out);
      if (state[i] == RunState::Finished) final_weights(i);
      push(out);
      if (m_stop.load(std::memory_order_acquire)) break;
    }
    if (m_pool && !due.empty()) {
      // Side by side: each run writes its own records (and only its own
      // state entry); they are queued in run order after the round.
      round_records.resize(due.size());
      m_pool->run(due.size(), [&](std::size_t k) { step_run(due[k], round_records[k]); });
      // The workers are done with the runs: this thread reads the models.
      for (std::size_t i : due)
        if (state[i] == RunState::Finished) final_weights(i);
      for (auto& r : round_records) {
        std::move(r.begin(), r.end(), std::back_inserter(out));
        r.clear();  // keeps its capacity for the next round
      }
      push(out);
    }
    if (single) m_step_budget.fetch_sub(1, std::memory_order_acq_rel);
    // A set speed: the next round waits for its slot (stop, pause and a
    // change of speed end the wait at once).
    const double rate = m_step_rate.load(std::memory_order_relaxed);
    if (rate > 0 && !single) {
      const auto now = std::chrono::steady_clock::now();
      next_round = std::max(next_round + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                             std::chrono::duration<double>(1.0 / rate)),
                            now - std::chrono::seconds(1));
      std::unique_lock<std::mutex> lk(m_control_mutex);
      m_control_cv.wait_until(lk, next_round, [&] {
        return m_stop.load() || m_paused.load() || m_step_rate.load(std::memory_order_relaxed) != rate;
      });
    } else {
      next_round = std::chrono::steady_clock::now();
    }
    if (!any) break;
  }
  m_pool.reset();
  // Every run evaluates at its end, a stopped one too: its validation
  // point is where it stopped.
  for (std::size_t i = 0; i < m_runs.size(); ++i)
    if (state[i] == RunState::Running || state[i] == RunState::Paused) end_stopped(i);
  push(out);
  if (m_sink) {
    try {
      m_sink->finish();
    } catch (const std::exception& e) {
      sink_failed(e, out);
      push(out);
    }
  }
  m_active.store(false, std::memory_order_release);
}

}  // namespace engine
