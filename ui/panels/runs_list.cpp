// RunsList: a flat QTreeView over a QStandardItemModel; the colour column
// shows a swatch, the colour the run's series have on every chart.
#include "panels/runs_list.h"

#include <QHeaderView>
#include <QPainter>
#include <QPixmap>
#include <QStandardItemModel>

#include "charts/chart_style.h"

namespace {

QIcon swatch(const QColor& colour) {
  QPixmap pixmap(14, 14);
  pixmap.fill(Qt::transparent);
  QPainter p(&pixmap);
  p.setPen(QPen(colour.darker(140), 1));
  p.setBrush(colour);
  p.drawRect(1, 1, 12, 12);
  return QIcon(pixmap);
}

}  // namespace

RunsList::RunsList(QWidget* parent) : QTreeView(parent) {
  setObjectName(QStringLiteral("runsList"));
  m_model = new QStandardItemModel(0, ColumnCount, this);
  m_model->setHorizontalHeaderLabels({tr("name"), tr("recipe"), tr("colour"), tr("status")});
  setModel(m_model);
  setRootIsDecorated(false);
  setUniformRowHeights(true);
  setAlternatingRowColors(true);
  setSelectionMode(QAbstractItemView::ExtendedSelection);  // several runs for Compare
  setEditTriggers(QAbstractItemView::NoEditTriggers);
  header()->setSectionResizeMode(Name, QHeaderView::Stretch);
  header()->setStretchLastSection(false);
  const QFontMetrics fm = fontMetrics();
  header()->resizeSection(Recipe, fm.horizontalAdvance(QStringLiteral("mixed-bf16")) + 14);
  header()->resizeSection(Colour, fm.horizontalAdvance(QStringLiteral("colour")) + 10);
  // Both stretch: names of reopened runs carry their date, and a failed
  // run's status carries its reason.
  header()->setSectionResizeMode(Status, QHeaderView::Stretch);
  header()->resizeSection(Status, fm.horizontalAdvance(QStringLiteral("running 100%")) + 12);
  setMinimumSize(280, 96);
  connect(m_model, &QStandardItemModel::itemChanged, this, [this](QStandardItem* item) {
    if (item->column() == Name) emit runCheckedChanged(item->row(), item->checkState() == Qt::Checked);
  });
  connect(selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) { emit currentRunChanged(current.isValid() ? current.row() : -1); });
}

int RunsList::addRun(const QString& name, const QString& recipe, const QColor& colour, const QString& status) {
  // The swatch is the cell; the colour's name is its tooltip and data.
  auto* colourItem = new QStandardItem(swatch(colour), QString());
  colourItem->setData(colour, Qt::UserRole);
  colourItem->setData(colour.name(), Qt::AccessibleTextRole);
  colourItem->setToolTip(colour.name());
  auto* nameItem = new QStandardItem(name);
  nameItem->setCheckable(true);
  nameItem->setCheckState(Qt::Checked);
  nameItem->setToolTip(tr("Ticked runs are drawn on every chart"));
  // Items set up before they join the model emit no itemChanged.
  m_model->appendRow({nameItem, new QStandardItem(recipe), colourItem, new QStandardItem(status)});
  setCurrentIndex(m_model->index(m_model->rowCount() - 1, 0));
  return m_model->rowCount() - 1;
}

void RunsList::setRunStatus(int row, const QString& status, const QString& detail, bool failed) {
  QStandardItem* item = m_model->item(row, Status);
  if (!item) return;
  if (item->text() != status) item->setText(status);
  if (item->toolTip() != detail) item->setToolTip(detail);
  const QBrush fg = failed ? QBrush(QColor(0xB0, 0x10, 0x10)) : QBrush();
  if (item->foreground() != fg) item->setForeground(fg);
  if (QStandardItem* name = m_model->item(row, Name); name && failed && name->toolTip() != detail)
    name->setToolTip(detail);
}

QString RunsList::runStatus(int row) const {
  const QStandardItem* item = m_model->item(row, Status);
  return item ? item->text() : QString();
}

void RunsList::setRunChecked(int row, bool checked) {
  if (QStandardItem* item = m_model->item(row, Name)) item->setCheckState(checked ? Qt::Checked : Qt::Unchecked);
}

bool RunsList::isRunChecked(int row) const {
  const QStandardItem* item = m_model->item(row, Name);
  return item && item->checkState() == Qt::Checked;
}

int RunsList::currentRun() const {
  const QModelIndex i = currentIndex();
  return i.isValid() ? i.row() : -1;
}

int RunsList::runCount() const { return m_model->rowCount(); }

QColor RunsList::nextColour() const { return paletteColour(m_model->rowCount()); }

// Distinguishable on white and for the common colour-vision deficiencies
// (Okabe-Ito): chart_style.
QColor RunsList::paletteColour(int index) { return chart_style::runColour(index); }
