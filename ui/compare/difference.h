// Difference to a reference run (the Compare tab's "difference to FP32"
// mode): each run minus the reference at the same step, smoothed by a
// centred moving mean, and the band of the reference's own batch-to-batch
// noise over the same window. Plain functions of the runs' records.
#pragma once

#include <QList>
#include <QPointF>

#include <cstdint>

struct RunData;

namespace difference {

// What is compared: the per-batch training loss, or the per-batch training
// accuracy in percent (its difference in percentage points).
enum class Quantity { Loss, Accuracy };

// The moving mean's half width for runs of `steps` steps: the window is
// 2h+1 steps, about a fiftieth of the run and never under 11 steps.
int halfWindow(std::int64_t steps);

// run - ref at every step both have a finite value, each averaged over the
// steps s-h..s+h that both have (a centred moving mean: no lag, so a
// difference shows at the step it begins). x: step, y: the difference.
QList<QPointF> smoothedDifference(const RunData& run, const RunData& ref, Quantity q, int h);

// The reference's batch-to-batch noise: at each step, the root mean square
// over s-h..s+h of (its per-batch value minus its own moving mean): one
// standard deviation of the noise a run shows by batch order alone. The
// band is +-that around 0.
struct Band {
  QList<QPointF> upper, lower;
};
Band noiseBand(const RunData& ref, Quantity q, int h);

// run - ref at each evaluation both have at the same step: the validation
// loss, or the validation accuracy in percentage points (none for a
// regression).
QList<QPointF> validationDifference(const RunData& run, const RunData& ref, Quantity q);

// Every k-th point so that at most `most` remain (a smoothed curve loses
// nothing a chart can show), the last point always kept.
QList<QPointF> thin(const QList<QPointF>& points, int most);

}  // namespace difference
