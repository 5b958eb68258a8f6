// AccuracyChart: each run's validation accuracy (thick, with markers while
// evaluations are sparse) and its noisy train-batch accuracy (thin, light),
// in percent; a regression run has none, and a note says so. It needs no
// header: the area makes it through its line in chart_registry.cpp.
#include <QChart>
#include <QGraphicsTextItem>
#include <QLineSeries>

#include <cmath>
#include <map>
#include <memory>

#include "charts/chart_registry.h"
#include "charts/chart_style.h"
#include "charts/decimate.h"
#include "session/run_store.h"

namespace {

class AccuracyChart : public StepChart {
 public:
  AccuracyChart(ChartHost& host, QWidget* parent)
      : StepChart(host,
                  {"accuracyChart", "accuracy", tr("Accuracy"), tr("accuracy (%)"), 0.0, 100.0, "%.0f", {0, 2, 1, 1}},
                  parent) {
    addLegendLine(tr("validation"), Qt::SolidLine, 2);
    addLegendLine(tr("train batch"), Qt::SolidLine, 1);
    m_note = new QGraphicsTextItem(tr("No accuracy: a regression (mean squared error)"), chart());
    m_note->setDefaultTextColor(chart_style::kNote);
    m_note->setVisible(false);
    // Kept inside the plot (wrapped to its width), clear of the y axis.
    connect(chart(), &QChart::plotAreaChanged, this, [this] {
      if (m_note->isVisible()) chart_style::placeNote(m_note, chart()->plotArea(), Qt::AlignCenter);
    });
  }

  QXYSeries* runSeries(int runId, int role) const override {
    const auto it = m_runs.find(runId);
    if (it == m_runs.end()) return nullptr;
    return role == 0 ? it->second.validation : it->second.train;
  }

  void setPresentation(bool on) override {
    StepChart::setPresentation(on);
    QFont font = chart_style::legendFont(chart());
    font.setPointSizeF(chart_style::presentation::kLegendPt - 2);
    m_note->setFont(on ? font : QFont());
    if (m_note->isVisible()) chart_style::placeNote(m_note, chart()->plotArea(), Qt::AlignCenter);
  }

 protected:
  void makeSeries(const RunData& run) override {
    Run& r = m_runs[run.id];
    // Raster, so the validation line (drawn after it) stays on top: OpenGL
    // series are painted above every raster item.
    QColor light = run.colour;
    light.setAlpha(60);
    r.train = addLine(run, 1.0, Qt::SolidLine, light, false);
    r.validation = addLine(run, 2.8, Qt::SolidLine, run.colour.darker(125), false);
    r.validation->setPointsVisible(true);
    r.validation->setMarkerSize(7);
  }

  void showSeries(const RunData& run, bool shown) override {
    const Run& r = m_runs.at(run.id);
    setShown(r.validation, shown);
    setShown(r.train, shown);
  }

  void draw(const RunData& run, double x1) override {
    Run& s = m_runs.at(run.id);
    QList<QPointF> validation;
    for (const engine::EvalMetrics& e : run.evals)
      if (e.val_accuracy >= 0) validation.append(QPointF(static_cast<double>(e.step), 100.0 * e.val_accuracy));
    s.validation->replace(validation);
    s.validation->setPointsVisible(validation.size() * 12 < columns());
    if (!s.decimator.sameGrid(0, x1, columns())) s.decimator.reset(0, x1, columns());
    const auto& steps = run.steps;
    s.decimator.feed(static_cast<std::int64_t>(steps.size()), [&](std::int64_t i) {
      const engine::StepMetrics& m = steps[static_cast<std::size_t>(i)];
      return QPointF(static_cast<double>(m.step), m.train_accuracy >= 0 ? 100.0 * m.train_accuracy : std::nan(""));
    });
    s.train->replace(s.decimator.points());
  }

  void finishRanges(const ChartFrame&) override {
    // Regression runs (tiny-gradients) have no accuracy: say so instead of
    // leaving an empty chart.
    const RunStore& store = m_host.store();
    bool anySteps = false, anyAccuracy = false;
    for (int id = 0; id < store.count(); ++id) {
      const RunData& r = store.run(id);
      if (!r.visible || r.steps.empty()) continue;
      anySteps = true;
      anyAccuracy = anyAccuracy || r.steps.back().train_accuracy >= 0;
    }
    const bool note = anySteps && !anyAccuracy;
    m_note->setVisible(note);
    if (note) chart_style::placeNote(m_note, chart()->plotArea(), Qt::AlignCenter);
  }

  QString hoverLine(const RunData& run, const engine::StepMetrics& s, double x, const QString& who) const override {
    QString t = who + QLatin1Char(':');
    const engine::EvalMetrics* e = nullptr;  // the evaluation at or before step x
    for (const engine::EvalMetrics& ev : run.evals)
      if (ev.step <= x + 0.5) e = &ev;
    if (!e && !run.evals.empty()) e = &run.evals.front();
    if (e && e->val_accuracy >= 0)
      t += tr(" validation %1% (step %2),").arg(100.0 * e->val_accuracy, 0, 'f', 2).arg(e->step);
    if (s.train_accuracy >= 0) t += tr(" train batch %1%").arg(100.0 * s.train_accuracy, 0, 'f', 1);
    return t;
  }

 private:
  struct Run {
    QLineSeries* validation = nullptr;
    QLineSeries* train = nullptr;
    ColumnDecimator decimator;
  };
  std::map<int, Run> m_runs;
  QGraphicsTextItem* m_note = nullptr;
};

}  // namespace

ChartTile* makeAccuracyChart(ChartHost& host, QWidget* parent) { return new AccuracyChart(host, parent); }
