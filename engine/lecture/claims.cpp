// Claims: each preset's promise measured on its runs' output.
#include "lecture/claims.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>

#include "lecture/solve_lesson.h"

namespace engine {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const RunExport* find_run(const std::vector<RunExport>& runs, const std::string& name) {
  for (const RunExport& r : runs)
    if ((r.name.empty() ? r.recipe : r.name) == name) return &r;
  return nullptr;
}

// The GradStats rows of the run's last statistics step.
std::vector<const GradStats*> last_stats(const RunExport& r) {
  std::vector<const GradStats*> out;
  if (r.history.grads.empty()) return out;
  const std::int64_t step = r.history.grads.back().step;
  for (const GradStats& g : r.history.grads)
    if (g.step == step) out.push_back(&g);
  return out;
}

// `field` of `layer` at the last statistics step, or the largest over layers.
template <typename F>
double stat(const RunExport& r, const std::string& layer, F field) {
  double best = kNaN;
  for (const GradStats* g : last_stats(r)) {
    if (!layer.empty() && g->layer != layer) continue;
    const double v = field(*g);
    if (std::isnan(best) || v > best) best = v;
  }
  return best;
}

// The value of the metric for one run (no vs).
double own_value(const Claim& c, const RunExport& r) {
  const RunSummary& s = r.summary;
  const auto& m = c.metric;
  if (m == "final_loss") return s.final_loss;
  // No evaluation (a run that diverged first): nothing measured, not 0.
  if (m == "val_loss") return r.history.evals.empty() ? kNaN : s.val_loss;
  if (m == "val_accuracy") return s.val_accuracy >= 0 ? 100.0 * s.val_accuracy : kNaN;
  if (m == "peak_memory") return static_cast<double>(s.peak_memory_bytes);
  if (m == "overflow_steps") return static_cast<double>(s.overflow_steps);
  if (m == "skipped_steps") return static_cast<double>(s.skipped_steps);
  if (m == "scale_backoffs" || m == "scale_growths") {
    const bool down = m == "scale_backoffs";
    std::int64_t n = 0;
    const auto& st = r.history.steps;
    for (std::size_t i = 1; i < st.size(); ++i)
      n += down ? st[i].loss_scale < st[i - 1].loss_scale : st[i].loss_scale > st[i - 1].loss_scale;
    return static_cast<double>(n);
  }
  if (m == "underflow") return stat(r, c.layer, [](const GradStats& g) { return g.underflow_unscaled; });
  if (m == "output_error") return stat(r, c.layer, [](const GradStats& g) { return g.output_error; });
  if (m == "grad_error") return stat(r, c.layer, [](const GradStats& g) { return g.grad_error; });
  if (m == "grad_bias") return stat(r, c.layer, [](const GradStats& g) { return g.grad_bias; });
  if (m == "samples_per_second") {
    std::vector<double> rates;
    const auto& st = r.history.steps;
    for (std::size_t i = st.size() > 2 ? 2 : 0; i < st.size(); ++i) rates.push_back(st[i].samples_per_second);
    if (rates.empty()) return kNaN;
    std::sort(rates.begin(), rates.end());
    const std::size_t h = rates.size() / 2;
    return rates.size() % 2 ? rates[h] : 0.5 * (rates[h - 1] + rates[h]);
  }
  if (m == "device_memory") {
    // The run's own allocation where the backend counts one (on a GPU each
    // run of a trainer has its own context and memory pool), else the
    // whole device's use, else the recipe's accounting.
    std::int64_t own = 0, device = 0;
    for (const StepMetrics& sm : r.history.steps) {
      own = std::max(own, sm.device_allocated);
      device = std::max(device, sm.device_used);
    }
    if (own > 0) return static_cast<double>(own);
    return device > 0 ? static_cast<double>(device) : static_cast<double>(s.peak_memory_bytes);
  }
  if (m == "attributed_overflows") {
    std::int64_t n = 0;
    for (const Event& e : r.history.events)
      n += e.kind == EventKind::Overflow && !e.layer.empty() && !e.tensor.empty() && e.count > 0;
    return static_cast<double>(n);
  }
  return kNaN;
}

std::string number(double v) {
  char buf[48];
  if (std::isnan(v)) return "n/a";
  const double a = std::fabs(v);
  if (a != 0 && (a < 1e-3 || a >= 1e6)) std::snprintf(buf, sizeof buf, "%.3g", v);
  else std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

}  // namespace

double claim_value(const Claim& c, const std::vector<RunExport>& runs) {
  const RunExport* run = find_run(runs, c.run);
  if (!run) return kNaN;
  const double v = own_value(c, *run);
  if (c.vs.empty()) return v;
  const RunExport* vs = find_run(runs, c.vs);
  if (!vs) return kNaN;
  const double w = own_value(c, *vs);
  if (c.metric == "val_accuracy") return w - v;  // the gap, in points
  return w != 0 ? v / w : (v == 0 ? 1.0 : std::numeric_limits<double>::infinity());
}

std::string claim_label(const Claim& c) {
  std::string s = c.metric;
  if (c.metric == "val_accuracy" && !c.vs.empty()) return s + " gap " + c.vs + " - " + c.run + " (points)";
  s += " " + c.run;
  if (!c.layer.empty()) s += " " + c.layer;
  if (!c.vs.empty()) s += " / " + c.vs;
  return s;
}

namespace {

// Why `c` is skipped on `runs` ("" when it is not).
std::string skip_reason(const Claim& c, const std::vector<RunExport>& runs, const std::string& note) {
  if (c.required_backend.empty()) return "";
  const RunExport* run = find_run(runs, c.run);
  if (run && run->summary.backend == c.required_backend) return "";
  const std::string ran = !note.empty() ? note : run ? run->summary.backend : std::string("no run");
  return "needs the " + c.required_backend + " backend; this machine ran " + ran;
}

template <typename Value>
std::vector<ClaimResult> check_each(const Preset& p, Value value,
                                    const std::function<std::string(const Claim&)>& skip = nullptr) {
  std::vector<ClaimResult> out;
  for (const Claim& c : p.expect) {
    ClaimResult r;
    r.claim = c;
    if (skip) r.reason = skip(c);
    if (!r.reason.empty()) {
      r.skipped = true;
      r.value = kNaN;
      r.text = "SKIP  " + claim_label(c) + ": " + r.reason;
      out.push_back(std::move(r));
      continue;
    }
    r.value = value(c);
    r.pass = !std::isnan(r.value) && (!c.min || r.value >= *c.min) && (!c.max || r.value <= *c.max);
    std::string bounds;
    if (c.min) bounds += ">= " + number(*c.min);
    if (c.max) bounds += std::string(bounds.empty() ? "" : ", ") + "<= " + number(*c.max);
    r.text = std::string(r.pass ? "PASS  " : "FAIL  ") + claim_label(c) + " = " + number(r.value) + "  (" + bounds + ")";
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

std::vector<ClaimResult> check_claims(const Preset& p, const std::vector<RunExport>& runs,
                                      const std::string& backend_note) {
  return check_each(
      p, [&](const Claim& c) { return claim_value(c, runs); },
      [&](const Claim& c) { return skip_reason(c, runs, backend_note); });
}

std::vector<ClaimResult> check_claims(const Preset& p, const std::vector<SolveRun>& runs) {
  return check_each(p, [&](const Claim& c) { return solve_claim_value(c, runs); });
}

}  // namespace engine
