// FaultDialog: Run > Inject NaN… — choose a live run, where the value goes
// (weights, activations, gradients, loss), the layer, and NaN or inf; the
// engine puts it there at the run's next step (a demonstration of what one
// non-finite value does to each recipe).
#pragma once

#include <QDialog>
#include <QVector>

#include <string>

#include "train/commands.h"

class QComboBox;
class QRadioButton;
class RunStore;

// GUI thread only.
class FaultDialog : public QDialog {
  Q_OBJECT

 public:
  // `runs`: the store ids that can take a fault (live runs).
  FaultDialog(const RunStore& store, const QVector<int>& runs, QWidget* parent = nullptr);

  int runId() const;
  engine::FaultTarget target() const;
  std::string layer() const;  // empty for the loss
  bool inf() const;

  // For tests and scripted demonstrations.
  void setRun(int storeId);
  void setTarget(engine::FaultTarget target);
  bool setLayer(const QString& layer);
  void setInf(bool inf);
  QComboBox* layerBox() const { return m_layer; }

 private:
  void fillLayers();

  const RunStore& m_store;
  QComboBox* m_run = nullptr;
  QComboBox* m_target = nullptr;
  QComboBox* m_layer = nullptr;
  QRadioButton* m_nan = nullptr;
  QRadioButton* m_inf = nullptr;
};
