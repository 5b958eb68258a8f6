// LossScaleChart: each run's loss scale on a log2 axis (GradScaler starts at
// 2^16 and halves on overflow, so integers on this axis are the scale's
// actual steps), overflow steps as red triangles, skipped steps as rings;
// runs without loss scaling are named in a note instead of drawn.
#pragma once

#include <map>

#include "charts/step_chart.h"

class QGraphicsTextItem;

class LossScaleChart : public StepChart {
  Q_OBJECT

 public:
  enum Role { Scale = 0, Overflow = 2, Skipped = 3 };
  LossScaleChart(ChartHost& host, QWidget* parent);
  ~LossScaleChart() override;

  QXYSeries* runSeries(int runId, int role) const override;
  void setPresentation(bool on) override;
  // The note naming the runs without loss scaling ("" when hidden).
  QString note() const;

 protected:
  void makeSeries(const RunData& run) override;
  void showSeries(const RunData& run, bool shown) override;
  void draw(const RunData& run, double x1) override;
  void finishRanges(const ChartFrame& frame) override;
  QString hoverLine(const RunData& run, const engine::StepMetrics& step, double x, const QString& who) const override;

 private:
  struct Run;
  std::map<int, Run*> m_runs;
  void placeNote();
  QGraphicsTextItem* m_note = nullptr;
  bool m_noteOnTop = false;  // top-left (above the scales) or centred
};
