// MainWindow: the application window — setup dock, charts, per-layer
// precision table, runs list, the run toolbar and the status bar.
#pragma once

#include <QMainWindow>

class ChartArea;
class PrecisionTable;
class QAction;
class QLabel;
class RunsList;
class SetupPanel;

// GUI thread only.
class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);

  SetupPanel* setupPanel() const { return m_setup; }
  ChartArea* chartArea() const { return m_charts; }
  PrecisionTable* precisionTable() const { return m_precision; }
  RunsList* runsList() const { return m_runs; }

  // Status bar read-outs; a negative value shows "—".
  void setStatusMetrics(qint64 step, double samplesPerSecond, double lossScale, qint64 memoryBytes);

  // Enables the run actions for what can be done now: Start needs a
  // trainer, Pause/Step/Stop a run in progress, Compare two runs, Export one.
  void updateActions();

 private:
  void createActions();
  void createMenus();
  void createStatusBar();

  SetupPanel* m_setup = nullptr;
  ChartArea* m_charts = nullptr;
  PrecisionTable* m_precision = nullptr;
  RunsList* m_runs = nullptr;

  QAction* m_start = nullptr;
  QAction* m_pause = nullptr;
  QAction* m_step = nullptr;
  QAction* m_stop = nullptr;
  QAction* m_compare = nullptr;
  QAction* m_export = nullptr;
  QAction* m_quit = nullptr;
  QAction* m_about = nullptr;

  QLabel* m_statusStep = nullptr;
  QLabel* m_statusRate = nullptr;
  QLabel* m_statusScale = nullptr;
  QLabel* m_statusMemory = nullptr;

  bool m_trainerConnected = false;  // the engine worker is not wired yet
  bool m_running = false;
};
