// LossChart: draws each run's losses and keeps the loss axis on the bulk of
// the curves (a divergence spike would flatten the others).
#include "charts/loss_chart.h"

#include <QAction>
#include <QChart>
#include <QCheckBox>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <vector>

#include "charts/chart_registry.h"
#include "charts/chart_style.h"
#include "charts/decimate.h"
#include "charts/live_chart_view.h"
#include "session/run_store.h"

struct LossChart::Run {
  QLineSeries* loss = nullptr;
  QLineSeries* validation = nullptr;
  QScatterSeries* nan = nullptr;
  ColumnDecimator decimator;
  ColumnPicker nanPicker;
  QList<std::int64_t> nanSteps;          // decimated NaN-loss steps (y set from the axis)
  double max = 0.0, high = 0.0;          // max and 98th percentile of the drawn losses
  double min = 0.0;                      // the smallest positive loss drawn (0: none)
};


LossChart::LossChart(ChartHost& host, QWidget* parent)
    : StepChart(host, {"lossChart", "loss", tr("Loss"), tr("loss"), 0.0, 2.5, "%.2f", {0, 0, 1, 1}}, parent) {
  addLegendLine(tr("validation"), Qt::DashLine, 2);
  m_legendNan = addLegendMarker(tr("NaN loss"), QScatterSeries::MarkerShapeStar, chart_style::kAlarm,
                                chart_style::kAlarm.darker(130), 11);
  hideLegendOf(m_legendNan);  // shown once a run diverges

  // The loss axis, linear or logarithmic (swapped in applyAxis()).
  m_linear = yAxis();
  m_log = new QLogValueAxis;
  m_log->setObjectName(QStringLiteral("yLogAxis"));
  m_log->setBase(10);
  m_log->setLabelFormat(QStringLiteral("%.0e"));
  m_log->setTitleText(m_linear->titleText() + tr(" (log)"));
  m_log->setTitleFont(m_linear->titleFont());
  m_log->setLabelsFont(m_linear->labelsFont());
  m_log->setMinorTickCount(-1);
  m_log->setRange(1e-3, 10);
  m_logCheck = new QCheckBox(tr("Log loss axis"), parent);
  m_logCheck->setObjectName(QStringLiteral("lossLogCheck"));
  m_logCheck->setToolTip(
      tr("A logarithmic loss axis: on by itself when the losses span more than %1 decades").arg(kLogDecades));
  connect(m_logCheck, &QCheckBox::toggled, this, [this](bool on) {
    if (on != m_logScale) setLogScale(on);
  });
  auto* logAction = new QAction(tr("Logarithmic loss axis"), this);
  logAction->setCheckable(true);
  connect(m_logCheck, &QCheckBox::toggled, logAction, &QAction::setChecked);
  connect(logAction, &QAction::triggered, this, [this](bool on) { setLogScale(on); });
  view()->addContextAction(logAction);
}

LossChart::~LossChart() {
  for (auto& [id, r] : m_runs) delete r;
  // The axis not on the chart is ours.
  if (m_logScale)
    delete m_linear;
  else
    delete m_log;
}

QWidget* LossChart::headerWidget() const { return m_logCheck; }

QAbstractAxis* LossChart::lossAxis() const {
  const auto axes = chart()->axes(Qt::Vertical);
  return axes.isEmpty() ? nullptr : axes.first();
}

QXYSeries* LossChart::runSeries(int runId, int role) const {
  const auto it = m_runs.find(runId);
  if (it == m_runs.end()) return nullptr;
  if (role == Train) return it->second->loss;
  if (role == Validation) return it->second->validation;
  return it->second->nan;
}

bool LossChart::drewPoints(int runId) const {
  const auto it = m_runs.find(runId);
  return it != m_runs.end() && it->second->loss->count() > 0;
}

