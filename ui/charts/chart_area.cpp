// ChartArea: builds the chart grid and redraws it from the RunStore, one
// replace() per changed series per frame, decimated per pixel column.
#include "charts/chart_area.h"

#include <QAction>
#include <QAreaSeries>
#include <QCheckBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLogValueAxis>
#include <QVBoxLayout>
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

#include "charts/chart_style.h"
#include "charts/decimate.h"
#include "charts/chart_export.h"
#include "charts/gradient_panel.h"
#include "charts/live_chart_view.h"
#include "session/run_store.h"

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
     QT_TRANSLATE_NOOP("ChartArea", "share (%)"), 0.0, 10.0, "%.0f"},
};

// Memory categories, bottom to top (colours: chart_style::memoryColour).
const char* const kCategories[] = {
    QT_TRANSLATE_NOOP("ChartArea", "weights"),     QT_TRANSLATE_NOOP("ChartArea", "master"),
    QT_TRANSLATE_NOOP("ChartArea", "grads"),       QT_TRANSLATE_NOOP("ChartArea", "optimizer"),
    QT_TRANSLATE_NOOP("ChartArea", "activations"), QT_TRANSLATE_NOOP("ChartArea", "workspace"),
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
const QColor kOverflowRed = chart_style::kAlarm;

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
  double lossMin = 0.0;                  // the smallest positive loss drawn (0: none)
  double scaleMin = 0.0, scaleMax = 0.0;
  double memMax = 0.0;
  bool hasScale = false;
};

// How a run is named on the charts: the recipe alone where it names one
// visible run, else the run's name with it.
QString ChartArea::runLabel(const RunData& r) const {
  int sameRecipe = 0;
  for (int id = 0; id < m_store->count(); ++id)
    if (m_store->run(id).visible && m_store->run(id).recipe == r.recipe) ++sameRecipe;
  return sameRecipe > 1 ? QStringLiteral("%1 · %2").arg(r.name, r.recipe) : r.recipe;
}

