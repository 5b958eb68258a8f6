// StatusReadouts: the status bar's permanent read-outs of the focus run —
// step (of its total), samples per second, loss scale, memory now and at
// its peak; for a text run also its last validation in bits per token and
// perplexity.
#pragma once

#include <QObject>

class QLabel;
class QStatusBar;
struct RunData;

// GUI thread only.
class StatusReadouts : public QObject {
  Q_OBJECT

 public:
  explicit StatusReadouts(QStatusBar* bar);

  // A negative value shows "—" (a negative peak: no peak shown).
  void set(qint64 step, double samplesPerSecond, double lossScale, qint64 memoryBytes, qint64 peakBytes = -1);
  // The run's last step, its rate over the last 50 steps; null: all "—".
  void showRun(const RunData* run);

 private:
  QLabel* m_step = nullptr;
  QLabel* m_rate = nullptr;
  QLabel* m_scale = nullptr;
  QLabel* m_memory = nullptr;
  QLabel* m_tokens = nullptr;  // shown for a text run only
};
