// ChartStyle: the one place that says how a chart looks.
#include "charts/chart_style.h"

#include <QChart>
#include <QGraphicsLayout>
#include <QGraphicsTextItem>
#include <QLegend>
#include <QValueAxis>
#include <QAbstractAxis>
#include <QAbstractSeries>
#include <QAreaSeries>
#include <QScatterSeries>
#include <QWidget>
#include <QXYSeries>
#include <QVariant>
#include <QHash>

#include <algorithm>

namespace chart_style {

QColor runColour(int index) {
  static const QColor kPalette[] = {QColor(0x00, 0x72, 0xB2), QColor(0xD5, 0x5E, 0x00), QColor(0x00, 0x9E, 0x73),
                                    QColor(0xCC, 0x79, 0xA7), QColor(0xE6, 0x9F, 0x00), QColor(0x56, 0xB4, 0xE9),
                                    QColor(0xF0, 0xE4, 0x42), QColor(0x00, 0x00, 0x00)};
  constexpr int n = static_cast<int>(sizeof(kPalette) / sizeof(kPalette[0]));
  return kPalette[((index % n) + n) % n];
}

RecipeStyle recipeStyle(const QString& recipe) {
  struct Entry {
    const char* name;
    QColor colour;
    QVector<qreal> dashes;
  };
  // Okabe-Ito where it has colours to give, then a dark gold and grey; the
  // dash patterns differ in rhythm, not only in length.
  static const Entry kRecipes[] = {
      {"fp32", QColor(0x00, 0x00, 0x00), {}},
      {"fp16", QColor(0xD5, 0x5E, 0x00), {6, 2.5}},
      {"mixed-fp16", QColor(0x00, 0x72, 0xB2), {1.2, 1.6}},
      {"mixed-bf16", QColor(0x00, 0x9E, 0x73), {7, 2, 1.2, 2}},
      {"fp8", QColor(0xCC, 0x79, 0xA7), {3, 2}},
      {"mxfp8", QColor(0xE6, 0x9F, 0x00), {10, 2, 1.2, 2, 1.2, 2}},
      {"mxfp4", QColor(0x56, 0xB4, 0xE9), {12, 4}},
      {"nvfp4", QColor(0x8B, 0x69, 0x14), {4, 2, 4, 6}},
      {"custom", QColor(0x77, 0x77, 0x77), {1.2, 4}},
  };
  constexpr int n = static_cast<int>(sizeof(kRecipes) / sizeof(kRecipes[0]));
  for (int i = 0; i < n; ++i)
    if (recipe == QLatin1String(kRecipes[i].name))
      // fp32 (first in the table) is drawn last: on top of the others.
      return {kRecipes[i].colour, kRecipes[i].dashes, i == 0 ? n : i};
  // A recipe this table does not know: a palette colour, solid, by name.
  return {runColour(static_cast<int>(qHash(recipe) % 8u)), {}, n - 1};
}

QColor recipeColour(const QString& recipe, int occurrence) {
  const QColor base = recipeStyle(recipe).colour;
  if (occurrence <= 0) return base;
  // Lighter shades (towards white), alternating so neighbours differ.
  static const double kTowardsWhite[] = {0.45, 0.25, 0.6, 0.35, 0.52};
  const double t = kTowardsWhite[(occurrence - 1) % 5];
  return QColor::fromRgbF(static_cast<float>(base.redF() + (1 - base.redF()) * t),
                          static_cast<float>(base.greenF() + (1 - base.greenF()) * t),
                          static_cast<float>(base.blueF() + (1 - base.blueF()) * t));
}

QPen recipePen(const QString& recipe, const QColor& colour, double width) {
  QPen pen = linePen(colour, width);
  const RecipeStyle style = recipeStyle(recipe);
  if (!style.dashes.isEmpty()) pen.setDashPattern(style.dashes);
  return pen;
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

double placeNote(QGraphicsTextItem* note, const QRectF& plot, Qt::Alignment where) {
  // Its natural width first, then no wider than the plot.
  note->setTextWidth(-1);
  const double room = std::max(40.0, plot.width() - 2 * kNoteMargin);
  if (note->boundingRect().width() > room) note->setTextWidth(room);
  const QRectF box = note->boundingRect();
  QPointF at = plot.center() - QPointF(box.width() / 2, box.height() / 2);
  if (where & Qt::AlignTop) at.setY(plot.top() + 2);
  if (where & Qt::AlignLeft) at.setX(plot.left() + kNoteMargin);
  at.setX(std::max(at.x(), plot.left() + 2));
  note->setPos(at);
  return box.height();
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

namespace {

// The normal value of something presentation changes, kept on the object
// the first time (a dynamic property), so "off" restores it exactly.
template <typename T>
T remembered(QObject* o, const char* key, const T& current) {
  const QVariant v = o->property(key);
  if (v.isValid()) return v.value<T>();
  o->setProperty(key, QVariant::fromValue(current));
  return current;
}

QFont sized(QFont f, double pt, bool on) {
  if (on) f.setPointSizeF(pt);
  return f;
}

}  // namespace

void applyPresentation(QChart* chart, bool on) {
  if (!chart) return;
  const QFont title = remembered(chart, "pl_titleFont", chart->titleFont());
  QFont t = sized(title, presentation::kTitlePt, on);
  if (chart->titleFont() != t) chart->setTitleFont(t);
  const QBrush titleBrush = remembered(chart, "pl_titleBrush", chart->titleBrush());
  chart->setTitleBrush(on ? QBrush(presentation::kInk) : titleBrush);
  const QFont legend = remembered(chart, "pl_legendFont", chart->legend()->font());
  const QFont l = sized(legend, presentation::kLegendPt, on);
  if (chart->legend()->font() != l) chart->legend()->setFont(l);
  const QColor legendColour = remembered(chart, "pl_legendColour", chart->legend()->labelColor());
  chart->legend()->setLabelColor(on ? presentation::kInk : legendColour);
  for (QAbstractAxis* a : chart->axes()) {
    const QFont labels = remembered(a, "pl_labelsFont", a->labelsFont());
    const QFont titleF = remembered(a, "pl_titleFont", a->titleFont());
    const QFont nl = sized(labels, presentation::kAxisPt, on);
    const QFont nt = sized(titleF, presentation::kAxisPt, on);
    if (a->labelsFont() != nl) a->setLabelsFont(nl);
    if (a->titleFont() != nt) a->setTitleFont(nt);
    const QBrush labelBrush = remembered(a, "pl_labelsBrush", a->labelsBrush());
    a->setLabelsBrush(on ? QBrush(presentation::kInk) : labelBrush);
    const QBrush titleB = remembered(a, "pl_titleBrush", a->titleBrush());
    a->setTitleBrush(on ? QBrush(presentation::kInk) : titleB);
    const QPen grid = remembered(a, "pl_gridPen", a->gridLinePen());
    QPen g = grid;
    if (on) {
      g.setColor(presentation::kGrid);
      g.setWidthF(1.0);
    }
    a->setGridLinePen(g);
    const QPen line = remembered(a, "pl_linePen", a->linePen());
    QPen ln = line;
    if (on) {
      ln.setColor(presentation::kInk);
      ln.setWidthF(2.0);
    }
    a->setLinePen(ln);
  }
  for (QAbstractSeries* s : chart->series()) {
    if (auto* sc = qobject_cast<QScatterSeries*>(s)) {
      const double size = remembered(sc, "pl_markerSize", sc->markerSize());
      const double want = on ? size * 1.6 : size;
      if (sc->markerSize() != want) sc->setMarkerSize(want);
    } else if (auto* xy = qobject_cast<QXYSeries*>(s)) {
      const double width = remembered(xy, "pl_penWidth", xy->pen().widthF());
      const double want = on ? width * presentation::kLineFactor : width;
      if (xy->pen().widthF() != want) {
        QPen p = xy->pen();
        p.setWidthF(want);
        xy->setPen(p);
      }
    }
  }
}

void setPresentationFont(QWidget* widget, bool on, double pointSize, bool bold) {
  if (!widget) return;
  const QFont normal = remembered(widget, "pl_font", widget->font());
  QFont f = normal;
  if (on) {
    f.setPointSizeF(pointSize);
    f.setBold(bold || normal.bold());
  }
  widget->setFont(f);
}

}  // namespace chart_style
