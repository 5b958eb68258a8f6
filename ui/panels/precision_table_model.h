// PrecisionTableModel: one row per layer — name, shape, its LayerPrecision
// (compute / storage / accumulate, editable), parameters and memory.
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <QVector>

#include "numeric/precision.h"

struct PrecisionTableRow {
  QString layer;                     // "fc1", "conv2", "block0.attn.qkv"
  QString kind;                      // the leaf's kind: "linear", "patch_embed", "layernorm", ... ("" if unknown)
  QString shape;                     // weight shape ("256 x 784"), or "→ 256" (output per sample)
  engine::LayerPrecision precision;
  engine::LayerPrecision recipePrecision;  // what the recipe gives; edited rows differ (shown bold)
  qint64 parameters = 0;
  qint64 memoryBytes = 0;            // weights (+ master) + saved activations in their real storage width
};

// GUI thread only.
class PrecisionTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Layer = 0, Shape, Compute, Storage, Accumulate, Parameters, Memory, ColumnCount };

  explicit PrecisionTableModel(QObject* parent = nullptr);

  void setRows(const QVector<PrecisionTableRow>& rows);
  const QVector<PrecisionTableRow>& rows() const { return m_rows; }
  // The row of `layer`, or -1.
  int rowOf(const QString& layer) const;
  // Sets one layer's precision without emitting precisionEdited (a change
  // that came from the engine or a recipe).
  void setLayerPrecision(int row, const engine::LayerPrecision& precision);

  // The formats a format column may take: compute any tensor format;
  // storage any stored format (TF32 is compute-only); accumulate FP32 or a
  // 16-bit format (rounding after every addition, for demonstrations).
  // Never an element format (FP6, FP4, E8M0): they are no layer format.
  static QVector<engine::Format> choices(int column);
  // The same for a layer of `kind`: a layer with a block-scaled GEMM path
  // (engine::takes_block_formats: linear, patch_embed, conv2d) also
  // computes in the block formats (MXFP8, MXFP8-E5M2, MXFP6, MXFP6-E3M2,
  // MXFP4, NVFP4); storage and accumulate never take one.
  static QVector<engine::Format> choices(int column, const QString& kind);
  // The choices of one cell (its row's kind).
  QVector<engine::Format> choicesAt(const QModelIndex& index) const;
  // The gradient format a layer gets with a new compute format, so that no
  // edit gives a combination the engine refuses (a block grad format needs a
  // block compute format): a block compute format brings its own block
  // gradients (the mxfp8/mxfp4/nvfp4 recipes' rule); leaving the block
  // formats brings the compute format's usual gradients (E4M3 -> E5M2,
  // TF32 -> FP32, else the same); other changes keep the grad format.
  static engine::Format gradFor(engine::Format compute, engine::Format previousGrad);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;
  // Accepts a format name or key ("FP16", "bf16", "e4m3", "mxfp4") in a
  // format column; refuses anything not in choicesAt(index). A compute edit
  // sets the grad format too (gradFor).
  bool setData(const QModelIndex& index, const QVariant& value, int role = Qt::EditRole) override;

 signals:
  // A user edit of one layer's precision (takes effect at the next step).
  void precisionEdited(int row, const engine::LayerPrecision& precision);

 private:
  QVector<PrecisionTableRow> m_rows;
};
