// ChartArea: builds the chart grid and redraws it from the RunStore, one
// replace() per changed series per frame, decimated per pixel column.
#include "chart_area.h"

#include <QAreaSeries>
#include <QChart>
#include <QGraphicsLayout>
#include <QGridLayout>
#include <QGuiApplication>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLocale>
#include <QScatterSeries>
#include <QValueAxis>

#include <algorithm>
#include <cmath>

#include "decimate.h"
#include "gradient_panel.h"
#include "live_chart_view.h"
#include "run_store.h"

namespace {

struct ChartSpec {
  const char* objectName;
  const char* title;
  const char* yTitle;
  double yMin, yMax;
  const char* yFormat;
};

// log2 of the loss scale: GradScaler starts at 2^16 and halves on overflow,
// so integers on this axis are the scale's actual steps.
const ChartSpec kSpecs[ChartArea::MetricCount] = {
    {"lossChart", QT_TRANSLATE_NOOP("ChartArea", "Loss"), QT_TRANSLATE_NOOP("ChartArea", "loss"), 0.0, 2.5, "%.2f"},
    {"lossScaleChart", QT_TRANSLATE_NOOP("ChartArea", "Loss scale (log2)"),
     QT_TRANSLATE_NOOP("ChartArea", "log2 scale"), 0.0, 32.0, "%.0f"},
    {"memoryChart", QT_TRANSLATE_NOOP("ChartArea", "Memory"), QT_TRANSLATE_NOOP("ChartArea", "MiB"), 0.0, 64.0,
     "%.1f"},
    {"accuracyChart", QT_TRANSLATE_NOOP("ChartArea", "Accuracy"), QT_TRANSLATE_NOOP("ChartArea", "accuracy (%)"),
     0.0, 100.0, "%.0f"},
    {"gradientsChart", QT_TRANSLATE_NOOP("ChartArea", "Gradients"),
     QT_TRANSLATE_NOOP("ChartArea", "share of values (%)"), 0.0, 10.0, "%.0f"},
};

// Memory categories, bottom to top, with the colour each stack band has.
struct Category {
  const char* name;
  QColor colour;
};
const Category kCategories[] = {
    {QT_TRANSLATE_NOOP("ChartArea", "weights"), QColor(0x4C, 0x72, 0xB0)},
    {QT_TRANSLATE_NOOP("ChartArea", "master"), QColor(0x55, 0xA8, 0x68)},
    {QT_TRANSLATE_NOOP("ChartArea", "grads"), QColor(0xC4, 0x4E, 0x52)},
    {QT_TRANSLATE_NOOP("ChartArea", "optimizer"), QColor(0x81, 0x72, 0xB2)},
    {QT_TRANSLATE_NOOP("ChartArea", "activations"), QColor(0xCC, 0xB9, 0x74)},
    {QT_TRANSLATE_NOOP("ChartArea", "workspace"), QColor(0x64, 0xB5, 0xCD)},
};
constexpr int kCategoryCount = 6;

std::int64_t categoryBytes(const engine::MemoryBytes& m, int c) {
  switch (c) {
    case 0: return m.weights;
    case 1: return m.master;
    case 2: return m.grads;
    case 3: return m.optimizer;
    case 4: return m.activations;
    default: return m.workspace;
  }
}

constexpr double kMiB = 1024.0 * 1024.0;
const QColor kOverflowRed(0xD0, 0x1C, 0x1C);

void hideLegend(QChart* chart, QAbstractSeries* s) {
  for (QLegendMarker* m : chart->legend()->markers(s)) m->setVisible(false);
}

void attach(QChart* chart, QAbstractSeries* s) {
  chart->addSeries(s);
  for (QAbstractAxis* a : chart->axes()) s->attachAxis(a);
}

QString formatScale(double scale) {
  const double e = std::log2(scale);
  return e == std::round(e) ? QStringLiteral("2^%1").arg(static_cast<int>(e)) : QString::number(scale, 'g', 6);
}

// Index of step `step` in a run's history (steps are 1-based, contiguous).
const engine::StepMetrics* stepAt(const RunData& r, double x) {
  if (r.steps.empty()) return nullptr;
  std::int64_t s = std::llround(x);
  s = std::clamp<std::int64_t>(s, r.steps.front().step, r.steps.back().step);
  std::size_t i = static_cast<std::size_t>(s - r.steps.front().step);
  if (i < r.steps.size() && r.steps[i].step == s) return &r.steps[i];
  auto it = std::lower_bound(r.steps.begin(), r.steps.end(), s,
                             [](const engine::StepMetrics& m, std::int64_t v) { return m.step < v; });
  return it == r.steps.end() ? &r.steps.back() : &*it;
}

// The evaluation at or before step x.
const engine::EvalMetrics* evalAt(const RunData& r, double x) {
  const engine::EvalMetrics* best = nullptr;
  for (const engine::EvalMetrics& e : r.evals)
    if (e.step <= x + 0.5) best = &e;
  return best ? best : (r.evals.empty() ? nullptr : &r.evals.front());
}

}  // namespace

