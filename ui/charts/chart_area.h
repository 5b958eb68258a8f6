// ChartArea: the live charts over training steps — loss (train and
// validation; linear or log axis), loss scale (log2, overflow and skipped
// steps marked; runs without loss scaling left off), memory stacked by
// category with the CPU's emulation buffers apart, accuracy (validation and
// train batch) — and the per-layer gradient histogram. One colour per run;
// ticked runs overlay; one legend above the grid names every run in full.
// It subscribes to the RunStore and redraws once per frame.
#pragma once

#include <QString>
#include <QTimer>
#include <QVector>
#include <QWidget>

#include <cstdint>
#include <map>

#include "charts/decimate.h"

class GradientPanel;
class LiveChartView;
class QAreaSeries;
class QCheckBox;
class QLabel;
class QLogValueAxis;
class QGraphicsSimpleTextItem;
class QChart;
class QChartView;
class QLineSeries;
class QScatterSeries;
class QValueAxis;
class QAbstractAxis;
class QXYSeries;
class RunStore;
struct RunData;

// A printf format for value-axis labels whose range is [0, top].
QString axisLabelFormat(double top);

// Sets a dynamic-tick axis to [lo, hi] with ticks every `interval`, in the
// order that never has many ticks in between (every setter lays the chart
// out: a range grown before its interval meant hundreds of labels for a
// moment — measured at 40 ms). No-op when nothing changes.
void setAxis(QValueAxis* axis, double lo, double hi, double interval);

// GUI thread only. Keeps no history: refresh() reads the RunStore and
// gives each changed series one replace() with its points decimated to the
// plot's pixel columns (STYLE.md habit 12). Dense line series use OpenGL
// only on xcb/wayland (they crash under the offscreen platform).
class ChartArea : public QWidget {
  Q_OBJECT

 public:
  enum Metric { Loss = 0, LossScale, Memory, Accuracy, Gradients, MetricCount };
  // Main: train loss, log2 scale, memory total, val accuracy. Secondary:
  // val loss, train batch accuracy. Markers: NaN loss, overflow steps.
  // Markers2: skipped steps.
  enum Role { Main = 0, Secondary, Markers, Markers2 };

  explicit ChartArea(RunStore* store, QWidget* parent = nullptr);
  ~ChartArea() override;

  QChartView* view(Metric m) const;
  QChart* chart(Metric m) const;
  QValueAxis* xAxis(Metric m) const;
  QValueAxis* yAxis(Metric m) const;  // null for the loss chart on its log axis
  QAbstractAxis* lossAxis() const;    // the loss chart's y axis, linear or log
  GradientPanel* gradientPanel() const { return m_gradients; }
  static QString title(Metric m);

  // The run whose memory is stacked by category and whose layer formats
  // the gradient panel draws (-1: the newest visible run).
  void setFocusRun(int id);
  int focusRun() const;

  // Redraws what changed since the last call. The store's signals schedule
  // it, coalesced to one call per event-loop pass (one per frame).
  void refresh();
  void scheduleRefresh();

  // The loss axis: logarithmic or linear. Until the user chooses, it is
  // logarithmic when the visible losses span more than three decades.
  void setLossLogScale(bool on);  // the user's choice: kept
  bool lossLogScale() const { return m_logScale; }
  QCheckBox* logScaleCheck() const { return m_logCheck; }
  static constexpr double kLogDecades = 3.0;

  // The legend shared by the grid: every visible run's whole name in its colour.
  QLabel* sharedLegend() const { return m_legend; }
  // The loss-scale chart's note naming the runs without loss scaling.
  QString lossScaleNote() const;
  // The memory chart's line about the GPU's own memory (cudaMemGetInfo of
  // the newest visible run on a device); empty on the CPU.
  QString deviceMemoryNote() const;

