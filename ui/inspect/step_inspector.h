// StepInspector: what the last inspected step (the toolbar's Step) did in
// every run — the loss (unscaled), the loss scale before and after, whether
// the step was skipped — and, for the selected run, a table per layer: the
// non-finite counts (activation, activation gradient, weight gradient), the
// fraction of weight gradients that underflowed in the layer's format, and
// the largest |gradient|.
#pragma once

#include <QVector>
#include <QWidget>

class QLabel;
class QTableWidget;
class RunStore;

// GUI thread only. Subscribes to RunStore::inspected.
class StepInspector : public QWidget {
  Q_OBJECT

 public:
  explicit StepInspector(RunStore* store, QWidget* parent = nullptr);

  // The runs shown (the current trainer's); their latest inspections.
  void setRuns(const QVector<int>& storeIds);
  // Shows the layers of run `storeId` in the layer table.
  void selectRun(int storeId);
  int selectedRun() const { return m_selected; }

  QTableWidget* runsTable() const { return m_runsTable; }
  QTableWidget* layerTable() const { return m_layerTable; }

  // Columns of the runs table and the layer table.
  enum RunColumn { RunName = 0, RunStep, RunLoss, RunScaleBefore, RunScaleAfter, RunSkipped, RunColumnCount };
  enum LayerColumn {
    LayerName = 0, LayerFormat, NonfiniteActivation, NonfiniteActivationGrad, NonfiniteWeightGrad,
    Underflow, MaxAbsGrad, LayerColumnCount
  };

  void refresh();

 private:
  void showLayers();

  RunStore* m_store;
  QVector<int> m_runs;
  int m_selected = -1;
  QLabel* m_heading = nullptr;
  QTableWidget* m_runsTable = nullptr;
  QLabel* m_layerHeading = nullptr;
  QTableWidget* m_layerTable = nullptr;
};
