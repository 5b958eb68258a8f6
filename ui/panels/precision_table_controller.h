// PrecisionTableController: keeps the per-layer precision table in step with
// what it describes — the next run (setup panel + base config) or, during
// training, the selected live run — sends table edits to the engine, and
// holds the settings the next run gets.
#pragma once

#include <QObject>
#include <QString>

#include <functional>

#include "train/run_config.h"

class PrecisionTable;
class QGroupBox;
class RunStore;
class SetupPanel;
class TrainingController;
class UserMessages;
struct LaunchOptions;

// GUI thread only.
class PrecisionTableController : public QObject {
  Q_OBJECT

 public:
  // `liveFocus` names the live run an edit goes to (-1: none).
  PrecisionTableController(SetupPanel* setup, PrecisionTable* table, QGroupBox* box, RunStore* store,
                           TrainingController* controller, UserMessages* messages, std::function<int()> liveFocus,
                           QObject* parent);

  // A config file's (or the command line's) settings: shown in the setup
  // panel; the keys it has no control for are kept for every run.
  void setBaseConfig(const engine::RunConfig& config);
  // The config the next run gets (panel + base + the precision table).
  engine::RunConfig nextRunConfig() const;
  // The command line's settings: each option changes only what it names; a
  // --config file replaces the panel's settings. A --config file that
  // cannot be used, or a bad value, is shown as an error and false returned.
  bool applyLaunchOptions(const LaunchOptions& options);

  // The table describes the next run.
  void showNextRun();
  // The table of a live run: its config's layers, with the precision
  // changes the engine has applied since on top. Edits then go to that
  // run only; the next run keeps the setup panel's recipe.
  void showRun(int storeId);

 signals:
  // A row with parameters was selected: the gradient panel follows it.
  void layerSelected(const QString& layer);

 private:
  void onEdited(int row);

  SetupPanel* m_setup;
  PrecisionTable* m_table;
  QGroupBox* m_box;
  RunStore* m_store;
  TrainingController* m_controller;
  UserMessages* m_messages;
  std::function<int()> m_liveFocus;
  engine::RunConfig m_baseConfig;
  bool m_rebuilding = false;
  int m_shownRun = -1;  // the live run the table shows (-1: the next run)
};
