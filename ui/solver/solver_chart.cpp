// SolverChart: backward error per iteration, log scale (see solver_chart.h).
#include "solver/solver_chart.h"

#include <QChart>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "charts/chart_style.h"

namespace {

constexpr double kFp64Unit = 0x1p-53;
// The axis floor: below FP64's noise (sqrt(n)·2^-53 is above it for any
// n) and where an exact 0 is drawn.
constexpr double kFloor = 1e-18;
// A u·κ line above this is left off the axis' range (its legend entry
// still gives the value): fp16 at κ = 10^12 would squeeze the errors,
// which live below 1, into the bottom of the plot.
constexpr double kLevelCap = 1e4;

QString shortNumber(double v) { return QString::number(v, 'e', 1); }

}  // namespace

QColor SolverChart::formatColour(const engine::SolveFormat& f) {
  if (f.fp64) return chart_style::runColour(7);  // black: the reference
  switch (f.format) {
    case engine::Format::FP32: return chart_style::runColour(0);
    case engine::Format::TF32: return chart_style::runColour(5);
    case engine::Format::BF16: return chart_style::runColour(1);
    case engine::Format::FP16: return chart_style::runColour(4);
    case engine::Format::E4M3: return chart_style::runColour(3);
    default: return chart_style::runColour(2);
  }
}

QString SolverChart::formatLabel(const engine::SolveFormat& f) { return QString::fromStdString(engine::factor_key(f)); }

// The chart is handed to QChartView's constructor: QChartView(parent) makes
// a default chart of its own, and setChart() releases that one without
// deleting it (LeakSanitizer caught it under the monkey test).
SolverChart::SolverChart(QWidget* parent) : QChartView(new QChart, parent) {
  setObjectName(QStringLiteral("solverChart"));
  QChart* chart = this->chart();
  chart_style::styleChart(chart);
  chart->setTitle(tr("Normwise backward error per refinement iteration"));
  chart->legend()->setAlignment(Qt::AlignRight);
  m_x = chart_style::makeValueAxis(chart, tr("iteration"), QStringLiteral("solverIterationAxis"));
  m_x->setLabelFormat(QStringLiteral("%d"));
  m_x->setTickInterval(1);
  m_y = new QLogValueAxis;
  m_y->setObjectName(QStringLiteral("solverErrorAxis"));
  m_y->setBase(10);
  m_y->setLabelFormat(QStringLiteral("%.0e"));
  m_y->setTitleText(tr("backward error"));
  m_y->setTitleFont(chart_style::axisFont(chart));
  m_y->setLabelsFont(chart_style::axisFont(chart));
  chart->addAxis(m_x, Qt::AlignBottom);
  chart->addAxis(m_y, Qt::AlignLeft);
  setRenderHint(QPainter::Antialiasing);
  setMinimumSize(chart_style::kMinChartWidth, chart_style::kMinChartHeight);
  reset(1.0, {});
}

QLineSeries* SolverChart::addLine(const QString& name, const QPen& pen, double y) {
  auto* s = new QLineSeries;
  s->setName(name);
  s->setPen(pen);
  chart()->addSeries(s);
  s->attachAxis(m_x);
  s->attachAxis(m_y);
  m_levels.push_back({s, y});
  return s;
}

void SolverChart::reset(double cond, const std::vector<engine::RefineConfig>& configs) {
  chart()->removeAllSeries();
  m_levels.clear();
  m_dataMin = kFp64Unit;
  m_dataMax = 1.0;
  m_maxIter = 1;
  addLine(tr("FP64 u = 2^-53"), chart_style::linePen(chart_style::kInk, 1.4, Qt::DashDotLine), kFp64Unit);
  std::set<std::string> seen;
  for (const engine::RefineConfig& c : configs) {
    const engine::SolveFormat f = c.lu.factor;
    if (f.fp64 || !seen.insert(engine::factor_key(f)).second) continue;
    const double level = f.unit_roundoff() * cond;
    addLine(tr("%1 u·κ = %2").arg(formatLabel(f), shortNumber(level)),
            chart_style::linePen(formatColour(f), 1.2, Qt::DashLine), level);
    if (level <= kLevelCap) m_dataMax = std::max(m_dataMax, level);
  }
  fitAxes();
}

void SolverChart::addRun(const QString& name, const engine::RefineConfig& config, const engine::SolveResult& result) {
  auto* s = new QLineSeries;
  const bool gmres = config.method == engine::Method::GmresIr;
  s->setName(name);
  s->setPen(chart_style::linePen(formatColour(config.lu.factor), gmres ? 2.4 : 1.8,
                                 gmres ? Qt::DotLine : Qt::SolidLine));
  s->setPointsVisible(true);
  s->setMarkerSize(gmres ? 5 : 7);
  QList<QPointF> points;
  for (const engine::IterationRecord& h : result.history) {
    double e = h.backward_error;
    if (!std::isfinite(e)) e = 1.0;  // a diverged iterate: at the top, not off the axis
    e = std::max(e, kFloor);
    points.append(QPointF(h.iteration, e));
    m_dataMin = std::min(m_dataMin, e);
    m_dataMax = std::max(m_dataMax, e);
    m_maxIter = std::max(m_maxIter, h.iteration);
  }
  s->replace(points);
  chart()->addSeries(s);
  s->attachAxis(m_x);
  s->attachAxis(m_y);
  fitAxes();
}

void SolverChart::fitAxes() {
  for (const Level& l : m_levels) l.series->replace(QList<QPointF>{{0.0, l.y}, {double(m_maxIter), l.y}});
  m_x->setRange(0, m_maxIter);
  m_x->setTickInterval(m_maxIter <= 12 ? 1 : std::ceil(m_maxIter / 10.0));
  // A decade of room below the lowest point, so the 2^-53 line and the
  // converged iterates do not sit on the axis.
  const double lo = std::pow(10.0, std::floor(std::log10(std::max(m_dataMin, kFloor))) - 1);
  const double hi = std::pow(10.0, std::ceil(std::log10(m_dataMax) + 1e-9));
  m_y->setRange(lo, hi);
  // A label every few decades when the range is wide (about 20 decades).
  const int decades = static_cast<int>(std::lround(std::log10(hi / lo)));
  m_y->setMinorTickCount(0);
  m_y->setBase(decades > 12 ? 1000.0 : (decades > 6 ? 100.0 : 10.0));
}

QVector<SolverChart::Shown> SolverChart::shown() const {
  QVector<Shown> out;
  for (QAbstractSeries* a : chart()->series()) {
    auto* s = qobject_cast<QLineSeries*>(a);
    if (!s) continue;
    out.push_back({s->name(), s->points(), s->pen().style()});
  }
  return out;
}

void SolverChart::setPresentation(bool on) { chart_style::applyPresentation(chart(), on); }
