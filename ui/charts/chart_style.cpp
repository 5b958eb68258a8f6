// ChartStyle: the one place that says how a chart looks.
#include "charts/chart_style.h"

#include <QChart>
#include <QGraphicsLayout>
#include <QLegend>
#include <QValueAxis>

namespace chart_style {

QColor runColour(int index) {
  static const QColor kPalette[] = {QColor(0x00, 0x72, 0xB2), QColor(0xD5, 0x5E, 0x00), QColor(0x00, 0x9E, 0x73),
                                    QColor(0xCC, 0x79, 0xA7), QColor(0xE6, 0x9F, 0x00), QColor(0x56, 0xB4, 0xE9),
                                    QColor(0xF0, 0xE4, 0x42), QColor(0x00, 0x00, 0x00)};
  constexpr int n = static_cast<int>(sizeof(kPalette) / sizeof(kPalette[0]));
  return kPalette[((index % n) + n) % n];
}

QColor memoryColour(int category) {
  static const QColor kColours[] = {QColor(0x4C, 0x72, 0xB0), QColor(0x55, 0xA8, 0x68), QColor(0xC4, 0x4E, 0x52),
                                    QColor(0x81, 0x72, 0xB2), QColor(0xCC, 0xB9, 0x74), QColor(0x64, 0xB5, 0xCD)};
  return category >= 0 && category < 6 ? kColours[category] : kEmulation;
}

QFont titleFont(const QChart* chart) {
  QFont f = chart ? chart->titleFont() : QFont();
  f.setBold(true);
  return f;
}

QFont axisFont(const QChart* chart) {
  QFont f = titleFont(chart);
  f.setBold(false);
  f.setPointSizeF(f.pointSizeF() * 0.85);
  return f;
}

QFont legendFont(const QChart* chart) {
  QFont f = titleFont(chart);
  f.setBold(false);
  f.setPointSizeF(f.pointSizeF() * 0.8);
  return f;
}

QFont smallFont(const QChart* chart) {
  QFont f = chart ? chart->titleFont() : QFont();
  f.setPointSizeF(f.pointSizeF() * 0.85);
  return f;
}

QPen linePen(const QColor& colour, double width, Qt::PenStyle style) {
  return QPen(colour, width, style, Qt::FlatCap, Qt::BevelJoin);
}

void styleChart(QChart* chart, bool small) {
  if (small) {
    chart->setTitleFont(smallFont(chart));
    chart->setMargins(kSmallChartMargins);
  } else {
    chart->setTitleFont(titleFont(chart));
    chart->setMargins(kChartMargins);
  }
  chart->layout()->setContentsMargins(0, 0, 0, 0);
  chart->setBackgroundRoundness(0);
  chart->legend()->setAlignment(Qt::AlignBottom);
  chart->legend()->setFont(legendFont(chart));
}

QValueAxis* makeValueAxis(const QChart* chart, const QString& title, const QString& objectName, bool small) {
  auto* axis = new QValueAxis;
  axis->setObjectName(objectName);
  const QFont font = small ? smallFont(chart) : axisFont(chart);
  axis->setTitleText(title);
  axis->setTitleFont(font);
  axis->setLabelsFont(font);
  axis->setTickType(QValueAxis::TicksDynamic);
  axis->setTickAnchor(0);
  return axis;
}

}  // namespace chart_style
