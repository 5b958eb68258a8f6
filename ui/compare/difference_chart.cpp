// DifferenceChart: smoothed differences to FP32 on a symmetric axis around
// zero, FP32's noise band behind them.
#include "compare/difference_chart.h"

#include <QAreaSeries>
#include <QChart>
#include <QGraphicsTextItem>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QScatterSeries>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <vector>

#include "charts/chart_export.h"
#include "charts/chart_style.h"
#include "charts/decimate.h"
#include "charts/live_chart_view.h"
#include "charts/number_text.h"
#include "charts/step_chart.h"
#include "session/run_store.h"

namespace {

// The most points a smoothed curve keeps (a plot is narrower than this).
constexpr int kMostPoints = 1500;

QValueAxis* axisOf(QChart* chart, Qt::Orientation o) {
  const auto axes = chart->axes(o);
  return axes.isEmpty() ? nullptr : qobject_cast<QValueAxis*>(axes.first());
}

// The value at step x of a curve sorted by x (the point at or before it).
double valueAt(const QList<QPointF>& pts, double x, bool* found) {
  *found = false;
  if (pts.isEmpty() || x < pts.front().x()) return 0.0;
  auto it = std::upper_bound(pts.begin(), pts.end(), x, [](double v, const QPointF& p) { return v < p.x(); });
  *found = true;
  return std::prev(it)->y();
}

}  // namespace

DifferenceChart::DifferenceChart(RunStore* store, difference::Quantity quantity, QWidget* parent)
    : QObject(parent), m_store(store), m_quantity(quantity) {
  auto* chart = new QChart;
  chart_style::styleChart(chart);
  chart->legend()->setMarkerShape(QLegend::MarkerShapeFromSeries);
  // On screen the Compare tab's one RecipeLegend names the runs for both
  // charts (it never elides a name); an exported picture shows this one.
  chart->legend()->hide();
  chart->setProperty(kLegendOnExportProperty, true);
  auto* x = chart_style::makeValueAxis(chart, tr("step"), QStringLiteral("xAxis"));
  x->setLabelFormat(QStringLiteral("%.0f"));
  chart->addAxis(x, Qt::AlignBottom);
  auto* y = chart_style::makeValueAxis(
      chart, quantity == difference::Quantity::Loss ? tr("loss − FP32") : tr("accuracy − FP32 (points)"),
      QStringLiteral("yAxis"));
  chart->addAxis(y, Qt::AlignLeft);

  // FP32's noise: behind everything, grey, no outline.
  m_bandUpper = new QLineSeries(this);
  m_bandLower = new QLineSeries(this);
  m_band = new QAreaSeries(m_bandUpper, m_bandLower);
  m_band->setName(tr("FP32 noise ±1σ"));
  m_band->setObjectName(QStringLiteral("noiseBand"));
  QColor fill = chart_style::recipeStyle(QStringLiteral("fp32")).colour;
  fill.setAlpha(40);
  m_band->setBrush(fill);
  m_band->setPen(Qt::NoPen);
  chart->addSeries(m_band);
  m_band->attachAxis(x);
  m_band->attachAxis(y);

  m_note = new QGraphicsTextItem(chart);
  m_note->setDefaultTextColor(chart_style::kNote);
  m_note->setVisible(false);
  connect(chart, &QChart::plotAreaChanged, this, [this] { placeNote(); });

  m_view = new LiveChartView(chart, parent);
  m_view->setObjectName(quantity == difference::Quantity::Loss ? QStringLiteral("lossDifferenceChart")
                                                               : QStringLiteral("accuracyDifferenceChart"));
  m_view->setMinimumSize(chart_style::kMinChartWidth, chart_style::kMinChartHeight);
  m_view->setExportStem([quantity] {
    return quantity == difference::Quantity::Loss ? QStringLiteral("compare-loss-minus-fp32")
                                                  : QStringLiteral("compare-accuracy-minus-fp32");
  });
  m_view->setHoverText([this](const QPointF& v) { return hoverText(v.x()); });
}

QChart* DifferenceChart::chart() const { return m_view->chart(); }

QLineSeries* DifferenceChart::differenceSeries(int runId) const {
  const auto it = m_series.find(runId);
  return it == m_series.end() ? nullptr : it->second.line;
}

