// MemoryChart: the focus run's memory stacked by category (weights, master,
// grads, optimizer, activations, workspace), the CPU's emulation buffers
// hatched above the stack and outside its total, every other run's total as
// a dashed line, and on a device the backend's own allocation per run as
// a dotted line (StepMetrics::device_allocated) with cudaMemGetInfo's
// figure as a note.
#pragma once

#include <QVector>

#include <map>

#include "charts/decimate.h"
#include "charts/step_chart.h"

class QAreaSeries;
class QGraphicsSimpleTextItem;

class MemoryChart : public StepChart {
  Q_OBJECT

 public:
  MemoryChart(ChartHost& host, QWidget* parent);
  ~MemoryChart() override;

  // role 0: the run's total (dashed; hidden for the focus run, whose
  // stack shows it); role 1 (ChartArea::Secondary): its device allocation
  // (dotted; empty where the backend reports none).
  QXYSeries* runSeries(int runId, int role) const override;
  void setPresentation(bool on) override;
  // The stacked area of category c (0 weights .. 5 workspace).
  QAreaSeries* area(int category) const;
  QAreaSeries* emulationArea() const { return m_emulationArea; }
  // The line about the GPU's memory (cudaMemGetInfo of the newest visible
  // run on a device); "" on the CPU.
  QString deviceNote() const;

 protected:
  void makeSeries(const RunData& run) override;
  void showSeries(const RunData& run, bool shown) override;
  void draw(const RunData& run, double x1) override;
  void finishRanges(const ChartFrame& frame) override;
  QString hoverLine(const RunData& run, const engine::StepMetrics& step, double x, const QString& who) const override;
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  struct Run;
  // The category legend only where the chart is wide enough for it.
  void fitLegend();
  void updateStack(const RunData* run, const ChartFrame& frame);

  std::map<int, Run*> m_runs;
  QVector<QLineSeries*> m_upper;
  QVector<QAreaSeries*> m_areas;
  QLineSeries* m_emulationUpper = nullptr;
  QAreaSeries* m_emulationArea = nullptr;
  QGraphicsSimpleTextItem* m_deviceNote = nullptr;
  QLineSeries* m_deviceLegend = nullptr;  // "device allocation", shown while a run has one
  ColumnPicker m_peaks;  // the focus run's peak step per pixel column
  int m_stackRun = -1;
  std::uint64_t m_stackRevision = 0;
  double m_emulationMax = 0.0;  // MiB: the focus run's stack plus emulation, at most
};
