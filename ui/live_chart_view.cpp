// LiveChartView: mouse position -> data value -> tooltip; export menu.
#include "live_chart_view.h"

#include <QChart>
#include <QContextMenuEvent>
#include <QFileDialog>
#include <QMenu>
#include <QMessageBox>
#include <QMouseEvent>
#include <QToolTip>

#include "chart_export.h"

LiveChartView::LiveChartView(QChart* chart, QWidget* parent) : QChartView(chart, parent) {
  setMouseTracking(true);
  setRenderHint(QPainter::Antialiasing, qEnvironmentVariable("PL_CHARTS_ANTIALIAS") != QLatin1String("0"));
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

void LiveChartView::leaveEvent(QEvent* event) {
  QToolTip::hideText();
  QChartView::leaveEvent(event);
}

void LiveChartView::contextMenuEvent(QContextMenuEvent* event) {
  QMenu menu(this);
  const QString stem = chartFileStem(chart()->title());
  QAction* png = menu.addAction(tr("Save chart as PNG…"));
  menu.addAction(tr("Save chart as SVG…"));
  QAction* chosen = menu.exec(event->globalPos());
  if (!chosen) return;
  const bool asPng = chosen == png;
  const QString file = QFileDialog::getSaveFileName(
      this, asPng ? tr("Save chart as PNG") : tr("Save chart as SVG"), stem + (asPng ? ".png" : ".svg"),
      asPng ? tr("PNG image (*.png)") : tr("SVG image (*.svg)"));
  if (file.isEmpty()) return;
  QString error;
  const bool ok = asPng ? saveChartPng(this, file, &error) : saveChartSvg(this, file, &error);
  if (!ok) QMessageBox::warning(this, tr("Save chart"), error);
}

