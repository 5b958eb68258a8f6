// ChartArea: makes the registered charts, lays them out, and drives them from
// the RunStore once per frame.
#include "charts/chart_area.h"

#include <QChart>
#include <QCheckBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QResizeEvent>
#include <QScrollArea>
#include <QValueAxis>
#include <QVBoxLayout>

#include <algorithm>

#include "charts/chart_registry.h"
#include "charts/chart_style.h"
#include "charts/decimate.h"
#include "charts/gradient_panel.h"
#include "charts/live_chart_view.h"
#include "charts/loss_chart.h"
#include "charts/loss_scale_chart.h"
#include "charts/memory_chart.h"
#include "session/run_store.h"

ChartArea::ChartArea(RunStore* store, QWidget* parent) : QWidget(parent), m_store(store) {
  setObjectName(QStringLiteral("chartArea"));
  // Decided now: the renderer query makes an OpenGL context (~150 ms with
  // llvmpipe), which must not happen in the first live frame.
  openGlWanted();
  for (ChartFactory make : liveCharts()) m_tiles << make(*this, this);

  // One legend for the grid: whole run names (a chart's own legend would
  // elide them to "mixed-f…" with five runs).
  m_legend = new QLabel(this);
  m_legend->setObjectName(QStringLiteral("chartLegend"));
  m_legend->setTextFormat(Qt::RichText);
  m_legend->setWordWrap(true);
  m_legend->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  // Two lines at most (20 runs would take the charts' height): the rest
  // scrolls (fitLegend).
  m_legendScroll = new QScrollArea(this);
  m_legendScroll->setObjectName(QStringLiteral("chartLegendScroll"));
  m_legendScroll->setWidget(m_legend);
  m_legendScroll->setWidgetResizable(true);
  m_legendScroll->setFrameShape(QFrame::NoFrame);
  m_legendScroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  m_legendScroll->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Fixed);

  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  outer->setSpacing(2);
  auto* header = new QHBoxLayout;
  header->setContentsMargins(6, 0, 6, 0);
  header->addWidget(m_legendScroll, 1);
  for (ChartTile* t : m_tiles)
    if (QWidget* w = t->headerWidget()) header->addWidget(w);
  outer->addLayout(header);
  m_gridHost = new QWidget(this);
  m_gridHost->setObjectName(QStringLiteral("chartGrid"));
  outer->addWidget(m_gridHost, 1);
  for (ChartTile* t : m_tiles) {
    t->widget()->setParent(m_gridHost);
    // The grid's stretch factors share the height, not the views' size
    // hints (a chart view's hint is its scene, i.e. its last size: the
    // larger chart would keep growing). Their minimum sizes still hold.
    t->view()->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Ignored);
  }
  layOutCharts();

  for (ChartTile* t : m_tiles) {
    QWidget* w = t->widget();
    connect(t->view(), &LiveChartView::enlargeToggled, this, [this, w] { toggleEnlarged(w); });
    if (!qobject_cast<StepChart*>(t)) continue;
    connect(t->view(), &LiveChartView::zoomChanged, this, [this](bool zoomed) {
      if (!zoomed) {
        m_x1 = -1;  // the axes are ours again: redraw with the full ranges
        scheduleRefresh();
      }
    });
  }
  if (auto* loss = tileAs<LossChart>(Loss)) connect(loss, &LossChart::logScaleChosen, this, &ChartArea::refresh);

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
      if (id < m_store->count() && !prepared(id)) {
        prepare(m_store->run(id));
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

ChartArea::~ChartArea() = default;

template <class T>
T* ChartArea::tileAs(int m) const {
  return m >= 0 && m < m_tiles.size() ? qobject_cast<T*>(m_tiles[m]) : nullptr;
}

void ChartArea::prepare(const RunData& run) {
  if (!m_prepared.insert(run.id).second) return;
  for (ChartTile* t : m_tiles) t->prepareRun(run);
}

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
    if (!r.visible || !prepared(id)) continue;
    // Whole names, never elided; non-breaking spaces and hyphens keep swatch
    // and name on one line (the hyphen of "mixed-fp16" was a place to break).
    entries << QStringLiteral("<span style='color:%1'>&#9632;</span>&nbsp;%2")
                   .arg(r.colour.name(), runLabel(r)
                                             .toHtmlEscaped()
                                             .replace(QLatin1Char(' '), QStringLiteral("&nbsp;"))
                                             .replace(QLatin1Char('-'), QStringLiteral("&#8209;")));
  }
  const QString text = entries.join(QStringLiteral(" &nbsp; &nbsp; "));
  if (m_legend->text() != text) {
    m_legend->setText(text);
    fitLegend();
  }
}

