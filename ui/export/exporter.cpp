// Exporter: the store's history -> engine::RunExport -> CSV; charts -> images.
#include "export/exporter.h"

#include <QChart>
#include <QChartView>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSet>

#include <stdexcept>

#include "charts/chart_export.h"
#include "charts/live_chart_view.h"
#include "journal/weights.h"
#include "session/run_store.h"

ExportPlan::ExportPlan(const RunStore& store, const ExportRequest& request)
    : m_dir(request.dir), m_png(request.png), m_svg(request.svg) {
  if (request.dir.isEmpty()) throw std::runtime_error("export: no folder chosen");
  if (!QDir().mkpath(request.dir))
    throw std::runtime_error(QStringLiteral("%1: cannot create the folder").arg(request.dir).toStdString());
  if (request.csv) {
    if (request.runs.isEmpty()) throw std::runtime_error("export: no run selected");
    // Copies: the worker writes them while the store grows.
    for (int id : request.runs) {
      const RunData& run = store.run(id);
      m_runs.push_back(run.toExport());
      // Its final weights, when its folder has them (a finished or stopped
      // run's), under the export's run number.
      if (run.folder.isEmpty() || run.folderRun < 0) continue;
      const QString file =
          QDir(run.folder).filePath(QString::fromStdString(engine::weights_file_name(run.folderRun)));
      if (QFileInfo(file).isFile())
        m_weights.push_back({file, QString::fromStdString(engine::weights_file_name(m_runs.back().run_id))});
    }
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
    m_charts.push_back({view, stem});
  }
}

DrawnChart ExportPlan::draw(int k, bool png, bool svg) const {
  const Chart& c = m_charts[static_cast<std::size_t>(k)];
  const QDir dir(m_dir);
  DrawnChart out;
  png = png && m_png;
  svg = svg && m_svg;
  if (png) out.pngFile = dir.filePath(c.stem + QStringLiteral(".png"));
  if (svg) out.svgFile = dir.filePath(c.stem + QStringLiteral(".svg"));
  if (!png && !svg) return out;
  // A chart of the Compare tab is rebuilt when its group changes: one that
  // went away while the export ran is not drawn as something else.
  if (!c.view) {
    const QString file = png ? out.pngFile : out.svgFile;
    throw std::runtime_error(
        QStringLiteral("%1: the chart was closed during the export").arg(QDir::toNativeSeparators(file)).toStdString());
  }
  if (png) out.png = recordChart(c.view);
  if (svg) {
    out.svg = renderChartSvg(c.view);
    if (out.svg.isEmpty())
      throw std::runtime_error(
          QStringLiteral("%1: cannot start the SVG painter").arg(QDir::toNativeSeparators(out.svgFile)).toStdString());
  }
  return out;
}

QStringList ExportPlan::writeCsv() const {
  QStringList written;
  if (m_runs.empty()) return written;
  engine::export_runs(m_dir.toStdString(), m_runs);  // throws naming the file
  const QDir dir(m_dir);
  for (const char* f :
       {"steps.csv", "evals.csv", "events.csv", "grads.csv", "summary.csv", "config.json", "samples.jsonl"})
    if (dir.exists(QString::fromLatin1(f))) written << dir.filePath(QString::fromLatin1(f));
  for (const auto& [from, name] : m_weights) {
    QFile in(from);
    const QString to = dir.filePath(name);
    QString error;
    if (!in.open(QIODevice::ReadOnly))
      throw std::runtime_error(QStringLiteral("%1: cannot read (%2)")
                                   .arg(QDir::toNativeSeparators(from), in.errorString())
                                   .toStdString());
    if (!writeFileBytes(in.readAll(), to, &error)) throw std::runtime_error(error.toStdString());
    written << to;
  }
  return written;
}

QStringList ExportPlan::write(const DrawnChart& chart) {
  QStringList written;
  QString error;
  if (!chart.pngFile.isEmpty()) {
    if (!writePngFile(rasterChart(chart.png), chart.pngFile, &error)) throw std::runtime_error(error.toStdString());
    written << chart.pngFile;
  }
  if (!chart.svgFile.isEmpty()) {
    if (!writeFileBytes(chart.svg, chart.svgFile, &error)) throw std::runtime_error(error.toStdString());
    written << chart.svgFile;
  }
  return written;
}

QStringList exportRuns(const RunStore& store, const ExportRequest& request) {
  const ExportPlan plan(store, request);
  QStringList written = plan.writeCsv();
  for (int k = 0; k < plan.chartCount(); ++k) written << ExportPlan::write(plan.draw(k));
  return written;
}
