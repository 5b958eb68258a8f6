// CompareView: small multiples on one y scale, and the summary table.
#include "compare/compare_view.h"

#include <QAction>
#include <QChart>
#include <QComboBox>
#include <QHBoxLayout>
#include <QGraphicsLayout>
#include <QGridLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineSeries>
#include <QLocale>
#include <QScrollArea>
#include <QScrollBar>
#include <QTableWidget>
#include <QTimer>
#include <QValueAxis>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <limits>

#include "charts/chart_area.h"
#include "charts/chart_export.h"
#include "charts/chart_style.h"
#include "charts/number_text.h"
#include "charts/decimate.h"
#include "charts/live_chart_view.h"
#include "charts/step_markers.h"
#include "compare/difference_chart.h"
#include "compare/recipe_legend.h"
#include "session/run_store.h"

namespace {


QTableWidgetItem* cell(const QString& text, Qt::Alignment align = Qt::AlignRight | Qt::AlignVCenter) {
  auto* item = new QTableWidgetItem(text);
  item->setTextAlignment(align);
  item->setFlags(Qt::ItemIsEnabled | Qt::ItemIsSelectable);
  return item;
}

// Losses: 3 significant digits, scientific below 1e-3 (tiny-gradients'
// 3.5e-9 against 2.5e-11 must not both read 0.0000).
QString number(double v, int digits = 3) { return number_text::significant(v, digits); }

}  // namespace

