// ChartStyle: every chart's fonts, colours, pens and margins in one place,
// so the live charts, the gradient panel and the compare small multiples
// look alike and a change of style is one edit.
#pragma once

#include <QColor>
#include <QFont>
#include <QMargins>
#include <QPen>
#include <QRectF>
#include <QString>
#include <QVector>

class QChart;
class QGraphicsTextItem;
class QValueAxis;

namespace chart_style {

// --- colours ---
// Run colours (Okabe-Ito, colour-blind safe), by index: for what is not a
// recipe's run (reopened runs of unknown recipes, tests).
QColor runColour(int index);
// Each recipe keeps one colour and one dash pattern everywhere (fp32 is
// always black and solid), distinct from every other recipe's in both, so
// two runs read apart in colour and in line style. `order` is the drawing
// order of comparison charts: the reference (fp32) last, on top, thin.
struct RecipeStyle {
  QColor colour;
  QVector<qreal> dashes;  // QPen::setDashPattern units (pen widths); empty: solid
  int order = 0;
};
RecipeStyle recipeStyle(const QString& recipe);
// The colour of the `occurrence`-th run (0-based) of `recipe` among the
// session's runs: the recipe's colour, then lighter shades of it, so a
// second fp16 run is still recognisably fp16.
QColor recipeColour(const QString& recipe, int occurrence = 0);
// A pen in the recipe's dash pattern (solid for fp32), flat caps.
QPen recipePen(const QString& recipe, const QColor& colour, double width);
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
// The alpha of overlaid per-step lines (loss, loss scale): translucent, so
// a run drawn later lets the ones below show through.
constexpr int kOverlayAlpha = 170;

// --- margins, sizes ---
inline const QMargins kChartMargins{4, 2, 4, 2};
inline const QMargins kSmallChartMargins{2, 2, 2, 2};
// The least a chart is drawn at: below this its axes eat the plot.
constexpr int kMinChartWidth = 240;
constexpr int kMinChartHeight = 170;
// PNG export: at least this wide (slides), and at least 2x device pixels.
constexpr int kExportMinWidth = 1920;
constexpr double kExportMinPixelRatio = 2.0;

// A note drawn on a chart ("no loss scaling: fp16", "No accuracy"): kept
// inside the plot area, clear of the axes' labels: wrapped to the plot's
// width (less a margin) and placed at its centre (Qt::AlignCenter) or its
// top-left corner (Qt::AlignTop | Qt::AlignLeft). Returns the note's height.
double placeNote(QGraphicsTextItem* note, const QRectF& plot, Qt::Alignment where);
constexpr double kNoteMargin = 6;

// Title font, margins, no rounded background, legend at the bottom.
void styleChart(QChart* chart, bool small = false);
// A value axis with the chart's axis font and dynamic ticks from 0.
QValueAxis* makeValueAxis(const QChart* chart, const QString& title, const QString& objectName,
                          bool small = false);

// --- the format explorer's bit fields (Float Toy's convention) and its
// number line: flush-to-zero, subnormal band, normal range, overflow ---
inline const QColor kSignBit{0xE8, 0x9A, 0xB4};      // pink
inline const QColor kExponentBit{0x8C, 0xC8, 0xF0};  // blue
inline const QColor kMantissaBit{0xC9, 0xB6, 0xEC};  // lilac
inline const QColor kBitInk{20, 20, 20};
inline const QColor kUnderflowZone{0xF4, 0xC7, 0xC3};
inline const QColor kSubnormalZone{0xFB, 0xE3, 0xA6};
inline const QColor kNormalZone{0xC8, 0xE6, 0xC9};
inline const QColor kOverflowZone{0xF4, 0xC7, 0xC3};
inline const QColor kMarker{0x00, 0x00, 0x00};
// A lecture claim's verdict.
inline const QColor kPass{0x1B, 0x7F, 0x3A};
inline const QColor kFail = kAlarmLine;

// --- presentation view: the window as slides, read from the back of a
// room at 1280x720 (a projector): large type, thick lines, black on white ---
namespace presentation {
constexpr double kTitlePt = 19;     // chart titles
constexpr double kAxisPt = 14;      // axis titles and tick labels
constexpr double kLegendPt = 15;    // legends, the gradient panel's numbers
constexpr double kHeadingPt = 22;   // the lesson's title
constexpr double kTextPt = 15;      // the lesson's explanation and claims
constexpr double kLineFactor = 2.2; // series pens, times their normal width
inline const QColor kInk{0, 0, 0};
inline const QColor kGrid{150, 150, 150};
inline const QColor kBackground{255, 255, 255};
}  // namespace presentation

// Presentation style on (or back off) for `chart`: fonts of title, axes and
// legend, axis and grid colours, and every series' pen width times
// kLineFactor (the normal width is remembered on the series, so series
// added later are widened by calling this again). Idempotent.
void applyPresentation(QChart* chart, bool on);
// A widget's font at `pointSize` (presentation) or its normal font.
void setPresentationFont(class QWidget* widget, bool on, double pointSize, bool bold = false);

}  // namespace chart_style
