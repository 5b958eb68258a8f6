// MainWindow: the application window — setup dock, the Live and Compare
// tabs, per-layer precision table, runs list, the run toolbar and the
// status bar — and the glue between them and the TrainingController.
#pragma once

#include <QElapsedTimer>
#include <QMainWindow>
#include <QStringList>
#include <QVector>

#include "train/run_config.h"

class ChartArea;
class DatasetCache;
class CompareView;
class PrecisionTable;
class QAction;
class QGroupBox;
class QLabel;
class QTabWidget;
class RunStore;
class RunsList;
class SetupPanel;
class TrainingController;
struct ExportRequest;
struct LaunchOptions;

// GUI thread only.
class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  SetupPanel* setupPanel() const { return m_setup; }
  ChartArea* chartArea() const { return m_charts; }
  CompareView* compareView() const { return m_compare; }
  QTabWidget* tabs() const { return m_tabs; }
  PrecisionTable* precisionTable() const { return m_precision; }
  RunsList* runsList() const { return m_runs; }
  RunStore* store() const { return m_store; }
  TrainingController* controller() const { return m_controller; }
  DatasetCache* datasetCache() const { return m_datasets; }

  // A config file's (or the command line's) settings: shown in the setup
  // panel; the keys it has no control for are kept for every run.
  void setBaseConfig(const engine::RunConfig& config);
  // The config the next run gets (panel + base + the precision table).
  engine::RunConfig nextRunConfig() const;
  // The command line's settings: each option changes only what it names; a
  // --config file replaces the panel's settings. A --config file that
  // cannot be used, or a bad value, is shown as an error (a dialog unless
  // quiet) and false returned; the window stays usable.
  bool applyLaunchOptions(const LaunchOptions& options);

  // Sized to the screen's available geometry (not a fixed 1400x900): the
  // whole of a 1280x720 projector, at most 1600x1000 on larger screens, centred.
  void fitToScreen();

  // The toolbar's actions. Each returns false and shows a message box (or,
  // with setQuietErrors(true), only the status bar) when it cannot start.
  bool startRun();
  bool startComparison(const QStringList& recipes);
  void togglePause();
  void stepOnce();
  void stopRun();
  void openCompareDialog();
  void openExportDialog();
  // Writes what `request` asks for; a failure is shown, not thrown.
  bool exportTo(const ExportRequest& request);
  // Every chart of the window (Live tab, then the Compare small multiples).
  QList<class QChartView*> allCharts() const;

  // An error the user must see: a warning box (or, quiet, the status bar).
  void reportError(const QString& title, const QString& message) { showError(title, message); }

  // Message boxes block: tests and the command line turn them into status
  // messages (the last one is kept).
  void setQuietErrors(bool quiet) { m_quietErrors = quiet; }
  QString lastError() const { return m_lastError; }
  void setCompareRecipes(const QStringList& recipes) { m_compareRecipes = recipes; }

  // Milliseconds from the last Start/Compare click to the first point on a
  // chart (-1 until then).
  qint64 firstPointMs() const { return m_firstPointMs; }

  // Status bar read-outs; a negative value shows "—".
  void setStatusMetrics(qint64 step, double samplesPerSecond, double lossScale, qint64 memoryBytes);

  // Enables the run actions for what can be done now.
  void updateActions();

 signals:
  // Every run of the current trainer has ended and its records are drawn.
  void trainingFinished();
  void firstPointShown(qint64 ms);

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  bool readyToStart();
  void createActions();
  void createMenus();
  void createStatusBar();
  void showError(const QString& title, const QString& message);
  bool launch(const std::vector<engine::RunConfig>& configs, const QStringList& names, int compareGroup,
              bool paused);
  void onFrame();
  void onRunChanged(int id);
  void onTrainingFinished();
  void onPrecisionEdited(int row);
  void rebuildPrecisionTable();
  void showRunInTable(int id);
  void updateStatusMetrics();
  void scanEvents();
  int liveFocusRun() const;

  RunStore* m_store = nullptr;
  TrainingController* m_controller = nullptr;
  DatasetCache* m_datasets = nullptr;
  SetupPanel* m_setup = nullptr;
  QTabWidget* m_tabs = nullptr;
  ChartArea* m_charts = nullptr;
  CompareView* m_compare = nullptr;
  PrecisionTable* m_precision = nullptr;
  RunsList* m_runs = nullptr;

  QAction* m_start = nullptr;
  QAction* m_pause = nullptr;
  QAction* m_step = nullptr;
  QAction* m_stop = nullptr;
  QAction* m_compareAction = nullptr;
  QAction* m_export = nullptr;
  QAction* m_quit = nullptr;
  QAction* m_about = nullptr;

  QLabel* m_statusStep = nullptr;
  QLabel* m_statusRate = nullptr;
  QLabel* m_statusScale = nullptr;
  QLabel* m_statusMemory = nullptr;

  engine::RunConfig m_baseConfig;
  QStringList m_compareRecipes;
  QString m_exportDir;
  bool m_quietErrors = false;
  QString m_lastError;
  QElapsedTimer m_startClock;
  qint64 m_firstPointMs = -1;
  int m_runCounter = 0;
  QVector<std::size_t> m_eventsSeen;
  bool m_rebuildingTable = false;
  QGroupBox* m_precisionBox = nullptr;  // its title says whose precisions the table shows
};
