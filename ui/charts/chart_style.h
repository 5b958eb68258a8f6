// ChartStyle: every chart's fonts, colours, pens and margins in one place,
// so the live charts, the gradient panel and the compare small multiples
// look alike and a change of style is one edit.
#pragma once

#include <QColor>
#include <QFont>
#include <QMargins>
#include <QPen>
#include <QString>

class QChart;
class QValueAxis;

namespace chart_style {

// --- colours ---
// Run colours (Okabe-Ito, colour-blind safe), in the order runs get them.
QColor runColour(int index);
// Overflow, NaN loss, flush-to-zero: red. Subnormal: amber.
inline const QColor kAlarm{0xD0, 0x1C, 0x1C};
inline const QColor kAlarmLine{0xB0, 0x10, 0x10};
inline const QColor kCaution{0xE6, 0x9F, 0x00};
inline const QColor kCautionLine{0xB0, 0x70, 0x00};
inline const QColor kNeutral{90, 90, 90};     // legend-only lines
inline const QColor kInk{40, 40, 40};         // skipped-step rings
inline const QColor kNote{110, 110, 110};     // notes drawn on a chart
inline const QColor kFlagFill{0xF4, 0xC7, 0xC3};  // flagged table cells
inline const QColor kFlagText{0x8B, 0x00, 0x00};
// Memory categories, bottom to top of the stack.
QColor memoryColour(int category);
// The CPU-emulation band, drawn apart from the stack (hatched).
inline const QColor kEmulation{0x70, 0x70, 0x70};

// --- fonts ---
QFont titleFont(const QChart* chart);
QFont axisFont(const QChart* chart);
QFont legendFont(const QChart* chart);
// Small multiples: a size smaller.
QFont smallFont(const QChart* chart);

// --- pens (flat caps, bevel joins: round ones make the stroker build an
// arc at every vertex, the largest single cost of a paint) ---
QPen linePen(const QColor& colour, double width, Qt::PenStyle style = Qt::SolidLine);
// Widths.
constexpr double kLossWidth = 1.6;
constexpr double kValidationWidth = 2.6;
constexpr double kScaleWidth = 1.8;
constexpr double kMemTotalWidth = 2.0;
constexpr double kHistogramWidth = 2.0;

// --- margins, sizes ---
inline const QMargins kChartMargins{4, 2, 4, 2};
inline const QMargins kSmallChartMargins{2, 2, 2, 2};
// The least a chart is drawn at: below this its axes eat the plot.
constexpr int kMinChartWidth = 240;
constexpr int kMinChartHeight = 170;
// PNG export: at least this wide (slides), and at least 2x device pixels.
constexpr int kExportMinWidth = 1920;
constexpr double kExportMinPixelRatio = 2.0;

// Title font, margins, no rounded background, legend at the bottom.
void styleChart(QChart* chart, bool small = false);
// A value axis with the chart's axis font and dynamic ticks from 0.
QValueAxis* makeValueAxis(const QChart* chart, const QString& title, const QString& objectName,
                          bool small = false);

}  // namespace chart_style