int ChartArea::chartIndex(const QString& key) const {
  for (int m = 0; m < m_tiles.size(); ++m)
    if (m_tiles[m]->key() == key) return m;
  return -1;
}

QString ChartArea::title(int m) const { return m_tiles[m]->title(); }
QChartView* ChartArea::view(int m) const { return m_tiles[m]->view(); }
QChart* ChartArea::chart(int m) const { return m_tiles[m]->view()->chart(); }

QValueAxis* ChartArea::xAxis(int m) const {
  const auto axes = chart(m)->axes(Qt::Horizontal);
  return axes.isEmpty() ? nullptr : qobject_cast<QValueAxis*>(axes.first());
}

QValueAxis* ChartArea::yAxis(int m) const {
  const auto axes = chart(m)->axes(Qt::Vertical);
  return axes.isEmpty() ? nullptr : qobject_cast<QValueAxis*>(axes.first());
}

GradientPanel* ChartArea::gradientPanel() const { return findChild<GradientPanel*>(); }
QAbstractAxis* ChartArea::lossAxis() const { return tileAs<LossChart>(Loss)->lossAxis(); }
void ChartArea::setLossLogScale(bool on) { tileAs<LossChart>(Loss)->setLogScale(on); }
bool ChartArea::lossLogScale() const { return tileAs<LossChart>(Loss)->logScale(); }
QCheckBox* ChartArea::logScaleCheck() const { return tileAs<LossChart>(Loss)->logCheck(); }
QString ChartArea::lossScaleNote() const { return tileAs<LossScaleChart>(LossScale)->note(); }
QString ChartArea::deviceMemoryNote() const { return tileAs<MemoryChart>(Memory)->deviceNote(); }
QAreaSeries* ChartArea::emulationArea() const { return tileAs<MemoryChart>(Memory)->emulationArea(); }
QAreaSeries* ChartArea::memoryArea(int category) const { return tileAs<MemoryChart>(Memory)->area(category); }

QXYSeries* ChartArea::runSeries(int m, int runId, Role role) const {
  const auto* chart = tileAs<StepChart>(m);
  return chart ? chart->runSeries(runId, role) : nullptr;
}

void ChartArea::scheduleRefresh() {
  if (m_refreshPending) return;
  m_refreshPending = true;
  QTimer::singleShot(0, this, [this] {
    m_refreshPending = false;
    refresh();
  });
}

