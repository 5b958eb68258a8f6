// HistoryPanel: a QTreeWidget over run_folders::list(), buttons below.
#include "panels/history_panel.h"

#include <QDir>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QMessageBox>
#include <QPushButton>
#include <QTreeWidget>
#include <QVBoxLayout>

#include "charts/chart_style.h"

HistoryPanel::HistoryPanel(QWidget* parent) : QWidget(parent), m_root(run_folders::root()) {
  setObjectName(QStringLiteral("historyPanel"));
  m_tree = new QTreeWidget;
  m_tree->setObjectName(QStringLiteral("historyList"));
  m_tree->setColumnCount(ColumnCount);
  m_tree->setHeaderLabels({tr("name"), tr("recipes"), tr("date"), tr("status"), tr("steps")});
  m_tree->setRootIsDecorated(false);
  m_tree->setUniformRowHeights(true);
  m_tree->setAlternatingRowColors(true);
  m_tree->setSelectionMode(QAbstractItemView::SingleSelection);
  m_tree->header()->setStretchLastSection(false);
  m_tree->header()->setSectionResizeMode(Name, QHeaderView::Stretch);
  const QFontMetrics fm = fontMetrics();
  m_tree->header()->resizeSection(Recipes, fm.horizontalAdvance(QStringLiteral("fp32, fp16, mixed-bf16")) + 14);
  m_tree->header()->resizeSection(Date, fm.horizontalAdvance(QStringLiteral("2024-12-31 23:59")) + 14);
  m_tree->header()->resizeSection(Status, fm.horizontalAdvance(QStringLiteral("interrupted")) + 20);
  m_tree->header()->resizeSection(Steps, fm.horizontalAdvance(QStringLiteral("1,000,000 / 1,000,000")) + 12);
  m_tree->setMinimumSize(280, 72);
  m_tree->header()->setMinimumSectionSize(fm.horizontalAdvance(QStringLiteral("run 10")) + 12);

  m_open = new QPushButton(tr("Open"));
  m_open->setObjectName(QStringLiteral("historyOpen"));
  m_open->setToolTip(tr("Load the run with all its charts (it stays on disk)"));
  m_delete = new QPushButton(tr("Delete…"));
  m_delete->setObjectName(QStringLiteral("historyDelete"));
  m_clear = new QPushButton(tr("Clear all…"));
  m_clear->setObjectName(QStringLiteral("historyClear"));
  m_refresh = new QPushButton(tr("Refresh"));
  m_refresh->setObjectName(QStringLiteral("historyRefresh"));
  m_size = new QLabel;
  m_size->setObjectName(QStringLiteral("historySize"));
  m_size->setTextInteractionFlags(Qt::TextSelectableByMouse);
  // Cut rather than widen the window (the folder's path is in its tooltip).
  m_size->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);

  auto* buttons = new QHBoxLayout;
  buttons->setContentsMargins(0, 0, 0, 0);
  buttons->addWidget(m_open);
  buttons->addWidget(m_delete);
  buttons->addWidget(m_clear);
  buttons->addWidget(m_refresh);
  buttons->addStretch(1);
  buttons->addWidget(m_size);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(4);
  layout->addWidget(m_tree, 1);
  layout->addLayout(buttons);

  connect(m_open, &QPushButton::clicked, this, [this] { openRow(currentRow()); });
  connect(m_delete, &QPushButton::clicked, this, [this] { deleteRow(currentRow()); });
  connect(m_clear, &QPushButton::clicked, this, [this] { clearAll(); });
  connect(m_refresh, &QPushButton::clicked, this, &HistoryPanel::refresh);
  connect(m_tree, &QTreeWidget::itemDoubleClicked, this,
          [this](QTreeWidgetItem* item) { openRow(m_tree->indexOfTopLevelItem(item)); });
  connect(m_tree, &QTreeWidget::currentItemChanged, this, &HistoryPanel::updateButtons);
  updateButtons();
}

void HistoryPanel::setRoot(const QString& dir) {
  m_root = dir;
  refresh();
}