QScatterSeries* DifferenceChart::validationSeries(int runId) const {
  const auto it = m_series.find(runId);
  return it == m_series.end() ? nullptr : it->second.validation;
}

QString DifferenceChart::note() const { return m_note->isVisible() ? m_note->toPlainText() : QString(); }

void DifferenceChart::setRuns(const QVector<int>& runs) {
  QChart* c = chart();
  for (auto& [id, s] : m_series) {
    c->removeSeries(s.line);
    c->removeSeries(s.validation);
    delete s.line;
    delete s.validation;
  }
  m_series.clear();
  if (m_legendValidation) {
    c->removeSeries(m_legendValidation);
    delete m_legendValidation;
    m_legendValidation = nullptr;
  }
  m_runs = runs;
  // Drawn in the recipes' order, FP32 last: on top, thin, so no recipe
  // hides another by being drawn after it (and the zero line stays visible).
  QVector<int> order = runs;
  std::stable_sort(order.begin(), order.end(), [this](int a, int b) {
    return chart_style::recipeStyle(m_store->run(a).recipe).order <
           chart_style::recipeStyle(m_store->run(b).recipe).order;
  });
  QValueAxis* x = axisOf(c, Qt::Horizontal);
  QValueAxis* y = axisOf(c, Qt::Vertical);
  for (int id : order) {
    const RunData& r = m_store->run(id);
    const bool reference = r.recipe == QLatin1String("fp32");
    Series s;
    s.line = new QLineSeries;
    s.line->setName(reference ? tr("%1 = 0").arg(r.recipe) : r.recipe);
    s.line->setPen(chart_style::recipePen(r.recipe, r.colour, reference ? 1.4 : 2.2));
    s.validation = new QScatterSeries;
    s.validation->setName(tr("%1 validation").arg(r.recipe));
    s.validation->setMarkerSize(7);
    s.validation->setColor(r.colour);
    s.validation->setBorderColor(Qt::white);
    for (QAbstractSeries* a : {static_cast<QAbstractSeries*>(s.line), static_cast<QAbstractSeries*>(s.validation)}) {
      c->addSeries(a);
      a->attachAxis(x);
      a->attachAxis(y);
    }
    for (QLegendMarker* m : c->legend()->markers(s.validation)) m->setVisible(false);
    m_series[id] = s;
  }
  // One legend entry says what the dots are.
  m_legendValidation = new QScatterSeries;
  m_legendValidation->setName(tr("validation"));
  m_legendValidation->setMarkerSize(7);
  m_legendValidation->setColor(chart_style::kNeutral);
  m_legendValidation->setBorderColor(Qt::white);
  c->addSeries(m_legendValidation);
  m_legendValidation->attachAxis(x);
  m_legendValidation->attachAxis(y);
  refresh();
}

