// CompareView: the "Compare" tab — the latest comparison's charts, either
// one small loss chart per run (small multiples on shared axes) or the
// difference to FP32 (loss and accuracy, smoothed, over FP32's own noise
// band: compare/difference_chart.h), and a summary table: the validation
// loss (the whole validation set, not one batch) and its ratio to FP32's at
// the same evaluation, the validation accuracy and its gap to FP32's (red
// above 0.5 points), the training loss as the mean of the last
// kTrainMeanSteps steps, overflow and skipped steps, final loss scale, peak
// memory, samples/s. Every header says what its column is (and its tooltip
// more). Numbers keep 3 or 4 significant digits (scientific below 1e-3).
#pragma once

#include <QList>
#include <QVector>
#include <QWidget>

#include <cstdint>

class DifferenceChart;
class QAction;
class QChartView;
class QComboBox;
class LiveChartView;
class QGridLayout;
class QLabel;
class QLineSeries;
class QScrollArea;
class QTableWidget;
class RecipeLegend;
class RunStore;
class StepMarkers;
struct RunData;

// GUI thread only.
class CompareView : public QWidget {
  Q_OBJECT

 public:
  // Accuracy gaps to FP32 above this many percentage points are flagged.
  static constexpr double kAccuracyGapPoints = 0.5;

  // The training loss column: the mean of this many last steps (one batch
  // is noise; the issue this table once had).
  static constexpr int kTrainMeanSteps = 100;

  // ValBitsPerToken: a text run's validation bits per token and perplexity;
  // the column shows only while a text run is in the table.
  enum Column {
    Run = 0, Recipe, ValLoss, ValLossRatio, ValBitsPerToken, ValAccuracy, AccuracyDiff, TrainLossMean, OverflowSteps,
    SkippedSteps, FinalScale, PeakMemory, SamplesPerSecond, ColumnCount
  };
  // What the charts show: each run's loss on its own, or every run minus FP32.
  enum class Mode { EachRun = 0, Difference };

  explicit CompareView(RunStore* store, QWidget* parent = nullptr);

  // Shows comparison group `group` (-1: nothing).
  void setGroup(int group);
  int group() const { return m_group; }
  // Redraws what changed (cheap when nothing did).
  void refresh();

  void setMode(Mode mode);
  // "Difference to FP32": sets the mode and asks to be shown (showRequested),
  // for the other places runs are compared (the Live tab's loss and
  // accuracy charts' context menus).
  QAction* differenceAction() const { return m_differenceAction; }
  Mode mode() const { return m_mode; }
  QComboBox* modeCombo() const { return m_modeCombo; }
  DifferenceChart* lossDifference() const { return m_lossDiff; }
  DifferenceChart* accuracyDifference() const { return m_accuracyDiff; }
  RecipeLegend* differenceLegend() const { return m_legend; }
  // The charts an export draws: the ones the chosen mode shows.
  QList<QChartView*> exportCharts() const;

  QTableWidget* summaryTable() const { return m_table; }
  // The training-loss column's figure: the mean of the last
  // kTrainMeanSteps steps (fewer while the run is shorter; NaN when any of
  // them is not finite).
  struct TrainMean {
    double mean = 0.0;
    int steps = 0;
    int nonFinite = 0;
  };
  static TrainMean trainLossMean(const RunData& run);
  const QVector<LiveChartView*>& smallCharts() const { return m_charts; }
  // The loss series of the small chart of store run `runId`, or null.
  QLineSeries* smallLoss(int runId) const;
  // The markers of that chart (a diverged run's "diverged at step N"), or null.
  StepMarkers* smallMarkers(int runId) const;
  // Where a run that failed as diverged ended: its first non-finite loss,
  // else its last step (non-finite gradients applied); -1 for any other run.
  static std::int64_t divergenceStep(const RunData& run);

 signals:
  // The difference action asks for the Compare tab to be shown.
  void showRequested();

 protected:
  void showEvent(QShowEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  void rebuild();
  void markDivergence(int k, const RunData& run);
  void updateTable();
  void fitTableHeight();
  void showMode();

  RunStore* m_store;
  int m_group = -1;
  QVector<int> m_runs;
  QLabel* m_header = nullptr;
  QWidget* m_grid = nullptr;
  QGridLayout* m_gridLayout = nullptr;
  QScrollArea* m_gridScroll = nullptr;
  QVector<LiveChartView*> m_charts;
  QVector<QLineSeries*> m_loss;
  QVector<QLineSeries*> m_val;
  QVector<StepMarkers*> m_markers;       // per small chart
  QVector<std::int64_t> m_markedStep;    // the divergence each marks (-1: none)
  QTableWidget* m_table = nullptr;
  std::uint64_t m_signature = 0;
  bool m_refreshPending = false;
  LiveChartView* m_enlarged = nullptr;
  Mode m_mode = Mode::EachRun;
  QAction* m_differenceAction = nullptr;
  QComboBox* m_modeCombo = nullptr;
  DifferenceChart* m_lossDiff = nullptr;
  DifferenceChart* m_accuracyDiff = nullptr;
  RecipeLegend* m_legend = nullptr;
};
