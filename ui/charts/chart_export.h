// Chart export: a chart view as PNG (raster, at twice the device pixels or
// more: at least chart_style::kExportMinWidth wide, for slides)
// or SVG (QSvgGenerator, vector), with OpenGL series drawn in software for
// the capture (an OpenGL series is not part of a widget grab or render).
#pragma once

#include <QPicture>
#include <QPixmap>
#include <QSize>
#include <QString>

class QChartView;
class QWidget;

// A chart whose legend is hidden on screen (another widget names its
// series there) sets this property true: the exports show its legend.
inline constexpr const char* kLegendOnExportProperty = "pl_legendOnExport";

// GUI thread only. Return false and set *error (one line naming the file)
// when the file cannot be written.
bool saveChartPng(QChartView* view, const QString& file, QString* error = nullptr);
bool saveChartSvg(QChartView* view, const QString& file, QString* error = nullptr);

// Grabs any widget with every OpenGL chart series below it switched to
// software drawing for the capture (screenshots of the whole window).
QPixmap grabWithoutOpenGL(QWidget* widget);

// The pixel ratio a PNG export renders `view` at: 2x or more, and at least
// chart_style::kExportMinWidth pixels wide.
double exportPixelRatio(const QWidget* view);
// The chart as the PNG export draws it (GUI thread).
class QImage;
QImage renderChart(QChartView* view);
// The same in two steps: the view's drawing recorded (GUI thread, a few ms),
// then rasterised at the export size (any thread: most of the time).
struct ChartPicture {
  QPicture picture;  // the whole viewport onto (0, 0, logical)
  QSize logical;
  double ratio = 1.0;
};
ChartPicture recordChart(QChartView* view);
QImage rasterChart(const ChartPicture& chart);
// The chart as an SVG document (GUI thread); empty when the painter fails.
class QByteArray;
QByteArray renderChartSvg(QChartView* view);
// Any thread: `image` encoded as PNG, or `bytes`, written to `file` through
// QSaveFile (a temporary file renamed, never half a file). Return false and
// set *error (one line naming the file) on failure.
bool writePngFile(const QImage& image, const QString& file, QString* error = nullptr);
bool writeFileBytes(const QByteArray& bytes, const QString& file, QString* error = nullptr);

// A file name for a chart title or label: "Loss scale (log2)" ->
// "loss-scale-log2", "gradients fc3" -> "gradients-fc3".
QString chartFileStem(const QString& title);