struct ChartArea::RunSeries {
  QLineSeries* loss = nullptr;
  QLineSeries* valLoss = nullptr;
  QScatterSeries* nan = nullptr;
  QLineSeries* scale = nullptr;
  QScatterSeries* overflow = nullptr;
  QScatterSeries* skipped = nullptr;
  QLineSeries* memTotal = nullptr;
  QLineSeries* valAcc = nullptr;
  QLineSeries* trainAcc = nullptr;
  std::uint64_t revision = ~std::uint64_t{0};
  QList<std::int64_t> nanSteps;   // decimated NaN-loss steps (y set from the axis)
  double lossMax = 0.0, lossHigh = 0.0;  // max and 98th percentile of the drawn losses
  double scaleMin = 0.0, scaleMax = 0.0;
  double memMax = 0.0;
  bool hasScale = false;
};

QString ChartArea::title(Metric m) { return tr(kSpecs[m].title); }

bool ChartArea::openGlWanted() {
  if (qEnvironmentVariable("PL_CHARTS_OPENGL") == QLatin1String("0")) return false;
  const QString platform = QGuiApplication::platformName();
  return platform == QLatin1String("xcb") || platform == QLatin1String("wayland");
}

ChartArea::ChartArea(RunStore* store, QWidget* parent) : QWidget(parent), m_store(store) {
  setObjectName(QStringLiteral("chartArea"));
  for (int m = 0; m < Gradients; ++m) m_views.push_back(makeChart(static_cast<Metric>(m)));
  m_gradients = new GradientPanel(store, this);
  m_views.push_back(m_gradients->view());
  m_widths.fill(-1, MetricCount);

  // Memory: the focus run stacked by category (bands), each run's total as
  // a line in its colour on top.
  QChart* mem = chart(Memory);
  QLineSeries* lower = nullptr;
  for (int c = 0; c < kCategoryCount; ++c) {
    auto* upper = new QLineSeries(this);
    auto* area = new QAreaSeries(upper, lower);
    area->setName(tr(kCategories[c].name));
    QColor fill = kCategories[c].colour;
    fill.setAlpha(170);
    area->setBrush(fill);
    area->setPen(QPen(kCategories[c].colour.darker(120), 1));
    attach(mem, area);
    m_memUpper << upper;
    m_memAreas << area;
    lower = upper;
  }

  // Legend-only series (no points): what the dashes and markers mean.
  auto legendLine = [](QChart* chart, const QString& name, Qt::PenStyle style, double width) {
    auto* s = new QLineSeries;
    s->setName(name);
    s->setPen(QPen(QColor(90, 90, 90), width, style));
    attach(chart, s);
  };
  legendLine(chart(Loss), tr("validation"), Qt::DashLine, 2);
  legendLine(chart(Accuracy), tr("validation"), Qt::SolidLine, 2);
  legendLine(chart(Accuracy), tr("train batch"), Qt::SolidLine, 1);
  auto legendMarker = [](QChart* chart, const QString& name, QScatterSeries::MarkerShape shape, const QColor& fill,
                         const QColor& border, double size) {
    auto* s = new QScatterSeries;
    s->setName(name);
    s->setMarkerShape(shape);
    s->setMarkerSize(size);
    s->setColor(fill);
    s->setBorderColor(border);
    attach(chart, s);
    return s;
  };
  legendMarker(chart(LossScale), tr("overflow"), QScatterSeries::MarkerShapeTriangle, kOverflowRed, kOverflowRed, 9);
  legendMarker(chart(LossScale), tr("skipped step"), QScatterSeries::MarkerShapeCircle, Qt::transparent,
               QColor(40, 40, 40), 12);
  m_legendNan = legendMarker(chart(Loss), tr("NaN loss"), QScatterSeries::MarkerShapeStar, kOverflowRed,
                             kOverflowRed.darker(130), 11);
  hideLegend(chart(Loss), m_legendNan);  // shown once a run diverges

  // Top row: the scalar curves; bottom: memory, and the wide gradient panel.
  auto* grid = new QGridLayout(this);
  grid->setContentsMargins(0, 0, 0, 0);
  grid->setSpacing(4);
  grid->addWidget(m_views[Loss], 0, 0);
  grid->addWidget(m_views[LossScale], 0, 1);
  grid->addWidget(m_views[Accuracy], 0, 2);
  grid->addWidget(m_views[Memory], 1, 0);
  grid->addWidget(m_gradients, 1, 1, 1, 2);
  for (int c = 0; c < 3; ++c) grid->setColumnStretch(c, 1);
  for (int r = 0; r < 2; ++r) grid->setRowStretch(r, 1);

  for (int m = 0; m < Gradients; ++m) {
    const auto metric = static_cast<Metric>(m);
    m_views[m]->setHoverText([this, metric](const QPointF& v) { return hoverText(metric, v); });
  }
}

