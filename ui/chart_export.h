// Chart export: a chart view as PNG (raster, at the screen's pixel ratio)
// or SVG (QSvgGenerator, vector), with OpenGL series drawn in software for
// the capture (an OpenGL series is not part of a widget grab or render).
#pragma once

#include <QPixmap>
#include <QString>

class QChartView;
class QWidget;

// GUI thread only. Return false and set *error (one line naming the file)
// when the file cannot be written.
bool saveChartPng(QChartView* view, const QString& file, QString* error = nullptr);
bool saveChartSvg(QChartView* view, const QString& file, QString* error = nullptr);

// Grabs any widget with every OpenGL chart series below it switched to
// software drawing for the capture (screenshots of the whole window).
QPixmap grabWithoutOpenGL(QWidget* widget);

// A file name for a chart title: "Loss scale (log2)" -> "loss_scale_log2".
QString chartFileStem(const QString& title);
