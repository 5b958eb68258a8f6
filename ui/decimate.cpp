// Decimation: one pass over the samples, four candidates per pixel column.
#include "decimate.h"

#include <algorithm>
#include <array>
#include <cmath>

QList<QPointF> decimateMinMax(std::int64_t n, const std::function<QPointF(std::int64_t)>& sample, double x0,
                              double x1, int columns) {
  QList<QPointF> out;
  if (n <= 0) return out;
  columns = std::max(columns, 1);
  if (n <= 2 * static_cast<std::int64_t>(columns)) {
    out.reserve(static_cast<qsizetype>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      const QPointF p = sample(i);
      if (std::isfinite(p.y()) && p.x() >= x0 && p.x() <= x1) out.append(p);
    }
    return out;
  }
  out.reserve(4 * columns + 4);
  const double span = x1 > x0 ? x1 - x0 : 1.0;
  const double perColumn = columns / span;
  long column = -1;
  QPointF first, last, lo, hi;
  bool any = false;
  auto flush = [&] {
    if (!any) return;
    // The four candidates in x order, without repeats.
    std::array<QPointF, 4> c = {first, lo, hi, last};
    std::sort(c.begin(), c.end(), [](const QPointF& a, const QPointF& b) { return a.x() < b.x(); });
    for (std::size_t k = 0; k < c.size(); ++k)
      if (k == 0 || c[k] != c[k - 1]) out.append(c[k]);
    any = false;
  };
  for (std::int64_t i = 0; i < n; ++i) {
    const QPointF p = sample(i);
    if (!std::isfinite(p.y()) || p.x() < x0 || p.x() > x1) continue;
    const long c = std::min<long>(static_cast<long>((p.x() - x0) * perColumn), columns - 1);
    if (c != column) {
      flush();
      column = c;
      first = last = lo = hi = p;
      any = true;
      continue;
    }
    last = p;
    if (p.y() < lo.y()) lo = p;
    if (p.y() > hi.y()) hi = p;
  }
  flush();
  return out;
}

QList<std::int64_t> decimateMarkers(std::int64_t n, const std::function<double(std::int64_t)>& x,
                                    const std::function<bool(std::int64_t)>& keep, double x0, double x1,
                                    int columns) {
  QList<std::int64_t> out;
  columns = std::max(columns, 1);
  const double span = x1 > x0 ? x1 - x0 : 1.0;
  long column = -1;
  for (std::int64_t i = 0; i < n; ++i) {
    if (!keep(i)) continue;
    const double xi = x(i);
    if (xi < x0 || xi > x1) continue;
    const long c = static_cast<long>((xi - x0) / span * columns);
    if (c == column) continue;
    column = c;
    out.append(i);
  }
  return out;
}

double niceCeil(double v) {
  if (!(v > 0) || !std::isfinite(v)) return 1.0;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (v <= m * p * (1 + 1e-12)) return m * p;
  return 10.0 * p;
}

double niceTickInterval(double span, int maxTicks) {
  if (!(span > 0) || !std::isfinite(span)) return 1.0;
  maxTicks = std::max(maxTicks, 1);
  const double raw = span / maxTicks;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (raw <= m * p * (1 + 1e-12)) return m * p;
  return 10.0 * p;
}
