// LossScaleChart: log2 of each run's loss scale with its overflow and
// skipped-step markers, decimated per pixel column.
#include "charts/loss_scale_chart.h"

#include <QChart>
#include <QGraphicsTextItem>
#include <QLineSeries>
#include <QScatterSeries>
#include <QValueAxis>

#include <algorithm>
#include <cmath>

#include "charts/chart_registry.h"
#include "charts/chart_style.h"
#include "charts/decimate.h"
#include "session/run_store.h"

struct LossScaleChart::Run {
  QLineSeries* scale = nullptr;
  QScatterSeries* overflow = nullptr;
  QScatterSeries* skipped = nullptr;
  ColumnDecimator decimator;
  ColumnPicker overflowPicker, skippedPicker;
  double min = 0.0, max = 0.0;
  bool hasScale = false;
};

LossScaleChart::LossScaleChart(ChartHost& host, QWidget* parent)
    : StepChart(host,
                {"lossScaleChart", "loss_scale", tr("Loss scale (log2)"), tr("log2 scale"), 0.0, 32.0, "%.0f",
                 {0, 1, 1, 1}},
                parent) {
  const QColor red = chart_style::kAlarm;
  addLegendMarker(tr("overflow"), QScatterSeries::MarkerShapeTriangle, red, red, 9);
  addLegendMarker(tr("skipped step"), QScatterSeries::MarkerShapeCircle, Qt::transparent, chart_style::kInk, 12);
  m_note = new QGraphicsTextItem(chart());
  m_note->setDefaultTextColor(chart_style::kNote);
  m_note->setFont(chart_style::legendFont(chart()));
  m_note->setVisible(false);
  // The plot moves when the window or the axis labels change: the note with it.
  connect(chart(), &QChart::plotAreaChanged, this, [this] { placeNote(); });
}

void LossScaleChart::placeNote() {
  if (m_note->isVisible())
    chart_style::placeNote(m_note, chart()->plotArea(), m_noteOnTop ? Qt::AlignTop | Qt::AlignLeft : Qt::AlignCenter);
}

LossScaleChart::~LossScaleChart() {
  for (auto& [id, r] : m_runs) delete r;
}

QXYSeries* LossScaleChart::runSeries(int runId, int role) const {
  const auto it = m_runs.find(runId);
  if (it == m_runs.end()) return nullptr;
  if (role == Scale) return it->second->scale;
  if (role == Skipped) return it->second->skipped;
  return it->second->overflow;
}

QString LossScaleChart::note() const { return m_note->isVisible() ? m_note->toPlainText() : QString(); }

void LossScaleChart::makeSeries(const RunData& run) {
  auto* r = new Run;
  m_runs[run.id] = r;
  QColor line = run.colour;
  line.setAlpha(chart_style::kOverlayAlpha);  // runs on the same scale: none hides the others
  r->scale = addLine(run, chart_style::kScaleWidth, Qt::SolidLine, line, true);
  r->overflow = addMarkers(run, QScatterSeries::MarkerShapeTriangle, chart_style::kAlarm, run.colour.darker(110), 9);
  r->skipped = addMarkers(run, QScatterSeries::MarkerShapeCircle, Qt::transparent, chart_style::kInk, 12);
}

void LossScaleChart::showSeries(const RunData& run, bool shown) {
  // A run without loss scaling is absent: a flat line at 2^0 would stretch
  // the axis and squash the others' sawtooth.
  const bool scaled = run.scalesLoss();
  Run* r = m_runs.at(run.id);
  for (QAbstractSeries* s : {static_cast<QAbstractSeries*>(r->scale), static_cast<QAbstractSeries*>(r->overflow),
                             static_cast<QAbstractSeries*>(r->skipped)}) {
    if (shown && !scaled) {
      if (s->isVisible()) s->setVisible(false);
    } else {
      setShown(s, shown);
    }
  }
  if (!scaled) r->hasScale = false;
}

