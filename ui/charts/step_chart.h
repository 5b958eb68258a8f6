// StepChart: the base of the Live tab's charts — a LiveChartView with a step
// axis and a value axis, per-run series made once and redrawn when the run's
// records change, decimated to the plot's pixel columns, a value tooltip and
// an export name. ChartTile is what the chart area lays out and drives (a
// StepChart, or the gradient panel). A new chart: a StepChart subclass in one
// file and one line in charts/chart_registry.cpp.
#pragma once

#include <QObject>
#include <QPointF>
#include <QString>

#include <cstdint>
#include <map>

class LiveChartView;
class QAbstractSeries;
class QChart;
class QScatterSeries;
class QLineSeries;
class QValueAxis;
class QWidget;
class QXYSeries;
class RunStore;
struct RunData;
namespace engine {
struct StepMetrics;
}

// A printf format for value-axis labels whose range is [0, top].
QString axisLabelFormat(double top);

// Sets a dynamic-tick axis to [lo, hi] with ticks every `interval`, in the
// order that never has many ticks in between (every setter lays the chart
// out: a range grown before its interval meant hundreds of labels for a
// moment — measured at 40 ms). No-op when nothing changes.
void setAxis(QValueAxis* axis, double lo, double hi, double interval);

// What the charts share, provided by the chart area.
class ChartHost {
 public:
  virtual ~ChartHost() = default;
  virtual const RunStore& store() const = 0;
  // How a run is named on the charts (the recipe, or name and recipe).
  virtual QString runLabel(const RunData& run) const = 0;
  // The run whose details are drawn (memory stack, gradients); -1: none.
  virtual int focusRun() const = 0;
  // Whether the run's series have been made.
  virtual bool prepared(int runId) const = 0;
};

// One frame's shared facts: the step axis's end, and whether every series
// must be decimated again (a new x range or plot width).
struct ChartFrame {
  double x1 = 0.0;
  bool force = false;
};

// Where a chart sits in the usual grid (row, column, spans).
struct GridCell {
  int row = 0, column = 0, rowSpan = 1, columnSpan = 1;
};

// GUI thread only.
class ChartTile : public QObject {
  Q_OBJECT

 public:
  using QObject::QObject;

  // The preset key a lesson's `watch` names it by ("loss", "loss_scale").
  virtual QString key() const = 0;
  virtual QString title() const = 0;
  // The widget the grid places, and the chart view inside it.
  virtual QWidget* widget() const = 0;
  virtual LiveChartView* view() const = 0;
  virtual GridCell cell() const = 0;
  // A widget for the row above the grid (the loss chart's log check), or null.
  virtual QWidget* headerWidget() const { return nullptr; }

  // Made as soon as a run is added, before its data arrives.
  virtual void prepareRun(const RunData& run) = 0;
  // A run's series hidden (unticked) or drawn.
  virtual void hideRun(int runId) { (void)runId; }
  virtual void updateRun(const RunData& run, const ChartFrame& frame) { (void)run, (void)frame; }
  // After every run: ranges, notes.
  virtual void finish(const ChartFrame& frame) = 0;
  // Records the plot's width for this frame; true when it changed.
  virtual bool measureWidth() { return false; }
  virtual void setPresentation(bool on) = 0;
  // True once a run's points are on this chart.
  virtual bool drewPoints(int runId) const { (void)runId; return false; }
};

// A chart over training steps.
class StepChart : public ChartTile {
  Q_OBJECT

 public:
  struct Spec {
    const char* objectName;  // "lossChart"
    const char* key;         // "loss"
    QString title;
    QString yTitle;
    double yMin, yMax;
    const char* yFormat;     // printf, for the value axis
    GridCell cell;
  };
  StepChart(ChartHost& host, const Spec& spec, QWidget* parent);

  QString key() const override { return QString::fromLatin1(m_spec.key); }
  QString title() const override { return m_spec.title; }
  QWidget* widget() const override;
  LiveChartView* view() const override { return m_view; }
  GridCell cell() const override { return m_spec.cell; }
  QChart* chart() const;
  QValueAxis* xAxis() const;
  QValueAxis* yAxis() const;  // null while the axis is not a value axis

  void prepareRun(const RunData& run) final;
  void hideRun(int runId) final;
  void updateRun(const RunData& run, const ChartFrame& frame) final;
  void finish(const ChartFrame& frame) final;
  bool measureWidth() final;
  void setPresentation(bool on) override;

  // A run's series: `role` 0 is the main one; the others are the chart's.
  virtual QXYSeries* runSeries(int runId, int role) const = 0;

  // Whether dense series use OpenGL here: on xcb/wayland with a hardware
  // OpenGL driver. PL_CHARTS_OPENGL=0 turns it off, =1 forces it on
  // (xcb/wayland only). Decided once per process.
  static bool openGlWanted();
  // The OpenGL driver's GL_RENDERER ("" when no context can be made).
  static QString openGlRenderer();

 protected:
  // Makes the run's series (once per run).
  virtual void makeSeries(const RunData& run) = 0;
  // Shows or hides every series of the run.
  virtual void showSeries(const RunData& run, bool shown) = 0;
  // Draws the run (its records changed, or the grid did).
  virtual void draw(const RunData& run, double x1) = 0;
  // The value axis and the notes, after every run is drawn.
  virtual void finishRanges(const ChartFrame& frame) = 0;
  // The tooltip line of one run at one step; `who` is its swatch and name.
  virtual QString hoverLine(const RunData& run, const engine::StepMetrics& step, double x, const QString& who) const = 0;

  // Series helpers: a line or markers in the run's colour, attached to both
  // axes and left out of the chart's legend (the shared legend names runs).
  QLineSeries* addLine(const RunData& run, double width, Qt::PenStyle style, const QColor& colour, bool dense);
  QScatterSeries* addMarkers(const RunData& run, int shape, const QColor& fill, const QColor& border, double size);
  // A legend entry without points (what a dash or marker means).
  QLineSeries* addLegendLine(const QString& name, Qt::PenStyle style, double width);
  QScatterSeries* addLegendMarker(const QString& name, int shape, const QColor& fill, const QColor& border,
                                  double size);
  void attach(QAbstractSeries* series);
  void hideLegendOf(QAbstractSeries* series);
  // Hides a series, or shows it again without its legend marker.
  void setShown(QAbstractSeries* series, bool shown);
  // The plot's pixel columns this frame (at least 50).
  int columns() const;
  // How many step ticks (1..5) have room for their labels up to x1.
  int stepTicks(double x1) const;
  bool zoomed() const;
  bool presentationOn() const { return m_presentation; }

  ChartHost& m_host;

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  QString hoverText(const QPointF& value) const;
  void fitLegend();

  Spec m_spec;
  LiveChartView* m_view = nullptr;
  std::map<int, std::uint64_t> m_revisions;  // per run: the records last drawn
  int m_width = -1;
  int m_legendWidth = 0;  // what the legend's entries need, measured when shown
  bool m_presentation = false;
};
