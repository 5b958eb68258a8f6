// LessonController: chooses, shows, starts and checks a lesson.
#include "lecture/lesson_controller.h"

#include <QAction>
#include <QSplitter>
#include <QTabWidget>

#include <algorithm>
#include <exception>

#include "charts/chart_area.h"
#include "charts/gradient_panel.h"
#include "compare/compare_view.h"
#include "backend/registry.h"
#include "lecture/claims.h"
#include "lecture/lecture_menu.h"
#include "lecture/lecture_panel.h"
#include "lecture/preset.h"
#include "panels/precision_table_controller.h"
#include "panels/runs_list.h"
#include "session/run_launcher.h"
#include "session/run_store.h"
#include "session/training_controller.h"
#include "session/user_messages.h"
#include "solver/solver_view.h"

namespace {

// When every claim of `p` needs a backend this machine lacks (a GPU lesson
// on a CPU), what the machine has, short ("cpu (no CUDA device)"),
// else "" (as the CLI's lecture decides).
std::string missingBackend(const engine::Preset& p) {
  const std::string needed = engine::required_backend(p);
  if (needed.empty()) return "";
  for (const engine::BackendAvailability& b : engine::available_backends())
    if (b.name == needed) {
      if (b.available) return "";
      // The reason's head ("no CUDA device", "libpl_cuda.so not found"):
      // the details (paths without spaces) would widen the lesson panel
      // past the charts' room.
      std::string why = b.reason.substr(0, b.reason.find(" ("));
      if (why.size() > 60) why = why.substr(0, 57) + "...";
      return "cpu (" + why + ")";
    }
  return "cpu (no " + needed + " backend in this build)";
}

}  // namespace

LessonController::LessonController(const Parts& parts, QObject* parent) : QObject(parent), m_parts(parts) {
  connect(m_parts.panel, &LecturePanel::closeRequested, this, &LessonController::leave);
  connect(m_parts.menu, &LectureMenu::presetChosen, this, [this](const QString& nameOrFile) { open(nameOrFile); });
  // A new start: the claims shown belong to the runs before it.
  connect(m_parts.launcher, &RunLauncher::launched, this, [this] {
    if (m_lesson) m_parts.panel->resetClaims();
    m_runs.clear();
  });
}

LessonController::~LessonController() = default;

bool LessonController::open(const QString& nameOrFile) {
  try {
    return set(engine::find_preset(nameOrFile.toStdString()));
  } catch (const std::exception& e) {
    m_parts.messages->error(tr("Cannot open the lesson"), QString::fromStdString(e.what()));
    return false;
  }
}

namespace {

// A solver lesson's job: its system and its runs.
SolverJob lessonJob(const engine::Preset& p) {
  SolverJob j;
  j.n = p.problem.n;
  j.cond = p.problem.cond;
  j.seed = p.problem.seed;
  j.matrixScale = p.problem.matrix_scale;
  j.runs = p.solve_runs;
  for (engine::SolveRun& r : j.runs) r.result = {};
  return j;
}

// Whether two jobs solve the same system with the same runs.
bool sameJob(const SolverJob& a, const SolverJob& b) {
  if (a.n != b.n || a.cond != b.cond || a.seed != b.seed || a.matrixScale != b.matrixScale ||
      a.runs.size() != b.runs.size())
    return false;
  for (std::size_t i = 0; i < a.runs.size(); ++i)
    if (a.runs[i].name != b.runs[i].name) return false;
  return true;
}

}  // namespace

void LessonController::markChosen(const std::string& name) {
  for (QAction* a : m_parts.menu->presetActions()) {
    a->setCheckable(true);
    a->setChecked(a->data().toString() == QString::fromStdString(name));
  }
}

void LessonController::showChecked(const std::vector<engine::ClaimResult>& results, const QString& note) {
  m_parts.panel->setClaimResults(results, note);
  int passed = 0, skipped = 0;
  for (const engine::ClaimResult& r : results) {
    passed += r.pass ? 1 : 0;
    skipped += r.skipped ? 1 : 0;
  }
  const QString line = tr("Lesson checked: %1 of %2 claims hold").arg(passed).arg(results.size() - skipped);
  m_parts.messages->status(skipped ? line + tr(", %1 skipped").arg(skipped) : line, 10000);
  emit checked();
}

