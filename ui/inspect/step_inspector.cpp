// StepInspector: two tables over RunData::inspection.
#include "inspect/step_inspector.h"

#include <QHeaderView>
#include <QLabel>
#include <QTableWidget>
#include <QVBoxLayout>

#include <cmath>

#include "charts/chart_style.h"
#include "charts/number_text.h"
#include "session/run_store.h"

namespace {

// Loss scales are powers of two under GradScaler: 2^16, else the number.
QString scaleText(double s) {
  if (s > 0 && std::isfinite(s)) {
    const double e = std::log2(s);
    if (e == std::round(e)) return QStringLiteral("2^%1").arg(static_cast<int>(e));
  }
  return number_text::significant(s, 4);
}

QTableWidgetItem* cell(const QString& text, bool number = true, bool flagged = false) {
  auto* item = new QTableWidgetItem(text);
  item->setFlags(Qt::ItemIsEnabled | Qt::ItemIsSelectable);
  if (number) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  if (flagged) {
    item->setBackground(chart_style::kFlagFill);
    item->setForeground(chart_style::kFlagText);
  }
  return item;
}

QTableWidget* table(const QString& objectName, const QStringList& headers) {
  auto* t = new QTableWidget(0, static_cast<int>(headers.size()));
  t->setObjectName(objectName);
  t->setHorizontalHeaderLabels(headers);
  t->verticalHeader()->setVisible(false);
  t->setEditTriggers(QAbstractItemView::NoEditTriggers);
  t->setSelectionBehavior(QAbstractItemView::SelectRows);
  t->setSelectionMode(QAbstractItemView::SingleSelection);
  t->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  t->horizontalHeader()->setStretchLastSection(true);
  t->setWordWrap(false);
  return t;
}

}  // namespace

StepInspector::StepInspector(RunStore* store, QWidget* parent) : QWidget(parent), m_store(store) {
  setObjectName(QStringLiteral("stepInspector"));
  m_heading = new QLabel(tr("Press Step (F10): every run takes exactly one step, and this panel shows what it did."));
  m_heading->setWordWrap(true);
  m_runsTable = table(QStringLiteral("inspectorRuns"),
                      {tr("run"), tr("step"), tr("loss (unscaled)"), tr("scale before"), tr("scale after"),
                       tr("step")});
  m_runsTable->horizontalHeaderItem(RunSkipped)->setText(tr("update"));
  m_layerHeading = new QLabel;
  m_layerHeading->setWordWrap(true);
  m_layerTable = table(QStringLiteral("inspectorLayers"),
                       {tr("layer"), tr("grad format"), tr("non-finite\nactivation"),
                        tr("non-finite\nactivation grad"), tr("non-finite\nweight grad"), tr("weight grads\nunderflowed"),
                        tr("max |grad|")});
  m_layerTable->horizontalHeaderItem(Underflow)->setToolTip(
      tr("The fraction of the layer's weight gradients that were nonzero but became zero in its gradient format"));
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(m_heading);
  layout->addWidget(m_runsTable, 2);
  layout->addWidget(m_layerHeading);
  layout->addWidget(m_layerTable, 5);
  connect(m_store, &RunStore::inspected, this, [this](int id) {
    if (!m_runs.contains(id)) return;
    if (m_selected < 0) m_selected = id;
    refresh();
  });
  connect(m_runsTable, &QTableWidget::currentCellChanged, this, [this](int row) {
    if (row >= 0 && row < m_runs.size() && m_runs[row] != m_selected) {
      m_selected = m_runs[row];
      showLayers();
    }
  });
}

void StepInspector::setRuns(const QVector<int>& storeIds) {
  m_runs = storeIds;
  if (!m_runs.contains(m_selected)) m_selected = m_runs.isEmpty() ? -1 : m_runs.front();
  refresh();
}

void StepInspector::selectRun(int storeId) {
  m_selected = storeId;
  refresh();
}

void StepInspector::refresh() {
  const QSignalBlocker block(m_runsTable);
  m_runsTable->setRowCount(static_cast<int>(m_runs.size()));
  bool any = false;
  for (int row = 0; row < m_runs.size(); ++row) {
    const RunData& r = m_store->run(m_runs[row]);
    auto* name = cell(r.name, false);
    name->setForeground(r.colour);
    m_runsTable->setItem(row, RunName, name);
    if (!r.inspection) {
      for (int c = RunStep; c < RunColumnCount; ++c) m_runsTable->setItem(row, c, cell(QStringLiteral("—")));
      continue;
    }
    any = true;
    const engine::StepInspection& in = *r.inspection;
    m_runsTable->setItem(row, RunStep, cell(QString::number(in.step)));
    m_runsTable->setItem(row, RunLoss, cell(number_text::significant(in.loss, 5), true, !std::isfinite(in.loss)));
    m_runsTable->setItem(row, RunScaleBefore, cell(scaleText(in.scale_before)));
    m_runsTable->setItem(row, RunScaleAfter, cell(scaleText(in.scale_after), true, in.scale_after < in.scale_before));
    const QString update = in.skipped ? (in.overflow ? tr("skipped (overflow)") : tr("skipped"))
                                      : (in.overflow ? tr("applied (overflow)") : tr("applied"));
    m_runsTable->setItem(row, RunSkipped, cell(update, false, in.skipped || in.overflow));
    if (m_runs[row] == m_selected) m_runsTable->setCurrentCell(row, RunName);
  }
  if (any)
    m_heading->setText(tr("What the last Step did in each run (select a run for its layers):"));
  showLayers();
}

void StepInspector::showLayers() {
  const RunData* r = m_selected >= 0 && m_selected < m_store->count() ? &m_store->run(m_selected) : nullptr;
  if (!r || !r->inspection) {
    m_layerHeading->setText(QString());
    m_layerTable->setRowCount(0);
    return;
  }
  const engine::StepInspection& in = *r->inspection;
  m_layerHeading->setText(tr("%1, step %2, layer by layer (counts of inf/NaN; gradients unscaled):")
                              .arg(r->name)
                              .arg(in.step));
  m_layerTable->setRowCount(static_cast<int>(in.layers.size()));
  for (int row = 0; row < static_cast<int>(in.layers.size()); ++row) {
    const engine::LayerInspection& l = in.layers[static_cast<std::size_t>(row)];
    m_layerTable->setItem(row, LayerName, cell(QString::fromStdString(l.layer), false));
    m_layerTable->setItem(row, LayerFormat, cell(QString::fromStdString(l.grad_format), false));
    auto count = [](std::int64_t n) { return cell(QString::number(n), true, n > 0); };
    m_layerTable->setItem(row, NonfiniteActivation, count(l.nonfinite_activation));
    m_layerTable->setItem(row, NonfiniteActivationGrad, count(l.nonfinite_activation_grad));
    if (l.has_weights) {
      m_layerTable->setItem(row, NonfiniteWeightGrad, count(l.nonfinite_weight_grad));
      m_layerTable->setItem(row, Underflow, cell(number_text::percent(l.underflow), true, l.underflow > 0));
      m_layerTable->setItem(row, MaxAbsGrad, cell(number_text::significant(l.max_abs_grad, 3)));
    } else {
      for (int c : {NonfiniteWeightGrad, Underflow, MaxAbsGrad})
        m_layerTable->setItem(row, c, cell(tr("no weights"), false));
    }
  }
}
