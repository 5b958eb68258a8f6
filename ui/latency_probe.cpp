// LatencyProbe: lateness of a 5 ms timer, max and percentiles.
#include "latency_probe.h"

#include <algorithm>
#include <numeric>

LatencyProbe::LatencyProbe(QObject* parent) : QObject(parent) {
  m_timer.setTimerType(Qt::PreciseTimer);
  m_timer.setInterval(kIntervalMs);
  connect(&m_timer, &QTimer::timeout, this, &LatencyProbe::onTick);
}

void LatencyProbe::start() {
  m_lateMs.clear();
  m_lateMs.reserve(1 << 16);
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
  return s;
}

QString LatencyProbe::describe(const Stats& s) {
  return QStringLiteral("ticks %1, lateness max %2 ms, p99 %3 ms, median %4 ms, mean %5 ms")
      .arg(s.ticks)
      .arg(s.maxMs, 0, 'f', 1)
      .arg(s.p99Ms, 0, 'f', 1)
      .arg(s.p50Ms, 0, 'f', 2)
      .arg(s.meanMs, 0, 'f', 2);
}
