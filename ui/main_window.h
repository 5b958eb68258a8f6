// MainWindow: the application window — setup dock, the Live and Compare
// tabs, per-layer precision table, runs list, the run toolbar and the
// status bar — and the glue between them and the TrainingController.
#pragma once

#include <QElapsedTimer>
#include <QSet>
#include <QMainWindow>
#include <QStringList>
#include <QVector>

#include <memory>

#include "train/commands.h"
#include "train/run_config.h"

class ChartArea;
class FormatExplorer;
class HistoryPanel;
class LectureMenu;
class LecturePanel;
class PresentationView;
class QDockWidget;
class QSplitter;
class SpeedControl;
class StepInspector;
namespace engine {
struct Preset;
}
class DatasetCache;
class CompareView;
class PrecisionTable;
class QAction;
class QGroupBox;
class QLabel;
class QTabWidget;
class QToolBar;
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
  HistoryPanel* historyPanel() const { return m_history; }
  // The Runs / History tabs below the charts.
  QTabWidget* runsTabs() const { return m_runsTabs; }
  QAction* injectFaultAction() const { return m_injectFault; }
  RunStore* store() const { return m_store; }
  TrainingController* controller() const { return m_controller; }
  DatasetCache* datasetCache() const { return m_datasets; }
  LectureMenu* lectureMenu() const { return m_lectureMenu; }
  LecturePanel* lecturePanel() const { return m_lecturePanel; }
  SpeedControl* speedControl() const { return m_speed; }
  StepInspector* stepInspector() const { return m_inspector; }
  QDockWidget* stepInspectorDock() const { return m_inspectorDock; }
  QAction* presentationAction() const { return m_presentationAction; }
  QAction* explorerAction() const { return m_explorerAction; }
  QAction* blockViewAction() const { return m_blockViewAction; }

  // --- Lecture mode (DESIGN.md "Lecture mode") ---
  // A built-in preset by name or a preset file: chosen as the lesson. A
  // preset that cannot be read is shown as an error (its one line) and
  // false returned; the lesson before it stays.
  bool openLecture(const QString& nameOrFile);
  // The lesson: fills the setup panel with its settings, shows its title
  // and explanation beside the charts, enlarges the charts it watches;
  // Start then runs all its runs side by side under their names.
  void setLecture(const engine::Preset& preset);
  void leaveLecture();
  const engine::Preset* lecture() const { return m_lecture.get(); }
  // Runs the lesson's runs (a comparison group); `paused`: built and
  // waiting for Step.
  bool startLecture(bool paused = false);
  // The store ids of the lesson's last start.
  const QVector<int>& lectureRuns() const { return m_lectureRuns; }
  // The format explorer (made on first use) and its window shown.
  FormatExplorer* formatExplorer();
  void showFormatExplorer();
  // The explorer on its Blocks tab (Lecture > Block formats).
  void showBlockView();
  // Presentation view: large type, thick lines, controls hidden, the
  // lesson and its watched charts on screen. F11 toggles it.
  void setPresentation(bool on);
  bool presentation() const;

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
  // --- Past runs (DESIGN.md "Runs on disk") ---
  // Loads a run folder (read_journal) into the store with every chart, the
  // Compare tab and Export; an interrupted run says so. A folder that cannot
  // be read is shown as an error (its one line) and false returned.
  bool openPastRun(const QString& dir);
  // The History tab, listing the data folder again.
  void showHistory();

  // --- Fault injection (Run > Inject NaN…) ---
  void openFaultDialog();
  // A NaN (inf) in store run `storeId` at its next step; false (and the
  // reason shown) when that run is not live.
  bool injectFault(int storeId, engine::FaultTarget target, const std::string& layer, bool inf);

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
  // The lesson's claims were checked on its runs' output (after trainingFinished).
  void lectureChecked();
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
              bool paused, const QString& folderName = {});
  void onFrame();
  void onRunChanged(int id);
  void onTrainingFinished();
  void onPrecisionEdited(int row);
  void rebuildPrecisionTable();
  void showRunInTable(int id);
  void updateStatusMetrics();
  void scanEvents();
  int liveFocusRun() const;
  void checkLectureClaims();
  void applyWatch();

  RunStore* m_store = nullptr;
  TrainingController* m_controller = nullptr;
  DatasetCache* m_datasets = nullptr;
  SetupPanel* m_setup = nullptr;
  QTabWidget* m_tabs = nullptr;
  ChartArea* m_charts = nullptr;
  CompareView* m_compare = nullptr;
  PrecisionTable* m_precision = nullptr;
  RunsList* m_runs = nullptr;
  HistoryPanel* m_history = nullptr;
  QTabWidget* m_runsTabs = nullptr;
  QAction* m_injectFault = nullptr;
  QSet<int> m_faultPending;  // runs with an injected fault whose overflow is not reported yet

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
  QGroupBox* m_precisionBox = nullptr;

  // Lecture mode.
  LectureMenu* m_lectureMenu = nullptr;
  LecturePanel* m_lecturePanel = nullptr;
  QSplitter* m_liveSplitter = nullptr;
  QWidget* m_bottom = nullptr;
  QDockWidget* m_setupDock = nullptr;
  SpeedControl* m_speed = nullptr;
  StepInspector* m_inspector = nullptr;
  QDockWidget* m_inspectorDock = nullptr;
  FormatExplorer* m_explorer = nullptr;
  PresentationView* m_presentationView = nullptr;
  QAction* m_presentationAction = nullptr;
  QAction* m_explorerAction = nullptr;
  QAction* m_blockViewAction = nullptr;
  QToolBar* m_toolbar = nullptr;
  std::unique_ptr<engine::Preset> m_lecture;
  QVector<int> m_lectureRuns;  // its title says whose precisions the table shows
};
