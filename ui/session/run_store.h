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
#include "records/metrics.h"
#include "train/run_config.h"

// One run as the UI knows it: the engine's RunHistory (steps, evaluations,
// events, gradient statistics and the counters kept as records arrive: the
// one history the CLI and the journal use too) plus what only the UI has.
// Plain data; the store owns it.
struct RunData : engine::RunHistory {
  int id = 0;               // index in the store (stable for the session)
  QString name;             // "run 3"
  QString recipe;
  QColor colour;
  engine::RunConfig config;
  int compareGroup = -1;    // >= 0: started together by Compare
  bool visible = true;      // ticked in the runs list: drawn on the charts

  engine::RunState state = engine::RunState::Pending;
  QString message;          // failure reason
  std::int64_t totalSteps = 0;
  std::optional<engine::RunSummary> summary;
  // What the run's latest inspected step did (Step asks for one); the
  // engine's RunHistory keeps no inspections, so the store does.
  std::optional<engine::StepInspection> inspection;
  // Its folder on disk (docs/ARCHITECTURE.md "Runs on disk") and its run id in it;
  // empty for a run that was never journaled.
  QString folder;
  int folderRun = -1;
  // Read back from a folder whose writer died mid-run (a crash, kill -9):
  // its state is Stopped, and it says so.
  bool interrupted = false;
  bool reopened = false;    // read back from a past run's folder, not trained here
  std::uint64_t revision = 0;    // bumped whenever anything above changes

  bool live() const {
    return state == engine::RunState::Pending || state == engine::RunState::Running ||
           state == engine::RunState::Paused;
  }
  // Whether the run scales its loss (its config, or its recipe's own rule):
  // runs that do not are left off the loss-scale chart.
  bool scalesLoss() const;
  // The engine's summary once the run ended; until then the same figures
  // computed from the history so far.
  engine::RunSummary currentSummary() const;
  // What export_runs() needs (the `run` column is the UI name; run_id is
  // the window's number, id + 1: "run 3" is run_id 3).
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
  // Adds a run read back from disk, whole (history, summary, status): its
  // id and revision are the store's. Emits runAdded().
  int addStoredRun(RunData run);
  // Sets the folder (and run id in it) the engine journals `id` to.
  void setFolder(int id, const QString& folder, int folderRun);
  int count() const { return static_cast<int>(m_runs.size()); }
  const RunData& run(int id) const { return m_runs[static_cast<std::size_t>(id)]; }
  int newCompareGroup() { return m_nextGroup++; }
  // Runs of a comparison group, in the order they were added.
  QVector<int> group(int compareGroup) const;
  int lastCompareGroup() const { return m_nextGroup - 1; }

  void setVisible(int id, bool visible);

  // Appends a batch of engine records (RunHistory::add). `toStore` maps the
  // trainer's run id (the index in it) to the store id. Emits runChanged()
  // once per run whose status changed, then appended() once if anything
  // arrived. Views subscribe to these signals (and coalesce them to one
  // redraw per frame); nothing routes frames to them by hand.
  void append(std::vector<engine::Record>& records, const QVector<int>& toStore);

 signals:
  void runAdded(int id);
  void runChanged(int id);       // status, name or visibility
  void appended();               // new history; once per batch
  void inspected(int id);        // a StepInspection of run `id` arrived (after appended())

 private:
  std::vector<RunData> m_runs;
  int m_nextGroup = 0;
};
