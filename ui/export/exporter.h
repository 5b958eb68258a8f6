// Exporter: writes the selected runs' CSV files (engine::export_runs, the
// files docs/numerics.md lists) and each chart as PNG and SVG into one folder.
#pragma once

#include <QList>
#include <QString>
#include <QStringList>
#include <QVector>

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

// GUI thread only. Returns the files written. Throws std::runtime_error
// (one line naming the file) on the first failure; CSV files are written
// to temporary files and renamed, so a failure leaves no half file.
QStringList exportRuns(const RunStore& store, const ExportRequest& request);