CompareView::CompareView(RunStore* store, QWidget* parent) : QWidget(parent), m_store(store) {
  setObjectName(QStringLiteral("compareView"));
  m_header = new QLabel(tr("No comparison yet. Press Compare to run FP32, FP16 and mixed precision side by side."),
                        this);
  m_header->setObjectName(QStringLiteral("compareHeader"));
  m_header->setWordWrap(true);
  m_grid = new QWidget(this);
  m_gridLayout = new QGridLayout(m_grid);
  m_gridLayout->setContentsMargins(0, 0, 0, 0);
  m_gridLayout->setSpacing(4);

  // The charts: each run on its own, or every run minus FP32.
  m_modeCombo = new QComboBox(this);
  m_modeCombo->setObjectName(QStringLiteral("compareModeCombo"));
  m_modeCombo->addItem(tr("Each run's loss"), static_cast<int>(Mode::EachRun));
  m_modeCombo->addItem(tr("Difference to FP32"), static_cast<int>(Mode::Difference));
  m_modeCombo->setToolTip(tr("Difference to FP32: each run's loss and batch accuracy minus the FP32 run's at the "
                             "same step, smoothed by a centred moving mean, over the band of FP32's own "
                             "batch-to-batch noise"));
  connect(m_modeCombo, &QComboBox::activated, this,
          [this](int i) { setMode(static_cast<Mode>(m_modeCombo->itemData(i).toInt())); });
  m_differenceAction = new QAction(tr("Difference to FP32 (Compare tab)"), this);
  m_differenceAction->setObjectName(QStringLiteral("compareDifferenceAction"));
  connect(m_differenceAction, &QAction::triggered, this, [this] {
    setMode(Mode::Difference);
    emit showRequested();
  });
  auto* differences = new QWidget(this);
  differences->setObjectName(QStringLiteral("compareDifferences"));
  auto* diffColumn = new QVBoxLayout(differences);
  diffColumn->setContentsMargins(0, 0, 0, 0);
  diffColumn->setSpacing(2);
  auto* diffLayout = new QHBoxLayout;
  diffLayout->setContentsMargins(0, 0, 0, 0);
  diffLayout->setSpacing(4);
  diffColumn->addLayout(diffLayout, 1);
  m_legend = new RecipeLegend(differences);
  diffColumn->addWidget(m_legend);
  m_lossDiff = new DifferenceChart(m_store, difference::Quantity::Loss, differences);
  m_accuracyDiff = new DifferenceChart(m_store, difference::Quantity::Accuracy, differences);
  for (DifferenceChart* d : {m_lossDiff, m_accuracyDiff}) {
    auto* back = new QAction(tr("Show each run's loss"), d);
    connect(back, &QAction::triggered, this, [this] { setMode(Mode::EachRun); });
    d->view()->addContextAction(back);
    diffLayout->addWidget(d->view(), 1);
  }
  differences->hide();

  m_table = new QTableWidget(0, ColumnCount, this);
  m_table->setObjectName(QStringLiteral("compareSummary"));
  // Two-line headers keep the columns narrow (the table fits 1280x720);
  // each tooltip says exactly what the column holds.
  const QString fp32Step = tr("at the latest evaluation step both this run and the FP32 run have");
  const QList<std::pair<QString, QString>> headers{
      {tr("run"), tr("The run's name in the runs list and the exported files")},
      {tr("recipe"), tr("The precision recipe")},
      {tr("val. loss"), tr("Validation loss: the mean loss over the whole validation set at the run's last "
                           "evaluation (not one training batch)")},
      {tr("val. loss\n÷ FP32"), tr("The validation loss as a multiple of the FP32 run's, %1: 1.003x is 0.3% "
                                   "above FP32").arg(fp32Step)},
      {tr("bits/token\n(perplexity)"),
       tr("A text run's validation loss in bits per token (per character: nats / ln 2), and its perplexity "
          "(e^loss: as unsure as a fair choice among that many characters)")},
      {tr("val. acc.\n(%)"), tr("Validation accuracy at the run's last evaluation, in percent (— for a "
                                "regression, which has none)")},
      {tr("Δ val. acc.\n(pts)"),
       tr("Validation accuracy minus the FP32 run's, in percentage points (vs FP32), %1; red above %2 points")
           .arg(fp32Step)
           .arg(kAccuracyGapPoints)},
      {tr("train loss\n(last %1)").arg(kTrainMeanSteps),
       tr("The training loss averaged over the run's last %1 steps (per-batch losses are noisy; this is not the "
          "validation loss)")
           .arg(kTrainMeanSteps)},
      {tr("overflow\nsteps"), tr("Steps with inf or NaN in a gradient or activation")},
      {tr("skipped\nsteps"), tr("Optimizer steps skipped by the loss scaler (non-finite gradients)")},
      {tr("final\nloss scale"), tr("The loss scale at the last step (— for a recipe without loss scaling)")},
      {tr("peak\nmemory"), tr("The most memory the run's tensors held at once")},
      {tr("samples/s"), tr("Training samples per second (wall clock)")},
  };
  for (int c = 0; c < ColumnCount; ++c) {
    auto* h = new QTableWidgetItem(headers[c].first);
    h->setToolTip(headers[c].second);
    m_table->setHorizontalHeaderItem(c, h);
  }
  m_table->setColumnHidden(ValBitsPerToken, true);  // until a text run is in the table
  m_table->verticalHeader()->hide();
  m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setWordWrap(false);
  QHeaderView* header = m_table->horizontalHeader();
  header->setSectionResizeMode(QHeaderView::ResizeToContents);
  header->setStretchLastSection(false);
  header->setTextElideMode(Qt::ElideRight);
  header->setDefaultAlignment(Qt::AlignCenter);

  // The charts take the room; the table is as tall as its rows, and as wide
  // as the tab gives it: it scrolls sideways rather than push the window
  // wider (fitTableHeight() leaves room for the scroll bar when it shows).
  m_table->setSizeAdjustPolicy(QAbstractScrollArea::AdjustIgnored);
  m_table->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  m_table->setHorizontalScrollBarPolicy(Qt::ScrollBarAsNeeded);
  m_table->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Fixed);
  m_table->setMinimumWidth(0);
  auto* top = new QHBoxLayout;
  top->addWidget(m_header, 1);
  auto* modeLabel = new QLabel(tr("Charts:"), this);
  modeLabel->setBuddy(m_modeCombo);
  top->addWidget(modeLabel);
  top->addWidget(m_modeCombo);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(top);
  // Many runs (a 10-run comparison) scroll rather than make the window taller.
  m_gridScroll = new QScrollArea(this);
  m_gridScroll->setObjectName(QStringLiteral("compareChartsScroll"));
  m_gridScroll->setFrameShape(QFrame::NoFrame);
  m_gridScroll->setWidgetResizable(true);
  m_gridScroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAsNeeded);
  m_gridScroll->setWidget(m_grid);
  layout->addWidget(m_gridScroll, 1);
  layout->addWidget(differences, 1);
  layout->addWidget(m_table);

  // The store says when something changed: one redraw per event-loop pass,
  // and none while the tab is hidden (showEvent catches up).
  auto schedule = [this] {
    if (m_refreshPending || !isVisible()) return;
    m_refreshPending = true;
    QTimer::singleShot(0, this, [this] {
      m_refreshPending = false;
      refresh();
    });
  };
  connect(m_store, &RunStore::appended, this, schedule);
  connect(m_store, &RunStore::runChanged, this, schedule);
  connect(m_store, &RunStore::runAdded, this, schedule);
}