void HistoryPanel::refresh() {
  const QString current = currentRow() >= 0 ? m_runs[currentRow()].dir : QString();
  m_runs = run_folders::list(m_root);
  m_bytes = run_folders::totalSize(m_root);
  m_tree->clear();
  const QLocale locale;
  int interrupted = 0;
  QList<QTreeWidgetItem*> items;
  for (const PastRun& p : m_runs) {
    auto* item = new QTreeWidgetItem;
    item->setText(Name, p.label);
    item->setText(Recipes, p.recipes.join(QStringLiteral(", ")));
    item->setText(Date, p.date.toString(QStringLiteral("yyyy-MM-dd HH:mm")));
    item->setText(Status, p.status);
    // status.json's count: for an interrupted run up to a second behind
    // what its CSV files hold ("+": opening it shows them all).
    const QString steps = locale.toString(p.steps) + (p.interrupted ? QStringLiteral("+") : QString());
    item->setText(Steps, p.totalSteps > 0 ? QStringLiteral("%1 / %2").arg(steps, locale.toString(p.totalSteps)) : steps);
    item->setTextAlignment(Steps, Qt::AlignRight | Qt::AlignVCenter);
    QString tip = QDir::toNativeSeparators(p.dir);
    if (p.names.size() > 1) tip += QLatin1Char('\n') + tr("runs: %1").arg(p.names.join(QStringLiteral(", ")));
    if (!p.error.isEmpty()) {
      // Unreadable: its one line, and it cannot be opened.
      item->setText(Name, QStringLiteral("%1 — %2").arg(p.folder, p.error));
      item->setForeground(Name, chart_style::kAlarmLine);
      item->setForeground(Status, chart_style::kAlarmLine);
      tip += QLatin1Char('\n') + p.error;
    } else if (p.interrupted) {
      ++interrupted;
      QFont bold = item->font(Status);
      bold.setBold(true);
      item->setFont(Status, bold);
      item->setForeground(Status, chart_style::kCautionLine);
      tip += QLatin1Char('\n') + tr("Interrupted: the app ended without stopping it (a crash, a kill, a closed lid). "
                                    "Its data up to the last second is kept.");
    } else if (p.status == QLatin1String("failed")) {
      item->setForeground(Status, chart_style::kAlarmLine);
      if (!p.message.isEmpty()) tip += QLatin1Char('\n') + p.message;
    } else if (p.beingWritten) {
      tip += QLatin1Char('\n') + tr("Still being written (a run in progress).");
    }
    for (int c = 0; c < ColumnCount; ++c) item->setToolTip(c, tip);
    items << item;
  }
  m_tree->addTopLevelItems(items);
  const int keep = rowOf(current);
  if (keep >= 0) m_tree->setCurrentItem(m_tree->topLevelItem(keep));
  m_size->setText(sizeText());
  m_size->setToolTip(sizeText() + QLatin1Char('\n') + QDir::toNativeSeparators(m_root));
  updateButtons();
  emit listed(static_cast<int>(m_runs.size()), interrupted);
}

QSize HistoryPanel::sizeHint() const {
  // Every column whole, the name column as wide as a comparison's label.
  int w = fontMetrics().horizontalAdvance(QStringLiteral("compare-fp32-fp16 (3 runs)")) + 24;
  for (int c = Recipes; c < ColumnCount; ++c) w += m_tree->header()->sectionSize(c);
  return QSize(w + 24, QWidget::sizeHint().height());
}

QString HistoryPanel::sizeText() const {
  return tr("%n run folder(s), %1 on disk", "", static_cast<int>(m_runs.size()))
      .arg(QLocale().formattedDataSize(m_bytes));
}

int HistoryPanel::rowOf(const QString& dir) const {
  if (dir.isEmpty()) return -1;
  const QString want = QFileInfo(dir).absoluteFilePath();
  for (int i = 0; i < m_runs.size(); ++i)
    if (m_runs[i].dir == want) return i;
  return -1;
}

int HistoryPanel::currentRow() const {
  QTreeWidgetItem* item = m_tree->currentItem();
  return item ? m_tree->indexOfTopLevelItem(item) : -1;
}

void HistoryPanel::updateButtons() {
  const int row = currentRow();
  const bool readable = row >= 0 && row < m_runs.size() && m_runs[row].error.isEmpty();
  m_open->setEnabled(readable);
  m_delete->setEnabled(row >= 0 && row < m_runs.size() && !m_runs[row].beingWritten);
  m_clear->setEnabled(!m_runs.isEmpty());
}

void HistoryPanel::openRow(int row) {
  if (row < 0 || row >= m_runs.size()) return;
  const PastRun& p = m_runs[row];
  if (!p.error.isEmpty()) {
    m_lastError = p.error;
    emit message(p.error, true);
    return;
  }
  emit openRequested(p.dir);
}

bool HistoryPanel::ask(const QString& title, const QString& text) {
  if (m_confirm) return m_confirm(title, text);
  return QMessageBox::question(this, title, text, QMessageBox::Yes | QMessageBox::Cancel, QMessageBox::Cancel) ==
         QMessageBox::Yes;
}

bool HistoryPanel::deleteRow(int row) {
  if (row < 0 || row >= m_runs.size()) return false;
  const PastRun p = m_runs[row];
  if (!ask(tr("Delete the run?"),
           tr("Delete %1 (%2, %3) from disk?\n%4\nThis cannot be undone.")
               .arg(p.label, p.date.toString(QStringLiteral("yyyy-MM-dd HH:mm:ss")), p.status,
                    QDir::toNativeSeparators(p.dir))))
    return false;
  QString error;
  const bool ok = run_folders::remove(p, &error);
  if (!ok) {
    m_lastError = error;
    emit message(error, true);
  } else {
    emit message(tr("Deleted %1").arg(QDir::toNativeSeparators(p.dir)), false);
  }
  refresh();
  return ok;
}

bool HistoryPanel::clearAll() {
  if (m_runs.isEmpty()) return false;
  int writing = 0;
  for (const PastRun& p : m_runs) writing += p.beingWritten ? 1 : 0;
  QString text = tr("Delete all %n past run(s) (%1) from disk?", "", static_cast<int>(m_runs.size() - writing))
                     .arg(QLocale().formattedDataSize(m_bytes));
  if (writing > 0) text += QLatin1Char('\n') + tr("%n run(s) still being written are kept.", "", writing);
  text += QLatin1Char('\n') + tr("This cannot be undone.");
  if (!ask(tr("Clear all past runs?"), text)) return false;
  QStringList failed;
  for (const PastRun& p : m_runs) {
    if (p.beingWritten) continue;
    QString error;
    if (!run_folders::remove(p, &error)) failed << error;
  }
  refresh();
  if (!failed.isEmpty()) {
    m_lastError = failed.front();
    emit message(failed.front(), true);
    return false;
  }
  emit message(tr("Cleared the past runs"), false);
  return true;
}
