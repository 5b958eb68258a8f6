// Difference to a reference run: centred moving means by prefix sums over
// the steps, so a long run costs one pass.
#include "compare/difference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "session/run_store.h"

namespace difference {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The run's value at each step (index = step), NaN where it has none.
std::vector<double> byStep(const RunData& r, Quantity q, std::int64_t last) {
  std::vector<double> v(static_cast<std::size_t>(last + 1), kNaN);
  for (const engine::StepMetrics& m : r.steps) {
    if (m.step < 0 || m.step > last) continue;
    const double x = q == Quantity::Loss ? m.loss : (m.train_accuracy >= 0 ? 100.0 * m.train_accuracy : kNaN);
    if (std::isfinite(x)) v[static_cast<std::size_t>(m.step)] = x;
  }
  return v;
}

// The centred moving mean of `v` over s-h..s+h (NaN ignored; NaN where the
// window holds nothing).
std::vector<double> movingMean(const std::vector<double>& v, int h) {
  const std::size_t n = v.size();
  std::vector<double> sum(n + 1, 0.0);
  std::vector<std::int64_t> count(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const bool ok = std::isfinite(v[i]);
    sum[i + 1] = sum[i] + (ok ? v[i] : 0.0);
    count[i + 1] = count[i] + (ok ? 1 : 0);
  }
  std::vector<double> out(n, kNaN);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t lo = i >= static_cast<std::size_t>(h) ? i - static_cast<std::size_t>(h) : 0;
    const std::size_t hi = std::min(n, i + static_cast<std::size_t>(h) + 1);
    const std::int64_t c = count[hi] - count[lo];
    if (c > 0) out[i] = (sum[hi] - sum[lo]) / static_cast<double>(c);
  }
  return out;
}

std::int64_t lastStep(const RunData& r) { return r.steps.empty() ? 0 : r.steps.back().step; }

}  // namespace

int halfWindow(std::int64_t steps) { return static_cast<int>(std::max<std::int64_t>(5, steps / 100)); }

QList<QPointF> smoothedDifference(const RunData& run, const RunData& ref, Quantity q, int h) {
  const std::int64_t last = std::min(lastStep(run), lastStep(ref));
  QList<QPointF> out;
  if (last <= 0) return out;
  const std::vector<double> a = byStep(run, q, last);
  const std::vector<double> b = byStep(ref, q, last);
  std::vector<double> d(a.size(), kNaN);
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::isfinite(a[i]) && std::isfinite(b[i])) d[i] = a[i] - b[i];
  const std::vector<double> mean = movingMean(d, h);
  for (std::size_t i = 0; i < mean.size(); ++i)
    if (std::isfinite(d[i]) && std::isfinite(mean[i])) out.append(QPointF(static_cast<double>(i), mean[i]));
  return out;
}

Band noiseBand(const RunData& ref, Quantity q, int h) {
  Band band;
  const std::int64_t last = lastStep(ref);
  if (last <= 0) return band;
  const std::vector<double> v = byStep(ref, q, last);
  const std::vector<double> mean = movingMean(v, h);
  std::vector<double> sq(v.size(), kNaN);
  for (std::size_t i = 0; i < v.size(); ++i)
    if (std::isfinite(v[i]) && std::isfinite(mean[i])) sq[i] = (v[i] - mean[i]) * (v[i] - mean[i]);
  const std::vector<double> var = movingMean(sq, h);
  for (std::size_t i = 0; i < var.size(); ++i) {
    if (!std::isfinite(v[i]) || !std::isfinite(var[i])) continue;
    const double sd = std::sqrt(var[i]);
    band.upper.append(QPointF(static_cast<double>(i), sd));
    band.lower.append(QPointF(static_cast<double>(i), -sd));
  }
  return band;
}

QList<QPointF> validationDifference(const RunData& run, const RunData& ref, Quantity q) {
  QList<QPointF> out;
  auto value = [q](const engine::EvalMetrics& e) {
    if (q == Quantity::Loss) return e.val_loss;
    return e.val_accuracy >= 0 ? 100.0 * e.val_accuracy : kNaN;
  };
  for (const engine::EvalMetrics& e : run.evals) {
    const auto it = std::find_if(ref.evals.begin(), ref.evals.end(),
                                 [&e](const engine::EvalMetrics& r) { return r.step == e.step; });
    if (it == ref.evals.end()) continue;
    const double d = value(e) - value(*it);
    if (std::isfinite(d)) out.append(QPointF(static_cast<double>(e.step), d));
  }
  return out;
}

QList<QPointF> thin(const QList<QPointF>& points, int most) {
  if (most <= 0 || points.size() <= most) return points;
  const qsizetype k = (points.size() + most - 1) / most;
  QList<QPointF> out;
  out.reserve(most + 1);
  for (qsizetype i = 0; i < points.size(); i += k) out.append(points[i]);
  if (out.back() != points.back()) out.append(points.back());
  return out;
}

}  // namespace difference