void DifferenceChart::refresh() {
  QChart* c = chart();
  const bool loss = m_quantity == difference::Quantity::Loss;
  m_reference = -1;
  std::int64_t maxStep = 0;
  bool anyAccuracy = false, anySteps = false;
  for (int id : m_runs) {
    const RunData& r = m_store->run(id);
    if (m_reference < 0 && r.recipe == QLatin1String("fp32")) m_reference = id;
    if (!r.steps.empty()) {
      anySteps = true;
      maxStep = std::max(maxStep, r.steps.back().step);
      anyAccuracy = anyAccuracy || r.steps.back().train_accuracy >= 0;
    }
  }
  m_half = difference::halfWindow(maxStep);
  const int window = 2 * m_half + 1;
  c->setTitle(loss ? tr("Loss − FP32 (centred mean of %1 steps)").arg(window)
                   : tr("Batch accuracy − FP32 (centred mean of %1 steps)").arg(window));

  QString note;
  if (m_runs.isEmpty())
    note = tr("No comparison yet.");
  else if (m_reference < 0)
    note = tr("No FP32 run in this comparison: the difference to FP32 needs one. Compare again with fp32 ticked.");
  else if (!loss && anySteps && !anyAccuracy)
    note = tr("No accuracy: a regression (mean squared error)");
  if (m_note->toPlainText() != note) m_note->setPlainText(note);
  m_note->setVisible(!note.isEmpty());

  double top = 0, bandTop = 0;
  auto grow = [](double& into, const QList<QPointF>& pts) {
    for (const QPointF& p : pts)
      if (std::isfinite(p.y())) into = std::max(into, std::fabs(p.y()));
  };
  if (note.isEmpty()) {
    const RunData& ref = m_store->run(m_reference);
    const difference::Band band = difference::noiseBand(ref, m_quantity, m_half);
    m_bandUpper->replace(difference::thin(band.upper, kMostPoints));
    m_bandLower->replace(difference::thin(band.lower, kMostPoints));
    grow(bandTop, band.upper);
    for (auto& [id, s] : m_series) {
      const RunData& r = m_store->run(id);
      QList<QPointF> d = difference::thin(difference::smoothedDifference(r, ref, m_quantity, m_half), kMostPoints);
      const QList<QPointF> v = difference::validationDifference(r, ref, m_quantity);
      grow(top, d);
      grow(top, v);
      s.line->replace(d);
      s.validation->replace(id == m_reference ? QList<QPointF>() : v);
      s.line->setVisible(true);
      s.validation->setVisible(true);
    }
  } else {
    m_bandUpper->clear();
    m_bandLower->clear();
    for (auto& [id, s] : m_series) {
      s.line->clear();
      s.validation->clear();
    }
  }
  // Symmetric about zero: above is worse for the loss, better for accuracy.
  // The differences set the scale; the band shows whole unless it is more
  // than 3 times their size (then it fills the plot: all of it is noise).
  const double fallback = loss ? 0.01 : 1.0;
  const double want = top > 0 ? std::max(top * 1.1, std::min(bandTop, 3 * top)) : (bandTop > 0 ? bandTop : fallback);
  const double y1 = niceCeil(want);
  QValueAxis* x = axisOf(c, Qt::Horizontal);
  QValueAxis* y = axisOf(c, Qt::Vertical);
  if (!m_view->isZoomed()) {
    // The last step, rounded up to a tick: a 600-step run ends at 600.
    const double last = std::max<double>(static_cast<double>(maxStep), 10.0);
    const double tick = niceTickInterval(last, 5);
    setAxis(x, 0, std::ceil(last / tick) * tick, tick);
    if (y->max() != y1) y->setLabelFormat(axisLabelFormat(y1));
    setAxis(y, -y1, y1, niceTickInterval(2 * y1, 6));
  }
  placeNote();
}

QVector<RecipeLegend::Entry> DifferenceChart::legendEntries() const {
  QVector<RecipeLegend::Entry> out;
  RecipeLegend::Entry band;
  band.kind = RecipeLegend::Entry::Band;
  band.label = m_band->name();
  band.fill = m_band->brush().color();
  out << band;
  // In the drawing order (the chart's series order).
  for (QAbstractSeries* a : chart()->series()) {
    auto* line = qobject_cast<QLineSeries*>(a);
    if (!line || a == m_bandUpper || a == m_bandLower || qobject_cast<QScatterSeries*>(a)) continue;
    RecipeLegend::Entry e;
    e.label = line->name();
    e.pen = line->pen();
    out << e;
  }
  RecipeLegend::Entry dot;
  dot.kind = RecipeLegend::Entry::Dot;
  dot.label = tr("validation (each evaluation)");
  dot.pen = QPen(chart_style::kNeutral);
  out << dot;
  return out;
}

void DifferenceChart::placeNote() {
  if (!m_note->isVisible()) return;
  chart_style::placeNote(m_note, chart()->plotArea(), Qt::AlignCenter);
}

QString DifferenceChart::hoverText(double x) const {
  if (m_reference < 0 || m_series.empty()) return {};
  QStringList lines;
  lines << tr("step %1, minus FP32 (moving mean over %2 steps):").arg(std::llround(x)).arg(2 * m_half + 1);
  for (const auto& [id, s] : m_series) {
    if (id == m_reference) continue;
    bool found = false;
    const double v = valueAt(s.line->points(), x, &found);
    if (!found) continue;
    const RunData& r = m_store->run(id);
    lines << QStringLiteral("<span style='color:%1'>■</span> %2 %3")
                 .arg(r.colour.name(), r.recipe.toHtmlEscaped(), number_text::signedSignificant(v, 3));
  }
  bool found = false;
  const double band = valueAt(m_bandUpper->points(), x, &found);
  if (found) lines << tr("FP32's batch noise ±%1").arg(number_text::significant(band, 3));
  return lines.join(QStringLiteral("<br>"));
}