ChartArea::~ChartArea() {
  for (auto& [id, s] : m_series) delete s;
}

LiveChartView* ChartArea::makeChart(Metric m) {
  const ChartSpec& spec = kSpecs[m];
  auto* chart = new QChart;
  chart->setTitle(tr(spec.title));
  QFont titleFont = chart->titleFont();
  titleFont.setBold(true);
  chart->setTitleFont(titleFont);
  chart->legend()->setAlignment(Qt::AlignBottom);
  QFont legendFont = chart->legend()->font();
  legendFont.setPointSizeF(titleFont.pointSizeF() * 0.8);
  chart->legend()->setFont(legendFont);
  chart->setMargins(QMargins(4, 2, 4, 2));
  chart->layout()->setContentsMargins(0, 0, 0, 0);
  chart->setBackgroundRoundness(0);

  QFont axisFont = chart->titleFont();
  axisFont.setBold(false);
  axisFont.setPointSizeF(axisFont.pointSizeF() * 0.85);

  auto* x = new QValueAxis;
  x->setObjectName(QStringLiteral("xAxis"));
  x->setTitleText(tr("step"));
  x->setTitleFont(axisFont);
  x->setLabelsFont(axisFont);
  x->setRange(0, 1000);
  x->setLabelFormat(QStringLiteral("%.0f"));
  x->setTickType(QValueAxis::TicksDynamic);
  x->setTickAnchor(0);
  x->setTickInterval(200);
  chart->addAxis(x, Qt::AlignBottom);

  auto* y = new QValueAxis;
  y->setObjectName(QStringLiteral("yAxis"));
  y->setTitleText(tr(spec.yTitle));
  y->setTitleFont(axisFont);
  y->setLabelsFont(axisFont);
  y->setRange(spec.yMin, spec.yMax);
  y->setLabelFormat(QString::fromLatin1(spec.yFormat));
  y->setTickType(QValueAxis::TicksDynamic);
  y->setTickAnchor(0);
  y->setTickInterval(niceTickInterval(spec.yMax - spec.yMin, 5));
  chart->addAxis(y, Qt::AlignLeft);

  auto* view = new LiveChartView(chart, this);
  view->setObjectName(QString::fromLatin1(spec.objectName));
  view->setMinimumSize(260, 190);
  return view;
}

