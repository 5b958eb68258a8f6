// ChangeMarkers: marks on every chart over steps the step from which a live
// change took effect (a layer's precision), as the engine's events record
// it, in the run's colour.
#pragma once

#include <QObject>

#include <map>
#include <vector>

class ChartArea;
class RunStore;
class StepMarkers;

// GUI thread only.
class ChangeMarkers : public QObject {
  Q_OBJECT

 public:
  ChangeMarkers(RunStore* store, ChartArea* charts, QObject* parent);

  // The markers on chart `m` of the chart area (null for a chart without a
  // step axis).
  StepMarkers* markersOf(int m) const;

  // Where a change recorded after `step` steps is marked: the first step
  // that ran with it.
  static double markerStep(long long eventStep) { return static_cast<double>(eventStep) + 1.0; }

 private:
  void scan();

  RunStore* m_store;
  ChartArea* m_charts;
  std::vector<StepMarkers*> m_markers;  // per chart of the area (null: none)
  std::map<int, std::size_t> m_seen;     // per run: events looked at
};