void LossChart::makeSeries(const RunData& run) {
  auto* r = new Run;
  m_runs[run.id] = r;
  // A little transparent: where runs overlap (fp32, fp16 and mixed-fp16
  // often do) the one drawn last does not hide the others; their colours mix.
  QColor line = run.colour;
  line.setAlpha(chart_style::kOverlayAlpha);
  r->loss = addLine(run, chart_style::kLossWidth, Qt::SolidLine, line, true);
  // Validation: sparse (once per epoch by default), so thick, dark and
  // with markers, to read above the noisy per-batch curves.
  r->validation = addLine(run, chart_style::kValidationWidth, Qt::DashLine, run.colour.darker(125), false);
  r->validation->setPointsVisible(true);
  r->validation->setMarkerSize(7);
  r->nan = addMarkers(run, QScatterSeries::MarkerShapeStar, chart_style::kAlarm, run.colour, 11);
}

void LossChart::showSeries(const RunData& run, bool shown) {
  const Run* r = m_runs.at(run.id);
  for (QAbstractSeries* s : {static_cast<QAbstractSeries*>(r->loss), static_cast<QAbstractSeries*>(r->validation),
                             static_cast<QAbstractSeries*>(r->nan)})
    setShown(s, shown);
}

void LossChart::draw(const RunData& run, double x1) {
  Run& s = *m_runs.at(run.id);
  const auto& steps = run.steps;
  const std::int64_t n = static_cast<std::int64_t>(steps.size());
  auto at = [&steps](std::int64_t i) -> const engine::StepMetrics& { return steps[static_cast<std::size_t>(i)]; };
  auto stepX = [&](std::int64_t i) { return static_cast<double>(at(i).step); };
  // The decimators keep their finished pixel columns: a frame only feeds
  // the steps that arrived since the last one.
  const int width = columns();
  if (!s.decimator.sameGrid(0, x1, width)) s.decimator.reset(0, x1, width);

  // Loss: min/max per column; remember the spread for the y range.
  s.decimator.feed(n, [&](std::int64_t i) { return QPointF(stepX(i), at(i).loss); });
  const QList<QPointF> loss = s.decimator.points();
  s.loss->replace(loss);
  if (!loss.isEmpty()) {
    std::vector<double> ys;
    ys.reserve(static_cast<std::size_t>(loss.size()));
    for (const QPointF& p : loss) ys.push_back(p.y());
    const std::size_t k = static_cast<std::size_t>(0.98 * static_cast<double>(ys.size() - 1));
    std::nth_element(ys.begin(), ys.begin() + static_cast<std::ptrdiff_t>(k), ys.end());
    s.high = ys[k];
    s.max = *std::max_element(ys.begin(), ys.end());
  } else {
    s.high = s.max = 0.0;
  }
  QList<QPointF> val;
  for (const engine::EvalMetrics& e : run.evals)
    if (std::isfinite(e.val_loss)) val.append(QPointF(static_cast<double>(e.step), e.val_loss));
  s.validation->replace(val);
  // Markers only while the evaluations are sparse (once per epoch of a big
  // set); frequent ones (a small set) would be a row of blobs.
  s.validation->setPointsVisible(val.size() * 12 < width);
  for (const QPointF& p : val) s.max = std::max(s.max, p.y()), s.high = std::max(s.high, p.y());
  s.min = 0.0;
  for (const QList<QPointF>* pts : {&loss, static_cast<const QList<QPointF>*>(&val)})
    for (const QPointF& p : *pts)
      if (std::isfinite(p.y()) && p.y() > 0 && (s.min == 0.0 || p.y() < s.min)) s.min = p.y();

  // NaN loss: one marker per 6 pixels (placed at the top of the axis later).
  if (!s.nanPicker.sameGrid(0, x1, width / 6)) s.nanPicker.reset(0, x1, width / 6, ColumnPicker::FirstKept);
  s.nanPicker.feed(n, stepX, [&](std::int64_t i) { return !std::isfinite(at(i).loss); },
                   [](std::int64_t) { return 0.0; });
  s.nanSteps.clear();
  for (std::int64_t i : s.nanPicker.indices()) s.nanSteps << at(i).step;
}

