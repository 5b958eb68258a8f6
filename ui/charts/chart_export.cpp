// Chart export: PNG rendered at >= 2x (and >= 1920 px wide), SVG through
// QSvgGenerator.
#include "charts/chart_export.h"

#include <QApplication>
#include <QBuffer>
#include <QChart>
#include <QChartView>
#include <QLegend>
#include <QFileInfo>
#include <QImage>
#include <QPainter>
#include <QRegularExpression>
#include <QSaveFile>
#include <QSvgGenerator>
#include <QXYSeries>

#include <algorithm>
#include <vector>

#include "charts/chart_style.h"

namespace {

// Switches the OpenGL series below `root` to software drawing for its
// lifetime, and back afterwards.
class SoftwareSeries {
 public:
  explicit SoftwareSeries(QWidget* root) {
    for (QChartView* v : root->findChildren<QChartView*>()) collect(v);
    if (auto* v = qobject_cast<QChartView*>(root)) collect(v);
    for (QXYSeries* s : m_series) s->setUseOpenGL(false);
    if (!m_series.empty()) QApplication::processEvents();  // let the scene re-create its items
  }
  ~SoftwareSeries() {
    for (QXYSeries* s : m_series) s->setUseOpenGL(true);
  }

 private:
  void collect(QChartView* v) {
    if (!v->chart()) return;
    for (QAbstractSeries* s : v->chart()->series())
      if (auto* xy = qobject_cast<QXYSeries*>(s); xy && xy->useOpenGL()) m_series.push_back(xy);
  }
  std::vector<QXYSeries*> m_series;
};

// Shows the legend of a chart that keeps it hidden on screen
// (kLegendOnExportProperty) for its lifetime, and hides it again.
class ExportLegend {
 public:
  explicit ExportLegend(QChartView* view) : m_chart(view->chart()) {
    if (!m_chart || !m_chart->property(kLegendOnExportProperty).toBool() || m_chart->legend()->isVisible()) {
      m_chart = nullptr;
      return;
    }
    m_chart->legend()->show();
    QApplication::processEvents();  // the chart lays its plot out again, legend below
  }
  ~ExportLegend() {
    if (!m_chart) return;
    m_chart->legend()->hide();
    QApplication::processEvents();
  }

 private:
  QChart* m_chart;
};

QString writeError(const QString& file, const QString& what) {
  return QStringLiteral("%1: %2").arg(QFileInfo(file).absoluteFilePath(), what);
}

}  // namespace

QPixmap grabWithoutOpenGL(QWidget* widget) {
  SoftwareSeries software(widget);
  return widget->grab();
}

double exportPixelRatio(const QWidget* view) {
  const double width = std::max(1, view->width());
  return std::max({chart_style::kExportMinPixelRatio, view->devicePixelRatioF(),
                   chart_style::kExportMinWidth / width});
}

ChartPicture recordChart(QChartView* view) {
  SoftwareSeries software(view);
  ExportLegend legend(view);
  ChartPicture out;
  out.logical = view->size();
  out.ratio = exportPixelRatio(view);
  QPainter painter(&out.picture);
  painter.setRenderHint(QPainter::Antialiasing);
  painter.setRenderHint(QPainter::TextAntialiasing);
  view->render(&painter, QRectF(QPointF(0, 0), QSizeF(out.logical)), view->viewport()->rect(), Qt::IgnoreAspectRatio);
  painter.end();
  return out;
}

QImage rasterChart(const ChartPicture& chart) {
  // Rasterised (vector) at the export ratio, not grabbed at the screen's:
  // a slide needs more pixels than a 350-pixel chart on screen has. The
  // view's whole viewport was recorded onto the whole logical rect, both
  // rects explicit: with no target, render() takes the device's pixel size
  // as the target and, scaled again by the ratio, drew only a blown-up
  // top-left corner.
  const QSize logical = chart.logical.expandedTo(QSize(1, 1));
  QImage image((QSizeF(logical) * chart.ratio).toSize(), QImage::Format_ARGB32_Premultiplied);
  image.fill(Qt::white);
  QPainter painter(&image);
  painter.setRenderHint(QPainter::Antialiasing);
  painter.setRenderHint(QPainter::TextAntialiasing);
  painter.scale(static_cast<double>(image.width()) / logical.width(),
                static_cast<double>(image.height()) / logical.height());
  painter.drawPicture(0, 0, chart.picture);
  painter.end();
  return image;
}

QImage renderChart(QChartView* view) { return rasterChart(recordChart(view)); }

bool writePngFile(const QImage& image, const QString& file, QString* error) {
  QSaveFile out(file);
  if (!out.open(QIODevice::WriteOnly) || !image.save(&out, "PNG") || !out.commit()) {
    if (error) *error = writeError(file, out.errorString().isEmpty() ? QStringLiteral("cannot write PNG") : out.errorString());
    return false;
  }
  return true;
}

bool writeFileBytes(const QByteArray& bytes, const QString& file, QString* error) {
  QSaveFile out(file);
  if (!out.open(QIODevice::WriteOnly) || out.write(bytes) != bytes.size() || !out.commit()) {
    if (error) *error = writeError(file, out.errorString().isEmpty() ? QStringLiteral("cannot write") : out.errorString());
    return false;
  }
  return true;
}

bool saveChartPng(QChartView* view, const QString& file, QString* error) {
  return writePngFile(renderChart(view), file, error);
}

QByteArray renderChartSvg(QChartView* view) {
  SoftwareSeries software(view);
  ExportLegend legend(view);
  QBuffer buffer;
  buffer.open(QIODevice::WriteOnly);
  QSvgGenerator svg;
  svg.setOutputDevice(&buffer);
  svg.setSize(view->size());
  svg.setViewBox(QRect(QPoint(0, 0), view->size()));
  svg.setTitle(view->chart() ? view->chart()->title() : QString());
  svg.setDescription(QStringLiteral("Precision Lab chart"));
  QPainter painter;
  if (!painter.begin(&svg)) return {};
  painter.setRenderHint(QPainter::Antialiasing);
  // The same mapping as the PNG: the whole viewport onto the whole picture.
  view->render(&painter, QRectF(QPointF(0, 0), QSizeF(view->size())), view->viewport()->rect(),
               Qt::IgnoreAspectRatio);
  painter.end();
  return buffer.data();
}

bool saveChartSvg(QChartView* view, const QString& file, QString* error) {
  const QByteArray bytes = renderChartSvg(view);
  if (bytes.isEmpty()) {
    if (error) *error = writeError(file, QStringLiteral("cannot start the SVG painter"));
    return false;
  }
  return writeFileBytes(bytes, file, error);
}

QString chartFileStem(const QString& title) {
  QString stem = title.toLower();
  stem.remove(QRegularExpression(QStringLiteral("<[^>]*>")));  // rich-text titles
  stem.replace(QRegularExpression(QStringLiteral("[^a-z0-9.]+")), QStringLiteral("-"));
  while (stem.startsWith(QLatin1Char('-'))) stem.remove(0, 1);
  while (stem.endsWith(QLatin1Char('-'))) stem.chop(1);
  return stem.isEmpty() ? QStringLiteral("chart") : stem;
}
