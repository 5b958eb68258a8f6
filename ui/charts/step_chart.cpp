// StepChart: axes, per-run bookkeeping (made once, redrawn on a new
// revision), tooltips and OpenGL choice shared by the Live tab's charts.
#include "charts/step_chart.h"

#include <QChart>
#include <QFontMetricsF>
#include <QGuiApplication>
#include <QEvent>
#include <QLegend>
#include <QLegendMarker>
#include <QTextDocumentFragment>
#include <QLineSeries>
#include <QLocale>
#include <QOffscreenSurface>
#include <QOpenGLContext>
#include <QOpenGLFunctions>
#include <QScatterSeries>
#include <QValueAxis>

#include <algorithm>
#include <cmath>

#include "charts/chart_style.h"
#include "charts/decimate.h"
#include "charts/live_chart_view.h"
#include "session/run_store.h"

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

// The record of step x in a run's history (steps are 1-based, contiguous).
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

}  // namespace

QString StepChart::openGlRenderer() {
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

bool StepChart::openGlWanted() {
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

StepChart::StepChart(ChartHost& host, const Spec& spec, QWidget* parent)
    : ChartTile(parent), m_host(host), m_spec(spec) {
  auto* chart = new QChart;
  chart->setTitle(spec.title);
  chart_style::styleChart(chart);

  auto* x = chart_style::makeValueAxis(chart, tr("step"), QStringLiteral("xAxis"));
  x->setRange(0, 1000);
  x->setLabelFormat(QStringLiteral("%.0f"));
  x->setTickInterval(200);
  chart->addAxis(x, Qt::AlignBottom);

  auto* y = chart_style::makeValueAxis(chart, spec.yTitle, QStringLiteral("yAxis"));
  y->setRange(spec.yMin, spec.yMax);
  y->setLabelFormat(QString::fromLatin1(spec.yFormat));
  y->setTickInterval(niceTickInterval(spec.yMax - spec.yMin, 5));
  chart->addAxis(y, Qt::AlignLeft);

  m_view = new LiveChartView(chart, parent);
  m_view->setObjectName(QString::fromLatin1(spec.objectName));
  m_view->setMinimumSize(chart_style::kMinChartWidth, chart_style::kMinChartHeight);
  m_view->setHoverText([this](const QPointF& v) { return hoverText(v); });
  m_view->installEventFilter(this);  // fitLegend() on every resize
  const QString stem = QString::fromLatin1(spec.key).replace(QLatin1Char('_'), QLatin1Char('-'));
  m_view->setExportStem([stem] { return stem; });
}

QWidget* StepChart::widget() const { return m_view; }

QChart* StepChart::chart() const { return m_view->chart(); }

QValueAxis* StepChart::xAxis() const {
  const auto axes = chart()->axes(Qt::Horizontal);
  return axes.isEmpty() ? nullptr : qobject_cast<QValueAxis*>(axes.first());
}

QValueAxis* StepChart::yAxis() const {
  const auto axes = chart()->axes(Qt::Vertical);
  return axes.isEmpty() ? nullptr : qobject_cast<QValueAxis*>(axes.first());
}

void StepChart::prepareRun(const RunData& run) {
  if (m_revisions.count(run.id)) return;
  m_revisions[run.id] = ~std::uint64_t{0};
  makeSeries(run);
}

void StepChart::hideRun(int runId) {
  const auto it = m_revisions.find(runId);
  if (it == m_revisions.end()) return;
  showSeries(m_host.store().run(runId), false);
  it->second = ~std::uint64_t{0};
}

void StepChart::updateRun(const RunData& run, const ChartFrame& frame) {
  prepareRun(run);
  showSeries(run, true);
  std::uint64_t& revision = m_revisions[run.id];
  if (!frame.force && revision == run.revision) return;
  revision = run.revision;
  draw(run, frame.x1);
}

// A legend below the plot that cannot show its entries whole (a lesson's
// bottom row, side by side in presentation view) is left out: QtCharts
// would cut each entry to "skipped s...". Double-click enlarges the chart
// with its legend; the hover text says what each mark is.
void StepChart::fitLegend() {
  QLegend* legend = chart()->legend();
  if (legend->alignment() != Qt::AlignBottom) return;
  // QtCharts gives each entry an equal share when they do not all fit. A
  // hidden legend's markers all read hidden: the width it needed when last
  // shown is kept.
  if (legend->isVisible()) {
    const QFontMetricsF fm(legend->font());
    int count = 0;
    double widest = 0;
    for (QLegendMarker* m : legend->markers())
      if (m->isVisible()) {
        ++count;
        widest = std::max(widest, fm.horizontalAdvance(QTextDocumentFragment::fromHtml(m->label()).toPlainText()));
      }
    m_legendWidth = static_cast<int>(count * (widest + fm.height() + 24));
  }
  const bool fits = m_legendWidth <= m_view->width() - 24;
  if (legend->isVisible() != fits) legend->setVisible(fits);
}

bool StepChart::eventFilter(QObject* watched, QEvent* event) {
  if (watched == m_view && event->type() == QEvent::Resize) fitLegend();
  return ChartTile::eventFilter(watched, event);
}

void StepChart::finish(const ChartFrame& frame) {
  // A zoomed chart keeps the user's ranges until the zoom is reset. As
  // many step ticks as the plot's width has room for whole labels (QtCharts
  // cuts a label wider than its tick spacing to "1…").
  if (!zoomed()) setAxis(xAxis(), 0, frame.x1, niceTickInterval(frame.x1, stepTicks(frame.x1)));
  finishRanges(frame);
  fitLegend();  // after the chart's own notes and legend entries
}

bool StepChart::measureWidth() {
  const int w = static_cast<int>(chart()->plotArea().width());
  const bool changed = w != m_width;
  m_width = w;
  return changed;
}

int StepChart::stepTicks(double x1) const {
  const QFontMetricsF fm(xAxis()->labelsFont());
  const double label = fm.horizontalAdvance(QLocale::c().toString(x1, 'f', 0)) * 1.5 + 12;
  return std::clamp(static_cast<int>(chart()->plotArea().width() / label), 1, 5);
}

int StepChart::columns() const { return std::max(m_width, 50); }

bool StepChart::zoomed() const { return m_view->isZoomed(); }

void StepChart::setPresentation(bool on) {
  m_presentation = on;
  chart_style::applyPresentation(chart(), on);
}

void StepChart::setShown(QAbstractSeries* series, bool shown) {
  if (!shown) {
    series->setVisible(false);
  } else if (!series->isVisible()) {
    series->setVisible(true);
    // A series shown again gets its legend marker back: runs are named in
    // the shared legend, not in each chart's.
    hideLegendOf(series);
  }
}

void StepChart::attach(QAbstractSeries* series) {
  chart()->addSeries(series);
  for (QAbstractAxis* a : chart()->axes()) series->attachAxis(a);
}

void StepChart::hideLegendOf(QAbstractSeries* series) {
  for (QLegendMarker* m : chart()->legend()->markers(series)) m->setVisible(false);
}

QLineSeries* StepChart::addLine(const RunData& run, double width, Qt::PenStyle style, const QColor& colour,
                                bool dense) {
  auto* l = new QLineSeries(this);
  l->setName(run.name);
  l->setPen(chart_style::linePen(colour, width, style));
  // OpenGL draws solid lines only: dense solid series only.
  if (dense && openGlWanted() && style == Qt::SolidLine) l->setUseOpenGL(true);
  attach(l);
  hideLegendOf(l);
  return l;
}

QScatterSeries* StepChart::addMarkers(const RunData& run, int shape, const QColor& fill, const QColor& border,
                                      double size) {
  auto* s = new QScatterSeries(this);
  s->setName(run.name);
  s->setMarkerShape(static_cast<QScatterSeries::MarkerShape>(shape));
  s->setMarkerSize(size);
  s->setColor(fill);
  s->setBorderColor(border);
  attach(s);
  hideLegendOf(s);
  return s;
}

QLineSeries* StepChart::addLegendLine(const QString& name, Qt::PenStyle style, double width) {
  auto* s = new QLineSeries;
  s->setName(name);
  s->setPen(QPen(chart_style::kNeutral, width, style));
  attach(s);
  return s;
}

QScatterSeries* StepChart::addLegendMarker(const QString& name, int shape, const QColor& fill, const QColor& border,
                                           double size) {
  auto* s = new QScatterSeries;
  s->setName(name);
  s->setMarkerShape(static_cast<QScatterSeries::MarkerShape>(shape));
  s->setMarkerSize(size);
  s->setColor(fill);
  s->setBorderColor(border);
  attach(s);
  return s;
}

QString StepChart::hoverText(const QPointF& value) const {
  QStringList lines;
  const std::int64_t step = std::max<std::int64_t>(1, std::llround(value.x()));
  lines << tr("step %1").arg(QLocale().toString(step));
  bool any = false;
  const RunStore& store = m_host.store();
  for (int id = 0; id < store.count(); ++id) {
    const RunData& r = store.run(id);
    if (!r.visible || r.steps.empty()) continue;
    const engine::StepMetrics* s = stepAt(r, value.x());
    if (!s) continue;
    any = true;
    const QString who = QStringLiteral("<span style='color:%1'>■</span> %2").arg(r.colour.name(), r.name.toHtmlEscaped());
    lines << hoverLine(r, *s, value.x(), who);
  }
  return any ? lines.join(QStringLiteral("<br>")) : QString();
}