QChartView* ChartArea::view(Metric m) const { return m_views[m]; }

QChart* ChartArea::chart(Metric m) const { return m_views[m]->chart(); }

QValueAxis* ChartArea::xAxis(Metric m) const {
  const auto axes = chart(m)->axes(Qt::Horizontal);
  return axes.isEmpty() ? nullptr : qobject_cast<QValueAxis*>(axes.first());
}

QValueAxis* ChartArea::yAxis(Metric m) const {
  const auto axes = chart(m)->axes(Qt::Vertical);
  return axes.isEmpty() ? nullptr : qobject_cast<QValueAxis*>(axes.first());
}

void ChartArea::setFocusRun(int id) {
  if (m_focus == id) return;
  m_focus = id;
  refresh();
}

int ChartArea::focusRun() const {
  if (m_focus >= 0 && m_focus < m_store->count() && m_store->run(m_focus).visible) return m_focus;
  for (int id = m_store->count() - 1; id >= 0; --id)
    if (m_store->run(id).visible) return id;
  return -1;
}

QXYSeries* ChartArea::runSeries(Metric m, int runId, Role role) const {
  const auto it = m_series.find(runId);
  if (it == m_series.end()) return nullptr;
  const RunSeries& s = *it->second;
  switch (m) {
    case Loss: return role == Main ? static_cast<QXYSeries*>(s.loss)
                      : role == Secondary ? static_cast<QXYSeries*>(s.valLoss)
                                          : static_cast<QXYSeries*>(s.nan);
    case LossScale: return role == Main ? static_cast<QXYSeries*>(s.scale)
                           : role == Markers2 ? static_cast<QXYSeries*>(s.skipped)
                                              : static_cast<QXYSeries*>(s.overflow);
    case Memory: return s.memTotal;
    case Accuracy: return role == Main ? s.valAcc : s.trainAcc;
    default: return nullptr;
  }
}

QAreaSeries* ChartArea::memoryArea(int category) const {
  return category >= 0 && category < m_memAreas.size() ? m_memAreas[category] : nullptr;
}

ChartArea::RunSeries& ChartArea::seriesFor(const RunData& run) {
  auto it = m_series.find(run.id);
  if (it != m_series.end()) return *it->second;
  auto* s = new RunSeries;
  m_series[run.id] = s;
  const bool gl = openGlWanted();
  const QColor colour = run.colour;
  auto line = [&](Metric m, double width, Qt::PenStyle style, const QColor& c, bool dense) {
    auto* l = new QLineSeries(this);
    l->setName(run.name);
    l->setPen(QPen(c, width, style, Qt::RoundCap, Qt::RoundJoin));
    // OpenGL draws solid lines only: dense solid series only.
    if (dense && gl && style == Qt::SolidLine) l->setUseOpenGL(true);
    attach(chart(m), l);
    return l;
  };
  auto markers = [&](Metric m, QScatterSeries::MarkerShape shape, const QColor& fill, const QColor& border,
                     double size) {
    auto* sc = new QScatterSeries(this);
    sc->setName(run.name);
    sc->setMarkerShape(shape);
    sc->setMarkerSize(size);
    sc->setColor(fill);
    sc->setBorderColor(border);
    attach(chart(m), sc);
    hideLegend(chart(m), sc);
    return sc;
  };
  s->loss = line(Loss, 1.6, Qt::SolidLine, colour, true);
  s->valLoss = line(Loss, 2.0, Qt::DashLine, colour, false);
  s->valLoss->setPointsVisible(true);
  hideLegend(chart(Loss), s->valLoss);
  s->nan = markers(Loss, QScatterSeries::MarkerShapeStar, kOverflowRed, colour, 11);
  s->scale = line(LossScale, 1.8, Qt::SolidLine, colour, true);
  hideLegend(chart(LossScale), s->scale);
  s->overflow = markers(LossScale, QScatterSeries::MarkerShapeTriangle, kOverflowRed, colour.darker(110), 9);
  s->skipped = markers(LossScale, QScatterSeries::MarkerShapeCircle, Qt::transparent, QColor(40, 40, 40), 12);
  s->memTotal = line(Memory, 2.0, Qt::DashLine, colour, false);
  hideLegend(chart(Memory), s->memTotal);
  QColor light = colour;
  light.setAlpha(110);
  s->trainAcc = line(Accuracy, 1.0, Qt::SolidLine, light, true);
  hideLegend(chart(Accuracy), s->trainAcc);
  s->valAcc = line(Accuracy, 2.2, Qt::SolidLine, colour, false);
  s->valAcc->setPointsVisible(true);
  hideLegend(chart(Accuracy), s->valAcc);
  return *s;
}

