// RoundPool: the trainer's fork-join over the runs of one round. With
// several runs and at least two engine threads, each run steps on a worker
// of its own with a single-threaded backend: independent runs need no
// barrier between their threads, whereas one run's OpenMP team stalls at
// every barrier while the GUI thread (or the X server) holds a core.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace engine {

class RoundPool {
 public:
  // `workers` >= 1 take part in each round: the caller and workers - 1
  // threads. Each thread runs `init` once when it starts (the caller's
  // own thread is not touched).
  explicit RoundPool(int workers, std::function<void()> init = {});
  ~RoundPool();
  RoundPool(const RoundPool&) = delete;
  RoundPool& operator=(const RoundPool&) = delete;

  int workers() const { return static_cast<int>(m_threads.size()) + 1; }
  // Calls task(i) for every i in [0, count), spread over the workers, and
  // returns when all have returned. `task` must not throw.
  void run(std::size_t count, const std::function<void(std::size_t)>& task);

 private:
  void worker(std::function<void()> init);
  // Takes tasks of the current round until none is left.
  void drain(std::unique_lock<std::mutex>& lk);

  std::vector<std::thread> m_threads;
  std::mutex m_mutex;
  std::condition_variable m_start, m_done;
  const std::function<void(std::size_t)>* m_task = nullptr;
  std::size_t m_count = 0, m_next = 0, m_running = 0;
  std::size_t m_round = 0;
  bool m_quit = false;
};

}  // namespace engine
