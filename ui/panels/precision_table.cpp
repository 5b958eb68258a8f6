// PrecisionTable: view, column sizing and the format-choice editor.
#include "panels/precision_table.h"

#include <QComboBox>
#include <QHeaderView>
#include <QStyledItemDelegate>

#include "numeric/format.h"
#include "panels/precision_table_model.h"

namespace {

// Edits a format cell with a combo of the formats that column allows, so
// a user cannot type a format the layer cannot use.
class FormatDelegate : public QStyledItemDelegate {
 public:
  using QStyledItemDelegate::QStyledItemDelegate;

  QWidget* createEditor(QWidget* parent, const QStyleOptionViewItem&, const QModelIndex& index) const override {
    auto* combo = new QComboBox(parent);
    // The row's own choices: block formats only for GEMM layers' compute.
    const auto* model = qobject_cast<const PrecisionTableModel*>(index.model());
    for (engine::Format f : model ? model->choicesAt(index) : PrecisionTableModel::choices(index.column()))
      combo->addItem(QString::fromLatin1(engine::format_name(f)));
    // Commit on pick, not only on focus loss.
    connect(combo, &QComboBox::activated, this, [this, combo] {
      auto* self = const_cast<FormatDelegate*>(this);
      emit self->commitData(combo);
      emit self->closeEditor(combo);
    });
    return combo;
  }

  void setEditorData(QWidget* editor, const QModelIndex& index) const override {
    static_cast<QComboBox*>(editor)->setCurrentText(index.data(Qt::EditRole).toString());
  }

  void setModelData(QWidget* editor, QAbstractItemModel* model, const QModelIndex& index) const override {
    model->setData(index, static_cast<QComboBox*>(editor)->currentText(), Qt::EditRole);
  }
};

}  // namespace

PrecisionTable::PrecisionTable(QWidget* parent) : QTableView(parent) {
  setObjectName(QStringLiteral("precisionTable"));
  m_model = new PrecisionTableModel(this);
  setModel(m_model);
  auto* delegate = new FormatDelegate(this);
  for (int c : {PrecisionTableModel::Compute, PrecisionTableModel::Storage, PrecisionTableModel::Accumulate})
    setItemDelegateForColumn(c, delegate);

  setSelectionBehavior(QAbstractItemView::SelectRows);
  setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::SelectedClicked |
                  QAbstractItemView::EditKeyPressed);
  setAlternatingRowColors(true);
  setWordWrap(false);
  // Leaf names differ at their end ("…0.attn.qkv", "…1.attn.qkv"), not at
  // their start; the other columns are sized to what they hold.
  setTextElideMode(Qt::ElideLeft);
  verticalHeader()->hide();
  QHeaderView* header = horizontalHeader();
  header->setSectionResizeMode(QHeaderView::Interactive);
  header->setSectionResizeMode(PrecisionTableModel::Layer, QHeaderView::Stretch);
  header->setMinimumSectionSize(60);
  const QFontMetrics fm = fontMetrics();
  // Wide enough for the longest format name and the header text.
  const int formatWidth = fm.horizontalAdvance(QStringLiteral("MXFP8-E5M2")) + 36;
  header->resizeSection(PrecisionTableModel::Shape, fm.horizontalAdvance(QStringLiteral("3 x 256 x 256")) + 16);
  for (int c : {PrecisionTableModel::Compute, PrecisionTableModel::Storage, PrecisionTableModel::Accumulate})
    header->resizeSection(c, formatWidth);
  header->resizeSection(PrecisionTableModel::Parameters, fm.horizontalAdvance(QStringLiteral("parameters")) + 24);
  header->resizeSection(PrecisionTableModel::Memory, fm.horizontalAdvance(QStringLiteral("1,023.9 MiB")) + 16);
  setMinimumSize(360, 96);  // three rows and the header: 1280x720 keeps its charts
}