void ChartArea::updateLegend() {
  QStringList entries;
  for (int id = 0; id < m_store->count(); ++id) {
    const RunData& r = m_store->run(id);
    if (!r.visible || m_series.find(id) == m_series.end()) continue;
    // Whole names, never elided; a non-breaking space keeps swatch and name together.
    entries << QStringLiteral("<span style='color:%1'>&#9632;</span>&nbsp;%2")
                   .arg(r.colour.name(), runLabel(r).toHtmlEscaped().replace(QLatin1Char(' '), QStringLiteral("&nbsp;")));
    const QString label = runLabel(r);
    if (m_series.at(id)->loss->name() != label) m_series.at(id)->loss->setName(label);
  }
  const QString text = entries.join(QStringLiteral(" &nbsp; &nbsp; "));
  if (m_legend->text() != text) m_legend->setText(text);
}

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
    area->setName(tr(kCategories[c]));
    QColor fill = chart_style::memoryColour(c);
    fill.setAlpha(170);
    area->setBrush(fill);
    area->setPen(QPen(chart_style::memoryColour(c).darker(120), 1));
    attach(mem, area);
    m_memUpper << upper;
    m_memAreas << area;
    lower = upper;
  }
  // The CPU's emulation buffers: hatched above the stack, outside it (a
  // device holding the recipe has none; DESIGN.md "Memory accounting").
  m_emulationUpper = new QLineSeries(this);
  m_emulationArea = new QAreaSeries(m_emulationUpper, lower);
  m_emulationArea->setName(tr("CPU emulation<br>(not in total)"));
  m_emulationArea->setBrush(QBrush(chart_style::kEmulation, Qt::BDiagPattern));
  m_emulationArea->setPen(QPen(chart_style::kEmulation, 1, Qt::DotLine));
  attach(mem, m_emulationArea);

  // Legend-only series (no points): what the dashes and markers mean.
  auto legendLine = [](QChart* chart, const QString& name, Qt::PenStyle style, double width) {
    auto* s = new QLineSeries;
    s->setName(name);
    s->setPen(QPen(chart_style::kNeutral, width, style));
    attach(chart, s);
  };
  legendLine(chart(Loss), tr("validation"), Qt::DashLine, 2);
  legendLine(chart(Memory), tr("other runs' totals"), Qt::DashLine, 2);
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
               chart_style::kInk, 12);
  m_legendNan = legendMarker(chart(Loss), tr("NaN loss"), QScatterSeries::MarkerShapeStar, kOverflowRed,
                             kOverflowRed.darker(130), 11);
  hideLegend(chart(Loss), m_legendNan);  // shown once a run diverges

  m_accuracyNote = new QGraphicsSimpleTextItem(tr("No accuracy:\na regression (mean squared error)"), chart(Accuracy));
  m_accuracyNote->setBrush(chart_style::kNote);
  m_accuracyNote->setVisible(false);
  m_scaleNote = new QGraphicsSimpleTextItem(chart(LossScale));
  m_scaleNote->setBrush(chart_style::kNote);
  m_scaleNote->setFont(chart_style::legendFont(chart(LossScale)));
  m_scaleNote->setVisible(false);
  m_deviceNote = new QGraphicsSimpleTextItem(chart(Memory));
  m_deviceNote->setBrush(chart_style::kNote);
  m_deviceNote->setFont(chart_style::legendFont(chart(Memory)));
  m_deviceNote->setVisible(false);

  // The loss axis, linear or logarithmic (swapped in applyLossAxis()).
  m_lossLinear = yAxis(Loss);
  m_lossLog = new QLogValueAxis;
  m_lossLog->setObjectName(QStringLiteral("yLogAxis"));
  m_lossLog->setBase(10);
  m_lossLog->setLabelFormat(QStringLiteral("%.0e"));
  m_lossLog->setTitleText(m_lossLinear->titleText() + tr(" (log)"));
  m_lossLog->setTitleFont(m_lossLinear->titleFont());
  m_lossLog->setLabelsFont(m_lossLinear->labelsFont());
  m_lossLog->setMinorTickCount(-1);
  m_lossLog->setRange(1e-3, 10);
  m_logCheck = new QCheckBox(tr("Log loss axis"), this);
  m_logCheck->setObjectName(QStringLiteral("lossLogCheck"));
  m_logCheck->setToolTip(tr("A logarithmic loss axis: on by itself when the losses span more than %1 decades")
                             .arg(kLogDecades));
  connect(m_logCheck, &QCheckBox::toggled, this, [this](bool on) {
    if (on != m_logScale) setLossLogScale(on);
  });
  auto* logAction = new QAction(tr("Logarithmic loss axis"), this);
  logAction->setCheckable(true);
  connect(m_logCheck, &QCheckBox::toggled, logAction, &QAction::setChecked);
  connect(logAction, &QAction::triggered, this, [this](bool on) { setLossLogScale(on); });
  m_views[Loss]->addContextAction(logAction);

  // One legend for the grid: whole run names (a chart's own legend would
  // elide them to "mixed-f…" with five runs).
  m_legend = new QLabel(this);
  m_legend->setObjectName(QStringLiteral("chartLegend"));
  m_legend->setTextFormat(Qt::RichText);
  m_legend->setWordWrap(true);
  m_legend->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);

  // Top row: the scalar curves; bottom: memory, and the wide gradient panel.
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  outer->setSpacing(2);
  auto* header = new QHBoxLayout;
  header->setContentsMargins(6, 0, 6, 0);
  header->addWidget(m_legend, 1);
  header->addWidget(m_logCheck);
  outer->addLayout(header);
  m_gridHost = new QWidget(this);
  m_gridHost->setObjectName(QStringLiteral("chartGrid"));
  outer->addWidget(m_gridHost, 1);
  for (int m = 0; m < Gradients; ++m) m_views[m]->setParent(m_gridHost);
  m_gradients->setParent(m_gridHost);
  layOutCharts();

  for (int m = 0; m < Gradients; ++m) {
    const auto metric = static_cast<Metric>(m);
    m_views[m]->setHoverText([this, metric](const QPointF& v) { return hoverText(metric, v); });
    connect(m_views[m], &LiveChartView::enlargeToggled, this, [this, m] { toggleEnlarged(m_views[m]); });
    connect(m_views[m], &LiveChartView::zoomChanged, this, [this](bool zoomed) {
      if (!zoomed) {
        m_x1 = -1;  // the axes are ours again: redraw with the full ranges
        scheduleRefresh();
      }
    });
  }
  connect(m_gradients->view(), &LiveChartView::enlargeToggled, this, [this] { toggleEnlarged(m_gradients); });
  // Exported file names say what a chart shows: the memory stack is one
  // run's, the histogram one layer's.
  m_views[Loss]->setExportStem([] { return QStringLiteral("loss"); });
  m_views[LossScale]->setExportStem([] { return QStringLiteral("loss-scale"); });
  m_views[Accuracy]->setExportStem([] { return QStringLiteral("accuracy"); });
  m_views[Memory]->setExportStem([this] {
    const int f = focusRun();
    return f < 0 ? QStringLiteral("memory") : chartFileStem(QStringLiteral("memory ") + m_store->run(f).name);
  });
  m_gradients->view()->setExportStem([this] {
    const QString layer = m_gradients->layer();
    return layer.isEmpty() ? QStringLiteral("gradients") : chartFileStem(QStringLiteral("gradients ") + layer);
  });

  // The store says when something changed; one redraw per event-loop pass.
  connect(m_store, &RunStore::appended, this, &ChartArea::scheduleRefresh);
  connect(m_store, &RunStore::runChanged, this, &ChartArea::scheduleRefresh);

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
  chart_style::styleChart(chart);

  auto* x = chart_style::makeValueAxis(chart, tr("step"), QStringLiteral("xAxis"));
  x->setRange(0, 1000);
  x->setLabelFormat(QStringLiteral("%.0f"));
  x->setTickInterval(200);
  chart->addAxis(x, Qt::AlignBottom);

  auto* y = chart_style::makeValueAxis(chart, tr(spec.yTitle), QStringLiteral("yAxis"));
  y->setRange(spec.yMin, spec.yMax);
  y->setLabelFormat(QString::fromLatin1(spec.yFormat));
  y->setTickInterval(niceTickInterval(spec.yMax - spec.yMin, 5));
  chart->addAxis(y, Qt::AlignLeft);

  auto* view = new LiveChartView(chart, this);
  view->setObjectName(QString::fromLatin1(spec.objectName));
  view->setMinimumSize(chart_style::kMinChartWidth, chart_style::kMinChartHeight);
  return view;
}

