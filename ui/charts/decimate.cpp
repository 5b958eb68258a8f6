// Decimation: one pass over the samples, four candidates per pixel column.
#include "charts/decimate.h"

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

double powerOfTwoTickInterval(double span, int maxTicks) {
  maxTicks = std::max(maxTicks, 1);
  double step = 1.0;
  while (span / step > maxTicks) step *= 2.0;
  return step;
}

void ColumnDecimator::reset(double x0, double x1, int columns) {
  m_x0 = x0;
  m_x1 = x1;
  m_columns = std::max(columns, 1);
  m_perColumn = m_columns / (x1 > x0 ? x1 - x0 : 1.0);
  m_consumed = 0;
  m_column = -1;
  m_any = false;
  m_done.clear();
  m_done.reserve(4 * m_columns + 4);
}

void ColumnDecimator::add(const QPointF& p) {
  if (!std::isfinite(p.y()) || p.x() < m_x0 || p.x() > m_x1) return;
  const long c = std::min<long>(static_cast<long>((p.x() - m_x0) * m_perColumn), m_columns - 1);
  if (c != m_column) {
    flushInto(m_done);
    m_column = c;
    m_first = m_last = m_lo = m_hi = p;
    m_any = true;
    return;
  }
  m_last = p;
  if (p.y() < m_lo.y()) m_lo = p;
  if (p.y() > m_hi.y()) m_hi = p;
}

void ColumnDecimator::flushInto(QList<QPointF>& out) const {
  if (!m_any) return;
  std::array<QPointF, 4> c = {m_first, m_lo, m_hi, m_last};
  std::sort(c.begin(), c.end(), [](const QPointF& a, const QPointF& b) { return a.x() < b.x(); });
  for (std::size_t k = 0; k < c.size(); ++k)
    if (k == 0 || c[k] != c[k - 1]) out.append(c[k]);
}

QList<QPointF> ColumnDecimator::points() const {
  QList<QPointF> out;
  out.reserve(m_done.size() + 4);
  out.append(m_done);
  flushInto(out);
  return out;
}

void ColumnPicker::reset(double x0, double x1, int columns, Mode mode) {
  m_x0 = x0;
  m_x1 = x1;
  m_columns = std::max(columns, 1);
  m_perColumn = m_columns / (x1 > x0 ? x1 - x0 : 1.0);
  m_mode = mode;
  m_consumed = 0;
  m_column = -1;
  m_best = 0;
  m_indices.clear();
}
