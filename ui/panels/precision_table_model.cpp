// PrecisionTableModel: the per-layer precision table's data and editing.
#include "panels/precision_table_model.h"

#include <QFont>
#include <QLocale>
#include <QStringList>

#include "amp/recipe.h"
#include "numeric/format.h"

namespace {

engine::Format& formatOf(PrecisionTableRow& row, int column) {
  switch (column) {
    case PrecisionTableModel::Compute: return row.precision.compute;
    case PrecisionTableModel::Storage: return row.precision.storage;
    default: return row.precision.accumulate;
  }
}

engine::Format formatAt(const engine::LayerPrecision& p, int column) {
  switch (column) {
    case PrecisionTableModel::Compute: return p.compute;
    case PrecisionTableModel::Storage: return p.storage;
    default: return p.accumulate;
  }
}

engine::Format formatAt(const PrecisionTableRow& row, int column) { return formatAt(row.precision, column); }

bool isFormatColumn(int column) {
  return column == PrecisionTableModel::Compute || column == PrecisionTableModel::Storage ||
         column == PrecisionTableModel::Accumulate;
}

}  // namespace

PrecisionTableModel::PrecisionTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void PrecisionTableModel::setRows(const QVector<PrecisionTableRow>& rows) {
  beginResetModel();
  m_rows = rows;
  endResetModel();
}

int PrecisionTableModel::rowOf(const QString& layer) const {
  for (int i = 0; i < m_rows.size(); ++i)
    if (m_rows[i].layer == layer) return i;
  return -1;
}

void PrecisionTableModel::setLayerPrecision(int row, const engine::LayerPrecision& precision) {
  if (row < 0 || row >= m_rows.size() || m_rows[row].precision == precision) return;
  m_rows[row].precision = precision;
  emit dataChanged(index(row, 0), index(row, ColumnCount - 1));
}

QVector<engine::Format> PrecisionTableModel::choices(int column) {
  using engine::Format;
  switch (column) {
    case Compute: return {Format::FP32, Format::TF32, Format::BF16, Format::FP16, Format::E4M3, Format::E5M2};
    case Storage: return {Format::FP32, Format::BF16, Format::FP16, Format::E4M3, Format::E5M2};
    case Accumulate: return {Format::FP32, Format::BF16, Format::FP16};
    default: return {};
  }
}

QVector<engine::Format> PrecisionTableModel::choices(int column, const QString& kind) {
  QVector<engine::Format> c = choices(column);
  if (column == Compute && !kind.isEmpty() && engine::takes_block_formats(kind.toStdString()))
    for (engine::Format f : engine::kBlockFormats) c << f;
  return c;
}

QVector<engine::Format> PrecisionTableModel::choicesAt(const QModelIndex& index) const {
  if (!index.isValid() || index.row() >= m_rows.size()) return {};
  return choices(index.column(), m_rows[index.row()].kind);
}

engine::Format PrecisionTableModel::gradFor(engine::Format compute, engine::Format previousGrad) {
  using engine::Format;
  if (engine::is_block_format(compute)) return compute;
  if (!engine::is_block_format(previousGrad)) return previousGrad;
  switch (compute) {
    case Format::E4M3: return Format::E5M2;  // FP8 recipes: E4M3 forward, E5M2 gradients
    case Format::TF32: return Format::FP32;  // TF32 is a GEMM input format only
    default: return compute;
  }
}

int PrecisionTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

int PrecisionTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant PrecisionTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= m_rows.size()) return {};
  const PrecisionTableRow& row = m_rows[index.row()];
  const int column = index.column();
  if (role == Qt::DisplayRole || role == Qt::EditRole) {
    switch (column) {
      case Layer: return row.layer;
      case Shape: return row.shape;
      case Compute:
      case Storage:
      case Accumulate: return QString::fromLatin1(engine::format_name(formatAt(row, column)));
      case Parameters: return role == Qt::EditRole ? QVariant(row.parameters)
                                                   : QVariant(QLocale().toString(row.parameters));
      case Memory: return role == Qt::EditRole ? QVariant(row.memoryBytes)
                                               : QVariant(QLocale().formattedDataSize(row.memoryBytes));
      default: return {};
    }
  }
  if (role == Qt::FontRole && isFormatColumn(column) &&
      formatAt(row, column) != formatAt(row.recipePrecision, column)) {
    QFont bold;
    bold.setBold(true);
    return bold;
  }
  // The name whole (the column is narrow at 1280x720 and elides it).
  if (role == Qt::ToolTipRole && column == Layer)
    return row.kind.isEmpty() ? row.layer : tr("%1 (%2)").arg(row.layer, row.kind);
  if (role == Qt::ToolTipRole && isFormatColumn(column)) {
    QStringList tip;
    if (row.precision != row.recipePrecision)
      tip << tr("Edited: the recipe gives %1 here")
                 .arg(QString::fromLatin1(engine::format_name(formatAt(row.recipePrecision, column))));
    // The grad format has no column: the compute cell says it.
    if (column == Compute && row.precision.grad != row.precision.compute)
      tip << tr("Gradients in %1").arg(QString::fromLatin1(engine::format_name(row.precision.grad)));
    if (column == Compute && engine::is_block_format(row.precision.compute))
      tip << tr("Block-scaled: see Lecture ▸ Block formats");
    if (!tip.isEmpty()) return tip.join(QLatin1Char('\n'));
  }
  if (role == Qt::TextAlignmentRole && (column == Parameters || column == Memory))
    return static_cast<int>(Qt::AlignRight | Qt::AlignVCenter);
  return {};
}

QVariant PrecisionTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal) return QAbstractTableModel::headerData(section, orientation, role);
  if (role == Qt::DisplayRole) {
    switch (section) {
      case Layer: return tr("layer");
      case Shape: return tr("shape");
      case Compute: return tr("compute");
      case Storage: return tr("storage");
      case Accumulate: return tr("accumulate");
      case Parameters: return tr("parameters");
      case Memory: return tr("memory");
      default: return {};
    }
  }
  if (role == Qt::ToolTipRole) {
    switch (section) {
      case Compute: return tr("Format inputs and weights are rounded to before the layer's op");
      case Storage: return tr("Format the layer's outputs and saved activations are stored in");
      case Accumulate: return tr("Accumulation format of GEMMs and reductions");
      case Memory: return tr("Bytes of weights and saved activations in their real storage width");
      default: return {};
    }
  }
  return {};
}

Qt::ItemFlags PrecisionTableModel::flags(const QModelIndex& index) const {
  Qt::ItemFlags f = QAbstractTableModel::flags(index);
  if (index.isValid() && isFormatColumn(index.column())) f |= Qt::ItemIsEditable;
  return f;
}

bool PrecisionTableModel::setData(const QModelIndex& index, const QVariant& value, int role) {
  if (role != Qt::EditRole || !index.isValid() || index.row() >= m_rows.size() ||
      !isFormatColumn(index.column()))
    return false;
  const std::optional<engine::Format> parsed = engine::parse_format(value.toString().toStdString());
  if (!parsed || !choicesAt(index).contains(*parsed)) return false;
  PrecisionTableRow& row = m_rows[index.row()];
  engine::Format& target = formatOf(row, index.column());
  if (target == *parsed) return true;
  target = *parsed;
  if (index.column() == Compute) row.precision.grad = gradFor(row.precision.compute, row.precision.grad);
  emit dataChanged(index, index, {Qt::DisplayRole, Qt::EditRole, Qt::ToolTipRole});
  emit precisionEdited(index.row(), m_rows[index.row()].precision);
  return true;
}
