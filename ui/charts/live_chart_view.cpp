// LiveChartView: mouse position -> data value -> tooltip; zoom; enlarge;
// export menu.
#include "charts/live_chart_view.h"

#include <QAction>
#include <QChart>
#include <QContextMenuEvent>
#include <QFileDialog>
#include <QMenu>
#include <QMessageBox>
#include <QMouseEvent>
#include <QToolTip>
#include <QWheelEvent>

#include <algorithm>

#include "charts/chart_export.h"

LiveChartView::LiveChartView(QChart* chart, QWidget* parent) : QChartView(chart, parent) {
  setMouseTracking(true);
  setRenderHint(QPainter::Antialiasing, qEnvironmentVariable("PL_CHARTS_ANTIALIAS") != QLatin1String("0"));
  // Left-drag draws a rectangle to zoom into; the wheel zooms around the
  // mouse; the context menu resets.
  setRubberBand(QChartView::RectangleRubberBand);
  setToolTip(QString());
}

QString LiveChartView::exportStem() const {
  if (m_exportStem) {
    const QString stem = m_exportStem();
    if (!stem.isEmpty()) return stem;
  }
  return chartFileStem(chart() ? chart()->title() : objectName());
}

QString LiveChartView::showValueAt(const QPointF& value) {
  const QString text = m_hoverText ? m_hoverText(value) : QString();
  const QPoint local = chart()->mapToPosition(value).toPoint();
  if (text.isEmpty())
    QToolTip::hideText();
  else
    QToolTip::showText(mapToGlobal(local), text, this);
  return text;
}

void LiveChartView::setZoomed(bool zoomed) {
  m_zoomed = zoomed;
  emit zoomChanged(zoomed);
}

void LiveChartView::zoomAt(const QPointF& at, double factor) {
  const QRectF plot = chart()->plotArea();
  if (!plot.isValid() || factor <= 0) return;
  // The rectangle that, shown as the whole plot, keeps `at` where it is.
  const QPointF p(std::clamp(at.x(), plot.left(), plot.right()), std::clamp(at.y(), plot.top(), plot.bottom()));
  QRectF r(p.x() - (p.x() - plot.left()) * factor, p.y() - (p.y() - plot.top()) * factor, plot.width() * factor,
           plot.height() * factor);
  chart()->zoomIn(r);
  setZoomed(true);
}

void LiveChartView::resetZoom() {
  if (!m_zoomed) return;
  chart()->zoomReset();
  setZoomed(false);
}

void LiveChartView::mouseMoveEvent(QMouseEvent* event) {
  QChartView::mouseMoveEvent(event);
  const QPointF scenePos = mapToScene(event->position().toPoint());
  const QPointF chartPos = chart()->mapFromScene(scenePos);
  if (!chart()->plotArea().contains(chartPos)) {
    QToolTip::hideText();
    return;
  }
  const QPointF value = chart()->mapToValue(chartPos);
  const QString text = m_hoverText ? m_hoverText(value) : QString();
  if (text.isEmpty())
    QToolTip::hideText();
  else
    QToolTip::showText(event->globalPosition().toPoint(), text, this);
}

void LiveChartView::mouseReleaseEvent(QMouseEvent* event) {
  if (event->button() == Qt::RightButton) {
    // QChartView would zoom out one step on a right click: the context
    // menu has "Reset zoom" instead.
    event->accept();
    return;
  }
  const bool before = chart()->isZoomed();
  QChartView::mouseReleaseEvent(event);
  if (event->button() == Qt::LeftButton && chart()->isZoomed() && !before) setZoomed(true);
  else if (event->button() == Qt::LeftButton && chart()->isZoomed() && m_zoomed) emit zoomChanged(true);
}

void LiveChartView::mouseDoubleClickEvent(QMouseEvent* event) {
  if (event->button() == Qt::LeftButton) {
    emit enlargeToggled();
    event->accept();
    return;
  }
  if (event->button() == Qt::MiddleButton) {
    resetZoom();
    event->accept();
    return;
  }
  QChartView::mouseDoubleClickEvent(event);
}

void LiveChartView::wheelEvent(QWheelEvent* event) {
  const int delta = event->angleDelta().y();
  if (delta == 0) {
    QChartView::wheelEvent(event);
    return;
  }
  const QPointF chartPos = chart()->mapFromScene(mapToScene(event->position().toPoint()));
  zoomAt(chartPos, delta > 0 ? 0.8 : 1.25);
  event->accept();
}

void LiveChartView::leaveEvent(QEvent* event) {
  QToolTip::hideText();
  QChartView::leaveEvent(event);
}

void LiveChartView::contextMenuEvent(QContextMenuEvent* event) {
  QMenu menu(this);
  QAction* reset = menu.addAction(tr("Reset zoom"));
  reset->setEnabled(m_zoomed);
  QAction* enlarge = menu.addAction(tr("Enlarge / restore (double-click)"));
  if (!m_actions.isEmpty()) {
    menu.addSeparator();
    menu.addActions(m_actions);
  }
  menu.addSeparator();
  const QString stem = exportStem();
  QAction* png = menu.addAction(tr("Save chart as PNG…"));
  QAction* svg = menu.addAction(tr("Save chart as SVG…"));
  QAction* chosen = menu.exec(event->globalPos());
  if (!chosen) return;
  if (chosen == reset) {
    resetZoom();
    return;
  }
  if (chosen == enlarge) {
    emit enlargeToggled();
    return;
  }
  if (chosen != png && chosen != svg) return;  // the owner's actions act themselves
  const bool asPng = chosen == png;
  const QString file = QFileDialog::getSaveFileName(
      this, asPng ? tr("Save chart as PNG") : tr("Save chart as SVG"), stem + (asPng ? ".png" : ".svg"),
      asPng ? tr("PNG image (*.png)") : tr("SVG image (*.svg)"));
  if (file.isEmpty()) return;
  QString error;
  const bool ok = asPng ? saveChartPng(this, file, &error) : saveChartSvg(this, file, &error);
  if (!ok) QMessageBox::warning(this, tr("Save chart"), error);
}