// The grid: by default each chart in its own cell (the scalar curves on
// top, memory and the wide gradient panel below). With watched charts (a
// lecture), those fill a large top row and the others share a short row
// below; with m_watchOnly (presentation), only the watched ones are shown,
// one above the other when there are two or fewer (wide, for curves over
// steps).
void ChartArea::layOutCharts() {
  delete m_gridHost->layout();
  auto* grid = new QGridLayout(m_gridHost);
  grid->setContentsMargins(0, 0, 0, 0);
  grid->setSpacing(4);
  m_enlarged = nullptr;
  // Each tile shown or hidden once: a chart shown only to be hidden again
  // below is polished and laid out for nothing.
  for (int m = 0; m < m_tiles.size(); ++m)
    m_tiles[m]->widget()->setVisible(!m_watchOnly || m_watched.isEmpty() ||
                                     m_watched.contains(static_cast<Metric>(m)));
  if (m_watched.isEmpty()) {
    int columns = 0;
    for (ChartTile* t : m_tiles) {
      const GridCell c = t->cell();
      grid->addWidget(t->widget(), c.row, c.column, c.rowSpan, c.columnSpan);
      columns = std::max(columns, c.column + c.columnSpan);
    }
    for (int c = 0; c < columns; ++c) grid->setColumnStretch(c, 1);
    // The bottom row carries the gradient panel's line of numbers: a little
    // more height, so its histogram is not squashed on a 720-pixel screen.
    grid->setRowStretch(0, 4);
    grid->setRowStretch(1, 5);
  } else {
    // The others in reading order of the usual grid.
    QVector<int> others;
    for (int m = 0; m < m_tiles.size(); ++m)
      if (!m_watched.contains(static_cast<Metric>(m))) others << m;
    std::stable_sort(others.begin(), others.end(), [this](int a, int b) {
      const GridCell ca = m_tiles[a]->cell(), cb = m_tiles[b]->cell();
      return std::pair(ca.row, ca.column) < std::pair(cb.row, cb.column);
    });
    const int n = static_cast<int>(m_watched.size());
    if (m_watchOnly) {
      // Two or fewer: stacked, full width, where each gets the height of a
      // readable chart; side by side on a short screen (1280x720). More:
      // two columns.
      m_columns = presentationColumns();
      const int columns = m_columns;
      for (int i = 0; i < n; ++i) {
        const bool lastAlone = columns == 2 && i == n - 1 && n % 2 == 1 && n > 2;
        grid->addWidget(m_tiles[m_watched[i]]->widget(), i / columns, i % columns, 1, lastAlone ? 2 : 1);
      }
      for (int m : others) m_tiles[m]->widget()->setVisible(false);
      // The gradient panel carries a line of numbers under its chart: a
      // little more height for its row.
      for (int i = 0; i < n; i += columns) {
        bool gradients = false;
        for (int j = i; j < std::min(n, i + columns); ++j) gradients = gradients || m_watched[j] == Gradients;
        grid->setRowStretch(i / columns, gradients ? 5 : 4);
      }
      for (int c = 0; c < columns; ++c) grid->setColumnStretch(c, 1);
    } else {
      // 60 columns: the watched charts share the top row, the others the
      // bottom one, evenly whatever their counts (60 = 3 * 4 * 5).
      for (int i = 0; i < n; ++i) grid->addWidget(m_tiles[m_watched[i]]->widget(), 0, i * 60 / n, 1, 60 / n);
      const int k = static_cast<int>(others.size());
      for (int i = 0; i < k; ++i) grid->addWidget(m_tiles[others[i]]->widget(), 1, i * 60 / k, 1, 60 / k);
      for (int c = 0; c < 60; ++c) grid->setColumnStretch(c, 1);
      grid->setRowStretch(0, k > 0 ? 3 : 1);
      if (k > 0) grid->setRowStretch(1, 2);
    }
  }
  // The charts of the widest row share a fixed budget of minimum width, so
  // a lesson's five charts beside its text fit a 1280-pixel screen.
  int widest = 1;
  for (int r = 0; r < grid->rowCount(); ++r) {
    int inRow = 0;
    for (int c = 0; c < grid->columnCount(); ++c) {
      QLayoutItem* item = grid->itemAtPosition(r, c);
      if (item && item->widget() && item->widget()->isVisibleTo(this) &&
          (c == 0 || grid->itemAtPosition(r, c - 1) != item))
        ++inRow;
    }
    widest = std::max(widest, inRow);
  }
  for (ChartTile* t : m_tiles) t->view()->setMinimumWidth(std::min(chart_style::kMinChartWidth, kGridMinWidth / widest));
  m_x1 = -1;  // new plot widths: decimate again
  scheduleRefresh();
}

