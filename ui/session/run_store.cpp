// RunStore: appends engine records to each run's engine::RunHistory.
#include "session/run_store.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <exception>
#include <variant>

#include "amp/recipe.h"

bool RunData::scalesLoss() const {
  if (config.loss_scale_set) return config.loss_scale.mode != engine::ScalingMode::None;
  try {
    return engine::make_recipe(config.recipe).scaling.mode != engine::ScalingMode::None;
  } catch (const std::exception&) {
    // "custom" and unknown recipes: what the run did says.
    for (const engine::StepMetrics& m : steps)
      if (m.loss_scale != 1.0) return true;
    return false;
  }
}

engine::RunSummary RunData::currentSummary() const {
  if (summary) return *summary;
  engine::RunSummary s = summarize(steps.empty() ? 1.0 : steps.back().loss_scale);
  s.run_id = id;
  s.recipe = config.recipe;
  s.model = config.model;
  s.dataset = config.dataset;
  s.backend = config.backend;
  return s;
}

engine::RunExport RunData::toExport() const {
  engine::RunExport x;
  // The window's numbering: "run 1" is the store's run 0, and run_id 1.
  const int exportId = id + 1;
  x.run_id = exportId;
  x.name = name.toStdString();
  x.recipe = config.recipe;
  x.config = config;
  x.history = *this;  // the RunHistory part
  x.summary = currentSummary();
  x.summary.run_id = exportId;
  for (engine::StepMetrics& m : x.history.steps) m.run_id = exportId;
  for (engine::EvalMetrics& e : x.history.evals) e.run_id = exportId;
  for (engine::Event& e : x.history.events) e.run_id = exportId;
  for (engine::GradStats& g : x.history.grads) g.run_id = exportId;
  for (engine::TextSample& t : x.history.texts) t.run_id = exportId;
  return x;
}

RunStore::RunStore(QObject* parent) : QObject(parent) {}

int RunStore::addRun(const QString& name, const QString& recipe, const QColor& colour,
                     const engine::RunConfig& config, int compareGroup) {
  RunData r;
  r.id = count();
  r.name = name;
  r.recipe = recipe;
  r.colour = colour;
  r.config = config;
  r.compareGroup = compareGroup;
  m_runs.push_back(std::move(r));
  emit runAdded(m_runs.back().id);
  return m_runs.back().id;
}

int RunStore::addStoredRun(RunData run) {
  run.id = count();
  ++run.revision;
  m_runs.push_back(std::move(run));
  emit runAdded(m_runs.back().id);
  return m_runs.back().id;
}

void RunStore::setFolder(int id, const QString& folder, int folderRun) {
  RunData& r = m_runs[static_cast<std::size_t>(id)];
  r.folder = folder;
  r.folderRun = folderRun;
}

QVector<int> RunStore::group(int compareGroup) const {
  QVector<int> ids;
  if (compareGroup < 0) return ids;
  for (const RunData& r : m_runs)
    if (r.compareGroup == compareGroup) ids << r.id;
  return ids;
}

void RunStore::setVisible(int id, bool visible) {
  RunData& r = m_runs[static_cast<std::size_t>(id)];
  if (r.visible == visible) return;
  r.visible = visible;
  ++r.revision;
  emit runChanged(id);
}

void RunStore::append(std::vector<engine::Record>& records, const QVector<int>& toStore) {
  if (records.empty()) return;
  QVector<int> changed;
  QVector<int> inspectedIds;
  auto target = [&](int trainerId) -> RunData* {
    if (trainerId < 0 || trainerId >= toStore.size()) return nullptr;
    RunData& r = m_runs[static_cast<std::size_t>(toStore[trainerId])];
    ++r.revision;
    return &r;
  };
  for (engine::Record& rec : records) {
    const int trainerId = std::visit([](const auto& r) { return r.run_id; }, rec);
    RunData* r = target(trainerId);
    if (!r) continue;
    if (auto* s = std::get_if<engine::RunSummary>(&rec)) {
      r->summary = std::move(*s);
    } else if (auto* in = std::get_if<engine::StepInspection>(&rec)) {
      r->inspection = std::move(*in);
      if (!inspectedIds.contains(r->id)) inspectedIds << r->id;
    } else if (auto* st = std::get_if<engine::RunStatus>(&rec)) {
      r->state = st->state;
      if (!st->message.empty()) r->message = QString::fromStdString(st->message);
      if (st->total_steps > 0) r->totalSteps = st->total_steps;
      if (!changed.contains(r->id)) changed << r->id;
    } else {
      r->add(rec);  // steps, evaluations, events, gradient statistics
    }
  }
  records.clear();
  for (int id : changed) emit runChanged(id);
  emit appended();
  for (int id : inspectedIds) emit inspected(id);
}
