// SolverChart: the Solver view's chart: each run's normwise backward error
// per refinement iteration on a log axis, FP64's unit roundoff and each
// factor format's u·κ marked.
#pragma once

#include <QChartView>
#include <QColor>
#include <QString>
#include <QVector>

#include <vector>

#include "solve/refine.h"

class QLineSeries;
class QLogValueAxis;
class QValueAxis;

// One series per run (format x method: the format's colour, LU-IR solid,
// GMRES-IR dotted, a marker at every iterate), a dash-dot black line at 2^-53
// (FP64's unit roundoff: the accuracy refinement aims at) and, per factor
// format, a dashed line in its colour at u_factor·κ: where that line
// reaches 1 (κ·u = 1) LU-IR stops converging (Carson and Higham). A
// backward error of exactly 0 is drawn at the axis' floor (a log axis has
// no 0). GUI thread.
class SolverChart : public QChartView {
  Q_OBJECT

 public:
  explicit SolverChart(QWidget* parent = nullptr);

  // Empties the chart for a new job: the 2^-53 line and one u·κ line per
  // distinct factor format among `configs` (TF32 and FP32 apart).
  void reset(double cond, const std::vector<engine::RefineConfig>& configs);
  // One run's curve: its backward error at iterations 0, 1, ...
  void addRun(const QString& name, const engine::RefineConfig& config, const engine::SolveResult& result);

  // What is drawn, for tests: every series' name and points.
  struct Shown {
    QString name;
    QVector<QPointF> points;
    Qt::PenStyle style = Qt::SolidLine;
  };
  QVector<Shown> shown() const;
  QLogValueAxis* yAxis() const { return m_y; }

  // A factor format's colour, the same in the chart and the table.
  static QColor formatColour(const engine::SolveFormat& f);
  // "fp16", "tf32", "fp64": the factor's name in the legend.
  static QString formatLabel(const engine::SolveFormat& f);

  void setPresentation(bool on);

 private:
  void fitAxes();
  QLineSeries* addLine(const QString& name, const QPen& pen, double y);

  QValueAxis* m_x = nullptr;
  QLogValueAxis* m_y = nullptr;
  // Horizontal lines (2^-53, u·κ): their y, stretched over the x range.
  struct Level {
    QLineSeries* series;
    double y;
  };
  QVector<Level> m_levels;
  double m_dataMin = 1.0, m_dataMax = 1.0;
  int m_maxIter = 1;
};