int ChartArea::presentationColumns() const {
  const int n = static_cast<int>(m_watched.size());
  if (n > 2) return 2;
  if (n <= 1) return 1;
  return m_gridHost->height() / n >= kStackedMinHeight ? 1 : 2;
}

void ChartArea::fitLegend() {
  const int line = m_legend->fontMetrics().lineSpacing();
  const int width = std::max(m_legendScroll->width(), 100);
  const int need = m_legend->text().isEmpty() ? line : m_legend->heightForWidth(width);
  const int h = std::clamp(need, line + 2, 2 * line + 4);
  if (m_legendScroll->minimumHeight() != h) m_legendScroll->setFixedHeight(h);
}

void ChartArea::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  fitLegend();
  if (m_watchOnly && presentationColumns() != m_columns) layOutCharts();
}

void ChartArea::setWatched(const QVector<Metric>& watched, bool watchedOnly) {
  QVector<Metric> unique;
  for (Metric m : watched)
    if (m >= 0 && m < m_tiles.size() && !unique.contains(m)) unique << m;
  if (unique == m_watched && watchedOnly == m_watchOnly) return;
  m_watched = unique;
  m_watchOnly = watchedOnly;
  layOutCharts();
}

void ChartArea::setPresentation(bool on) {
  m_presentation = on;
  for (ChartTile* t : m_tiles) t->setPresentation(on);
  m_styledSeries = seriesCount();
  chart_style::setPresentationFont(m_legend, on, chart_style::presentation::kLegendPt, true);
  fitLegend();
  m_x1 = -1;
  scheduleRefresh();
}

int ChartArea::seriesCount() const {
  int n = 0;
  for (ChartTile* t : m_tiles) n += static_cast<int>(t->view()->chart()->series().size());
  return n;
}

void ChartArea::toggleEnlarged(QWidget* target) {
  m_enlarged = m_enlarged == target ? nullptr : target;
  for (int m = 0; m < m_tiles.size(); ++m) {
    QWidget* w = m_tiles[m]->widget();
    // Charts the presentation leaves out stay out.
    const bool shown = !m_watchOnly || m_watched.isEmpty() || m_watched.contains(static_cast<Metric>(m));
    w->setVisible(shown && (!m_enlarged || w == m_enlarged));
  }
  m_x1 = -1;  // new plot widths: decimate again
  scheduleRefresh();
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

void ChartArea::refresh() {
  // Series made since the presentation style was applied get it too.
  if (m_presentation && seriesCount() != m_styledSeries) {
    for (ChartTile* t : m_tiles) chart_style::applyPresentation(t->view()->chart(), true);
    m_styledSeries = seriesCount();
  }
  // One x range for every step chart, so runs and charts line up.
  std::int64_t maxStep = 0;
  for (int id = 0; id < m_store->count(); ++id) {
    const RunData& r = m_store->run(id);
    if (r.visible && !r.steps.empty()) maxStep = std::max(maxStep, r.steps.back().step);
  }
  ChartFrame frame;
  frame.x1 = niceCeil(std::max<double>(static_cast<double>(maxStep), 10.0));
  bool widthChanged = false;
  for (ChartTile* t : m_tiles) widthChanged = t->measureWidth() || widthChanged;
  frame.force = widthChanged || frame.x1 != m_x1;
  m_x1 = frame.x1;

  bool anyPoints = false;
  for (int id = 0; id < m_store->count(); ++id) {
    const RunData& r = m_store->run(id);
    if (!r.visible) {
      for (ChartTile* t : m_tiles) t->hideRun(id);
      continue;
    }
    if (r.steps.empty() && r.evals.empty() && !prepared(id)) continue;
    prepare(r);
    for (ChartTile* t : m_tiles) {
      t->updateRun(r, frame);
      anyPoints = anyPoints || t->drewPoints(id);
    }
  }
  updateLegend();
  for (ChartTile* t : m_tiles) t->finish(frame);
  if (anyPoints && !m_hadPoints) {
    m_hadPoints = true;
    emit pointsAppeared();
  }
}