void ChartArea::refresh() {
  // One x range for every step chart, so runs and charts line up.
  std::int64_t maxStep = 0;
  for (int id = 0; id < m_store->count(); ++id) {
    const RunData& r = m_store->run(id);
    if (r.visible && !r.steps.empty()) maxStep = std::max(maxStep, r.steps.back().step);
  }
  const double x1 = niceCeil(std::max<double>(static_cast<double>(maxStep), 10.0));
  bool widthChanged = false;
  for (int m = 0; m < Gradients; ++m) {
    const int w = static_cast<int>(chart(static_cast<Metric>(m))->plotArea().width());
    if (w != m_widths[m]) widthChanged = true;
    m_widths[m] = w;
  }
  const bool force = widthChanged || x1 != m_x1;
  m_x1 = x1;

  bool anyPoints = false;
  for (int id = 0; id < m_store->count(); ++id) {
    const RunData& r = m_store->run(id);
    if (!r.visible) {
      if (auto it = m_series.find(id); it != m_series.end()) {
        RunSeries& s = *it->second;
        for (QAbstractSeries* a : {static_cast<QAbstractSeries*>(s.loss), static_cast<QAbstractSeries*>(s.valLoss),
                                   static_cast<QAbstractSeries*>(s.nan), static_cast<QAbstractSeries*>(s.scale),
                                   static_cast<QAbstractSeries*>(s.overflow), static_cast<QAbstractSeries*>(s.skipped),
                                   static_cast<QAbstractSeries*>(s.memTotal), static_cast<QAbstractSeries*>(s.valAcc),
                                   static_cast<QAbstractSeries*>(s.trainAcc)})
          a->setVisible(false);
        s.revision = ~std::uint64_t{0};
      }
      continue;
    }
    if (r.steps.empty() && r.evals.empty() && m_series.find(id) == m_series.end()) continue;
    RunSeries& s = seriesFor(r);
    updateRun(r, s, x1, force);
    anyPoints = anyPoints || s.loss->count() > 0;
  }
  const int focus = focusRun();
  updateMemoryStack(focus >= 0 ? &m_store->run(focus) : nullptr, x1, force);
  updateRanges(x1);
  m_gradients->refresh(focus);
  if (anyPoints && !m_hadPoints) {
    m_hadPoints = true;
    emit pointsAppeared();
  }
}