void CompareView::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  refresh();
}

QLineSeries* CompareView::smallLoss(int runId) const {
  const qsizetype i = m_runs.indexOf(runId);
  return i < 0 ? nullptr : m_loss[i];
}

StepMarkers* CompareView::smallMarkers(int runId) const {
  const qsizetype i = m_runs.indexOf(runId);
  return i < 0 || i >= m_markers.size() ? nullptr : m_markers[i];
}

void CompareView::setGroup(int group) {
  if (group == m_group) return;
  m_group = group;
  rebuild();
  refresh();
}

void CompareView::rebuild() {
  for (LiveChartView* v : m_charts) delete v;
  m_charts.clear();
  m_enlarged = nullptr;
  m_loss.clear();
  m_val.clear();
  m_markers.clear();  // the charts' children, gone with them
  m_markedStep.clear();
  m_runs = m_store->group(m_group);
  m_signature = 0;
  const int n = static_cast<int>(m_runs.size());
  const int columns = n <= 4 ? std::max(n, 1) : 3;
  for (int k = 0; k < n; ++k) {
    const RunData& r = m_store->run(m_runs[k]);
    auto* chart = new QChart;
    chart->setTitle(QStringLiteral("<span style='color:%1'>■</span> %2 · %3")
                        .arg(r.colour.name(), r.recipe.toHtmlEscaped(), r.name.toHtmlEscaped()));
    chart_style::styleChart(chart, true);
    chart->legend()->hide();
    auto* x = chart_style::makeValueAxis(chart, tr("step"), QStringLiteral("xAxis"), true);
    x->setLabelFormat(QStringLiteral("%.0f"));
    chart->addAxis(x, Qt::AlignBottom);
    auto* y = chart_style::makeValueAxis(chart, tr("loss"), QStringLiteral("yAxis"), true);
    y->setLabelFormat(QStringLiteral("%.2f"));
    chart->addAxis(y, Qt::AlignLeft);
    auto* loss = new QLineSeries;
    loss->setName(tr("train"));
    loss->setPen(chart_style::linePen(r.colour, 1.4));
    auto* val = new QLineSeries;
    val->setName(tr("validation"));
    val->setPen(chart_style::linePen(r.colour.darker(130), 2.0, Qt::DashLine));
    val->setPointsVisible(true);
    for (QLineSeries* s : {loss, val}) {
      chart->addSeries(s);
      s->attachAxis(x);
      s->attachAxis(y);
    }
    auto* view = new LiveChartView(chart, m_grid);
    view->setObjectName(QStringLiteral("compareChart%1").arg(k));
    view->setMinimumSize(200, 140);
    const int runId = m_runs[k];
    view->setExportStem([this, runId] { return chartFileStem(QStringLiteral("compare loss ") + m_store->run(runId).name); });
    connect(view, &LiveChartView::enlargeToggled, this, [this, view] {
      // One small chart fills the grid; again: all of them.
      const bool enlarge = !m_enlarged || m_enlarged != view;
      m_enlarged = enlarge ? view : nullptr;
      for (LiveChartView* v : m_charts) v->setVisible(!enlarge || v == view);
    });
    view->setHoverText([this, runId](const QPointF& v) {
      const RunData& rd = m_store->run(runId);
      if (rd.steps.empty()) return QString();
      const std::int64_t step = std::clamp<std::int64_t>(std::llround(v.x()), 1, rd.steps.back().step);
      const auto it = std::lower_bound(rd.steps.begin(), rd.steps.end(), step,
                                       [](const engine::StepMetrics& m, std::int64_t s) { return m.step < s; });
      if (it == rd.steps.end()) return QString();
      return tr("%1, step %2: loss %3").arg(rd.recipe).arg(it->step).arg(number(it->loss, 4));
    });
    auto* toDifference = new QAction(tr("Show the difference to FP32"), view);
    connect(toDifference, &QAction::triggered, this, [this] { setMode(Mode::Difference); });
    view->addContextAction(toDifference);
    m_gridLayout->addWidget(view, k / columns, k % columns);
    m_charts << view;
    m_loss << loss;
    m_val << val;
    m_markers << new StepMarkers(chart, x, view);
    m_markedStep << -1;
  }
  if (m_group < 0 || m_runs.isEmpty()) {
    m_header->setText(tr("No comparison yet. Press Compare to run FP32, FP16 and mixed precision side by side."));
  } else {
    const RunData& first = m_store->run(m_runs.front());
    m_header->setText(tr("<b>Comparison %1</b>: %2 on %3, seed %4 — the same initial weights and batches for "
                         "every run; one loss scale for all the small charts.")
                          .arg(m_group + 1)
                          .arg(QString::fromStdString(first.config.model), QString::fromStdString(first.config.dataset))
                          .arg(first.config.seed));
  }
  m_table->setRowCount(static_cast<int>(m_runs.size()));
  m_lossDiff->setRuns(m_runs);
  m_accuracyDiff->setRuns(m_runs);
  m_legend->setEntries(m_lossDiff->legendEntries());
  fitTableHeight();
}