  // The charts a lesson watches (a preset's `watch`): they fill a large top
  // row, the others a short one below; `watchedOnly` (presentation view)
  // hides the others. Empty: the usual grid.
  void setWatched(const QVector<Metric>& watched, bool watchedOnly = false);
  const QVector<Metric>& watched() const { return m_watched; }
  bool watchedOnly() const { return m_watchOnly; }
  // Large type and thick lines (chart_style::presentation), or back.
  void setPresentation(bool on);
  bool presentation() const { return m_presentation; }

  // Double-click: one chart fills the area; again: the grid is back.
  void toggleEnlarged(QWidget* chartOrPanel);
  QWidget* enlarged() const { return m_enlarged; }

  // The CPU-emulation band of the focus run (not part of the total).
  QAreaSeries* emulationArea() const { return m_emulationArea; }
  // A run's series on a chart (null before the run was first drawn).
  QXYSeries* runSeries(Metric m, int runId, Role role = Main) const;
  // The stacked memory area of category c (0 weights .. 5 workspace).
  QAreaSeries* memoryArea(int category) const;

  // Whether dense series use OpenGL here: on xcb/wayland with a hardware
  // OpenGL driver. PL_CHARTS_OPENGL=0 turns it off, =1 forces it on
  // (xcb/wayland only). Decided once per process.
  static bool openGlWanted();
  // The OpenGL driver's GL_RENDERER ("" when no context can be made).
  static QString openGlRenderer();

  // True once any loss point is on a chart since the last reset.
  bool hasPoints() const { return m_hadPoints; }
  void resetFirstPoint() { m_hadPoints = false; }

 signals:
  // The first point of a run reached a chart (after resetFirstPoint()).
  void pointsAppeared();

 private:
  struct RunSeries;
  LiveChartView* makeChart(Metric m);
  RunSeries& seriesFor(const RunData& run);
  void updateRun(const RunData& run, RunSeries& s, double x1, bool force);
  void updateMemoryStack(const RunData* run, double x1, bool force);
  void updateRanges(double x1);
  void updateLegend();
  void layOutCharts();
  int seriesCount() const;
  QString runLabel(const RunData& r) const;
  void applyLossAxis(bool log);
  QString hoverText(Metric m, const QPointF& value) const;

  RunStore* m_store;
  QVector<LiveChartView*> m_views;
  GradientPanel* m_gradients = nullptr;
  std::map<int, RunSeries*> m_series;
  QVector<QLineSeries*> m_memUpper;
  QVector<QAreaSeries*> m_memAreas;
  QScatterSeries* m_legendNan = nullptr;
  QGraphicsSimpleTextItem* m_accuracyNote = nullptr;
  int m_focus = -1;
  ColumnPicker m_memPeaks;  // the focus run's peak step per memory-chart column
  int m_memoryRun = -1;
  std::uint64_t m_memoryRevision = 0;
  double m_x1 = -1.0;
  QVector<int> m_widths;
  QVector<int> m_pending;  // runs whose series are still to be made
  QTimer m_prepare;
  bool m_hadPoints = false;
  bool m_refreshPending = false;
  QLabel* m_legend = nullptr;
  QCheckBox* m_logCheck = nullptr;
  QValueAxis* m_lossLinear = nullptr;
  QLogValueAxis* m_lossLog = nullptr;
  bool m_logScale = false;
  bool m_logChosen = false;  // the user chose; no more automatic switching
  QGraphicsSimpleTextItem* m_deviceNote = nullptr;
  QGraphicsSimpleTextItem* m_scaleNote = nullptr;
  QLineSeries* m_emulationUpper = nullptr;
  QAreaSeries* m_emulationArea = nullptr;
  QWidget* m_enlarged = nullptr;
  QWidget* m_gridHost = nullptr;
  QVector<Metric> m_watched;
  bool m_watchOnly = false;
  bool m_presentation = false;
  int m_styledSeries = 0;  // series count when the presentation style was last applied
  double m_emulationMax = 0.0;  // MiB: the focus run's stack plus emulation, at most
};
