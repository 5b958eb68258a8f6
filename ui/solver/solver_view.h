// SolverView: the Solver tab: Ax = b by a low-precision LU refined to FP64
// accuracy (engine/solve, docs/solver.md), formats side by side.
#pragma once

#include <QElapsedTimer>
#include <QWidget>

#include <vector>

#include "solver/solver_runner.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QPushButton;
class QSlider;
class QSpinBox;
class QTableWidget;
class SolverChart;

// Settings on the left (size n, κ on a log slider 10^0..10^12, seed, the
// factor formats to compare, Tensor Core mode, method, residual precision,
// GMRES-IR's inner precision, iteration limit), Solve and Stop; on the right the chart (SolverChart)
// above a summary table: one row per run (as the CLI's summary.csv:
// converged or not and why, iterations, final backward and forward error,
// the scale, time). The solve runs on SolverRunner's thread; each run's
// curve and row appear as it finishes, and the window never waits for it.
// GUI thread.
class SolverView : public QWidget {
  Q_OBJECT

 public:
  explicit SolverView(QWidget* parent = nullptr);

  // The job the controls describe (or the lesson's, while it is set), and
  // the controls set from a job.
  SolverJob job() const;
  void setJob(const SolverJob& job);
  // A solver lesson's job (its runs, named, and its matrix scale): the
  // controls show what they can of it and Solve runs it as it is, until a
  // control is changed by hand or clearLessonJob(); then the controls'
  // job again.
  void setLessonJob(const SolverJob& job);
  void clearLessonJob();
  bool lessonJobSet() const { return m_lessonSet; }
  // Whether the last job started was the lesson's (its outcomes are the
  // lesson's runs, in order).
  bool lastJobWasLesson() const { return m_ranLesson; }
  // The last job started.
  const SolverJob& lastJob() const { return m_last; }
  // Starts the job the controls describe; false (with the reason in the
  // status line) when nothing is chosen or a solve is running.
  bool solve();
  void stop();
  bool running() const;

  // κ for a slider position, and back: 10^(position / kSliderStepsPerDecade).
  static double condForSlider(int position);
  static int sliderForCond(double cond);
  static constexpr int kSliderStepsPerDecade = 4;
  static constexpr int kMaxDecades = 12;

  // The summary table's columns.
  enum Column { Run, Converged, Iterations, Gmres, Backward, Forward, Scale, Seconds, Reason, ColumnCount };

  SolverChart* chart() const { return m_chart; }
  QTableWidget* table() const { return m_table; }
  SolverRunner* runner() const { return m_runner; }
  // The runs of the last job, as they came.
  const std::vector<SolverOutcome>& outcomes() const { return m_outcomes; }
  QString statusText() const;

  void setPresentation(bool on);

 signals:
  // A job ended (done, stopped or failed): its curves and rows are shown.
  void solveFinished();

 private:
  void onOutcome(const SolverOutcome& o);
  void onFinished(bool stopped, const QString& error);
  void updateCondLabel();
  void updateButtons();

  QSpinBox* m_n = nullptr;
  QSlider* m_cond = nullptr;
  QLabel* m_condLabel = nullptr;
  QSpinBox* m_seed = nullptr;
  std::vector<std::pair<engine::SolveFormat, QCheckBox*>> m_formats;
  QCheckBox* m_tensorCore = nullptr;
  QComboBox* m_method = nullptr;
  QComboBox* m_residual = nullptr;
  QComboBox* m_gmres = nullptr;
  QSpinBox* m_maxIter = nullptr;
  QPushButton* m_solve = nullptr;
  QPushButton* m_stop = nullptr;
  QLabel* m_status = nullptr;
  SolverChart* m_chart = nullptr;
  QTableWidget* m_table = nullptr;
  SolverRunner* m_runner = nullptr;
  std::vector<SolverOutcome> m_outcomes;
  int m_expected = 0;
  SolverJob m_lesson;       // setLessonJob's
  bool m_lessonSet = false;
  bool m_settingJob = false;  // setJob at work: its control changes are not the user's
  SolverJob m_last;
  bool m_ranLesson = false;
  QElapsedTimer m_clock;
};
