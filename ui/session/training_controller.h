// TrainingController: the UI thread's side of the worker boundary. Owns the
// engine's Trainer (which trains on its own thread), drains its record
// queue every kDrainIntervalMs (33 ms, ~30 Hz) into the RunStore, and forwards the controls.
#pragma once

#include <QColor>
#include <QElapsedTimer>
#include <QObject>
#include <QStringList>
#include <QTimer>
#include <QVector>

#include <memory>
#include <string>
#include <vector>

#include "numeric/precision.h"
#include "train/commands.h"
#include "records/metrics.h"
#include "train/run_config.h"

namespace engine {
class Trainer;
struct DatasetPair;
}
class RunStore;

// GUI thread only. The engine thread never calls back into Qt: records
// cross the boundary by value through Trainer::drain(), once per frame.
class TrainingController : public QObject {
  Q_OBJECT

 public:
  // 33 ms, about 30 drains a second: fast enough to look live, rare enough
  // that one frame's batch of records is drawn with one replace() per series.
  static constexpr int kDrainIntervalMs = 33;
  // How far below the UI thread's priority the engine's threads run.
  static constexpr int kEngineNiceness = 10;

  explicit TrainingController(RunStore* store, QObject* parent = nullptr);
  ~TrainingController() override;  // stops and joins the engine thread

  struct RunRequest {
    engine::RunConfig config;
    QString name;
    QColor colour;
  };
  // Starts a new Trainer with one run per request (a comparison when
  // several). Validates every config first and throws std::runtime_error
  // (one line, naming the field) without starting anything. A trainer that
  // is still active is stopped and drained first. `paused`: build the runs
  // and wait (Step then advances one step). Returns the store ids.
  // The engine thread journals the runs into a new folder under
  // journalRoot() named <yyyyMMdd-HHmmss>-<folderName> (the run's name when
  // empty and there is one run, "compare" otherwise); a folder that cannot
  // be written throws (one line naming it) and nothing starts.
  QVector<int> start(const std::vector<RunRequest>& runs, int compareGroup = -1, bool paused = false,
                     const QString& folderName = {});
  // Where start() journals: run_folders::root() unless set; empty: nowhere.
  void setJournalRoot(const QString& dir) { m_journalRoot = dir; }
  const QString& journalRoot() const { return m_journalRoot; }
  // The folder the current trainer writes (empty when none).
  const QString& currentFolder() const { return m_folder; }
  // Data the next start() hands to its Trainer (Trainer::provide_data):
  // runs on this dataset skip loading it. Cleared by start().
  void provideData(const std::string& dataset, std::shared_ptr<const engine::DatasetPair> data);

  void pause();
  void resume();
  // One step of every unfinished run, inspected: each run's StepInspection
  // (what the step did, layer by layer) reaches the store (RunStore::inspected).
  // Starts nothing when no trainer exists.
  void stepOnce();
  // At most this many steps of each run per second (0: as fast as
  // possible), for a class watching a lesson unfold. Applies to the running
  // trainer at its next step boundary and to every trainer started later.
  void setStepRate(double stepsPerSecond);
  double stepRate() const { return m_stepRate; }
  // Cooperative: the engine stops at its next step boundary; the timer keeps
  // draining until the thread has ended, so nothing is lost.
  void stop();
  // Stop, join the engine thread, and drain what is left (window close).
  void shutdown();

  bool active() const;   // a trainer exists and its thread has not finished
  bool paused() const;
  // The store ids of the current trainer's runs (empty when none started).
  const QVector<int>& currentRuns() const { return m_storeIds; }
  bool isCurrent(int storeId) const { return m_storeIds.contains(storeId); }

  // Queues a precision change of `layer` in store run `storeId` (applied at
  // the engine's next step boundary). False when that run is not live here.
  bool setLayerPrecision(int storeId, const std::string& layer, const engine::LayerPrecision& p);
  // Queues a new loss scaler for store run `storeId` (LiveChange::LossScaler,
  // applied at the engine's next step). False when that run is not live
  // here; throws std::invalid_argument (naming the field) for a bad value.
  bool setLossScaler(int storeId, const engine::LossScalerConfig& scaler);
  // A NaN (or inf) in `layer`'s weights, activations or weight gradient, or
  // in the loss, at store run `storeId`'s next step (Trainer::inject_fault;
  // a demonstration of what a non-finite value does). False when that run
  // is not live here.
  bool injectFault(int storeId, engine::FaultTarget target, const std::string& layer, bool inf);

  // Drains the queue now (the timer does this on its own).
  void drainNow();
  // Milliseconds since the last start() (for the first-point latency).
  qint64 msSinceStart() const { return m_sinceStart.isValid() ? m_sinceStart.elapsed() : -1; }
  std::uint64_t droppedRecords() const;

 signals:
  void started();
  void folderStarted(const QString& dir);  // the journal folder of the runs just started
  void framed();      // records were appended to the store this frame
  void finished();    // the engine thread ended and its records are drained
  void pausedChanged(bool paused);

 private:
  void onTick();

  RunStore* m_store;
  std::unique_ptr<engine::Trainer> m_trainer;
  std::string m_providedName;
  std::shared_ptr<const engine::DatasetPair> m_provided;
  QVector<int> m_storeIds;
  QTimer m_timer;
  std::vector<engine::Record> m_buffer;
  QElapsedTimer m_sinceStart;
  bool m_finishedSignalled = true;
  double m_stepRate = 0.0;
  QString m_journalRoot;
  QString m_folder;
};