QChartView* ChartArea::view(Metric m) const { return m_views[m]; }

QChart* ChartArea::chart(Metric m) const { return m_views[m]->chart(); }

QValueAxis* ChartArea::xAxis(Metric m) const {
  const auto axes = chart(m)->axes(Qt::Horizontal);
  return axes.isEmpty() ? nullptr : qobject_cast<QValueAxis*>(axes.first());
}

QAbstractAxis* ChartArea::lossAxis() const {
  const auto axes = chart(Loss)->axes(Qt::Vertical);
  return axes.isEmpty() ? nullptr : axes.first();
}

void ChartArea::scheduleRefresh() {
  if (m_refreshPending) return;
  m_refreshPending = true;
  QTimer::singleShot(0, this, [this] {
    m_refreshPending = false;
    refresh();
  });
}

void ChartArea::setLossLogScale(bool on) {
  m_logChosen = true;
  applyLossAxis(on);
  refresh();
}

void ChartArea::applyLossAxis(bool log) {
  if (log == m_logScale) return;
  m_logScale = log;
  QChart* c = chart(Loss);
  QAbstractAxis* from = log ? static_cast<QAbstractAxis*>(m_lossLinear) : m_lossLog;
  QAbstractAxis* to = log ? static_cast<QAbstractAxis*>(m_lossLog) : m_lossLinear;
  const auto series = c->series();
  for (QAbstractSeries* sr : series) sr->detachAxis(from);
  c->removeAxis(from);  // kept: ownership comes back to this area
  from->setParent(this);
  c->addAxis(to, Qt::AlignLeft);
  for (QAbstractSeries* sr : series) sr->attachAxis(to);
  if (m_presentation) chart_style::applyPresentation(c, true);
  if (m_logCheck->isChecked() != log) {
    const QSignalBlocker block(m_logCheck);
    m_logCheck->setChecked(log);
  }
}

QString ChartArea::lossScaleNote() const { return m_scaleNote->isVisible() ? m_scaleNote->text() : QString(); }
QString ChartArea::deviceMemoryNote() const { return m_deviceNote->isVisible() ? m_deviceNote->text() : QString(); }

