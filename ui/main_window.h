// MainWindow: the application window. It assembles the widgets — setup dock,
// the Live and Compare tabs, the per-layer precision table, runs and
// history, the step inspector, toolbar, menus and status bar — and wires
// them to the features that own the behaviour (session/, panels/, lecture/,
// inspect/, export/).
#pragma once

#include <QMainWindow>

class FormatExplorer;
class PresentationView;
class WindowActions;
class ChartArea;
class CompareView;
class SamplesView;
class SolverView;
class DatasetCache;
class EventNotices;
class ExportController;
class FaultInjector;
class HistoryController;
class LessonController;
class PrecisionTableController;
class QDockWidget;
class QSplitter;
class QTabWidget;
class RunLauncher;
class RunStore;
class RunsList;
class SetupPanel;
class StatusReadouts;
class TrainingController;
class UserMessages;

// GUI thread only.
class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // A part of the window by its type: a widget (ChartArea, SetupPanel,
  // RunsList, ...) or a feature (RunLauncher, LessonController,
  // PrecisionTableController, ExportController, HistoryController,
  // FaultInjector, UserMessages, RunStore, TrainingController). Each type is
  // made once; null for one not made yet (the format explorer until used).
  template <class T>
  T* part() const {
    return findChild<T*>();
  }

  // The format explorer (made on first use) and its window shown, on its
  // Values or its Blocks tab (Lecture > Block formats).
  FormatExplorer* formatExplorer();
  void showFormatExplorer();
  void showBlockView();
  // Presentation view: large type, thick lines, controls hidden, the
  // lesson and its watched charts on screen. F11 toggles it.
  void setPresentation(bool on);
  bool presentation() const;
  // True while a toggle's later parts are still queued (see setPresentation).
  bool presentationSettling() const { return m_presentationPart < kPresentationParts; }

  // Sized to the screen's available geometry (not a fixed 1400x900): the
  // whole of a 1280x720 projector, at most 1600x1000 on larger screens, centred.
  void fitToScreen();
  // The window's frame moved (and shrunk if need be) into the screen's
  // available geometry, once fitToScreen() sized it (and on showing, when a
  // window manager adds its frame); a full-screen or maximized window is
  // left alone.
  void keepOnScreen();
  // One part of a presentation toggle; queues the next (see setPresentation).
  void presentationPart(bool on, int stage, unsigned toggle);
  // The Compare tab in front.
  void showCompare();
  void showSamples();
  // The Solver tab in front.
  void showSolver();
  // Enables the run actions for what can be done now.
  void updateActions();

 signals:
  // Every run of the current trainer has ended and its records are drawn.
  void trainingFinished();

 protected:
  void closeEvent(QCloseEvent* event) override;
  void showEvent(QShowEvent* event) override;

 private:
  void buildLayout();
  void createFeatures();
  void wire();
  void onTrainingFinished();
  void showExplorer(bool blocks);

  // Made here, owned by Qt's parent tree.
  RunStore* m_store = nullptr;
  TrainingController* m_controller = nullptr;
  DatasetCache* m_datasets = nullptr;
  UserMessages* m_messages = nullptr;
  SetupPanel* m_setup = nullptr;
  QDockWidget* m_setupDock = nullptr;
  QTabWidget* m_tabs = nullptr;
  ChartArea* m_charts = nullptr;
  CompareView* m_compare = nullptr;
  QWidget* m_compareScroll = nullptr;  // the Compare tab: the view, scrollable
  SamplesView* m_samples = nullptr;
  QWidget* m_samplesScroll = nullptr;  // the Samples tab: each text run's latest continuation
  SolverView* m_solver = nullptr;      // the Solver tab: Ax = b, LU in a low precision, refined
  QWidget* m_solverScroll = nullptr;
  QSplitter* m_solverSplitter = nullptr;  // the Solver tab
  QSplitter* m_liveSplitter = nullptr;
  QSplitter* m_bottom = nullptr;
  RunsList* m_runs = nullptr;
  QTabWidget* m_runsTabs = nullptr;
  QDockWidget* m_inspectorDock = nullptr;
  PresentationView* m_presentationView = nullptr;
  static constexpr int kPresentationParts = 4;
  unsigned m_presentationToggle = 0;           // which toggle the queued parts belong to
  int m_presentationPart = kPresentationParts;  // the next part to run; kPresentationParts: none left
  FormatExplorer* m_explorer = nullptr;
  WindowActions* m_actions = nullptr;
  StatusReadouts* m_readouts = nullptr;
  // The features.
  EventNotices* m_notices = nullptr;
  PrecisionTableController* m_table = nullptr;
  RunLauncher* m_launcher = nullptr;
  LessonController* m_lesson = nullptr;
  HistoryController* m_history = nullptr;
  ExportController* m_export = nullptr;
  FaultInjector* m_faults = nullptr;
  bool m_fitted = false;  // sized by fitToScreen(): kept on the screen
};
