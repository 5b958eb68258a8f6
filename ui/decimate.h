// Decimation of long series to the chart's pixel columns (min/max per
// column), so a chart draws ~2 points per pixel whatever the history length.
#pragma once

#include <QList>
#include <QPointF>

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

// Picks at most one sample per column: the first one for which `keep(i)`
// holds (markers: overflow steps, NaN events). Returns sample indices.
QList<std::int64_t> decimateMarkers(std::int64_t n, const std::function<double(std::int64_t)>& x,
                                    const std::function<bool(std::int64_t)>& keep, double x0, double x1,
                                    int columns);

// A "nice" upper bound >= v: 1, 2, 2.5, 5 times a power of ten.
double niceCeil(double v);
// A tick interval giving at most `maxTicks` intervals over `span`.
double niceTickInterval(double span, int maxTicks);