namespace {
QWidget* chartWidget(const QVector<LiveChartView*>& views, GradientPanel* gradients, int m) {
  return m == ChartArea::Gradients ? static_cast<QWidget*>(gradients) : static_cast<QWidget*>(views[m]);
}
}  // namespace

// The grid: by default the scalar curves on top and memory with the wide
// gradient panel below. With watched charts (a lecture), those fill a
// large top row and the others share a short row below; with
// m_watchOnly (presentation), only the watched ones are shown, one above
// the other when there are two or fewer (wide, for curves over steps).
void ChartArea::layOutCharts() {
  delete m_gridHost->layout();
  auto* grid = new QGridLayout(m_gridHost);
  grid->setContentsMargins(0, 0, 0, 0);
  grid->setSpacing(4);
  m_enlarged = nullptr;
  for (int m = 0; m < MetricCount; ++m) chartWidget(m_views, m_gradients, m)->setVisible(true);
  if (m_watched.isEmpty()) {
    grid->addWidget(m_views[Loss], 0, 0);
    grid->addWidget(m_views[LossScale], 0, 1);
    grid->addWidget(m_views[Accuracy], 0, 2);
    grid->addWidget(m_views[Memory], 1, 0);
    grid->addWidget(m_gradients, 1, 1, 1, 2);
    for (int c = 0; c < 3; ++c) grid->setColumnStretch(c, 1);
    // The bottom row carries the gradient panel's line of numbers: a little
    // more height, so its histogram is not squashed on a 720-pixel screen.
    grid->setRowStretch(0, 4);
    grid->setRowStretch(1, 5);
  } else {
    QVector<int> others;
    for (int m : {Loss, LossScale, Accuracy, Memory, Gradients})
      if (!m_watched.contains(static_cast<Metric>(m))) others << m;
    const int n = static_cast<int>(m_watched.size());
    if (m_watchOnly) {
      // Two or fewer: stacked, full width. More: two columns.
      const int columns = n <= 2 ? 1 : 2;
      for (int i = 0; i < n; ++i) {
        QWidget* w = chartWidget(m_views, m_gradients, m_watched[i]);
        const bool lastAlone = columns == 2 && i == n - 1 && n % 2 == 1;
        grid->addWidget(w, i / columns, i % columns, 1, lastAlone ? 2 : 1);
      }
      for (int m : others) chartWidget(m_views, m_gradients, m)->setVisible(false);
      // The gradient panel carries a line of numbers under its chart: a
      // little more height for its row.
      for (int i = 0; i < n; i += columns) {
        bool gradients = false;
        for (int j = i; j < std::min(n, i + columns); ++j) gradients = gradients || m_watched[j] == Gradients;
        grid->setRowStretch(i / columns, gradients ? 5 : 4);
      }
    } else {
      // 60 columns: the watched charts share the top row, the others the
      // bottom one, evenly whatever their counts (60 = 3 * 4 * 5).
      for (int i = 0; i < n; ++i)
        grid->addWidget(chartWidget(m_views, m_gradients, m_watched[i]), 0, i * 60 / n, 1, 60 / n);
      const int k = static_cast<int>(others.size());
      for (int i = 0; i < k; ++i)
        grid->addWidget(chartWidget(m_views, m_gradients, others[i]), 1, i * 60 / k, 1, 60 / k);
      for (int c = 0; c < 60; ++c) grid->setColumnStretch(c, 1);
      grid->setRowStretch(0, k > 0 ? 3 : 1);
      if (k > 0) grid->setRowStretch(1, 2);
    }
  }
  m_x1 = -1;  // new plot widths: decimate again
  scheduleRefresh();
}

void ChartArea::setWatched(const QVector<Metric>& watched, bool watchedOnly) {
  QVector<Metric> unique;
  for (Metric m : watched)
    if (m >= 0 && m < MetricCount && !unique.contains(m)) unique << m;
  if (unique == m_watched && watchedOnly == m_watchOnly) return;
  m_watched = unique;
  m_watchOnly = watchedOnly;
  layOutCharts();
}

