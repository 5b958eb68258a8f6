// GradientChart: the gradient panel (histogram of one layer's gradients
// against its format's range) as one of the Live tab's charts: it spans the
// bottom row beside memory and follows the focus run.
#include <QChart>

#include "charts/chart_export.h"
#include "charts/chart_registry.h"
#include "charts/chart_style.h"
#include "charts/gradient_panel.h"
#include "charts/live_chart_view.h"
#include "session/run_store.h"

namespace {

class GradientChart : public ChartTile {
 public:
  GradientChart(ChartHost& host, QWidget* parent)
      : ChartTile(parent), m_host(host), m_panel(new GradientPanel(const_cast<RunStore*>(&host.store()), parent)) {
    // The histogram is one layer's: the exported file says which.
    m_panel->view()->setExportStem([this] {
      const QString layer = m_panel->layer();
      return layer.isEmpty() ? QStringLiteral("gradients") : chartFileStem(QStringLiteral("gradients ") + layer);
    });
  }

  QString key() const override { return QStringLiteral("gradients"); }
  QString title() const override { return tr("Gradients"); }
  QWidget* widget() const override { return m_panel; }
  LiveChartView* view() const override { return m_panel->view(); }
  GridCell cell() const override { return {1, 1, 1, 2}; }
  void prepareRun(const RunData& run) override { m_panel->prepareRun(run); }
  void finish(const ChartFrame&) override { m_panel->refresh(m_host.focusRun()); }
  void setPresentation(bool on) override {
    chart_style::applyPresentation(m_panel->view()->chart(), on);
    m_panel->setPresentation(on);
  }

 private:
  ChartHost& m_host;
  GradientPanel* m_panel;
};

}  // namespace

ChartTile* makeGradientChart(ChartHost& host, QWidget* parent) { return new GradientChart(host, parent); }