void LessonController::placePanel(bool besideSolver) {
  QSplitter* want = besideSolver ? m_parts.solverSplitter : m_parts.liveSplitter;
  if (m_parts.panel->parentWidget() == want) return;
  want->addWidget(m_parts.panel);  // takes it from the other splitter
  want->setStretchFactor(1, 1);
}

bool LessonController::solverLesson() const { return m_lesson && m_lesson->kind == engine::PresetKind::Solve; }

bool LessonController::set(const engine::Preset& preset) {
  const bool solve = preset.kind == engine::PresetKind::Solve;
  if (solve ? preset.solve_runs.empty() : preset.runs.empty()) {
    m_parts.messages->error(tr("Cannot open the lesson"),
                            tr("%1: the preset has no runs").arg(QString::fromStdString(preset.name)));
    return false;
  }
  m_lesson = std::make_unique<engine::Preset>(preset);
  m_runs.clear();
  placePanel(solve);
  m_parts.panel->setPreset(preset);
  m_parts.panel->show();
  markChosen(preset.name);
  if (solve) {
    m_parts.solver->setLessonJob(lessonJob(preset));
    m_parts.tabs->setCurrentWidget(m_parts.solverSplitter);
    setPresentation(m_parts.presentation());  // the lesson's share of the width, the watched charts
    m_parts.messages->status(tr("Lesson: %1 — Start (F5) solves its %2 runs")
                                 .arg(QString::fromStdString(preset.title))
                                 .arg(preset.solve_runs.size()),
                             8000);
    return true;
  }
  m_parts.solver->clearLessonJob();
  // The setup panel shows the first run's settings (the runs share data,
  // model, length and seed; they differ in precision).
  m_parts.settings->setBaseConfig(preset.runs.front().config);
  // A lesson this machine cannot train shows its claims skipped at once.
  showSkippedClaims();
  QSplitter* live = m_parts.liveSplitter;
  live->setSizes({3 * live->width() / 4, live->width() / 4});
  m_parts.tabs->setCurrentWidget(live);
  applyWatch();
  m_parts.messages->status(tr("Lesson: %1 — Start (F5) runs its %2 runs side by side")
                               .arg(QString::fromStdString(preset.title))
                               .arg(preset.runs.size()),
                           8000);
  return true;
}

void LessonController::leave() {
  if (solverLesson()) m_parts.solver->clearLessonJob();
  m_lesson.reset();
  m_runs.clear();
  m_parts.panel->hide();
  for (QAction* a : m_parts.menu->presetActions()) a->setChecked(false);
  applyWatch();
}

void LessonController::applyWatch() {
  QVector<ChartArea::Metric> watched;
  if (m_lesson) {
    for (const std::string& w : m_lesson->watch) {
      // "gradients:fc2" also puts the gradient panel on that layer.
      const QString name = QString::fromStdString(w);
      const int chart = m_parts.charts->chartIndex(name.section(QLatin1Char(':'), 0, 0));
      if (chart < 0) continue;
      watched << static_cast<ChartArea::Metric>(chart);
      const QString layer = name.section(QLatin1Char(':'), 1);
      if (chart == ChartArea::Gradients && !layer.isEmpty()) m_parts.charts->gradientPanel()->setLayer(layer);
    }
  }
  const bool presentation = m_parts.presentation();
  if (watched.isEmpty() && presentation) watched = {ChartArea::Loss, ChartArea::LossScale};
  m_parts.charts->setWatched(watched, presentation);
}

void LessonController::setPresentation(bool on) {
  applyWatch();
  // The lesson takes a third of the width: its explanation in large type.
  if (m_lesson) {
    QSplitter* live = solverLesson() ? m_parts.solverSplitter : m_parts.liveSplitter;
    const int w = std::max(live->width(), 600);
    // Beside the solver (its settings, chart and table) the lesson gets less.
    const int share = solverLesson() ? 31 : 37;
    live->setSizes(on ? QList<int>{w * (100 - share) / 100, w * share / 100} : QList<int>{w * 3 / 4, w / 4});
  }
}

bool LessonController::notTrainedHere() const { return m_lesson && !missingBackend(*m_lesson).empty(); }

bool LessonController::showSkippedClaims() {
  const std::string here = m_lesson ? missingBackend(*m_lesson) : std::string();
  if (here.empty()) return false;
  m_parts.panel->setClaimResults(
      engine::check_claims(*m_lesson, {}, here),
      tr("Not trained here: every claim needs the %1 backend, and a GPU-sized model takes minutes a step on a CPU.")
          .arg(QString::fromStdString(engine::required_backend(*m_lesson))));
  return true;
}