void LossChart::finishRanges(const ChartFrame&) {
  const RunStore& store = m_host.store();
  double high = 0, max = 0, min = 0;
  bool anyNan = false;
  for (const auto& [id, s] : m_runs) {
    const RunData& r = store.run(id);
    if (!r.visible) continue;
    high = std::max(high, s->high);
    max = std::max(max, s->max);
    if (s->min > 0 && (min == 0 || s->min < min)) min = s->min;
    anyNan = anyNan || !s->nanSteps.isEmpty();
    // The shared legend names the run; the series carry the same name.
    const QString label = m_host.runLabel(r);
    if (s->loss->name() != label) s->loss->setName(label);
  }
  // Until the user chooses, the axis is logarithmic when the losses span
  // more than kLogDecades decades (tiny-gradients: 1e-1 down to 1e-11).
  if (!m_logChosen && min > 0 && max > 0) applyAxis(std::log10(max / min) > kLogDecades);
  if (max > 0 && !zoomed()) {
    double top = 0;
    if (m_logScale && min > 0) {
      const double lo = std::pow(10.0, std::floor(std::log10(min)));
      top = std::pow(10.0, std::ceil(std::log10(max)));
      if (top <= lo) top = lo * 10;
      if (m_log->min() != lo || m_log->max() != top) m_log->setRange(lo, top);
      // Its NaN stars sit at the top, a little below.
      top = std::pow(10.0, std::log10(top) - 0.05 * std::log10(top / lo));
    } else {
      // From 0; the axis follows the bulk (98th percentile) when the
      // maximum is far above it (an fp16 divergence spike).
      top = niceCeil(max > 3 * high ? 1.3 * high : 1.05 * max);
      if (m_linear->max() != top || m_linear->min() != 0) {
        m_linear->setLabelFormat(axisLabelFormat(top));
        setAxis(m_linear, 0, top, niceTickInterval(top, 5));
      }
      top *= 0.95;
    }
    for (const auto& [id, s] : m_runs) {
      QList<QPointF> stars;
      for (std::int64_t step : s->nanSteps) stars.append(QPointF(static_cast<double>(step), top));
      s->nan->replace(stars);
    }
  }
  for (QLegendMarker* mk : chart()->legend()->markers(m_legendNan)) mk->setVisible(anyNan);
}

void LossChart::setLogScale(bool on) {
  m_logChosen = true;
  applyAxis(on);
  emit logScaleChosen();
}

void LossChart::applyAxis(bool log) {
  if (log == m_logScale) return;
  m_logScale = log;
  QChart* c = chart();
  QAbstractAxis* from = log ? static_cast<QAbstractAxis*>(m_linear) : m_log;
  QAbstractAxis* to = log ? static_cast<QAbstractAxis*>(m_log) : m_linear;
  const auto series = c->series();
  for (QAbstractSeries* sr : series) sr->detachAxis(from);
  c->removeAxis(from);  // kept: ownership comes back to this chart
  from->setParent(nullptr);
  c->addAxis(to, Qt::AlignLeft);
  for (QAbstractSeries* sr : series) sr->attachAxis(to);
  if (presentationOn()) chart_style::applyPresentation(c, true);
  if (m_logCheck->isChecked() != log) {
    const QSignalBlocker block(m_logCheck);
    m_logCheck->setChecked(log);
  }
}

void LossChart::setPresentation(bool on) {
  StepChart::setPresentation(on);
  chart_style::setPresentationFont(m_logCheck, on, chart_style::presentation::kLegendPt);
}

QString LossChart::hoverLine(const RunData& run, const engine::StepMetrics& s, double x, const QString& who) const {
  QString t = tr("%1: loss %2").arg(who, std::isfinite(s.loss) ? QString::number(s.loss, 'g', 5) : tr("NaN"));
  // The evaluation at or before step x.
  const engine::EvalMetrics* e = nullptr;
  for (const engine::EvalMetrics& ev : run.evals)
    if (ev.step <= x + 0.5) e = &ev;
  if (!e && !run.evals.empty()) e = &run.evals.front();
  if (e) t += tr(", validation %1 (step %2)").arg(QString::number(e->val_loss, 'g', 5)).arg(e->step);
  return t;
}

ChartTile* makeLossChart(ChartHost& host, QWidget* parent) { return new LossChart(host, parent); }