void ChartArea::updateRun(const RunData& r, RunSeries& s, double x1, bool force) {
  for (QAbstractSeries* a : {static_cast<QAbstractSeries*>(s.loss), static_cast<QAbstractSeries*>(s.valLoss),
                             static_cast<QAbstractSeries*>(s.nan), static_cast<QAbstractSeries*>(s.scale),
                             static_cast<QAbstractSeries*>(s.overflow), static_cast<QAbstractSeries*>(s.skipped),
                             static_cast<QAbstractSeries*>(s.memTotal), static_cast<QAbstractSeries*>(s.valAcc),
                             static_cast<QAbstractSeries*>(s.trainAcc)})
    if (!a->isVisible()) a->setVisible(true);
  if (!force && s.revision == r.revision) return;
  s.revision = r.revision;

  const auto& steps = r.steps;
  const std::int64_t n = static_cast<std::int64_t>(steps.size());
  auto at = [&steps](std::int64_t i) -> const engine::StepMetrics& { return steps[static_cast<std::size_t>(i)]; };

  // Loss: min/max per column; remember the spread for the y range.
  const QList<QPointF> loss = decimateMinMax(
      n, [&](std::int64_t i) { return QPointF(static_cast<double>(at(i).step), at(i).loss); }, 0, x1,
      std::max(m_widths[Loss], 50));
  s.loss->replace(loss);
  if (!loss.isEmpty()) {
    std::vector<double> ys;
    ys.reserve(static_cast<std::size_t>(loss.size()));
    for (const QPointF& p : loss) ys.push_back(p.y());
    const std::size_t k = static_cast<std::size_t>(0.98 * static_cast<double>(ys.size() - 1));
    std::nth_element(ys.begin(), ys.begin() + static_cast<std::ptrdiff_t>(k), ys.end());
    s.lossHigh = ys[k];
    s.lossMax = *std::max_element(ys.begin(), ys.end());
  } else {
    s.lossHigh = s.lossMax = 0.0;
  }
  QList<QPointF> val;
  for (const engine::EvalMetrics& e : r.evals)
    if (std::isfinite(e.val_loss)) val.append(QPointF(static_cast<double>(e.step), e.val_loss));
  s.valLoss->replace(val);
  for (const QPointF& p : val) s.lossMax = std::max(s.lossMax, p.y()), s.lossHigh = std::max(s.lossHigh, p.y());

  // NaN loss: one marker per column (placed at the top of the axis later).
  s.nanSteps.clear();
  for (std::int64_t i : decimateMarkers(
           n, [&](std::int64_t i) { return static_cast<double>(at(i).step); },
           [&](std::int64_t i) { return !std::isfinite(at(i).loss); }, 0, x1, std::max(m_widths[Loss], 50) / 6))
    s.nanSteps << at(i).step;

  // Loss scale on a log2 axis; overflow and skipped steps as markers.
  const int scaleColumns = std::max(m_widths[LossScale], 50);
  const QList<QPointF> scale = decimateMinMax(
      n, [&](std::int64_t i) { return QPointF(static_cast<double>(at(i).step), std::log2(at(i).loss_scale)); }, 0,
      x1, scaleColumns);
  s.scale->replace(scale);
  s.hasScale = !scale.isEmpty();
  if (s.hasScale) {
    auto [lo, hi] = std::minmax_element(scale.begin(), scale.end(),
                                        [](const QPointF& a, const QPointF& b) { return a.y() < b.y(); });
    s.scaleMin = lo->y();
    s.scaleMax = hi->y();
  }
  // Markers are drawn raster: keep them to one per 4 pixels.
  QList<QPointF> overflow, skipped;
  for (std::int64_t i : decimateMarkers(
           n, [&](std::int64_t i) { return static_cast<double>(at(i).step); },
           [&](std::int64_t i) { return at(i).overflow; }, 0, x1, scaleColumns / 4))
    overflow.append(QPointF(static_cast<double>(at(i).step), std::log2(at(i).loss_scale)));
  for (std::int64_t i : decimateMarkers(
           n, [&](std::int64_t i) { return static_cast<double>(at(i).step); },
           [&](std::int64_t i) { return at(i).skipped; }, 0, x1, scaleColumns / 4))
    skipped.append(QPointF(static_cast<double>(at(i).step), std::log2(at(i).loss_scale)));
  s.overflow->replace(overflow);
  s.skipped->replace(skipped);

  // Memory total (MiB) of every visible run.
  const QList<QPointF> mem = decimateMinMax(
      n, [&](std::int64_t i) { return QPointF(static_cast<double>(at(i).step), at(i).mem.total() / kMiB); }, 0, x1,
      std::max(m_widths[Memory], 50));
  s.memTotal->replace(mem);
  s.memMax = r.peakMemory / kMiB;

  // Accuracy in percent: validation, and the (noisy) train batch accuracy.
  QList<QPointF> valAcc;
  for (const engine::EvalMetrics& e : r.evals)
    if (e.val_accuracy >= 0) valAcc.append(QPointF(static_cast<double>(e.step), 100.0 * e.val_accuracy));
  s.valAcc->replace(valAcc);
  s.trainAcc->replace(decimateMinMax(
      n,
      [&](std::int64_t i) {
        const double a = at(i).train_accuracy;
        return QPointF(static_cast<double>(at(i).step), a >= 0 ? 100.0 * a : std::nan(""));
      },
      0, x1, std::max(m_widths[Accuracy], 50)));
}

