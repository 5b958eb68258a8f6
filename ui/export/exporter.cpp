// Exporter: the store's history -> engine::RunExport -> CSV; charts -> images.
#include "export/exporter.h"

#include <QChart>
#include <QChartView>
#include <QDir>
#include <QRegularExpression>
#include <QSet>

#include <stdexcept>

#include "charts/chart_export.h"
#include "charts/live_chart_view.h"
#include "report/csv.h"
#include "session/run_store.h"

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
    // The name says what the chart shows: run and layer where it is one
    // run's or one layer's ("memory-run-3", "gradients-fc3").
    QString stem;
    if (auto* live = qobject_cast<LiveChartView*>(view)) {
      stem = live->exportStem();
    } else {
      QString title = view->chart() ? view->chart()->title() : view->objectName();
      stem = chartFileStem(title);
    }
    for (int k = 2; stems.contains(stem); ++k) stem = QStringLiteral("%1-%2").arg(stem).arg(k);
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