void ChartArea::setPresentation(bool on) {
  m_presentation = on;
  for (LiveChartView* v : m_views) chart_style::applyPresentation(v->chart(), on);
  m_styledSeries = seriesCount();
  chart_style::setPresentationFont(m_legend, on, chart_style::presentation::kLegendPt, true);
  chart_style::setPresentationFont(m_logCheck, on, chart_style::presentation::kLegendPt);
  // The notes drawn on the charts: large enough to read too.
  QFont note = chart_style::legendFont(chart(LossScale));
  if (on) note.setPointSizeF(chart_style::presentation::kLegendPt - 2);
  m_scaleNote->setFont(note);
  m_scaleNote->setBrush(on ? chart_style::presentation::kInk : chart_style::kNote);
  m_deviceNote->setFont(note);
  m_deviceNote->setBrush(on ? chart_style::presentation::kInk : chart_style::kNote);
  m_accuracyNote->setFont(on ? note : QFont());
  m_gradients->setPresentation(on);
  m_x1 = -1;
  scheduleRefresh();
}

int ChartArea::seriesCount() const {
  int n = 0;
  for (LiveChartView* v : m_views) n += static_cast<int>(v->chart()->series().size());
  return n;
}

void ChartArea::toggleEnlarged(QWidget* target) {
  QList<QWidget*> all;
  for (int m = 0; m < Gradients; ++m) all << m_views[m];
  all << m_gradients;
  m_enlarged = m_enlarged == target ? nullptr : target;
  for (QWidget* w : all) {
    // Charts the presentation leaves out stay out.
    const int m = w == m_gradients ? Gradients : static_cast<int>(m_views.indexOf(static_cast<LiveChartView*>(w)));
    const bool shown = !m_watchOnly || m_watched.isEmpty() || m_watched.contains(static_cast<Metric>(m));
    w->setVisible(shown && (!m_enlarged || w == m_enlarged));
  }
  m_x1 = -1;  // new plot widths: decimate again
  scheduleRefresh();
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
    l->setPen(chart_style::linePen(c, width, style));
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
  s->loss = line(Loss, chart_style::kLossWidth, Qt::SolidLine, colour, true);
  hideLegend(chart(Loss), s->loss);  // the shared legend above the grid names the run
  // Validation: sparse (once per epoch by default), so thick, dark and
  // with markers, to read above the noisy per-batch curves.
  s->valLoss = line(Loss, chart_style::kValidationWidth, Qt::DashLine, colour.darker(125), false);
  s->valLoss->setPointsVisible(true);
  s->valLoss->setMarkerSize(7);
  hideLegend(chart(Loss), s->valLoss);
  s->nan = markers(Loss, QScatterSeries::MarkerShapeStar, kOverflowRed, colour, 11);
  s->scale = line(LossScale, chart_style::kScaleWidth, Qt::SolidLine, colour, true);
  hideLegend(chart(LossScale), s->scale);
  s->overflow = markers(LossScale, QScatterSeries::MarkerShapeTriangle, kOverflowRed, colour.darker(110), 9);
  s->skipped = markers(LossScale, QScatterSeries::MarkerShapeCircle, Qt::transparent, chart_style::kInk, 12);
  s->memTotal = line(Memory, chart_style::kMemTotalWidth, Qt::DashLine, colour, false);
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
  // Series made since the presentation style was applied get it too.
  if (m_presentation && seriesCount() != m_styledSeries) {
    for (LiveChartView* v : m_views) chart_style::applyPresentation(v->chart(), true);
    m_styledSeries = seriesCount();
  }
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
    // A run without loss scaling has no loss scale to show: a flat line at
    // 2^0 would stretch the axis and squash the others' sawtooth.
    if (!r.scalesLoss()) s.hasScale = false;
    anyPoints = anyPoints || s.loss->count() > 0;
  }
  updateLegend();
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
  // A run without loss scaling is absent from the loss-scale chart.
  const bool scaled = r.scalesLoss();
  for (QAbstractSeries* a : {static_cast<QAbstractSeries*>(s.scale), static_cast<QAbstractSeries*>(s.overflow),
                             static_cast<QAbstractSeries*>(s.skipped)})
    if (!scaled && a->isVisible()) a->setVisible(false);
  for (QAbstractSeries* a : {static_cast<QAbstractSeries*>(s.loss), static_cast<QAbstractSeries*>(s.valLoss),
                             static_cast<QAbstractSeries*>(s.nan), static_cast<QAbstractSeries*>(s.scale),
                             static_cast<QAbstractSeries*>(s.overflow), static_cast<QAbstractSeries*>(s.skipped),
                             static_cast<QAbstractSeries*>(s.memTotal), static_cast<QAbstractSeries*>(s.valAcc),
                             static_cast<QAbstractSeries*>(s.trainAcc)})
    if (!a->isVisible() && (scaled || (a != s.scale && a != s.overflow && a != s.skipped))) {
      a->setVisible(true);
      // A series shown again gets its legend marker back: runs are named
      // in the shared legend, not in each chart's.
      hideLegend(a->chart(), a);
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
  s.lossMin = 0.0;
  for (const QList<QPointF>* pts : {&loss, static_cast<const QList<QPointF>*>(&val)})
    for (const QPointF& p : *pts)
      if (std::isfinite(p.y()) && p.y() > 0 && (s.lossMin == 0.0 || p.y() < s.lossMin)) s.lossMin = p.y();

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
  s.memMax = static_cast<double>(r.peak_memory) / kMiB;

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
  QList<QPointF> emulation;  // the stack's top plus the emulation buffers
  m_emulationMax = 0.0;
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
      sum += static_cast<double>(at(i).mem.emulation) / kMiB;
      emulation.append(QPointF(static_cast<double>(at(i).step), sum));
      m_emulationMax = std::max(m_emulationMax, sum);
    }
    // One step is a single point: give the band a visible width.
    if (bands[0].size() == 1) {
      for (auto& b : bands) b.append(QPointF(b[0].x() + x1 / columns * 2, b[0].y()));
      emulation.append(QPointF(emulation[0].x() + x1 / columns * 2, emulation[0].y()));
    }
  }
  for (int c = 0; c < kCategoryCount; ++c) m_memUpper[c]->replace(bands[c]);
  // Only when there is any: no legend entry for a recipe the CPU runs natively.
  bool anyEmulation = false;
  for (int k = 0; k < emulation.size() && !anyEmulation; ++k) anyEmulation = emulation[k].y() > bands[kCategoryCount - 1][k].y();
  m_emulationUpper->replace(anyEmulation ? emulation : QList<QPointF>{});
  for (QLegendMarker* mk : chart(Memory)->legend()->markers(m_emulationArea))
    if (mk->isVisible() != anyEmulation) mk->setVisible(anyEmulation);
}