void ChartArea::updateMemoryStack(const RunData* run, double x1, bool force) {
  const int id = run ? run->id : -1;
  if (!force && id == m_memoryRun && (!run || run->revision == m_memoryRevision)) return;
  m_memoryRun = id;
  m_memoryRevision = run ? run->revision : 0;
  QVector<QList<QPointF>> bands(kCategoryCount);
  if (run && !run->steps.empty()) {
    // Per pixel column the step with the largest total (the peak), so
    // every band uses the same steps and the stack stays consistent.
    const int columns = std::max(m_widths[Memory], 50);
    const double perColumn = columns / x1;
    long column = -1;
    const engine::StepMetrics* best = nullptr;
    auto flush = [&] {
      if (!best) return;
      double sum = 0;
      for (int c = 0; c < kCategoryCount; ++c) {
        sum += categoryBytes(best->mem, c) / kMiB;
        bands[c].append(QPointF(static_cast<double>(best->step), sum));
      }
      best = nullptr;
    };
    for (const engine::StepMetrics& m : run->steps) {
      const long c = static_cast<long>(static_cast<double>(m.step) * perColumn);
      if (c != column) {
        flush();
        column = c;
      }
      if (!best || m.mem.total() > best->mem.total()) best = &m;
    }
    flush();
    // One step is a single point: give the band a visible width.
    if (bands[0].size() == 1)
      for (auto& b : bands) b.append(QPointF(b[0].x() + x1 / columns * 2, b[0].y()));
  }
  for (int c = 0; c < kCategoryCount; ++c) m_memUpper[c]->replace(bands[c]);
}

