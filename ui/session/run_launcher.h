// RunLauncher: starts runs — one run, a comparison of recipes, a lesson's
// runs — from the settings of the next run, and carries the run controls
// (pause, step, stop) and the live loss-scaler change to the controller.
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <QStringList>
#include <vector>

#include "train/run_config.h"

class ChartArea;
class CompareView;
class DatasetCache;
class LessonController;
class PrecisionTableController;
class QWidget;
class RunStore;
class RunsList;
class SetupPanel;
class TrainingController;
class UserMessages;

// GUI thread only.
class RunLauncher : public QObject {
  Q_OBJECT

 public:
  struct Parts {
    RunStore* store;
    TrainingController* controller;
    DatasetCache* datasets;
    ChartArea* charts;
    RunsList* runs;
    CompareView* compare;
    SetupPanel* setup;
    PrecisionTableController* settings;  // the next run's config
    UserMessages* messages;
    QWidget* window;  // dialogs' parent
  };
  RunLauncher(const Parts& parts, QObject* parent);

  // With a lesson chosen, Start and Step run its runs.
  void setLesson(LessonController* lesson) { m_lesson = lesson; }

  // The toolbar's actions. Each returns false and shows the error when it
  // cannot start.
  bool startRun();
  bool startComparison(const QStringList& recipes);
  void togglePause();
  void stepOnce();
  void stopRun();
  void openCompareDialog();
  void setCompareRecipes(const QStringList& recipes) { m_compareRecipes = recipes; }

  // Validates every config, then starts them as one trainer (a comparison
  // group when `compareGroup` >= 0). Nothing starts on an error (shown).
  bool launch(const std::vector<engine::RunConfig>& configs, const QStringList& names, int compareGroup, bool paused,
              const QString& folderName = {});
  // False while a run can still step; a trainer whose runs all ended (one
  // failed while its thread winds down) is joined first.
  bool readyToStart();
  // True while a run of the trainer can still step.
  bool runActive() const;
  // The selected run if it is live, else the first live run (-1: none).
  int liveFocusRun() const;

  // The setup panel's loss scaler to the live focus run, at its next step.
  // False (and the reason shown) when it cannot be sent.
  bool sendLossScaler();

  // Milliseconds from the last Start/Compare click to the first point on a
  // chart (-1 until then).
  qint64 firstPointMs() const { return m_firstPointMs; }

 signals:
  // Runs were started (the store ids are the controller's currentRuns()).
  void launched();
  // Step was pressed: the step inspector is wanted (even in presentation
  // view when `always`).
  void inspectorWanted(bool always);
  // The run controls' state changed (enable the actions again).
  void controlsChanged();
  void firstPointShown(qint64 ms);

 private:
  // "run N" for the run `offset` places after the next one to be added.
  QString nextRunName(int offset = 0) const;

  Parts m_parts;
  LessonController* m_lesson = nullptr;
  QStringList m_compareRecipes;
  QElapsedTimer m_startClock;
  qint64 m_firstPointMs = -1;
};
