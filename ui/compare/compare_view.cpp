// CompareView: small multiples on one y scale, and the summary table.
#include "compare/compare_view.h"

#include <QChart>
#include <QGraphicsLayout>
#include <QGridLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineSeries>
#include <QLocale>
#include <QTableWidget>
#include <QTimer>
#include <QValueAxis>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "charts/chart_area.h"
#include "charts/chart_export.h"
#include "charts/chart_style.h"
#include "charts/number_text.h"
#include "charts/decimate.h"
#include "charts/live_chart_view.h"
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

  m_table = new QTableWidget(0, ColumnCount, this);
  m_table->setObjectName(QStringLiteral("compareSummary"));
  m_table->setHorizontalHeaderLabels({tr("run"), tr("recipe"), tr("final loss"), tr("accuracy (%)"),
                                      tr("overflow steps"), tr("skipped steps"), tr("final scale"),
                                      tr("peak memory"), tr("samples/s"), tr("Δ loss vs FP32"),
                                      tr("loss ÷ FP32"), tr("Δ accuracy vs FP32 (points)")});
  m_table->horizontalHeaderItem(LossRatio)
      ->setToolTip(tr("The final loss as a multiple of the FP32 run's: 140x is 140 times FP32's loss"));
  m_table->horizontalHeaderItem(AccuracyDiff)
      ->setToolTip(tr("Red where the accuracy differs from the FP32 run by more than %1 points")
                       .arg(kAccuracyGapPoints));
  m_table->verticalHeader()->hide();
  m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setWordWrap(false);
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_table->horizontalHeader()->setSectionResizeMode(Run, QHeaderView::Stretch);

  // The charts take the room; the table is as tall as its rows.
  m_table->setSizeAdjustPolicy(QAbstractScrollArea::AdjustToContents);
  m_table->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  m_table->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(m_header);
  layout->addWidget(m_grid, 1);
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
    m_gridLayout->addWidget(view, k / columns, k % columns);
    m_charts << view;
    m_loss << loss;
    m_val << val;
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
  updateTable();
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
  const engine::RunSummary refSummary = ref ? ref->currentSummary() : engine::RunSummary{};
  m_table->setRowCount(static_cast<int>(m_runs.size()));
  for (int k = 0; k < m_runs.size(); ++k) {
    const RunData& r = m_store->run(m_runs[k]);
    const engine::RunSummary s = r.currentSummary();
    const bool hasAcc = s.val_accuracy >= 0;
    auto* name = cell(r.name, Qt::AlignLeft | Qt::AlignVCenter);
    name->setData(Qt::DecorationRole, r.colour);
    if (r.state == engine::RunState::Failed) name->setToolTip(r.message);
    m_table->setItem(k, Run, name);
    m_table->setItem(k, Recipe, cell(r.recipe, Qt::AlignLeft | Qt::AlignVCenter));
    QTableWidgetItem* finalLoss = cell(s.steps > 0 ? number(s.final_loss) : QStringLiteral("—"));
    if (s.steps > 0) finalLoss->setToolTip(QString::number(s.final_loss, 'g', 17));
    m_table->setItem(k, FinalLoss, finalLoss);
    m_table->setItem(k, Accuracy, cell(hasAcc ? QString::number(100.0 * s.val_accuracy, 'f', 2) : QStringLiteral("—")));
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

    QTableWidgetItem* dLoss = cell(QStringLiteral("—"));
    QTableWidgetItem* ratio = cell(QStringLiteral("—"));
    QTableWidgetItem* dAcc = cell(QStringLiteral("—"));
    if (ref && ref != &r && s.steps > 0 && refSummary.steps > 0) {
      dLoss->setText(number_text::signedSignificant(s.final_loss - refSummary.final_loss, 3));
      if (refSummary.final_loss > 0 && std::isfinite(refSummary.final_loss))
        ratio->setText(number_text::ratio(s.final_loss / refSummary.final_loss));
      if (hasAcc && refSummary.val_accuracy >= 0) {
        const double gap = 100.0 * (s.val_accuracy - refSummary.val_accuracy);
        dAcc->setText(gap == 0 ? QStringLiteral("0") : (gap > 0 ? QStringLiteral("+") : QString()) + QString::number(gap, 'f', 2));
        if (std::fabs(gap) > kAccuracyGapPoints) {
          dAcc->setBackground(chart_style::kFlagFill);
          dAcc->setForeground(chart_style::kFlagText);
          dAcc->setData(Qt::UserRole, true);  // flagged (tests read this)
          dAcc->setToolTip(tr("%1 points from FP32: more than %2").arg(std::fabs(gap), 0, 'f', 2).arg(kAccuracyGapPoints));
        }
      }
    } else if (ref == &r) {
      dLoss->setText(tr("reference"));
      ratio->setText(tr("1x (reference)"));
      dAcc->setText(tr("reference"));
    }
    m_table->setItem(k, LossDiff, dLoss);
    m_table->setItem(k, LossRatio, ratio);
    m_table->setItem(k, AccuracyDiff, dAcc);
  }
}
