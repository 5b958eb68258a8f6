// RoundPool: one mutex guards the round (task, next index, tasks running);
// a task runs outside it.
#include "train/round_pool.h"

#include <utility>

namespace engine {

RoundPool::RoundPool(int workers, std::function<void()> init) {
  for (int i = 1; i < workers; ++i) m_threads.emplace_back([this, init] { worker(init); });
}

RoundPool::~RoundPool() {
  {
    std::lock_guard<std::mutex> lk(m_mutex);
    m_quit = true;
  }
  m_start.notify_all();
  for (std::thread& t : m_threads) t.join();
}

void RoundPool::drain(std::unique_lock<std::mutex>& lk) {
  while (m_next < m_count) {
    const std::size_t i = m_next++;
    ++m_running;
    const auto* task = m_task;
    lk.unlock();
    (*task)(i);
    lk.lock();
    --m_running;
  }
  if (m_running == 0) m_done.notify_all();
}

void RoundPool::worker(std::function<void()> init) {
  if (init) init();
  std::unique_lock<std::mutex> lk(m_mutex);
  std::size_t seen = m_round;
  for (;;) {
    m_start.wait(lk, [&] { return m_quit || m_round != seen; });
    if (m_quit) return;
    seen = m_round;
    drain(lk);
  }
}

void RoundPool::run(std::size_t count, const std::function<void(std::size_t)>& task) {
  std::unique_lock<std::mutex> lk(m_mutex);
  m_task = &task;
  m_count = count;
  m_next = 0;
  ++m_round;
  m_start.notify_all();
  drain(lk);
  m_done.wait(lk, [&] { return m_next >= m_count && m_running == 0; });
  m_task = nullptr;
}

}  // namespace engine
