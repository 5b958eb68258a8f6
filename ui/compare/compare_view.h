// CompareView: the "Compare" tab — one small loss chart per run of the
// latest comparison (small multiples on shared axes) and a summary table:
// final loss, accuracy, overflow and skipped steps, final loss scale, peak
// memory, samples/s, and each run's difference to the FP32 run (its loss
// minus FP32's, and as a multiple of it), the accuracy gap flagged red above
// 0.5 points. Numbers keep 3 significant digits (scientific below 1e-3).
#pragma once

#include <QVector>
#include <QWidget>

#include <cstdint>

class LiveChartView;
class QGridLayout;
class QLabel;
class QLineSeries;
class QTableWidget;
class RunStore;

// GUI thread only.
class CompareView : public QWidget {
  Q_OBJECT

 public:
  // Accuracy gaps to FP32 above this many percentage points are flagged.
  static constexpr double kAccuracyGapPoints = 0.5;

  enum Column {
    Run = 0, Recipe, FinalLoss, Accuracy, OverflowSteps, SkippedSteps, FinalScale, PeakMemory, SamplesPerSecond,
    LossDiff, LossRatio, AccuracyDiff, ColumnCount
  };

  explicit CompareView(RunStore* store, QWidget* parent = nullptr);

  // Shows comparison group `group` (-1: nothing).
  void setGroup(int group);
  int group() const { return m_group; }
  // Redraws what changed (cheap when nothing did).
  void refresh();

  QTableWidget* summaryTable() const { return m_table; }
  const QVector<LiveChartView*>& smallCharts() const { return m_charts; }
  // The loss series of the small chart of store run `runId`, or null.
  QLineSeries* smallLoss(int runId) const;

 protected:
  void showEvent(QShowEvent* event) override;

 private:
  void rebuild();
  void updateTable();

  RunStore* m_store;
  int m_group = -1;
  QVector<int> m_runs;
  QLabel* m_header = nullptr;
  QWidget* m_grid = nullptr;
  QGridLayout* m_gridLayout = nullptr;
  QVector<LiveChartView*> m_charts;
  QVector<QLineSeries*> m_loss;
  QVector<QLineSeries*> m_val;
  QTableWidget* m_table = nullptr;
  std::uint64_t m_signature = 0;
  bool m_refreshPending = false;
  LiveChartView* m_enlarged = nullptr;
};
