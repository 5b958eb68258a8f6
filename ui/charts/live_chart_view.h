// LiveChartView: a QChartView that reports where the mouse is in data
// coordinates (for value tooltips), zooms (mouse wheel, rubber band; reset
// from the context menu or a double-click with the middle button), asks to
// be enlarged on a double-click, and offers "Save as PNG/SVG" and the
// owner's actions on its context menu.
#pragma once

#include <QChartView>
#include <QList>
#include <functional>

class QAction;

// GUI thread only.
class LiveChartView : public QChartView {
  Q_OBJECT

 public:
  explicit LiveChartView(QChart* chart, QWidget* parent = nullptr);

  // Text for the tooltip at a data point of the plot area ("" hides it).
  // Set by the owner, which knows what the series mean.
  void setHoverText(std::function<QString(const QPointF& value)> text) { m_hoverText = std::move(text); }
  // Shows the tooltip for `value` as if the mouse were there (tests, and
  // keyboard users). Returns the text shown.
  QString showValueAt(const QPointF& value);

  // The file name (without extension) this chart is exported as: it says
  // what the chart shows ("loss", "gradients-fc3", "memory-run-3"). Set by
  // the owner; defaults to the title's words.
  void setExportStem(std::function<QString()> stem) { m_exportStem = std::move(stem); }
  QString exportStem() const;

  // Actions of the owner added to the context menu (e.g. the loss chart's
  // log scale).
  void addContextAction(QAction* action) { m_actions << action; }
  const QList<QAction*>& contextActions() const { return m_actions; }

  // Zoom: true after a wheel or rubber-band zoom, until resetZoom(). While
  // zoomed the owner leaves the axes alone.
  bool isZoomed() const { return m_zoomed; }
  // Zooms by `factor` (< 1 in, > 1 out) around the plot point `at`.
  void zoomAt(const QPointF& at, double factor);
  void resetZoom();

 signals:
  // A double-click on the chart: the owner enlarges it (or restores it).
  void enlargeToggled();
  // Zoomed or reset: the owner redraws (a reset gives the axes back).
  void zoomChanged(bool zoomed);

 protected:
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void wheelEvent(QWheelEvent* event) override;
  void leaveEvent(QEvent* event) override;
  void contextMenuEvent(QContextMenuEvent* event) override;

 private:
  void setZoomed(bool zoomed);

  std::function<QString(const QPointF&)> m_hoverText;
  std::function<QString()> m_exportStem;
  QList<QAction*> m_actions;
  bool m_zoomed = false;
};