void LossScaleChart::draw(const RunData& run, double x1) {
  Run& s = *m_runs.at(run.id);
  const auto& steps = run.steps;
  const std::int64_t n = static_cast<std::int64_t>(steps.size());
  auto at = [&steps](std::int64_t i) -> const engine::StepMetrics& { return steps[static_cast<std::size_t>(i)]; };
  auto stepX = [&](std::int64_t i) { return static_cast<double>(at(i).step); };
  const int width = columns();
  if (!s.decimator.sameGrid(0, x1, width)) s.decimator.reset(0, x1, width);
  s.decimator.feed(n, [&](std::int64_t i) { return QPointF(stepX(i), std::log2(at(i).loss_scale)); });
  const QList<QPointF> scale = s.decimator.points();
  s.scale->replace(scale);
  s.hasScale = !scale.isEmpty() && run.scalesLoss();
  if (!scale.isEmpty()) {
    auto [lo, hi] = std::minmax_element(scale.begin(), scale.end(),
                                        [](const QPointF& a, const QPointF& b) { return a.y() < b.y(); });
    s.min = lo->y();
    s.max = hi->y();
  }
  // Markers are drawn raster: keep them to one per 4 pixels.
  for (ColumnPicker* p : {&s.overflowPicker, &s.skippedPicker})
    if (!p->sameGrid(0, x1, width / 4)) p->reset(0, x1, width / 4, ColumnPicker::FirstKept);
  auto never = [](std::int64_t) { return 0.0; };
  s.overflowPicker.feed(n, stepX, [&](std::int64_t i) { return at(i).overflow; }, never);
  s.skippedPicker.feed(n, stepX, [&](std::int64_t i) { return at(i).skipped; }, never);
  QList<QPointF> overflow, skipped;
  for (std::int64_t i : s.overflowPicker.indices()) overflow.append(QPointF(stepX(i), std::log2(at(i).loss_scale)));
  for (std::int64_t i : s.skippedPicker.indices()) skipped.append(QPointF(stepX(i), std::log2(at(i).loss_scale)));
  s.overflow->replace(overflow);
  s.skipped->replace(skipped);
}

void LossScaleChart::finishRanges(const ChartFrame&) {
  const RunStore& store = m_host.store();
  double lo = 1e9, hi = -1e9;
  bool anyScale = false;
  for (const auto& [id, s] : m_runs) {
    if (!store.run(id).visible || !s->hasScale) continue;
    anyScale = true;
    lo = std::min(lo, s->min);
    hi = std::max(hi, s->max);
  }
  // Runs without loss scaling are named, not drawn.
  QStringList unscaled;
  bool anyVisible = false;
  for (int id = 0; id < store.count(); ++id) {
    const RunData& r = store.run(id);
    if (!r.visible || (r.steps.empty() && !m_host.prepared(id))) continue;
    anyVisible = true;
    if (!r.scalesLoss()) unscaled << m_host.runLabel(r);
  }
  const QString text = unscaled.isEmpty() ? QString() : tr("no loss scaling: %1").arg(unscaled.join(QStringLiteral(", ")));
  if (m_note->toPlainText() != text) m_note->setPlainText(text);
  m_note->setVisible(anyVisible && !text.isEmpty());
  // Centred when no run scales; else in the top-left corner, in a band the
  // axis keeps free above the highest scale (and its overflow markers).
  m_noteOnTop = anyScale;
  placeNote();
  if (anyScale && !zoomed()) {
    const double bottom = std::floor(lo) - 1;
    double top = std::ceil(hi) + 1;
    if (m_note->isVisible()) {
      // The band must hold the note's height plus a marker's radius: in
      // axis units that depends on the plot's height, so solve for the
      // extra units e:  (top + e - hi) * H / (top + e - bottom) >= need.
      const double need = m_note->boundingRect().height() + 8;
      const double plotHeight = chart()->plotArea().height();
      const double above = top - hi, span = top - bottom;
      double extra = span;  // a plot too short for the note: half of it is the band
      if (plotHeight > need) extra = std::max(0.0, std::ceil((need * span - above * plotHeight) / (plotHeight - need)));
      top += std::min(extra, 3 * span);
    }
    setAxis(yAxis(), bottom, top, powerOfTwoTickInterval(top - bottom, 6));
  }
}

void LossScaleChart::setPresentation(bool on) {
  StepChart::setPresentation(on);
  // The note drawn on the chart: large enough to read too.
  QFont font = chart_style::legendFont(chart());
  if (on) font.setPointSizeF(chart_style::presentation::kLegendPt - 2);
  m_note->setFont(font);
  m_note->setDefaultTextColor(on ? chart_style::presentation::kInk : chart_style::kNote);
  placeNote();
}

QString LossScaleChart::hoverLine(const RunData& run, const engine::StepMetrics& s, double, const QString& who) const {
  if (!run.scalesLoss()) return tr("%1: — (no loss scaling)").arg(who);
  const double e = std::log2(s.loss_scale);
  const QString scale = e == std::round(e) ? QStringLiteral("2^%1").arg(static_cast<int>(e))
                                           : QString::number(s.loss_scale, 'g', 6);
  QString t = tr("%1: scale %2").arg(who, scale);
  if (s.overflow) t += tr(", <b>overflow</b>");
  if (s.skipped) t += tr(", step skipped");
  return t;
}

ChartTile* makeLossScaleChart(ChartHost& host, QWidget* parent) { return new LossScaleChart(host, parent); }
