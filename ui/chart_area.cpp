// ChartArea: builds the chart grid and redraws it from the RunStore, one
// replace() per changed series per frame, decimated per pixel column.
#include "chart_area.h"

#include <QAreaSeries>
#include <QChart>
#include <QGraphicsLayout>
#include <QGraphicsSimpleTextItem>
#include <QGridLayout>
#include <QGuiApplication>
#include <QOffscreenSurface>
#include <QOpenGLContext>
#include <QOpenGLFunctions>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLocale>
#include <QMap>
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

}  // namespace

void setAxis(QValueAxis* axis, double lo, double hi, double interval) {
  const bool sameRange = axis->min() == lo && axis->max() == hi;
  const bool sameInterval = axis->tickInterval() == interval;
  if (sameRange && sameInterval) return;
  // Coarser ticks first when the range grows; the range first when it shrinks.
  if (interval >= axis->tickInterval()) {
    if (!sameInterval) axis->setTickInterval(interval);
    if (!sameRange) axis->setRange(lo, hi);
  } else {
    if (!sameRange) axis->setRange(lo, hi);
    if (!sameInterval) axis->setTickInterval(interval);
  }
}

// Tick labels that show the values: tiny-gradients' losses are ~1e-12.
QString axisLabelFormat(double top) {
  if (top >= 10) return QStringLiteral("%.0f");
  if (top >= 0.1) return QStringLiteral("%.2f");
  if (top >= 0.001) return QStringLiteral("%.4f");
  return QStringLiteral("%.1e");
}

namespace {

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
  ColumnDecimator dLoss, dScale, dMem, dTrainAcc;
  ColumnPicker pNan, pOverflow, pSkipped;
  QList<std::int64_t> nanSteps;   // decimated NaN-loss steps (y set from the axis)
  double lossMax = 0.0, lossHigh = 0.0;  // max and 98th percentile of the drawn losses
  double scaleMin = 0.0, scaleMax = 0.0;
  double memMax = 0.0;
  bool hasScale = false;
};

QString ChartArea::title(Metric m) { return tr(kSpecs[m].title); }

QString ChartArea::openGlRenderer() {
  static const QString renderer = [] {
    // A throwaway context: the GL_RENDERER string says whether the driver
    // is hardware or Mesa's software rasterisers.
    QOpenGLContext context;
    QOffscreenSurface surface;
    surface.create();
    if (!context.create() || !surface.isValid() || !context.makeCurrent(&surface)) return QString();
    const auto* text = reinterpret_cast<const char*>(context.functions()->glGetString(GL_RENDERER));
    QString name = text ? QString::fromLatin1(text) : QString();
    context.doneCurrent();
    return name;
  }();
  return renderer;
}

bool ChartArea::openGlWanted() {
  static const bool wanted = [] {
    const QString env = qEnvironmentVariable("PL_CHARTS_OPENGL");
    if (env == QLatin1String("0")) return false;
    // OpenGL series crash under the offscreen platform: xcb/wayland only.
    const QString platform = QGuiApplication::platformName();
    if (platform != QLatin1String("xcb") && platform != QLatin1String("wayland")) return false;
    if (env == QLatin1String("1")) return true;
    // A software rasteriser (llvmpipe under Xvfb, a VM without a GPU) draws
    // OpenGL series on the CPU, in threads that compete with the engine's:
    // measured here, it made the UI thread's event loop 60 ms late at the
    // median. Raster series of decimated points are cheaper there.
    const QString renderer = openGlRenderer().toLower();
    if (renderer.isEmpty()) return false;
    for (const char* software : {"llvmpipe", "softpipe", "swrast", "swiftshader", "software"})
      if (renderer.contains(QLatin1String(software))) return false;
    return true;
  }();
  return wanted;
}

