// Exporter: writes the selected runs' CSV files (engine::export_runs, the
// files docs/numerics.md lists; a text run's samples.jsonl), each run's final
// weights where its run folder has them, and each chart as PNG and SVG into
// one folder, in steps: what must draw widgets on the GUI thread, what may
// run anywhere.
#pragma once

#include <QByteArray>
#include <QList>
#include <QPointer>
#include <QString>
#include <QStringList>
#include <QVector>

#include <utility>
#include <vector>

#include "charts/chart_export.h"
#include "report/csv.h"

class QChartView;
class RunStore;

struct ExportRequest {
  QString dir;
  QVector<int> runs;               // store ids
  bool csv = true;
  bool png = true;
  bool svg = true;
  QList<QChartView*> charts;       // drawn as they are on screen
};

// One chart drawn into memory on the GUI thread: the PNG's drawing (not yet
// rasterised nor encoded) and the SVG's bytes, and the files they go to.
struct DrawnChart {
  QString pngFile;
  ChartPicture png;
  QString svgFile;
  QByteArray svg;
};

// An export cut into steps, so that the GUI thread's part can be spread over
// event-loop turns and the rest done on a worker. The constructor and draw()
// run on the GUI thread; writeCsv() and write() on any thread (they touch
// only the plan's own copies). Each throws std::runtime_error, one line
// naming the file; every file is written to a temporary file and renamed,
// so a failure leaves no half file.
class ExportPlan {
 public:
  // Creates the folder and copies the runs' histories as they are now.
  ExportPlan(const RunStore& store, const ExportRequest& request);

  int chartCount() const { return static_cast<int>(m_charts.size()); }
  // Chart `k` as it is on screen now, as PNG and/or SVG where the request
  // asked for them (each one is a slice of GUI-thread time of its own);
  // throws when its view is gone.
  DrawnChart draw(int k, bool png = true, bool svg = true) const;
  QStringList writeCsv() const;
  static QStringList write(const DrawnChart& chart);

 private:
  struct Chart {
    QPointer<QChartView> view;
    QString stem;
  };
  QString m_dir;
  bool m_png, m_svg;
  std::vector<engine::RunExport> m_runs;  // empty: no CSV
  // Each exported run's final weights: the run folder's file, and its name
  // in the export (weights-<export run_id>.bin).
  std::vector<std::pair<QString, QString>> m_weights;
  std::vector<Chart> m_charts;
};

// Every step on the calling thread (the GUI thread). Returns the files written.
QStringList exportRuns(const RunStore& store, const ExportRequest& request);
