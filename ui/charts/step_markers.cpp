// StepMarkers: a line and a label per marker, placed from the x axis's
// range and the plot area whenever either changes.
#include "charts/step_markers.h"

#include <QChart>
#include <QFont>
#include <QGraphicsLineItem>
#include <QGraphicsSimpleTextItem>
#include <QPen>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <limits>

StepMarkers::StepMarkers(QChart* chart, QValueAxis* xAxis, QObject* parent)
    : QObject(parent), m_chart(chart), m_x(xAxis) {
  connect(m_chart, &QChart::plotAreaChanged, this, [this] { place(); });
  connect(m_x, &QValueAxis::rangeChanged, this, [this] { place(); });
  // The chart owns the items (its scene's children); they must not outlive it.
  connect(m_chart, &QObject::destroyed, this, [this] {
    m_items.clear();
    m_chart = nullptr;
  });
}

StepMarkers::~StepMarkers() { clear(); }

void StepMarkers::addMarker(double step, const QString& text, const QColor& colour, int group) {
  if (!m_chart) return;
  Item it{{step, text, group}, new QGraphicsLineItem(m_chart), new QGraphicsSimpleTextItem(text, m_chart), true};
  QPen pen(colour, 1.5, Qt::DashLine);
  pen.setCosmetic(true);
  it.line->setPen(pen);
  it.line->setZValue(20);  // above the series
  it.label->setBrush(colour);
  it.label->setZValue(21);
  it.label->setToolTip(text);
  m_items.push_back(it);
  place();
}

void StepMarkers::setGroupVisible(int group, bool visible) {
  for (Item& it : m_items)
    if (it.marker.group == group) it.groupShown = visible;
  place();
}

void StepMarkers::clear() {
  if (m_chart)
    for (Item& it : m_items) {
      delete it.line;
      delete it.label;
    }
  m_items.clear();
}

QList<StepMarkers::Marker> StepMarkers::markers() const {
  QList<Marker> out;
  for (const Item& it : m_items) out << it.marker;
  return out;
}

double StepMarkers::lineX(int index) const {
  const Item& it = m_items[static_cast<std::size_t>(index)];
  return it.line->isVisible() ? it.line->line().x1() : std::numeric_limits<double>::quiet_NaN();
}

bool StepMarkers::shown(int index) const { return m_items[static_cast<std::size_t>(index)].line->isVisible(); }

// The labels stack downwards when markers are close (a burst of edits), so
// none is drawn over another.
void StepMarkers::place() {
  if (!m_chart) return;
  const QRectF plot = m_chart->plotArea();
  const double lo = m_x->min(), hi = m_x->max();
  double lastRight = -1e9;
  int stacked = 0;
  // The axis's type, a little smaller: presentation view enlarges both.
  QFont font = m_x->labelsFont();
  font.setPointSizeF(std::max(6.0, font.pointSizeF() * 0.9));
  for (Item& it : m_items) {
    if (it.label->font() != font) it.label->setFont(font);
    const double s = it.marker.step;
    const bool inside = it.groupShown && hi > lo && s >= lo && s <= hi && plot.width() > 0;
    it.line->setVisible(inside);
    it.label->setVisible(inside);
    if (!inside) continue;
    const double x = plot.left() + (s - lo) / (hi - lo) * plot.width();
    it.line->setLine(x, plot.top(), x, plot.bottom());
    const QRectF text = it.label->boundingRect();
    stacked = x < lastRight ? stacked + 1 : 0;
    // Right of the line, unless that runs past the plot.
    const double left = x + 3 + text.width() > plot.right() ? x - 3 - text.width() : x + 3;
    it.label->setPos(left, plot.top() + 2 + stacked * text.height());
    lastRight = left + text.width();
  }
}