ChartArea::ChartArea(RunStore* store, QWidget* parent) : QWidget(parent), m_store(store) {
  setObjectName(QStringLiteral("chartArea"));
  // Decided now: the renderer query makes an OpenGL context (~150 ms with
  // llvmpipe), which must not happen in the first live frame.
  openGlWanted();
  for (int m = 0; m < Gradients; ++m) m_views.push_back(makeChart(static_cast<Metric>(m)));
  m_gradients = new GradientPanel(store, this);
  m_views.push_back(m_gradients->view());
  m_widths.fill(-1, MetricCount);

  // Memory: the focus run stacked by category (bands), each run's total as
  // a line in its colour on top.
  QChart* mem = chart(Memory);
  mem->legend()->setAlignment(Qt::AlignRight);
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

  m_accuracyNote = new QGraphicsSimpleTextItem(tr("No accuracy:\na regression (mean squared error)"), chart(Accuracy));
  m_accuracyNote->setBrush(QColor(110, 110, 110));
  m_accuracyNote->setVisible(false);

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

  // A run's series are made as soon as it is added, one run per event-loop
  // pass, while the engine loads its data: making them in the first live
  // frame (a dozen series per run, each re-laying out its chart) blocked
  // the UI thread for ~40 ms with three runs.
  m_prepare.setSingleShot(true);
  m_prepare.setInterval(0);
  connect(&m_prepare, &QTimer::timeout, this, [this] {
    while (!m_pending.isEmpty()) {
      const int id = m_pending.takeFirst();
      if (id < m_store->count() && m_series.find(id) == m_series.end()) {
        seriesFor(m_store->run(id));
        m_gradients->prepareRun(m_store->run(id));
        break;
      }
    }
    if (!m_pending.isEmpty()) m_prepare.start();
  });
  connect(m_store, &RunStore::runAdded, this, [this](int id) {
    m_pending << id;
    m_prepare.start();
  });
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
  // Coalesced: several focus changes in one pass (runs being added) give
  // one redraw, after the current event.
  QTimer::singleShot(0, this, [this] { refresh(); });
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
    // Flat caps and bevel joins: round ones make the stroker build a Bezier
    // arc at every vertex (profiled: the largest single cost of a paint).
    l->setPen(QPen(c, width, style, Qt::FlatCap, Qt::BevelJoin));
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
  // Validation: sparse (once per epoch by default), so thick, dark and
  // with markers, to read above the noisy per-batch curves.
  s->valLoss = line(Loss, 2.6, Qt::DashLine, colour.darker(125), false);
  s->valLoss->setPointsVisible(true);
  s->valLoss->setMarkerSize(7);
  hideLegend(chart(Loss), s->valLoss);
  s->nan = markers(Loss, QScatterSeries::MarkerShapeStar, kOverflowRed, colour, 11);
  s->scale = line(LossScale, 1.8, Qt::SolidLine, colour, true);
  hideLegend(chart(LossScale), s->scale);
  s->overflow = markers(LossScale, QScatterSeries::MarkerShapeTriangle, kOverflowRed, colour.darker(110), 9);
  s->skipped = markers(LossScale, QScatterSeries::MarkerShapeCircle, Qt::transparent, QColor(40, 40, 40), 12);
  s->memTotal = line(Memory, 2.0, Qt::DashLine, colour, false);
  hideLegend(chart(Memory), s->memTotal);
  // Raster, so the validation line (drawn after it) stays on top: OpenGL
  // series are painted above every raster item.
  QColor light = colour;
  light.setAlpha(60);
  s->trainAcc = line(Accuracy, 1.0, Qt::SolidLine, light, false);
  hideLegend(chart(Accuracy), s->trainAcc);
  s->valAcc = line(Accuracy, 2.8, Qt::SolidLine, colour.darker(125), false);
  s->valAcc->setPointsVisible(true);
  s->valAcc->setMarkerSize(7);
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
  // Legend: the recipe alone where it names one visible run, else with the
  // run's name.
  QMap<QString, int> recipeCount;
  for (int id = 0; id < m_store->count(); ++id)
    if (m_store->run(id).visible) ++recipeCount[m_store->run(id).recipe];
  for (auto& [id, rs] : m_series) {
    const RunData& r = m_store->run(id);
    const QString label = recipeCount.value(r.recipe) > 1 ? QStringLiteral("%1 · %2").arg(r.name, r.recipe) : r.recipe;
    if (rs->loss->name() != label) rs->loss->setName(label);
  }
  const int focus = focusRun();
  // The focus run's memory is the stack; other runs show their total line.
  for (auto& [id, rs] : m_series)
    if (m_store->run(id).visible) rs->memTotal->setVisible(id != focus);
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
    if (!a->isVisible()) {
      a->setVisible(true);
      // A series shown again gets its legend marker back: only the train
      // loss (the run's entry) keeps one.
      if (a != s.loss) hideLegend(a->chart(), a);
    }
  if (!force && s.revision == r.revision) return;
  s.revision = r.revision;

  const auto& steps = r.steps;
  const std::int64_t n = static_cast<std::int64_t>(steps.size());
  auto at = [&steps](std::int64_t i) -> const engine::StepMetrics& { return steps[static_cast<std::size_t>(i)]; };
  auto stepX = [&](std::int64_t i) { return static_cast<double>(at(i).step); };
  // The decimators keep their finished pixel columns: a frame only feeds
  // the steps that arrived since the last one (the grid changes rarely:
  // on resize, or when the x axis grows to its next round number).
  auto grid = [x1](ColumnDecimator& d, int columns) {
    if (!d.sameGrid(0, x1, columns)) d.reset(0, x1, columns);
  };
  auto gridPick = [x1](ColumnPicker& p, int columns, ColumnPicker::Mode mode) {
    if (!p.sameGrid(0, x1, columns)) p.reset(0, x1, columns, mode);
  };
  auto never = [](std::int64_t) { return 0.0; };

  // Loss: min/max per column; remember the spread for the y range.
  grid(s.dLoss, std::max(m_widths[Loss], 50));
  s.dLoss.feed(n, [&](std::int64_t i) { return QPointF(stepX(i), at(i).loss); });
  const QList<QPointF> loss = s.dLoss.points();
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
  // Markers only while the evaluations are sparse (once per epoch of a big
  // set); frequent ones (a small set) would be a row of blobs.
  s.valLoss->setPointsVisible(val.size() * 12 < std::max(m_widths[Loss], 50));
  for (const QPointF& p : val) s.lossMax = std::max(s.lossMax, p.y()), s.lossHigh = std::max(s.lossHigh, p.y());

  // NaN loss: one marker per 6 pixels (placed at the top of the axis later).
  gridPick(s.pNan, std::max(m_widths[Loss], 50) / 6, ColumnPicker::FirstKept);
  s.pNan.feed(n, stepX, [&](std::int64_t i) { return !std::isfinite(at(i).loss); }, never);
  s.nanSteps.clear();
  for (std::int64_t i : s.pNan.indices()) s.nanSteps << at(i).step;

  // Loss scale on a log2 axis; overflow and skipped steps as markers.
  const int scaleColumns = std::max(m_widths[LossScale], 50);
  grid(s.dScale, scaleColumns);
  s.dScale.feed(n, [&](std::int64_t i) { return QPointF(stepX(i), std::log2(at(i).loss_scale)); });
  const QList<QPointF> scale = s.dScale.points();
  s.scale->replace(scale);
  s.hasScale = !scale.isEmpty();
  if (s.hasScale) {
    auto [lo, hi] = std::minmax_element(scale.begin(), scale.end(),
                                        [](const QPointF& a, const QPointF& b) { return a.y() < b.y(); });
    s.scaleMin = lo->y();
    s.scaleMax = hi->y();
  }
  // Markers are drawn raster: keep them to one per 4 pixels.
  gridPick(s.pOverflow, scaleColumns / 4, ColumnPicker::FirstKept);
  gridPick(s.pSkipped, scaleColumns / 4, ColumnPicker::FirstKept);
  s.pOverflow.feed(n, stepX, [&](std::int64_t i) { return at(i).overflow; }, never);
  s.pSkipped.feed(n, stepX, [&](std::int64_t i) { return at(i).skipped; }, never);
  QList<QPointF> overflow, skipped;
  for (std::int64_t i : s.pOverflow.indices()) overflow.append(QPointF(stepX(i), std::log2(at(i).loss_scale)));
  for (std::int64_t i : s.pSkipped.indices()) skipped.append(QPointF(stepX(i), std::log2(at(i).loss_scale)));
  s.overflow->replace(overflow);
  s.skipped->replace(skipped);

  // Memory total (MiB) of every visible run.
  grid(s.dMem, std::max(m_widths[Memory], 50));
  s.dMem.feed(n, [&](std::int64_t i) { return QPointF(stepX(i), static_cast<double>(at(i).mem.total()) / kMiB); });
  s.memTotal->replace(s.dMem.points());
  s.memMax = static_cast<double>(r.peakMemory) / kMiB;

  // Accuracy in percent: validation, and the (noisy) train batch accuracy.
  QList<QPointF> valAcc;
  for (const engine::EvalMetrics& e : r.evals)
    if (e.val_accuracy >= 0) valAcc.append(QPointF(static_cast<double>(e.step), 100.0 * e.val_accuracy));
  s.valAcc->replace(valAcc);
  s.valAcc->setPointsVisible(valAcc.size() * 12 < std::max(m_widths[Accuracy], 50));
  grid(s.dTrainAcc, std::max(m_widths[Accuracy], 50));
  s.dTrainAcc.feed(n, [&](std::int64_t i) {
    const double a = at(i).train_accuracy;
    return QPointF(stepX(i), a >= 0 ? 100.0 * a : std::nan(""));
  });
  s.trainAcc->replace(s.dTrainAcc.points());
}

