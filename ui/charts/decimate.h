// Decimation of long series to the chart's pixel columns (min/max per
// column), so a chart draws ~2 points per pixel whatever the history length.
#pragma once

#include <QList>
#include <QPointF>

#include <algorithm>
#include <cstdint>
#include <functional>

// Min/max decimation of n samples (x ascending) to `columns` columns over
// [x0, x1]. Each column keeps its first, minimum, maximum and last sample
// in x order (at most 4 points, fewer when they coincide), so the drawn
// line keeps every spike and joins the columns where the data does.
// Non-finite y values are skipped. Samples outside [x0, x1] are dropped.
// `sample(i)` returns sample i. With n <= 2 * columns nothing is dropped.
// Any thread.
QList<QPointF> decimateMinMax(std::int64_t n, const std::function<QPointF(std::int64_t)>& sample, double x0,
                              double x1, int columns);

// Incremental min/max decimation of an append-only series (a run's
// history): the points of completed pixel columns are kept, so a frame
// costs O(samples added since the last frame), not O(history). Same output
// as decimateMinMax() without its short-series pass-through. Any thread;
// one object per series.
class ColumnDecimator {
 public:
  // Starts over for a new x range or column count.
  void reset(double x0, double x1, int columns);
  bool sameGrid(double x0, double x1, int columns) const {
    return m_columns == columns && m_x0 == x0 && m_x1 == x1;
  }
  // Consumes samples [consumed(), n): sample(i) -> QPointF, x ascending.
  template <class Sample>
  void feed(std::int64_t n, Sample&& sample) {
    for (std::int64_t i = m_consumed; i < n; ++i) add(sample(i));
    m_consumed = std::max(m_consumed, n);
  }
  std::int64_t consumed() const { return m_consumed; }
  // Completed columns, then the open one.
  QList<QPointF> points() const;

 private:
  void add(const QPointF& p);
  void flushInto(QList<QPointF>& out) const;

  double m_x0 = 0, m_x1 = 0, m_perColumn = 0;
  int m_columns = -1;
  std::int64_t m_consumed = 0;
  long m_column = -1;
  bool m_any = false;
  QPointF m_first, m_last, m_lo, m_hi;
  QList<QPointF> m_done;
};

// Incremental choice of one sample per column (markers: the first sample
// with keep(i); peaks: the sample with the largest score(i)). Indices only.
class ColumnPicker {
 public:
  enum Mode { FirstKept, MaxScore };
  void reset(double x0, double x1, int columns, Mode mode);
  bool sameGrid(double x0, double x1, int columns) const {
    return m_columns == columns && m_x0 == x0 && m_x1 == x1;
  }
  // x(i): position; keep(i): candidate at all; score(i): for MaxScore.
  template <class X, class Keep, class Score>
  void feed(std::int64_t n, X&& x, Keep&& keep, Score&& score) {
    for (std::int64_t i = m_consumed; i < n; ++i) {
      if (!keep(i)) continue;
      const double xi = x(i);
      if (xi < m_x0 || xi > m_x1) continue;
      const long c = std::min<long>(static_cast<long>((xi - m_x0) * m_perColumn), m_columns - 1);
      if (c != m_column) {
        m_column = c;
        m_indices.append(i);
        m_best = score(i);
      } else if (m_mode == MaxScore) {
        const double s = score(i);
        if (s > m_best) {
          m_best = s;
          m_indices.back() = i;
        }
      }
    }
    m_consumed = std::max(m_consumed, n);
  }
  const QList<std::int64_t>& indices() const { return m_indices; }

 private:
  double m_x0 = 0, m_x1 = 0, m_perColumn = 0, m_best = 0;
  int m_columns = -1;
  Mode m_mode = FirstKept;
  std::int64_t m_consumed = 0;
  long m_column = -1;
  QList<std::int64_t> m_indices;
};

// A "nice" upper bound >= v: 1, 2, 2.5, 5 times a power of ten.
double niceCeil(double v);
// A tick interval giving at most `maxTicks` intervals over `span`.
double niceTickInterval(double span, int maxTicks);
// The same for a log2 axis: a power of two >= 1 (1, 2, 4, 8, ...).
double powerOfTwoTickInterval(double span, int maxTicks);
