// Trainer: the engine thread, its controls and the record queue.
#include "train/trainer.h"

#include <map>
#include <stdexcept>
#include <tuple>

#include "backend/backend.h"
#include "data/dataset.h"
#include "train/run.h"

namespace engine {

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

int Trainer::add_run(const RunConfig& config) {
  if (m_thread.joinable()) throw std::logic_error("Trainer::add_run after start()");
  validate(config, "run " + std::to_string(m_configs.size()));
  if (config.backend == "cuda")
    throw std::runtime_error(
        "backend 'cuda': training on the CUDA backend is not built yet (its module has the device "
        "query and casts only); use --backend cpu or auto");
  m_configs.push_back(config);
  return static_cast<int>(m_configs.size()) - 1;
}

void Trainer::provide_data(const std::string& dataset, std::uint64_t seed, std::shared_ptr<const DatasetPair> data) {
  if (m_thread.joinable()) throw std::logic_error("Trainer::provide_data after start()");
  if (data) m_provided[{dataset, seed}] = std::move(data);
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

void Trainer::set_layer_precision(int run_id, const std::string& layer, const LayerPrecision& p) {
  std::lock_guard<std::mutex> lk(m_command_mutex);
  m_commands.push_back({run_id, [layer, p](Run& r) { r.set_layer_precision(layer, p); }});
}

void Trainer::set_step_rate(double steps_per_second) {
  m_step_rate.store(steps_per_second > 0 ? steps_per_second : 0.0, std::memory_order_relaxed);
  m_control_cv.notify_all();
}

void Trainer::inspect_next_step() {
  std::lock_guard<std::mutex> lk(m_command_mutex);
  for (std::size_t i = 0; i < m_configs.size(); ++i)
    m_commands.push_back({static_cast<int>(i), [](Run& r) { r.request_inspection(); }});
}

void Trainer::set_loss_scaler(int run_id, const LossScalerConfig& c) {
  validate(c);
  std::lock_guard<std::mutex> lk(m_command_mutex);
  m_commands.push_back({run_id, [c](Run& r) { r.set_loss_scaler(c); }});
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

void Trainer::push(std::vector<Record>& batch) {
  if (batch.empty()) return;
  {
    std::lock_guard<std::mutex> lk(m_queue_mutex);
    for (Record& r : batch) {
      if (m_queue.size() >= m_capacity) {
        m_queue.pop_front();
        m_dropped.fetch_add(1, std::memory_order_relaxed);
      }
      m_queue.push_back(std::move(r));
    }
  }
  batch.clear();
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
    Run& r = *m_runs[static_cast<std::size_t>(c.run_id)];
    try {
      const std::size_t events_before = r.events().size();
      c.apply(r);
      // The events the change recorded (a precision change), once.
      for (std::size_t k = events_before; k < r.events().size(); ++k) out.emplace_back(r.events()[k]);
    } catch (const std::exception& e) {
      out.emplace_back(Event{c.run_id, r.steps_done(), EventKind::Error, "", e.what(), 0});
    }
  }
  push(out);
}

void Trainer::thread_main() {
  std::vector<Record> out;
  std::vector<RunState> state(m_configs.size(), RunState::Pending);
  // Build: backend, data (shared between runs with the same dataset and seed), runs.
  try {
    int threads = 0;
    for (const auto& c : m_configs) threads = std::max<int>(threads, static_cast<int>(c.threads));
    m_backend = make_cpu_backend(threads);
  } catch (const std::exception& e) {
    for (std::size_t i = 0; i < m_configs.size(); ++i)
      out.emplace_back(RunStatus{static_cast<int>(i), RunState::Failed, e.what()});
    push(out);
    m_active.store(false, std::memory_order_release);
    return;
  }
  std::map<std::pair<std::string, std::uint64_t>, std::shared_ptr<const DatasetPair>> data_cache = m_provided;
  m_runs.resize(m_configs.size());
  for (std::size_t i = 0; i < m_configs.size(); ++i) {
    const RunConfig& c = m_configs[i];
    try {
      auto key = std::make_pair(c.dataset, c.seed);
      auto it = data_cache.find(key);
      if (it == data_cache.end())
        it = data_cache.emplace(key, std::make_shared<const DatasetPair>(load_dataset(c.dataset, c.seed))).first;
      m_runs[i] = std::make_unique<Run>(static_cast<int>(i), c, it->second, *m_backend);
      state[i] = RunState::Running;
      out.emplace_back(RunStatus{static_cast<int>(i), RunState::Running, "", m_runs[i]->total_steps()});
    } catch (const std::exception& e) {
      state[i] = RunState::Failed;
      out.emplace_back(RunStatus{static_cast<int>(i), RunState::Failed, e.what()});
    }
  }
  push(out);

  bool was_paused = false;
  auto next_round = std::chrono::steady_clock::now();
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
    for (std::size_t i = 0; i < m_runs.size(); ++i) {
      if (state[i] != RunState::Running) continue;
      Run& r = *m_runs[i];
      if (r.finished()) continue;
      any = true;
      try {
        r.step(out);
        if (r.eval_due()) r.evaluate(out);
        if (r.finished()) {
          state[i] = RunState::Finished;
          out.emplace_back(r.summary());
          out.emplace_back(RunStatus{static_cast<int>(i), RunState::Finished, ""});
        }
      } catch (const std::exception& e) {
        state[i] = RunState::Failed;
        out.emplace_back(RunStatus{static_cast<int>(i), RunState::Failed, e.what()});
      }
      push(out);
      if (m_stop.load(std::memory_order_acquire)) break;
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
  for (std::size_t i = 0; i < m_runs.size(); ++i) {
    if (state[i] == RunState::Running || state[i] == RunState::Paused) {
      // Every run evaluates at its end, a stopped one too: its validation
      // point is where it stopped.
      if (m_runs[i] && m_runs[i]->steps_done() > 0 && !m_runs[i]->evaluated_at_end()) {
        try {
          m_runs[i]->evaluate(out);
        } catch (const std::exception&) {
          // The summary below still reports the steps taken.
        }
      }
      if (m_runs[i]) out.emplace_back(m_runs[i]->summary());
      out.emplace_back(RunStatus{static_cast<int>(i), RunState::Stopped, ""});
    }
  }
  push(out);
  m_active.store(false, std::memory_order_release);
}

}  // namespace engine
