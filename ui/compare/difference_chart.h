// DifferenceChart: one chart of the Compare tab's "difference to FP32" mode:
// every run of the comparison minus the FP32 run at the same step (training
// loss, or training-batch accuracy in points), smoothed by a centred moving
// mean, over a grey band of FP32's own batch-to-batch noise (+-1 std), with
// the validation differences as dots. Each recipe keeps its colour and dash
// pattern (chart_style::recipeStyle); FP32 is the zero line, drawn on top.
// Without an FP32 run (or without accuracy) the chart says so.
#pragma once

#include <QObject>
#include <QString>
#include <QVector>

#include <map>

#include "compare/difference.h"
#include "compare/recipe_legend.h"

class LiveChartView;
class QAreaSeries;
class QChart;
class QGraphicsTextItem;
class QLineSeries;
class QScatterSeries;
class RunStore;
class QWidget;

// GUI thread only.
class DifferenceChart : public QObject {
  Q_OBJECT

 public:
  DifferenceChart(RunStore* store, difference::Quantity quantity, QWidget* parent);

  LiveChartView* view() const { return m_view; }
  QChart* chart() const;
  // The runs drawn (a comparison group); the series are made again.
  void setRuns(const QVector<int>& runs);
  // Redraws from the store.
  void refresh();

  // The store run used as the reference (-1: the group has no FP32 run).
  int referenceRun() const { return m_reference; }
  // The note the chart shows instead of curves ("" when it draws them).
  QString note() const;
  // The moving mean's half width last used (the window is 2h+1 steps).
  int halfWindow() const { return m_half; }
  QLineSeries* differenceSeries(int runId) const;
  QScatterSeries* validationSeries(int runId) const;
  QAreaSeries* noiseBand() const { return m_band; }
  // The legend of this chart's runs, band and dots, in drawing order.
  QVector<RecipeLegend::Entry> legendEntries() const;

 private:
  struct Series {
    QLineSeries* line = nullptr;
    QScatterSeries* validation = nullptr;
  };
  void placeNote();
  QString hoverText(double x) const;

  RunStore* m_store;
  difference::Quantity m_quantity;
  LiveChartView* m_view = nullptr;
  QVector<int> m_runs;
  std::map<int, Series> m_series;
  QLineSeries* m_bandUpper = nullptr;
  QLineSeries* m_bandLower = nullptr;
  QAreaSeries* m_band = nullptr;
  QScatterSeries* m_legendValidation = nullptr;
  QGraphicsTextItem* m_note = nullptr;
  int m_reference = -1;
  int m_half = 5;
};