void ChartArea::updateRanges(double x1) {
  const double xTick = niceTickInterval(x1, 5);
  for (int m = 0; m < Gradients; ++m) {
    QValueAxis* x = xAxis(static_cast<Metric>(m));
    if (x->max() != x1) x->setRange(0, x1);
    if (x->tickInterval() != xTick) x->setTickInterval(xTick);
  }
  double lossHigh = 0, lossMax = 0, scaleMin = 1e9, scaleMax = -1e9, memMax = 0;
  bool anyScale = false, anyNan = false;
  for (const auto& [id, s] : m_series) {
    if (!m_store->run(id).visible) continue;
    lossHigh = std::max(lossHigh, s->lossHigh);
    lossMax = std::max(lossMax, s->lossMax);
    memMax = std::max(memMax, s->memMax);
    anyNan = anyNan || !s->nanSteps.isEmpty();
    if (s->hasScale) {
      anyScale = true;
      scaleMin = std::min(scaleMin, s->scaleMin);
      scaleMax = std::max(scaleMax, s->scaleMax);
    }
  }
  // Loss: from 0; a divergence spike (fp16) would flatten every other
  // curve, so the axis follows the bulk (98th percentile) when the maximum
  // is far above it.
  if (lossMax > 0) {
    const double top = niceCeil(lossMax > 3 * lossHigh ? 1.3 * lossHigh : 1.05 * lossMax);
    QValueAxis* y = yAxis(Loss);
    if (y->max() != top || y->min() != 0) {
      y->setRange(0, top);
      y->setTickInterval(niceTickInterval(top, 5));
    }
    for (const auto& [id, s] : m_series) {
      QList<QPointF> stars;
      for (std::int64_t step : s->nanSteps) stars.append(QPointF(static_cast<double>(step), top * 0.95));
      s->nan->replace(stars);
    }
  }
  for (QLegendMarker* mk : chart(Loss)->legend()->markers(m_legendNan)) mk->setVisible(anyNan);
  if (anyScale) {
    const double lo = std::floor(scaleMin) - 1, hi = std::ceil(scaleMax) + 1;
    QValueAxis* y = yAxis(LossScale);
    if (y->min() != lo || y->max() != hi) {
      y->setRange(lo, hi);
      y->setTickAnchor(0);
      y->setTickInterval(std::max(1.0, std::ceil(niceTickInterval(hi - lo, 6))));
    }
  }
  if (memMax > 0) {
    const double top = niceCeil(memMax * 1.1);
    QValueAxis* y = yAxis(Memory);
    if (y->max() != top) {
      y->setRange(0, top);
      y->setTickInterval(niceTickInterval(top, 5));
      y->setLabelFormat(top >= 10 ? QStringLiteral("%.0f") : QStringLiteral("%.1f"));
    }
  }
}

QString ChartArea::hoverText(Metric m, const QPointF& value) const {
  QStringList lines;
  const QLocale locale;
  const std::int64_t step = std::max<std::int64_t>(1, std::llround(value.x()));
  lines << tr("step %1").arg(locale.toString(step));
  bool any = false;
  for (int id = 0; id < m_store->count(); ++id) {
    const RunData& r = m_store->run(id);
    if (!r.visible || r.steps.empty()) continue;
    const engine::StepMetrics* s = stepAt(r, value.x());
    if (!s) continue;
    any = true;
    const QString who = QStringLiteral("<span style='color:%1'>■</span> %2").arg(r.colour.name(), r.name.toHtmlEscaped());
    switch (m) {
      case Loss: {
        QString t = tr("%1: loss %2").arg(who, std::isfinite(s->loss) ? QString::number(s->loss, 'g', 5) : tr("NaN"));
        if (const engine::EvalMetrics* e = evalAt(r, value.x()))
          t += tr(", validation %1 (step %2)").arg(QString::number(e->val_loss, 'g', 5)).arg(e->step);
        lines << t;
        break;
      }
      case LossScale: {
        QString t = tr("%1: scale %2").arg(who, formatScale(s->loss_scale));
        if (s->overflow) t += tr(", <b>overflow</b>");
        if (s->skipped) t += tr(", step skipped");
        lines << t;
        break;
      }
      case Memory: {
        QString t = tr("%1: total %2").arg(who, locale.formattedDataSize(s->mem.total()));
        if (id == focusRun()) {
          QStringList parts;
          for (int c = kCategoryCount - 1; c >= 0; --c)
            parts << QStringLiteral("%1 %2").arg(tr(kCategories[c].name),
                                                 locale.formattedDataSize(categoryBytes(s->mem, c)));
          t += QStringLiteral("<br>&nbsp;&nbsp;") + parts.join(QStringLiteral(", "));
        }
        lines << t;
        break;
      }
      case Accuracy: {
        QString t = who + QLatin1Char(':');
        if (const engine::EvalMetrics* e = evalAt(r, value.x()); e && e->val_accuracy >= 0)
          t += tr(" validation %1% (step %2),").arg(100.0 * e->val_accuracy, 0, 'f', 2).arg(e->step);
        if (s->train_accuracy >= 0) t += tr(" train batch %1%").arg(100.0 * s->train_accuracy, 0, 'f', 1);
        lines << t;
        break;
      }
      default: break;
    }
  }
  return any ? lines.join(QStringLiteral("<br>")) : QString();
}
