// LatencyProbe: lateness of a 5 ms timer, max and percentiles.
#include "session/latency_probe.h"

#include <time.h>

#include <algorithm>
#include <numeric>

#include <QStringList>

namespace {

// CPU time of the calling thread (Linux/POSIX), in milliseconds.
double threadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

}  // namespace

LatencyProbe::LatencyProbe(QObject* parent) : QObject(parent) {
  m_timer.setTimerType(Qt::PreciseTimer);
  m_timer.setInterval(kIntervalMs);
  connect(&m_timer, &QTimer::timeout, this, &LatencyProbe::onTick);
}

void LatencyProbe::start() {
  m_lateMs.clear();
  m_atMs.clear();
  m_cpuMs.clear();
  m_cpuMs.reserve(1 << 16);
  m_lastCpuMs = threadCpuMs();
  m_lateMs.reserve(1 << 16);
  m_atMs.reserve(1 << 16);
  m_clock.start();
  m_lastNs = 0;
  m_timer.start();
}

void LatencyProbe::stop() { m_timer.stop(); }

void LatencyProbe::onTick() {
  const qint64 now = m_clock.nsecsElapsed();
  const double sinceLast = static_cast<double>(now - m_lastNs) / 1e6;
  m_lastNs = now;
  m_lateMs.push_back(std::max(0.0, sinceLast - kIntervalMs));
  m_atMs.push_back(static_cast<double>(now) / 1e6);
  const double cpu = threadCpuMs();
  m_cpuMs.push_back(cpu - m_lastCpuMs);
  m_lastCpuMs = cpu;
}

LatencyProbe::Stats LatencyProbe::stats() const {
  Stats s;
  s.ticks = m_lateMs.size();
  if (m_lateMs.empty()) return s;
  std::vector<double> v = m_lateMs;
  std::sort(v.begin(), v.end());
  s.maxMs = v.back();
  s.p99Ms = v[static_cast<std::size_t>(0.99 * static_cast<double>(v.size() - 1))];
  s.p50Ms = v[v.size() / 2];
  s.meanMs = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  std::vector<std::size_t> order(m_lateMs.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  const std::size_t k = std::min<std::size_t>(5, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                    [this](std::size_t a, std::size_t b) { return m_lateMs[a] > m_lateMs[b]; });
  for (std::size_t i = 0; i < k; ++i)
    s.worst.push_back({m_atMs[order[i]], m_lateMs[order[i]], m_cpuMs[order[i]]});
  // Lateness the thread's own work explains: at most the CPU it used in the
  // interval beyond the 5 ms it was meant to wait (idle at best).
  std::vector<double> busy(m_lateMs.size());
  for (std::size_t i = 0; i < busy.size(); ++i) busy[i] = std::min(m_lateMs[i], m_cpuMs[i]);
  std::sort(busy.begin(), busy.end());
  s.maxBusyMs = busy.back();
  s.p99BusyMs = busy[static_cast<std::size_t>(0.99 * static_cast<double>(busy.size() - 1))];
  return s;
}

QString LatencyProbe::describe(const Stats& s) {
  QStringList worst;
  for (const Stats::Tick& t : s.worst)
    worst << QStringLiteral("%1 ms at %2 s (UI thread CPU %3 ms)")
                 .arg(t.lateMs, 0, 'f', 1)
                 .arg(t.atMs / 1000.0, 0, 'f', 2)
                 .arg(t.cpuMs, 0, 'f', 1);
  return QStringLiteral("ticks %1, lateness max %2 ms, p99 %3 ms, median %4 ms, mean %5 ms; "
                        "of it the UI thread's own CPU: max %7 ms, p99 %8 ms; worst: %6")
      .arg(s.ticks)
      .arg(s.maxMs, 0, 'f', 1)
      .arg(s.p99Ms, 0, 'f', 1)
      .arg(s.p50Ms, 0, 'f', 2)
      .arg(s.meanMs, 0, 'f', 2)
      .arg(worst.join(QStringLiteral(", ")))
      .arg(s.maxBusyMs, 0, 'f', 1)
      .arg(s.p99BusyMs, 0, 'f', 1);
}
