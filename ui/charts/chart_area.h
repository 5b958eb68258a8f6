// ChartArea: the Live tab's chart grid — the charts of charts/chart_registry.h
// (loss, loss scale, memory, accuracy, gradients), one colour per run, ticked
// runs overlaid, one legend above the grid naming every run in full. It
// subscribes to the RunStore, redraws once per frame, and lays the charts out
// (the usual grid, a lesson's watched charts large, one chart enlarged).
#pragma once

#include <QString>
#include <QTimer>
#include <QVector>
#include <QWidget>

#include <set>

#include "charts/step_chart.h"

class GradientPanel;
class LiveChartView;
class QAbstractAxis;
class QAreaSeries;
class QChart;
class QChartView;
class QCheckBox;
class QLabel;
class QValueAxis;
class QXYSeries;
class RunStore;
struct RunData;

// GUI thread only. Keeps no history: refresh() reads the RunStore and each
// chart gives each changed series one replace() with its points decimated
// to the plot's pixel columns. Dense line series use OpenGL only on
// xcb/wayland (they crash under the offscreen platform).
class ChartArea : public QWidget, public ChartHost {
  Q_OBJECT

 public:
  // The built-in charts, by their place in PL_LIVE_CHARTS.
  enum Metric { Loss = 0, LossScale, Memory, Accuracy, Gradients };
  // A run's series on a chart. Loss: train, validation, NaN markers. Loss
  // scale: scale, overflow (Markers), skipped steps (Markers2). Memory: the
  // total. Accuracy: validation, train batch.
  enum Role { Main = 0, Secondary, Markers, Markers2 };

  explicit ChartArea(RunStore* store, QWidget* parent = nullptr);
  ~ChartArea() override;

  int chartCount() const { return static_cast<int>(m_tiles.size()); }
  // A chart by the key a lesson's `watch` uses ("loss", "loss_scale",
  // "memory", "accuracy", "gradients"); -1 when none has it.
  int chartIndex(const QString& key) const;
  QString title(int m) const;
  QChartView* view(int m) const;
  QChart* chart(int m) const;
  QValueAxis* xAxis(int m) const;
  QValueAxis* yAxis(int m) const;  // null for the loss chart on its log axis
  QAbstractAxis* lossAxis() const;  // the loss chart's y axis, linear or log
  GradientPanel* gradientPanel() const;

  // The run whose memory is stacked by category and whose layer formats
  // the gradient panel draws (-1: the newest visible run).
  void setFocusRun(int id);
  int focusRun() const override;

  // Redraws what changed since the last call. The store's signals schedule
  // it, coalesced to one call per event-loop pass (one per frame).
  void refresh();
  void scheduleRefresh();

  // The loss axis: logarithmic or linear. Until the user chooses, it is
  // logarithmic when the visible losses span more than three decades.
  void setLossLogScale(bool on);  // the user's choice: kept
  bool lossLogScale() const;
  QCheckBox* logScaleCheck() const;

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
  QAreaSeries* emulationArea() const;
  // A run's series on a chart (null before the run was first drawn).
  QXYSeries* runSeries(int m, int runId, Role role = Main) const;
  // The stacked memory area of category c (0 weights .. 5 workspace).
  QAreaSeries* memoryArea(int category) const;

  static bool openGlWanted() { return StepChart::openGlWanted(); }
  static QString openGlRenderer() { return StepChart::openGlRenderer(); }

  // True once any loss point is on a chart since the last reset.
  bool hasPoints() const { return m_hadPoints; }
  void resetFirstPoint() { m_hadPoints = false; }

  // ChartHost.
  const RunStore& store() const override { return *m_store; }
  QString runLabel(const RunData& r) const override;
  bool prepared(int runId) const override { return m_prepared.count(runId) > 0; }

 signals:
  // The first point of a run reached a chart (after resetFirstPoint()).
  void pointsAppeared();

 protected:
  void resizeEvent(QResizeEvent* event) override;

 private:
  // The least width of a row of charts (each at most chart_style's least).
  static constexpr int kGridMinWidth = 600;
  // Presentation view stacks two charts only where each gets this height.
  static constexpr int kStackedMinHeight = 400;
  template <class T>
  T* tileAs(int m) const;
  int presentationColumns() const;
  void fitLegend();
  void prepare(const RunData& run);
  void updateLegend();
  void layOutCharts();
  int seriesCount() const;

  RunStore* m_store;
  QVector<ChartTile*> m_tiles;
  std::set<int> m_prepared;  // runs whose series are made
  int m_focus = -1;
  double m_x1 = -1.0;
  QVector<int> m_pending;  // runs whose series are still to be made
  QTimer m_prepare;
  bool m_hadPoints = false;
  bool m_refreshPending = false;
  QLabel* m_legend = nullptr;
  class QScrollArea* m_legendScroll = nullptr;
  QWidget* m_enlarged = nullptr;
  QWidget* m_gridHost = nullptr;
  QVector<Metric> m_watched;
  bool m_watchOnly = false;
  int m_columns = 1;  // presentation view: the watched charts' columns
  bool m_presentation = false;
  int m_styledSeries = 0;  // series count when the presentation style was last applied
};
