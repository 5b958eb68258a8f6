// RunLauncher: validates and starts runs, names them, and forwards the run
// controls; the views follow the store on their own.
#include "session/run_launcher.h"

#include <QDialog>

#include <cmath>
#include <exception>

#include "amp/loss_scaler.h"
#include "charts/chart_area.h"
#include "charts/chart_style.h"
#include "compare/compare_dialog.h"
#include "compare/compare_view.h"
#include "lecture/lesson_controller.h"
#include "panels/precision_table_controller.h"
#include "panels/runs_list.h"
#include "panels/setup_panel.h"
#include "session/dataset_cache.h"
#include "session/run_store.h"
#include "session/training_controller.h"
#include "session/user_messages.h"
#include "train/comparison.h"
#include "train/layer_catalog.h"

RunLauncher::RunLauncher(const Parts& parts, QObject* parent) : QObject(parent), m_parts(parts) {
  m_compareRecipes = CompareDialog::defaultRecipes();
  connect(m_parts.charts, &ChartArea::pointsAppeared, this, [this] {
    if (m_firstPointMs >= 0 || !m_startClock.isValid()) return;
    m_firstPointMs = m_startClock.elapsed();
    emit firstPointShown(m_firstPointMs);
  });
  connect(m_parts.setup, &SetupPanel::lossScalerEdited, this, [this] {
    if (runActive()) sendLossScaler();
  });
}

bool RunLauncher::launch(const std::vector<engine::RunConfig>& configs, const QStringList& names, int compareGroup,
                         bool paused, const QString& folderName) {
  // Start to first point counts from here: the click.
  m_startClock.start();
  m_firstPointMs = -1;
  std::vector<TrainingController::RunRequest> requests;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    // Each recipe keeps its colour on every chart (chart_style::recipeStyle);
    // a later run of the same recipe gets a lighter shade of it.
    const QString recipe = QString::fromStdString(configs[i].recipe);
    int occurrence = 0;
    for (int id = 0; id < m_parts.store->count(); ++id) occurrence += m_parts.store->run(id).recipe == recipe ? 1 : 0;
    for (std::size_t j = 0; j < i; ++j) occurrence += configs[j].recipe == configs[i].recipe ? 1 : 0;
    requests.push_back({configs[i], names[static_cast<int>(i)], chart_style::recipeColour(recipe, occurrence)});
  }
  try {
    // Validate before anything is added: a bad setting never leaves a
    // half-started comparison behind.
    for (std::size_t i = 0; i < configs.size(); ++i) {
      const engine::RunConfig& c = configs[i];
      engine::validate(c, "settings");
      // Builds the model ("cnn: needs image samples ...") before any thread
      // starts; runs of a comparison share model and data: once.
      if (i == 0 || c.model != configs[0].model || c.dataset != configs[0].dataset || c.widths != configs[0].widths)
        (void)engine::describe_layers(c);
    }
    // The data set loaded in the background, if it is ready.
    if (auto data = m_parts.datasets->get(configs[0].dataset))
      m_parts.controller->provideData(configs[0].dataset, data);
    m_parts.charts->resetFirstPoint();
    m_parts.controller->start(requests, compareGroup, paused, folderName);
  } catch (const std::exception& e) {
    m_parts.messages->error(compareGroup >= 0 ? tr("Cannot start the comparison") : tr("Cannot start the run"),
                            QString::fromStdString(e.what()));
    return false;
  }
  emit controlsChanged();
  emit launched();
  return true;
}

QString RunLauncher::nextRunName(int offset) const {
  // "run N" is the run's place in the session (its store id + 1), which is
  // also its run_id in an export: the window and the files number runs
  // alike, whatever lessons or reopened runs came before.
  return tr("run %1").arg(m_parts.store->count() + offset + 1);
}

bool RunLauncher::readyToStart() {
  if (!m_parts.controller->active()) return true;
  for (int id : m_parts.controller->currentRuns())
    if (m_parts.store->run(id).live()) return false;
  m_parts.controller->shutdown();
  return true;
}

bool RunLauncher::runActive() const {
  // A run that failed (or ended) while the thread winds down leaves Start enabled.
  bool anyLive = false;
  for (int id : m_parts.controller->currentRuns()) anyLive = anyLive || m_parts.store->run(id).live();
  return m_parts.controller->active() && anyLive;
}

int RunLauncher::liveFocusRun() const {
  const int current = m_parts.runs->currentRun();
  if (current >= 0 && m_parts.controller->isCurrent(current) && m_parts.store->run(current).live()) return current;
  for (int id : m_parts.controller->currentRuns())
    if (m_parts.store->run(id).live()) return id;
  return -1;
}

