// LatencyProbe: measures how late the UI thread's event loop is. A 5 ms
// precise timer records, at every tick, how much later than 5 ms after the
// previous tick it fired; a blocked event loop shows up as one large value.
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <QTimer>

#include <vector>

// GUI thread only (it measures the thread it lives on).
class LatencyProbe : public QObject {
  Q_OBJECT

 public:
  static constexpr int kIntervalMs = 5;

  explicit LatencyProbe(QObject* parent = nullptr);

  void start();
  void stop();
  bool running() const { return m_timer.isActive(); }

  struct Stats {
    std::size_t ticks = 0;
    double maxMs = 0.0;   // worst lateness
    double p99Ms = 0.0;
    double p50Ms = 0.0;
    double meanMs = 0.0;
    // The worst ticks, worst first: when (ms since start()), how late, and
    // how much CPU the UI thread used in that interval (little CPU in a
    // late interval: the thread was waiting for a core, not blocked by
    // its own work).
    struct Tick {
      double atMs, lateMs, cpuMs;
    };
    std::vector<Tick> worst;
    // Worst lateness counting only the UI thread's own CPU time in the
    // interval (what the UI's code cost), max and p99.
    double maxBusyMs = 0.0;
    double p99BusyMs = 0.0;
  };
  Stats stats() const;
  // "ticks 1234, lateness max 12.3 ms, p99 4.5 ms, median 0.1 ms, mean 0.3 ms"
  static QString describe(const Stats& s);

 private:
  void onTick();

  QTimer m_timer;
  QElapsedTimer m_clock;
  qint64 m_lastNs = 0;
  std::vector<double> m_lateMs;
  std::vector<double> m_atMs;
  std::vector<double> m_cpuMs;
  double m_lastCpuMs = 0.0;
};
