// LossChart: the training loss of every run (per batch, min/max per pixel
// column), the validation loss dashed with markers, NaN losses as stars at
// the top; a linear or logarithmic axis that follows the bulk of the curves.
#pragma once

#include <map>

#include "charts/step_chart.h"

class QAbstractAxis;
class QCheckBox;
class QLogValueAxis;

class LossChart : public StepChart {
  Q_OBJECT

 public:
  enum Role { Train = 0, Validation, NanMarkers };
  LossChart(ChartHost& host, QWidget* parent);
  ~LossChart() override;

  QXYSeries* runSeries(int runId, int role) const override;
  QWidget* headerWidget() const override;
  bool drewPoints(int runId) const override;
  void setPresentation(bool on) override;

  // The y axis as it is now, linear or log.
  QAbstractAxis* lossAxis() const;
  // The user's choice: kept (no more automatic switching).
  void setLogScale(bool on);
  bool logScale() const { return m_logScale; }
  QCheckBox* logCheck() const { return m_logCheck; }
  // Until the user chooses, the axis is logarithmic when the visible losses
  // span more than this many decades.
  static constexpr double kLogDecades = 3.0;

 signals:
  // The user chose the axis: the area redraws.
  void logScaleChosen();

 protected:
  void makeSeries(const RunData& run) override;
  void showSeries(const RunData& run, bool shown) override;
  void draw(const RunData& run, double x1) override;
  void finishRanges(const ChartFrame& frame) override;
  QString hoverLine(const RunData& run, const engine::StepMetrics& step, double x, const QString& who) const override;

 private:
  struct Run;
  void applyAxis(bool log);

  std::map<int, Run*> m_runs;
  QScatterSeries* m_legendNan = nullptr;
  QCheckBox* m_logCheck = nullptr;
  QValueAxis* m_linear = nullptr;
  QLogValueAxis* m_log = nullptr;
  bool m_logScale = false;
  bool m_logChosen = false;
};
