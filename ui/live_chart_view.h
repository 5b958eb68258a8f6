// LiveChartView: a QChartView that reports where the mouse is in data
// coordinates (for value tooltips) and offers "Save as PNG/SVG" on its
// context menu.
#pragma once

#include <QChartView>
#include <functional>

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

 protected:
  void mouseMoveEvent(QMouseEvent* event) override;
  void leaveEvent(QEvent* event) override;
  void contextMenuEvent(QContextMenuEvent* event) override;

 private:
  std::function<QString(const QPointF&)> m_hoverText;
};