void CompareView::setMode(Mode mode) {
  if (m_modeCombo->currentIndex() != static_cast<int>(mode)) m_modeCombo->setCurrentIndex(static_cast<int>(mode));
  if (mode == m_mode) return;
  m_mode = mode;
  showMode();
  m_signature = 0;  // the shown charts draw now
  refresh();
}

void CompareView::showMode() {
  const bool diff = m_mode == Mode::Difference;
  m_gridScroll->setVisible(!diff);
  m_lossDiff->view()->parentWidget()->setVisible(diff);
}

QList<QChartView*> CompareView::exportCharts() const {
  QList<QChartView*> out;
  if (m_mode == Mode::Difference) {
    out << m_lossDiff->view() << m_accuracyDiff->view();
  } else {
    for (LiveChartView* v : m_charts) out << v;
  }
  return out;
}

void CompareView::fitTableHeight() {
  // As tall as the header and the rows, plus the sideways scroll bar when
  // the columns are wider than the tab; at most 40% of the tab (but three
  // rows), scrolling beyond: ten runs must not make the window taller.
  const int header = m_table->horizontalHeader()->sizeHint().height() + 2 * m_table->frameWidth();
  int h = header;
  for (int r = 0; r < m_table->rowCount(); ++r) h += m_table->rowHeight(r);
  if (m_table->horizontalHeader()->length() > m_table->viewport()->width())
    h += m_table->horizontalScrollBar()->sizeHint().height();
  const int row = m_table->rowCount() > 0 ? m_table->rowHeight(0) : 30;
  const int most = std::max(header + 3 * row + m_table->horizontalScrollBar()->sizeHint().height(), height() * 2 / 5);
  m_table->setVerticalScrollBarPolicy(h > most ? Qt::ScrollBarAsNeeded : Qt::ScrollBarAlwaysOff);
  h = std::min(h, most);
  if (m_table->height() != h) m_table->setFixedHeight(h);
}

void CompareView::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  fitTableHeight();
}

