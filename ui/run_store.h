// RunStore: the UI's data model — every run of the session with its FULL
// history (steps, evaluations, events, gradient statistics, status), fed
// in batches by the TrainingController. Charts read it; they keep nothing.
#pragma once

#include <QColor>
#include <QObject>
#include <QString>
#include <QVector>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "report/csv.h"
#include "train/metrics.h"
#include "train/run_config.h"

// One run as the UI knows it. Plain data; the store owns it.
struct RunData {
  int id = 0;               // index in the store (stable for the session)
  QString name;             // "run 3", "compare 1 · fp16"
  QString recipe;
  QColor colour;
  engine::RunConfig config;
  int compareGroup = -1;    // >= 0: started together by Compare
  bool visible = true;      // ticked in the runs list: drawn on the charts

  engine::RunState state = engine::RunState::Pending;
  QString message;          // failure reason
  std::int64_t totalSteps = 0;

  std::vector<engine::StepMetrics> steps;
  std::vector<engine::EvalMetrics> evals;
  std::vector<engine::Event> events;
  std::vector<engine::GradStats> grads;  // every GradStats record, in arrival order
  std::optional<engine::RunSummary> summary;

  // Counters kept as records arrive (the charts and the summary table read
  // them without scanning the history).
  std::int64_t overflowSteps = 0;
  std::int64_t skippedSteps = 0;
  std::int64_t peakMemory = 0;
  double stepWallMs = 0.0;       // sum of wall_ms
  double samples = 0.0;          // sum of batch sizes (samples_per_second * wall)
  std::uint64_t revision = 0;    // bumped whenever anything above changes

  bool live() const {
    return state == engine::RunState::Pending || state == engine::RunState::Running ||
           state == engine::RunState::Paused;
  }
  // The latest GradStats of `layer`, or null.
  const engine::GradStats* latestGrad(const std::string& layer) const;
  // Layers with gradient statistics, in the order they first arrived.
  std::vector<std::string> gradLayers() const;
  // The loss scale used at `step` (1 when unknown).
  double lossScaleAt(std::int64_t step) const;
  // The engine's summary once the run ended; until then the same figures
  // computed from the history so far.
  engine::RunSummary currentSummary() const;
  // What export_runs() needs.
  engine::RunExport toExport() const;
};

// GUI thread only.
class RunStore : public QObject {
  Q_OBJECT

 public:
  explicit RunStore(QObject* parent = nullptr);

  // Adds a run (before its records arrive) and returns its id.
  int addRun(const QString& name, const QString& recipe, const QColor& colour, const engine::RunConfig& config,
             int compareGroup = -1);
  int count() const { return static_cast<int>(m_runs.size()); }
  const RunData& run(int id) const { return m_runs[static_cast<std::size_t>(id)]; }
  int newCompareGroup() { return m_nextGroup++; }
  // Runs of a comparison group, in the order they were added.
  QVector<int> group(int compareGroup) const;
  int lastCompareGroup() const { return m_nextGroup - 1; }

  void setVisible(int id, bool visible);

  // Appends a batch of engine records. `toStore` maps the trainer's run id
  // (the index in it) to the store id. Emits runChanged() once per run whose
  // status changed, then appended() once if anything arrived.
  void append(std::vector<engine::Record>& records, const QVector<int>& toStore);

 signals:
  void runAdded(int id);
  void runChanged(int id);       // status, name or visibility
  void appended();               // new history; once per batch

 private:
  std::vector<RunData> m_runs;
  int m_nextGroup = 0;
};
