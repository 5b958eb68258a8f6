// LessonController: the chosen lesson (a preset) — its settings in the setup
// panel, its text beside the charts, the charts it watches enlarged — and
// its runs: started side by side, their claims checked when they end.
#pragma once

#include <QObject>
#include <QVector>

#include <functional>
#include <memory>
#include <string>
#include <vector>

class ChartArea;
class CompareView;
class LectureMenu;
class LecturePanel;
class PrecisionTableController;
class QSplitter;
class QTabWidget;
class RunLauncher;
class RunStore;
class RunsList;
class SolverView;
class TrainingController;
class UserMessages;
namespace engine {
struct ClaimResult;
struct Preset;
}

// GUI thread only.
class LessonController : public QObject {
  Q_OBJECT

 public:
  struct Parts {
    RunStore* store;
    TrainingController* controller;
    RunLauncher* launcher;
    PrecisionTableController* settings;
    ChartArea* charts;
    CompareView* compare;
    RunsList* runs;
    LecturePanel* panel;
    LectureMenu* menu;
    QSplitter* liveSplitter;  // the charts and the lesson panel
    SolverView* solver;
    QSplitter* solverSplitter;  // the Solver tab: the view, and a solver lesson's panel
    QTabWidget* tabs;
    UserMessages* messages;
    std::function<bool()> presentation;  // whether presentation view is on
  };
  LessonController(const Parts& parts, QObject* parent);
  ~LessonController() override;

  // A built-in preset by name or a preset file: chosen as the lesson. A
  // preset that cannot be read is shown as an error (its one line) and
  // false returned; the lesson before it stays.
  bool open(const QString& nameOrFile);
  // Fills the setup panel with the lesson's settings, shows its title and
  // explanation beside the charts, enlarges the charts it watches. A
  // solver lesson instead opens the Solver tab with the lesson's system
  // and runs, its panel beside the solver. A preset without runs is shown
  // as an error and false returned; the lesson before it stays.
  bool set(const engine::Preset& preset);
  void leave();
  const engine::Preset* lesson() const { return m_lesson.get(); }
  // Runs the lesson's runs (a comparison group); `paused`: built and
  // waiting for Step. A solver lesson's runs are solved on the Solver
  // tab's thread (not paused: a solve has no steps to take one at a time).
  bool start(bool paused = false);
  bool solverLesson() const;
  // True while the open lesson is one this machine does not train (every
  // claim needs a backend it lacks): start() then shows why and returns false.
  bool notTrainedHere() const;
  // The store ids of the lesson's last start.
  const QVector<int>& runs() const { return m_runs; }

  // The charts the lesson names in `watch`, large; in presentation view
  // only those (loss and loss scale without a lesson).
  void applyWatch();
  // Presentation view on or off: the lesson's share of the width.
  void setPresentation(bool on);
  // After the lesson's runs end: its claims, checked on their output.
  void checkClaims();
  // After a solve ends: a solver lesson's claims, when the job was the
  // lesson's own.
  void checkSolveClaims();

 signals:
  // The lesson's claims were checked on its runs' output.
  void checked();

 private:
  Parts m_parts;
  // When every claim of the lesson needs a backend this machine lacks:
  // shows them skipped with the reason and returns true.
  bool showSkippedClaims();
  // The lesson panel beside the live charts, or beside the solver.
  void placePanel(bool besideSolver);
  // The chosen lesson's menu action ticked, the others not.
  void markChosen(const std::string& name);
  // Checked claims: in the panel, counted in the status line, checked().
  void showChecked(const std::vector<engine::ClaimResult>& results, const QString& note);
  std::unique_ptr<engine::Preset> m_lesson;
  QVector<int> m_runs;  // its title says whose precisions the table shows
};