void CompareView::refresh() {
  if (m_store->group(m_group) != m_runs) rebuild();
  std::uint64_t sig = 1469598103934665603ull;
  for (int id : m_runs) sig = (sig ^ (m_store->run(id).revision + 1)) * 1099511628211ull;
  if (sig == m_signature && !m_runs.isEmpty()) return;
  m_signature = sig;

  // Shared axes: the small multiples compare at a glance only on one scale.
  std::int64_t maxStep = 0;
  double high = 0;
  for (int id : m_runs) {
    const RunData& r = m_store->run(id);
    if (!r.steps.empty()) maxStep = std::max(maxStep, r.steps.back().step);
  }
  const double x1 = niceCeil(std::max<double>(static_cast<double>(maxStep), 10.0));
  for (int k = 0; k < m_runs.size(); ++k) {
    const RunData& r = m_store->run(m_runs[k]);
    const int columns = std::max(50, static_cast<int>(m_charts[k]->chart()->plotArea().width()));
    const QList<QPointF> pts = decimateMinMax(
        static_cast<std::int64_t>(r.steps.size()),
        [&r](std::int64_t i) {
          const auto& m = r.steps[static_cast<std::size_t>(i)];
          return QPointF(static_cast<double>(m.step), m.loss);
        },
        0, x1, columns);
    m_loss[k]->replace(pts);
    QList<QPointF> val;
    for (const engine::EvalMetrics& e : r.evals)
      if (std::isfinite(e.val_loss)) val.append(QPointF(static_cast<double>(e.step), e.val_loss));
    m_val[k]->replace(val);
    markDivergence(k, r);
    // Every finite loss fits, the first ones included: the drop from the
    // initial loss is what a comparison shows first.
    for (const QList<QPointF>* list : {&pts, static_cast<const QList<QPointF>*>(&val)})
      for (const QPointF& p : *list)
        if (std::isfinite(p.y())) high = std::max(high, p.y());
  }
  const double top = niceCeil(high > 0 ? high * 1.05 : 1.0);
  for (LiveChartView* v : m_charts) {
    if (v->isZoomed()) continue;
    auto* x = qobject_cast<QValueAxis*>(v->chart()->axes(Qt::Horizontal).first());
    auto* y = qobject_cast<QValueAxis*>(v->chart()->axes(Qt::Vertical).first());
    if (y->max() != top) y->setLabelFormat(axisLabelFormat(top));
    setAxis(x, 0, x1, niceTickInterval(x1, 4));
    setAxis(y, 0, top, niceTickInterval(top, 4));
  }
  if (m_mode == Mode::Difference) {
    m_lossDiff->refresh();
    m_accuracyDiff->refresh();
  }
  updateTable();
}

std::int64_t CompareView::divergenceStep(const RunData& r) {
  if (r.state != engine::RunState::Failed || !r.message.startsWith(QLatin1String("diverged"))) return -1;
  for (const engine::StepMetrics& m : r.steps)
    if (!std::isfinite(m.loss)) return m.step;
  return r.steps.empty() ? 0 : r.steps.back().step;
}

// A diverged run's chart holds a point or two and then nothing: the step
// where it ended is marked, as the Live tab's charts mark their events, so
// the empty chart says why it is empty.
void CompareView::markDivergence(int k, const RunData& r) {
  const std::int64_t at = divergenceStep(r);
  if (at == m_markedStep[k]) return;
  m_markedStep[k] = at;
  m_markers[k]->clear();
  if (at >= 0) m_markers[k]->addMarker(static_cast<double>(at), tr("diverged at step %1").arg(at), chart_style::kAlarm);
  m_charts[k]->setToolTip(at >= 0 ? r.message : QString());
}

namespace {

// The evaluation of `r` at `step`, or null.
const engine::EvalMetrics* evalAt(const RunData& r, std::int64_t step) {
  for (const engine::EvalMetrics& e : r.evals)
    if (e.step == step) return &e;
  return nullptr;
}

// The last evaluation with a finite loss, or null.
const engine::EvalMetrics* lastEval(const RunData& r) {
  for (auto it = r.evals.rbegin(); it != r.evals.rend(); ++it)
    if (std::isfinite(it->val_loss)) return &*it;
  return nullptr;
}

// The latest step at which both runs were evaluated (-1: none).
std::int64_t commonEvalStep(const RunData& a, const RunData& b) {
  for (auto it = a.evals.rbegin(); it != a.evals.rend(); ++it)
    if (std::isfinite(it->val_loss) && evalAt(b, it->step) && std::isfinite(evalAt(b, it->step)->val_loss))
      return it->step;
  return -1;
}

// A ratio near 1 keeps a 4th digit: 0.3149 against 0.3140 is 1.003x, not 1.00x.
QString lossRatio(double v) {
  if (std::isfinite(v) && std::fabs(v - 1.0) < 0.1) return number_text::significant(v, 4) + QLatin1Char('x');
  return number_text::ratio(v);
}

}  // namespace

