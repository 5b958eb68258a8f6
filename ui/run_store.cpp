// RunStore: appends engine records to each run's history and keeps the
// running counters the charts and the summary table use.
#include "run_store.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <variant>

const engine::GradStats* RunData::latestGrad(const std::string& layer) const {
  for (auto it = grads.rbegin(); it != grads.rend(); ++it)
    if (it->layer == layer) return &*it;
  return nullptr;
}

std::vector<std::string> RunData::gradLayers() const {
  std::vector<std::string> layers;
  for (const engine::GradStats& g : grads) {
    if (std::find(layers.begin(), layers.end(), g.layer) == layers.end()) layers.push_back(g.layer);
    // Every layer reports at the same step: once a step repeats, all are known.
    if (!layers.empty() && g.step != grads.front().step) break;
  }
  return layers;
}

double RunData::lossScaleAt(std::int64_t step) const {
  // Steps are 1-based and contiguous: step s is at index s - 1.
  if (step >= 1 && static_cast<std::size_t>(step) <= steps.size()) {
    const engine::StepMetrics& m = steps[static_cast<std::size_t>(step - 1)];
    if (m.step == step) return m.loss_scale;
  }
  for (const engine::StepMetrics& m : steps)
    if (m.step == step) return m.loss_scale;
  return 1.0;
}

engine::RunSummary RunData::currentSummary() const {
  if (summary) return *summary;
  engine::RunSummary s;
  s.run_id = id;
  s.recipe = config.recipe;
  s.model = config.model;
  s.dataset = config.dataset;
  s.backend = config.backend;
  s.steps = steps.empty() ? 0 : steps.back().step;
  s.final_loss = steps.empty() ? std::numeric_limits<double>::quiet_NaN() : steps.back().loss;
  if (!evals.empty()) {
    s.val_accuracy = evals.back().val_accuracy;
    s.val_loss = evals.back().val_loss;
  }
  s.overflow_steps = overflowSteps;
  s.skipped_steps = skippedSteps;
  s.final_loss_scale = steps.empty() ? 1.0 : steps.back().loss_scale;
  s.peak_memory_bytes = peakMemory;
  s.wall_seconds = stepWallMs / 1000.0;
  s.samples_per_second = stepWallMs > 0 ? samples / (stepWallMs / 1000.0) : 0.0;
  return s;
}

engine::RunExport RunData::toExport() const {
  engine::RunExport x;
  x.run_id = id;
  x.recipe = config.recipe;
  x.config = config;
  x.steps = steps;
  x.evals = evals;
  x.events = events;
  x.grad_stats = grads;
  x.summary = currentSummary();
  x.summary.run_id = id;
  for (engine::StepMetrics& m : x.steps) m.run_id = id;
  for (engine::EvalMetrics& e : x.evals) e.run_id = id;
  for (engine::Event& e : x.events) e.run_id = id;
  for (engine::GradStats& g : x.grad_stats) g.run_id = id;
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
  auto target = [&](int trainerId) -> RunData* {
    if (trainerId < 0 || trainerId >= toStore.size()) return nullptr;
    RunData& r = m_runs[static_cast<std::size_t>(toStore[trainerId])];
    ++r.revision;
    return &r;
  };
  for (engine::Record& rec : records) {
    if (auto* m = std::get_if<engine::StepMetrics>(&rec)) {
      if (RunData* r = target(m->run_id)) {
        if (m->overflow) ++r->overflowSteps;
        if (m->skipped) ++r->skippedSteps;
        r->peakMemory = std::max(r->peakMemory, m->mem.total());
        r->stepWallMs += m->wall_ms;
        r->samples += std::round(m->samples_per_second * m->wall_ms / 1000.0);
        r->steps.push_back(std::move(*m));
      }
    } else if (auto* e = std::get_if<engine::EvalMetrics>(&rec)) {
      if (RunData* r = target(e->run_id)) r->evals.push_back(std::move(*e));
    } else if (auto* ev = std::get_if<engine::Event>(&rec)) {
      if (RunData* r = target(ev->run_id)) r->events.push_back(std::move(*ev));
    } else if (auto* g = std::get_if<engine::GradStats>(&rec)) {
      if (RunData* r = target(g->run_id)) r->grads.push_back(std::move(*g));
    } else if (auto* s = std::get_if<engine::RunSummary>(&rec)) {
      if (RunData* r = target(s->run_id)) r->summary = std::move(*s);
    } else if (auto* st = std::get_if<engine::RunStatus>(&rec)) {
      if (RunData* r = target(st->run_id)) {
        r->state = st->state;
        if (!st->message.empty()) r->message = QString::fromStdString(st->message);
        if (st->total_steps > 0) r->totalSteps = st->total_steps;
        if (!changed.contains(r->id)) changed << r->id;
      }
    }
  }
  records.clear();
  for (int id : changed) emit runChanged(id);
  emit appended();
}