void ChartArea::updateMemoryStack(const RunData* run, double x1, bool force) {
  const int id = run ? run->id : -1;
  if (!force && id == m_memoryRun && (!run || run->revision == m_memoryRevision)) return;
  const int columns = std::max(m_widths[Memory], 50);
  if (id != m_memoryRun || !m_memPeaks.sameGrid(0, x1, columns))
    m_memPeaks.reset(0, x1, columns, ColumnPicker::MaxScore);
  m_memoryRun = id;
  m_memoryRevision = run ? run->revision : 0;
  QVector<QList<QPointF>> bands(kCategoryCount);
  if (run && !run->steps.empty()) {
    // Per pixel column the step with the largest total (the peak), so
    // every band uses the same steps and the stack stays consistent.
    const auto& steps = run->steps;
    auto at = [&steps](std::int64_t i) -> const engine::StepMetrics& { return steps[static_cast<std::size_t>(i)]; };
    m_memPeaks.feed(
        static_cast<std::int64_t>(steps.size()), [&](std::int64_t i) { return static_cast<double>(at(i).step); },
        [](std::int64_t) { return true; }, [&](std::int64_t i) { return static_cast<double>(at(i).mem.total()); });
    for (std::int64_t i : m_memPeaks.indices()) {
      double sum = 0;
      for (int c = 0; c < kCategoryCount; ++c) {
        sum += static_cast<double>(categoryBytes(at(i).mem, c)) / kMiB;
        bands[c].append(QPointF(static_cast<double>(at(i).step), sum));
      }
    }
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
    setAxis(x, 0, x1, xTick);
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
      y->setLabelFormat(axisLabelFormat(top));
      setAxis(y, 0, top, niceTickInterval(top, 5));
    }
    for (const auto& [id, s] : m_series) {
      QList<QPointF> stars;
      for (std::int64_t step : s->nanSteps) stars.append(QPointF(static_cast<double>(step), top * 0.95));
      s->nan->replace(stars);
    }
  }
  for (QLegendMarker* mk : chart(Loss)->legend()->markers(m_legendNan)) mk->setVisible(anyNan);
  // Regression runs (tiny-gradients) have no accuracy: say so instead of
  // leaving an empty chart.
  bool anySteps = false, anyAccuracy = false;
  for (int id = 0; id < m_store->count(); ++id) {
    const RunData& r = m_store->run(id);
    if (!r.visible || r.steps.empty()) continue;
    anySteps = true;
    anyAccuracy = anyAccuracy || r.steps.back().train_accuracy >= 0;
  }
  const bool note = anySteps && !anyAccuracy;
  m_accuracyNote->setVisible(note);
  if (note) {
    const QRectF plot = chart(Accuracy)->plotArea();
    const QRectF text = m_accuracyNote->boundingRect();
    m_accuracyNote->setPos(plot.center() - QPointF(text.width() / 2, text.height() / 2));
  }
  if (anyScale) {
    const double lo = std::floor(scaleMin) - 1, hi = std::ceil(scaleMax) + 1;
    QValueAxis* y = yAxis(LossScale);
    setAxis(y, lo, hi, powerOfTwoTickInterval(hi - lo, 6));
  }
  if (memMax > 0) {
    const double top = niceCeil(memMax * 1.1);
    QValueAxis* y = yAxis(Memory);
    if (y->max() != top) {
      y->setLabelFormat(top >= 10 ? QStringLiteral("%.0f") : QStringLiteral("%.1f"));
      setAxis(y, 0, top, niceTickInterval(top, 5));
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
