// RunHistory: one run's records and the counters its summary needs; event kinds by name.
#include <algorithm>
#include <cmath>
#include <limits>

#include "records/metrics.h"

namespace engine {

namespace {
constexpr const char* kEventKindNames[] = {"overflow",         "nan_loss", "skipped", "scale_change",
                                           "precision_change", "error"};
}  // namespace

const char* event_kind_name(EventKind k) { return kEventKindNames[static_cast<int>(k)]; }

std::optional<EventKind> parse_event_kind(std::string_view s) {
  for (int i = 0; i < static_cast<int>(std::size(kEventKindNames)); ++i)
    if (s == kEventKindNames[i]) return static_cast<EventKind>(i);
  return std::nullopt;
}

void RunHistory::add(const StepMetrics& m) {
  if (m.overflow) ++overflow_steps;
  if (m.skipped) ++skipped_steps;
  peak_memory = std::max(peak_memory, m.mem.total());
  wall_seconds += m.wall_ms / 1000.0;
  // samples_per_second is batch / wall time: this gives the batch back.
  samples += std::round(m.samples_per_second * m.wall_ms / 1000.0);
  steps.push_back(m);
}

bool RunHistory::add(const Record& r) {
  if (const auto* m = std::get_if<StepMetrics>(&r)) add(*m);
  else if (const auto* e = std::get_if<EvalMetrics>(&r)) add(*e);
  else if (const auto* ev = std::get_if<Event>(&r)) add(*ev);
  else if (const auto* g = std::get_if<GradStats>(&r)) add(*g);
  else if (const auto* t = std::get_if<TextSample>(&r)) add(*t);
  else return false;
  return true;
}

const GradStats* RunHistory::latest_grad(const std::string& layer) const {
  for (auto it = grads.rbegin(); it != grads.rend(); ++it)
    if (it->layer == layer) return &*it;
  return nullptr;
}

std::vector<std::string> RunHistory::grad_layers() const {
  std::vector<std::string> layers;
  for (const GradStats& g : grads) {
    // Every layer reports at the same step: once a later step starts, all are known.
    if (g.step != grads.front().step) break;
    if (std::find(layers.begin(), layers.end(), g.layer) == layers.end()) layers.push_back(g.layer);
  }
  return layers;
}

double RunHistory::loss_scale_at(std::int64_t step) const {
  // Steps are 1-based and contiguous: step s is at index s - 1.
  if (step >= 1 && static_cast<std::size_t>(step) <= steps.size()) {
    const StepMetrics& m = steps[static_cast<std::size_t>(step - 1)];
    if (m.step == step) return m.loss_scale;
  }
  for (const StepMetrics& m : steps)
    if (m.step == step) return m.loss_scale;
  return 1.0;
}

RunSummary RunHistory::summarize(double final_loss_scale) const {
  RunSummary s;
  s.steps = steps.empty() ? 0 : steps.back().step;
  s.final_loss = steps.empty() ? std::numeric_limits<double>::quiet_NaN() : steps.back().loss;
  if (!evals.empty()) {
    s.val_accuracy = evals.back().val_accuracy;
    s.val_loss = evals.back().val_loss;
    s.per_token = evals.back().per_token;
  }
  s.overflow_steps = overflow_steps;
  s.skipped_steps = skipped_steps;
  s.final_loss_scale = final_loss_scale;
  s.peak_memory_bytes = peak_memory;
  s.wall_seconds = wall_seconds;
  s.samples_per_second = wall_seconds > 0 ? samples / wall_seconds : 0.0;
  return s;
}

}  // namespace engine
