// PrecisionTable: the per-layer precision table (a QTableView over
// PrecisionTableModel, format cells edited with a combo box).
#pragma once

#include <QTableView>

class PrecisionTableModel;

// GUI thread only.
class PrecisionTable : public QTableView {
  Q_OBJECT

 public:
  explicit PrecisionTable(QWidget* parent = nullptr);

  PrecisionTableModel* precisionModel() const { return m_model; }

 private:
  PrecisionTableModel* m_model = nullptr;
};