bool LessonController::start(bool paused) {
  if (solverLesson()) {
    if (paused) {
      m_parts.messages->status(tr("A solve has no steps to take one at a time: Start (F5) solves the lesson"), 6000);
      return false;
    }
    // Start runs the lesson's job, even after the controls were changed.
    if (!m_parts.solver->lessonJobSet()) m_parts.solver->setLessonJob(lessonJob(*m_lesson));
    m_parts.tabs->setCurrentWidget(m_parts.solverSplitter);
    if (!m_parts.solver->solve()) return false;
    m_parts.panel->resetClaims();
    m_parts.messages->status(tr("Lesson: %1 — solving").arg(QString::fromStdString(m_lesson->title)), 8000);
    return true;
  }
  if (!m_lesson || !m_parts.launcher->readyToStart()) return false;
  // A lesson whose every claim needs a backend this machine lacks is not
  // trained: its claims stay skipped, with the reason.
  if (showSkippedClaims()) {
    m_parts.messages->status(tr("Lesson %1 needs the %2 backend: not trained on this machine")
                                 .arg(QString::fromStdString(m_lesson->name),
                                      QString::fromStdString(engine::required_backend(*m_lesson))),
                             8000);
    return false;
  }
  std::vector<engine::RunConfig> configs;
  QStringList names;
  for (const engine::PresetRun& r : m_lesson->runs) {
    configs.push_back(r.config);
    names << QString::fromStdString(r.name);
  }
  const int previous = m_parts.store->count();
  const int group = m_parts.store->newCompareGroup();
  if (!m_parts.launcher->launch(configs, names, group, paused, QString::fromStdString(m_lesson->name))) return false;
  m_runs = m_parts.controller->currentRuns();
  // Older runs step back: the charts show the lesson.
  for (int id = 0; id < previous; ++id) m_parts.runs->setRunChecked(id, false);
  m_parts.compare->setGroup(group);
  m_parts.messages->status(
      tr("Lesson: %1 — %2").arg(QString::fromStdString(m_lesson->title), names.join(QStringLiteral(", "))), 8000);
  return true;
}

void LessonController::checkSolveClaims() {
  if (!solverLesson() || !m_parts.solver->lastJobWasLesson()) return;
  const SolverJob& job = m_parts.solver->lastJob();
  if (!sameJob(job, lessonJob(*m_lesson))) return;
  std::vector<engine::SolveRun> runs;
  for (const SolverOutcome& o : m_parts.solver->outcomes()) {
    engine::SolveRun r;
    r.name = job.runs.at(static_cast<std::size_t>(o.index)).name;
    r.config = o.config;
    r.result = o.result;
    runs.push_back(std::move(r));
  }
  const std::vector<engine::ClaimResult> results = engine::check_claims(*m_lesson, runs);
  QString note;
  if (runs.size() < job.runs.size())
    note = tr("Stopped after %1 of %2 runs: a claim on a run not solved fails.").arg(runs.size()).arg(job.runs.size());
  showChecked(results, note);
}

// The claims are checked on the same data the CSV export holds.
void LessonController::checkClaims() {
  if (!m_lesson || solverLesson() || m_runs.isEmpty() || m_parts.controller->currentRuns() != m_runs) return;
  std::vector<engine::RunExport> exports;
  QStringList shortRuns;
  for (int id : m_runs) {
    const RunData& r = m_parts.store->run(id);
    exports.push_back(r.toExport());
    const std::int64_t done = r.steps.empty() ? 0 : r.steps.back().step;
    // A run that diverged ended as the lesson means it to (lm-fp16-adam):
    // its claims are made for what it did.
    const bool diverged = std::any_of(r.events.begin(), r.events.end(),
                                      [](const engine::Event& e) { return e.kind == engine::EventKind::NanLoss; });
    if (r.totalSteps > 0 && done < r.totalSteps && !diverged)
      shortRuns << tr("%1 stopped at step %2 of %3").arg(r.name).arg(done).arg(r.totalSteps);
  }
  const std::vector<engine::ClaimResult> results = engine::check_claims(*m_lesson, exports);
  QString note;
  if (!shortRuns.isEmpty()) note = tr("%1: the claims are made for whole runs.").arg(shortRuns.join(QStringLiteral("; ")));
  showChecked(results, note);
}