void ChartArea::updateRanges(double x1) {
  const double xTick = niceTickInterval(x1, 5);
  // A zoomed chart keeps the user's ranges until the zoom is reset.
  auto zoomed = [this](Metric m) { return m_views[m]->isZoomed(); };
  for (int m = 0; m < Gradients; ++m) {
    if (zoomed(static_cast<Metric>(m))) continue;
    QValueAxis* x = xAxis(static_cast<Metric>(m));
    setAxis(x, 0, x1, xTick);
  }
  double lossHigh = 0, lossMax = 0, lossMin = 0, scaleMin = 1e9, scaleMax = -1e9, memMax = 0;
  bool anyScale = false, anyNan = false;
  for (const auto& [id, s] : m_series) {
    if (!m_store->run(id).visible) continue;
    lossHigh = std::max(lossHigh, s->lossHigh);
    lossMax = std::max(lossMax, s->lossMax);
    if (s->lossMin > 0 && (lossMin == 0 || s->lossMin < lossMin)) lossMin = s->lossMin;
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
  // Until the user chooses, the axis is logarithmic when the losses span
  // more than kLogDecades decades (tiny-gradients: 1e-1 down to 1e-11).
  if (!m_logChosen && lossMin > 0 && lossMax > 0)
    applyLossAxis(std::log10(lossMax / lossMin) > kLogDecades);
  if (lossMax > 0 && !zoomed(Loss)) {
    double top = 0;
    if (m_logScale && lossMin > 0) {
      const double lo = std::pow(10.0, std::floor(std::log10(lossMin)));
      top = std::pow(10.0, std::ceil(std::log10(lossMax)));
      if (top <= lo) top = lo * 10;
      if (m_lossLog->min() != lo || m_lossLog->max() != top) m_lossLog->setRange(lo, top);
      // Its NaN stars sit at the top, a little below.
      top = std::pow(10.0, std::log10(top) - 0.05 * std::log10(top / lo));
    } else {
      top = niceCeil(lossMax > 3 * lossHigh ? 1.3 * lossHigh : 1.05 * lossMax);
      if (m_lossLinear->max() != top || m_lossLinear->min() != 0) {
        m_lossLinear->setLabelFormat(axisLabelFormat(top));
        setAxis(m_lossLinear, 0, top, niceTickInterval(top, 5));
      }
      top *= 0.95;
    }
    for (const auto& [id, s] : m_series) {
      QList<QPointF> stars;
      for (std::int64_t step : s->nanSteps) stars.append(QPointF(static_cast<double>(step), top));
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
  // Runs without loss scaling are named, not drawn.
  QStringList unscaled;
  bool anyVisible = false;
  for (int id = 0; id < m_store->count(); ++id) {
    const RunData& r = m_store->run(id);
    if (!r.visible || (r.steps.empty() && m_series.find(id) == m_series.end())) continue;
    anyVisible = true;
    if (!r.scalesLoss()) unscaled << runLabel(r);
  }
  const QString scaleNote = unscaled.isEmpty() ? QString() : tr("no loss scaling: %1").arg(unscaled.join(QStringLiteral(", ")));
  if (m_scaleNote->text() != scaleNote) m_scaleNote->setText(scaleNote);
  m_scaleNote->setVisible(anyVisible && !scaleNote.isEmpty());
  if (m_scaleNote->isVisible()) {
    const QRectF plot = chart(LossScale)->plotArea();
    const QRectF text = m_scaleNote->boundingRect();
    // Centred when no run scales; else in the top-left corner, where the
    // axis keeps a free unit above the highest scale.
    m_scaleNote->setPos(anyScale ? plot.topLeft() + QPointF(6, 2)
                                 : plot.center() - QPointF(text.width() / 2, text.height() / 2));
  }
  if (anyScale && !zoomed(LossScale)) {
    const double lo = std::floor(scaleMin) - 1, hi = std::ceil(scaleMax) + (scaleNote.isEmpty() ? 1 : 2);
    QValueAxis* y = yAxis(LossScale);
    setAxis(y, lo, hi, powerOfTwoTickInterval(hi - lo, 6));
  }
  // The GPU's own figure (the bands are the tensors the recipe holds; the
  // device also holds the CUDA context and library workspaces).
  QString deviceNote;
  for (int id = 0; id < m_store->count(); ++id) {
    const RunData& r = m_store->run(id);
    if (!r.visible || r.steps.empty() || r.steps.back().device_total <= 0) continue;
    const engine::StepMetrics& last = r.steps.back();
    deviceNote = tr("GPU memory in use: %1 MiB of %2 GiB (cudaMemGetInfo: the whole device)")
                     .arg(static_cast<double>(last.device_used) / kMiB, 0, 'f', 0)
                     .arg(static_cast<double>(last.device_total) / (1024.0 * kMiB), 0, 'f', 1);
  }
  if (m_deviceNote->text() != deviceNote) m_deviceNote->setText(deviceNote);
  m_deviceNote->setVisible(!deviceNote.isEmpty());
  if (m_deviceNote->isVisible()) m_deviceNote->setPos(chart(Memory)->plotArea().topLeft() + QPointF(6, 2));
  memMax = std::max(memMax, m_emulationMax);
  if (memMax > 0 && !zoomed(Memory)) {
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
        if (!r.scalesLoss()) {
          lines << tr("%1: — (no loss scaling)").arg(who);
          break;
        }
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
            parts << QStringLiteral("%1 %2").arg(tr(kCategories[c]),
                                                 locale.formattedDataSize(categoryBytes(s->mem, c)));
          t += QStringLiteral("<br>&nbsp;&nbsp;") + parts.join(QStringLiteral(", "));
        }
        if (s->mem.emulation > 0) {
          t += QStringLiteral("<br>&nbsp;&nbsp;") +
               tr("CPU emulation %1 (not in the total: a device has none)")
                   .arg(locale.formattedDataSize(s->mem.emulation));
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
