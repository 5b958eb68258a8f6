// GradientPanel: the gradient histogram of one layer (GradStats: log2|g|
// in unit bins) per visible run, with the layer's gradient format's
// representable range laid over it — flush-to-zero below the smallest
// subnormal, subnormals below the smallest normal, overflow above the
// largest finite — and the fractions that underflow / overflow, unscaled
// and as scaled by the loss scale.
#pragma once

#include <QWidget>

#include <cstdint>
#include <map>
#include <string>

#include "charts/elided_label.h"


class LiveChartView;
class QAreaSeries;
class QChart;
class QComboBox;
class QLabel;
class QLineSeries;
class QValueAxis;
class RunStore;
struct RunData;

namespace engine {
struct GradStats;
}

// GUI thread only.
class GradientPanel : public QWidget {
  Q_OBJECT

 public:
  explicit GradientPanel(RunStore* store, QWidget* parent = nullptr);
  ~GradientPanel() override;

  LiveChartView* view() const { return m_view; }
  QChart* chart() const;
  QComboBox* layerCombo() const { return m_layer; }
  QLabel* fractionsLabel() const { return m_fractions; }

  // Selects the layer (no-op when no run has statistics for it yet; kept
  // and applied when they arrive).
  void setLayer(const QString& layer);
  QString layer() const;

  // Large type and thick lines (chart_style::presentation), or back.
  void setPresentation(bool on);

  // Redraws for the visible runs; `focusRun` decides the layer list and the
  // format whose range is drawn. Cheap when nothing changed.
  void refresh(int focusRun);

  // Makes the run's series ahead of its first statistics.
  void prepareRun(const RunData& run);
  // The histogram series (unscaled) of a run, or null.
  QLineSeries* histogram(int runId) const;
  // The range lines drawn for the focus layer's format, in log2 units:
  // smallest subnormal, smallest normal, largest finite (NaN when off the axis).
  struct Range {
    QString format;
    double minSubnormal = 0, minNormal = 0, maxFinite = 0;
  };
  Range range() const { return m_range; }

 protected:
  void resizeEvent(QResizeEvent* event) override;

 private:
  struct RunHist;
  void fitFractions();
  void fitFooter();
  void nameZones();
  void rebuildLayerList(const RunData* focus);
  RunHist& histFor(const RunData& run);
  void updateZones(double x0, double x1, double yTop);
  QString hoverText(const QPointF& value) const;

  RunStore* m_store;
  LiveChartView* m_view = nullptr;
  QComboBox* m_layer = nullptr;
  ElidedLabel* m_fractions = nullptr;
  QLabel* m_layerLabel = nullptr;
  class QGridLayout* m_footer = nullptr;
  QString m_wantedLayer;
  std::map<int, RunHist*> m_hists;
  QAreaSeries* m_zoneUnder = nullptr;
  QAreaSeries* m_zoneSub = nullptr;
  QAreaSeries* m_zoneOver = nullptr;
  QLineSeries* m_lineSub = nullptr;
  QLineSeries* m_lineNormal = nullptr;
  QLineSeries* m_lineMax = nullptr;
  Range m_range;
  bool m_presentation = false;
  int m_styledSeries = 0;
  int m_focus = -2;
  std::uint64_t m_focusRevision = 0;
  std::uint64_t m_signature = 0;
};
