// Exporter: the store's history -> engine::RunExport -> CSV; charts -> images.
#include "exporter.h"

#include <QChart>
#include <QChartView>
#include <QDir>
#include <QRegularExpression>
#include <QSet>

#include <stdexcept>

#include "chart_export.h"
#include "report/csv.h"
#include "run_store.h"

QStringList exportRuns(const RunStore& store, const ExportRequest& request) {
  QStringList written;
  if (request.dir.isEmpty()) throw std::runtime_error("export: no folder chosen");
  if (!QDir().mkpath(request.dir))
    throw std::runtime_error(QStringLiteral("%1: cannot create the folder").arg(request.dir).toStdString());
  const QDir dir(request.dir);
  if (request.csv) {
    if (request.runs.isEmpty()) throw std::runtime_error("export: no run selected");
    std::vector<engine::RunExport> runs;
    for (int id : request.runs) runs.push_back(store.run(id).toExport());
    engine::export_runs(request.dir.toStdString(), runs);  // throws naming the file
    for (const char* f : {"steps.csv", "evals.csv", "events.csv", "grads.csv", "summary.csv", "config.json"})
      if (dir.exists(QString::fromLatin1(f))) written << dir.filePath(QString::fromLatin1(f));
  }
  QSet<QString> stems;
  for (QChartView* view : request.charts) {
    // Titles may carry HTML (the compare charts' colour swatch).
    QString title = view->chart() ? view->chart()->title() : view->objectName();
    title.remove(QRegularExpression(QStringLiteral("<[^>]*>")));
    QString stem = chartFileStem(title);
    if (view->objectName().startsWith(QLatin1String("compareChart"))) stem = QStringLiteral("compare_") + stem;
    for (int k = 2; stems.contains(stem); ++k) stem = QStringLiteral("%1_%2").arg(stem).arg(k);
    stems.insert(stem);
    QString error;
    if (request.png) {
      const QString file = dir.filePath(stem + QStringLiteral(".png"));
      if (!saveChartPng(view, file, &error)) throw std::runtime_error(error.toStdString());
      written << file;
    }
    if (request.svg) {
      const QString file = dir.filePath(stem + QStringLiteral(".svg"));
      if (!saveChartSvg(view, file, &error)) throw std::runtime_error(error.toStdString());
      written << file;
    }
  }
  return written;
}