CompareView::TrainMean CompareView::trainLossMean(const RunData& r) {
  TrainMean m;
  const std::size_t n = std::min<std::size_t>(r.steps.size(), static_cast<std::size_t>(kTrainMeanSteps));
  m.steps = static_cast<int>(n);
  if (n == 0) return m;
  double sum = 0;
  for (std::size_t i = r.steps.size() - n; i < r.steps.size(); ++i) {
    const double loss = r.steps[i].loss;
    if (std::isfinite(loss))
      sum += loss;
    else
      ++m.nonFinite;
  }
  m.mean = m.nonFinite > 0 ? std::numeric_limits<double>::quiet_NaN() : sum / static_cast<double>(n);
  return m;
}

void CompareView::updateTable() {
  const QLocale locale;
  // The reference: the group's FP32 run.
  const RunData* ref = nullptr;
  for (int id : m_runs)
    if (m_store->run(id).recipe == QLatin1String("fp32")) {
      ref = &m_store->run(id);
      break;
    }
  m_table->setRowCount(static_cast<int>(m_runs.size()));
  bool anyText = false;
  for (int k = 0; k < m_runs.size(); ++k) {
    const RunData& r = m_store->run(m_runs[k]);
    const engine::RunSummary s = r.currentSummary();
    auto* name = cell(r.name, Qt::AlignLeft | Qt::AlignVCenter);
    name->setData(Qt::DecorationRole, r.colour);
    if (r.state == engine::RunState::Failed) name->setToolTip(r.message);
    m_table->setItem(k, Run, name);
    m_table->setItem(k, Recipe, cell(r.recipe, Qt::AlignLeft | Qt::AlignVCenter));

    // Validation: the whole validation set at the run's last evaluation.
    const engine::EvalMetrics* last = lastEval(r);
    QTableWidgetItem* val = cell(last ? number(last->val_loss, 4) : QStringLiteral("—"));
    val->setToolTip(last ? tr("validation loss at step %1 (the run's last evaluation): %2")
                               .arg(last->step)
                               .arg(QString::number(last->val_loss, 'g', 17))
                         : tr("no evaluation yet"));
    m_table->setItem(k, ValLoss, val);
    const bool perToken = last && last->per_token;
    anyText = anyText || perToken;
    QTableWidgetItem* bits = cell(perToken ? tr("%1 (%2)").arg(number(last->val_bits_per_token(), 4),
                                                               number(last->val_perplexity(), 4))
                                           : QStringLiteral("—"));
    if (perToken)
      bits->setToolTip(tr("at step %1: %2 bits per token, perplexity %3")
                           .arg(last->step)
                           .arg(QString::number(last->val_bits_per_token(), 'g', 17))
                           .arg(QString::number(last->val_perplexity(), 'g', 17)));
    m_table->setItem(k, ValBitsPerToken, bits);
    const bool hasAcc = last && last->val_accuracy >= 0;
    QTableWidgetItem* acc = cell(hasAcc ? QString::number(100.0 * last->val_accuracy, 'f', 2) : QStringLiteral("—"));
    if (last && !hasAcc) acc->setToolTip(tr("a regression: no accuracy"));
    if (hasAcc) acc->setToolTip(tr("validation accuracy at step %1").arg(last->step));
    m_table->setItem(k, ValAccuracy, acc);

    const TrainMean tm = trainLossMean(r);
    QTableWidgetItem* train = cell(tm.steps == 0 ? QStringLiteral("—") : number(tm.mean));
    if (tm.steps > 0)
      train->setToolTip(tm.nonFinite > 0
                            ? tr("%1 of the last %2 losses are not finite").arg(tm.nonFinite).arg(tm.steps)
                            : tr("the mean of the last %1 steps' training losses: %2")
                                  .arg(tm.steps)
                                  .arg(QString::number(tm.mean, 'g', 17)));
    m_table->setItem(k, TrainLossMean, train);

    m_table->setItem(k, OverflowSteps, cell(locale.toString(static_cast<qint64>(s.overflow_steps))));
    m_table->setItem(k, SkippedSteps, cell(locale.toString(static_cast<qint64>(s.skipped_steps))));
    const double e = std::log2(s.final_loss_scale);
    // A run without loss scaling has no scale: "—", not 2^0.
    QTableWidgetItem* scale = cell(!r.scalesLoss()       ? QStringLiteral("—")
                                   : e == std::round(e) ? QStringLiteral("2^%1").arg(static_cast<int>(e))
                                                        : QString::number(s.final_loss_scale, 'g', 6));
    if (!r.scalesLoss()) scale->setToolTip(tr("no loss scaling"));
    m_table->setItem(k, FinalScale, scale);
    m_table->setItem(k, PeakMemory, cell(locale.formattedDataSize(s.peak_memory_bytes)));
    m_table->setItem(k, SamplesPerSecond, cell(locale.toString(s.samples_per_second, 'f', 0)));

    // The differences to FP32: at the same evaluation step, never one run's
    // last evaluation against another's earlier one.
    QTableWidgetItem* ratio = cell(QStringLiteral("—"));
    QTableWidgetItem* dAcc = cell(QStringLiteral("—"));
    if (ref == &r) {
      ratio->setText(tr("1x (ref.)"));
      ratio->setToolTip(tr("the FP32 run: the reference the other runs' validation losses are divided by"));
      dAcc->setText(tr("reference"));
    } else if (!ref) {
      ratio->setToolTip(tr("no FP32 run in this comparison"));
      dAcc->setToolTip(ratio->toolTip());
    } else if (const std::int64_t at = commonEvalStep(r, *ref); at >= 0) {
      const engine::EvalMetrics& mine = *evalAt(r, at);
      const engine::EvalMetrics& theirs = *evalAt(*ref, at);
      if (theirs.val_loss > 0) {
        ratio->setText(lossRatio(mine.val_loss / theirs.val_loss));
        ratio->setToolTip(tr("validation loss %1 ÷ FP32's %2, both at step %3")
                              .arg(number(mine.val_loss, 4), number(theirs.val_loss, 4))
                              .arg(at));
      }
      if (mine.val_accuracy >= 0 && theirs.val_accuracy >= 0) {
        const double gap = 100.0 * (mine.val_accuracy - theirs.val_accuracy);
        dAcc->setText(gap == 0 ? QStringLiteral("0") : (gap > 0 ? QStringLiteral("+") : QString()) + QString::number(gap, 'f', 2));
        dAcc->setToolTip(tr("%1% − FP32's %2%, both at step %3")
                             .arg(100.0 * mine.val_accuracy, 0, 'f', 2)
                             .arg(100.0 * theirs.val_accuracy, 0, 'f', 2)
                             .arg(at));
        if (std::fabs(gap) > kAccuracyGapPoints) {
          dAcc->setBackground(chart_style::kFlagFill);
          dAcc->setForeground(chart_style::kFlagText);
          dAcc->setData(Qt::UserRole, true);  // flagged (tests read this)
          dAcc->setToolTip(tr("%1 points from FP32 at step %2: more than %3")
                               .arg(std::fabs(gap), 0, 'f', 2)
                               .arg(at)
                               .arg(kAccuracyGapPoints));
        }
      }
    } else {
      ratio->setToolTip(tr("no evaluation at a step both runs have yet"));
      dAcc->setToolTip(ratio->toolTip());
    }
    m_table->setItem(k, ValLossRatio, ratio);
    m_table->setItem(k, AccuracyDiff, dAcc);
  }
  m_table->setColumnHidden(ValBitsPerToken, !anyText);
  fitTableHeight();
}