bool RunLauncher::startRun() {
  if (!readyToStart()) return false;
  if (m_lesson && m_lesson->lesson()) return m_lesson->start();
  const engine::RunConfig c = m_parts.settings->nextRunConfig();
  const QString name = nextRunName();
  if (!launch({c}, {name}, -1, false)) return false;
  m_parts.messages->status(tr("Started %1 (%2)").arg(name, QString::fromStdString(c.recipe)), 4000);
  return true;
}

bool RunLauncher::startComparison(const QStringList& recipes) {
  if (recipes.isEmpty() || !readyToStart()) return false;
  // The presets as they are, without the table's overrides: the comparison
  // is of recipes (same seed, same data, same weights). The engine's one
  // rule (shared with precision-lab-cli compare) says which recipes take
  // the panel's loss-scaler settings.
  engine::RunConfig base = m_parts.settings->nextRunConfig();
  base.layers.clear();
  std::vector<std::string> names8;
  for (const QString& r : recipes) names8.push_back(r.toStdString());
  std::vector<engine::RunConfig> configs;
  QStringList names;
  for (engine::ComparisonRun& run : engine::comparison_runs(base, names8)) {
    configs.push_back(std::move(run.config));
    names << nextRunName(static_cast<int>(names.size()));
  }
  try {
    for (const engine::RunConfig& c : configs) engine::validate(c, "settings");
  } catch (const std::exception& e) {
    m_parts.messages->error(tr("Cannot start the comparison"), QString::fromStdString(e.what()));
    return false;
  }
  const int previous = m_parts.store->count();
  const int realGroup = m_parts.store->newCompareGroup();
  if (!launch(configs, names, realGroup, false, QStringLiteral("compare-") + recipes.join(QLatin1Char('+'))))
    return false;
  // Older runs step back: the overlay shows the comparison (re-tick to add).
  for (int id = 0; id < previous; ++id) m_parts.runs->setRunChecked(id, false);
  m_parts.compare->setGroup(realGroup);
  m_parts.messages->status(tr("Comparing %1 on seed %2; the summary is on the Compare tab")
                               .arg(recipes.join(QStringLiteral(", ")))
                               .arg(base.seed),
                           8000);
  return true;
}

void RunLauncher::togglePause() {
  if (!m_parts.controller->active()) return;
  if (m_parts.controller->paused())
    m_parts.controller->resume();
  else
    m_parts.controller->pause();
  emit controlsChanged();
}

void RunLauncher::stepOnce() {
  emit inspectorWanted(false);
  if (!readyToStart()) {
    m_parts.controller->stepOnce();
  } else {
    // No run yet: build one paused (the lesson's, when one is chosen) and
    // take its first step.
    if (m_lesson && m_lesson->lesson()) {
      if (!m_lesson->start(true)) return;
      m_parts.controller->stepOnce();
      emit inspectorWanted(true);
      emit controlsChanged();
      return;
    }
    const engine::RunConfig c = m_parts.settings->nextRunConfig();
    const QString name = nextRunName();
    if (!launch({c}, {name}, -1, true)) return;
    m_parts.controller->stepOnce();
  }
  emit controlsChanged();
}

void RunLauncher::stopRun() {
  if (!m_parts.controller->active()) return;
  m_parts.controller->stop();
  m_parts.messages->status(tr("Stopping at the next step boundary…"));
}

void RunLauncher::openCompareDialog() {
  if (!readyToStart()) return;
  CompareDialog dialog(m_compareRecipes, m_parts.setup->settings().seed, m_parts.window);
  if (dialog.exec() != QDialog::Accepted) return;
  m_compareRecipes = dialog.recipes();
  startComparison(m_compareRecipes);
}

bool RunLauncher::sendLossScaler() {
  const int live = liveFocusRun();
  const engine::LossScalerConfig scaler = m_parts.setup->lossScaler();
  try {
    if (live < 0 || !m_parts.controller->setLossScaler(live, scaler)) {
      m_parts.messages->error(tr("Loss scaling"), tr("No run is training: the next run takes these settings"));
      return false;
    }
  } catch (const std::exception& e) {
    // A value on its way to a valid one (a factor stepped down to 1): a
    // status line, not a box under the user's mouse.
    m_parts.messages->status(tr("Loss scaling not changed: %1").arg(QString::fromStdString(e.what())), 8000);
    return false;
  }
  const double e = std::log2(scaler.init_scale);
  const QString scale = e == std::round(e) ? QStringLiteral("2^%1").arg(static_cast<int>(e))
                                           : QString::number(scaler.init_scale, 'g', 6);
  m_parts.messages->status(tr("%1: loss scaling %2 from %3 (growth %4, backoff %5, every %6 steps) at the next step")
                               .arg(m_parts.store->run(live).name,
                                    QString::fromLatin1(engine::scaling_mode_key(scaler.mode)), scale)
                               .arg(scaler.growth_factor)
                               .arg(scaler.backoff_factor)
                               .arg(scaler.growth_interval),
                           6000);
  return true;
}
