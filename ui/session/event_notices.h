// EventNotices: what the runs' records tell the user — each live run's state
// in the runs list, and a status message for the events worth one
// (divergence, an overflow where overflows are news, a precision change
// applied by the engine, a failed run, an engine error).
#pragma once

#include <QObject>
#include <QSet>
#include <QVector>

#include <cstddef>

class RunStore;
class RunsList;
class TrainingController;
class UserMessages;
struct RunData;

// GUI thread only.
class EventNotices : public QObject {
  Q_OBJECT

 public:
  EventNotices(RunStore* store, TrainingController* controller, RunsList* runs, UserMessages* messages,
               QObject* parent);

  // A fault was injected into store run `id`: its next overflow is reported
  // even under dynamic loss scaling.
  void expectFault(int id) { m_faultPending.insert(id); }

  // After each drain: the current runs' states and their new events.
  void onFrame();
  // A run's state or visibility changed (a failure is reported).
  void onRunChanged(int id);

  // The runs list's status word for a run ("running 40%", "failed: …").
  static QString stateText(const RunData& r);

 private:
  void scanEvents();

  RunStore* m_store;
  TrainingController* m_controller;
  RunsList* m_runs;
  UserMessages* m_messages;
  QVector<std::size_t> m_eventsSeen;
  QSet<int> m_faultPending;  // runs with an injected fault whose overflow is not reported yet
};
