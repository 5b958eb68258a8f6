// Chart export: PNG through QWidget::grab, SVG through QSvgGenerator.
#include "chart_export.h"

#include <QApplication>
#include <QChart>
#include <QChartView>
#include <QFileInfo>
#include <QPainter>
#include <QRegularExpression>
#include <QSaveFile>
#include <QSvgGenerator>
#include <QXYSeries>

#include <vector>

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

QString writeError(const QString& file, const QString& what) {
  return QStringLiteral("%1: %2").arg(QFileInfo(file).absoluteFilePath(), what);
}

}  // namespace

QPixmap grabWithoutOpenGL(QWidget* widget) {
  SoftwareSeries software(widget);
  return widget->grab();
}

bool saveChartPng(QChartView* view, const QString& file, QString* error) {
  const QPixmap pixmap = grabWithoutOpenGL(view);
  // QSaveFile: written to a temporary file and renamed, never half a PNG.
  QSaveFile out(file);
  if (!out.open(QIODevice::WriteOnly) || !pixmap.save(&out, "PNG") || !out.commit()) {
    if (error) *error = writeError(file, out.errorString().isEmpty() ? QStringLiteral("cannot write PNG") : out.errorString());
    return false;
  }
  return true;
}

bool saveChartSvg(QChartView* view, const QString& file, QString* error) {
  SoftwareSeries software(view);
  QSaveFile out(file);
  if (!out.open(QIODevice::WriteOnly)) {
    if (error) *error = writeError(file, out.errorString());
    return false;
  }
  QSvgGenerator svg;
  svg.setOutputDevice(&out);
  svg.setSize(view->size());
  svg.setViewBox(QRect(QPoint(0, 0), view->size()));
  svg.setTitle(view->chart() ? view->chart()->title() : QString());
  svg.setDescription(QStringLiteral("Precision Lab chart"));
  {
    QPainter painter;
    if (!painter.begin(&svg)) {
      out.cancelWriting();
      if (error) *error = writeError(file, QStringLiteral("cannot start the SVG painter"));
      return false;
    }
    painter.setRenderHint(QPainter::Antialiasing);
    view->render(&painter);
    painter.end();
  }
  if (!out.commit()) {
    if (error) *error = writeError(file, out.errorString());
    return false;
  }
  return true;
}

QString chartFileStem(const QString& title) {
  QString stem = title.toLower();
  stem.replace(QRegularExpression(QStringLiteral("[^a-z0-9]+")), QStringLiteral("_"));
  while (stem.startsWith(QLatin1Char('_'))) stem.remove(0, 1);
  while (stem.endsWith(QLatin1Char('_'))) stem.chop(1);
  return stem.isEmpty() ? QStringLiteral("chart") : stem;
}
