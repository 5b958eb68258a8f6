// PrecisionTableModel: one row per layer — name, shape, its LayerPrecision
// (compute / storage / accumulate, editable), parameters and memory.
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <QVector>

#include "amp/precision.h"

struct PrecisionTableRow {
  QString layer;                     // "fc1", "conv2", "block0.attn.qkv"
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

  // The formats a format column may take: compute any; storage any stored
  // format (TF32 is compute-only); accumulate FP32 or a 16-bit format
  // (rounding after every addition, for demonstrations).
  static QVector<engine::Format> choices(int column);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;
  // Accepts a format name or key ("FP16", "bf16", "e4m3") in a format
  // column; refuses anything not in choices(column).
  bool setData(const QModelIndex& index, const QVariant& value, int role = Qt::EditRole) override;

 signals:
  // A user edit of one layer's precision (takes effect at the next step).
  void precisionEdited(int row, const engine::LayerPrecision& precision);

 private:
  QVector<PrecisionTableRow> m_rows;
};
