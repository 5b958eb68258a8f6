// StepMarkers: vertical dashed lines with a short label on a chart over
// steps, at the steps where something changed mid-run (a layer's precision,
// the loss scaler). They are items of the chart's scene, so every grab,
// render, PNG and SVG export of the chart draws them.
#pragma once

#include <QColor>
#include <QList>
#include <QObject>
#include <QString>

#include <vector>

class QChart;
class QGraphicsLineItem;
class QGraphicsSimpleTextItem;
class QValueAxis;

// GUI thread only.
class StepMarkers : public QObject {
  Q_OBJECT

 public:
  // Follows `chart`'s plot area and `xAxis`'s range (a zoom moves them).
  StepMarkers(QChart* chart, QValueAxis* xAxis, QObject* parent = nullptr);
  ~StepMarkers() override;

  struct Marker {
    double step = 0;
    QString text;
    int group = -1;  // who it belongs to (a run id): hidden together
  };
  // A dashed line at `step` labelled `text` (kept short: "fc2 → FP16").
  void addMarker(double step, const QString& text, const QColor& colour, int group = -1);
  void setGroupVisible(int group, bool visible);
  void clear();
  QList<Marker> markers() const;
  // The scene x of a marker's line (NaN while outside the axis range), for tests.
  double lineX(int index) const;
  bool shown(int index) const;

 private:
  struct Item {
    Marker marker;
    QGraphicsLineItem* line;
    QGraphicsSimpleTextItem* label;
    bool groupShown = true;
  };
  void place();

  QChart* m_chart;
  QValueAxis* m_x;
  std::vector<Item> m_items;
};
