// ExportController: asks what to export, draws the charts from the store as
// it is now, and writes the files.
#include "export/export_controller.h"

#include <QChartView>
#include <QDir>
#include <QStandardPaths>
#include <QWidget>

#include <exception>

#include "charts/chart_area.h"
#include "charts/live_chart_view.h"
#include "compare/compare_view.h"
#include "export/export_dialog.h"
#include "export/exporter.h"
#include "session/run_store.h"
#include "session/training_controller.h"
#include "session/user_messages.h"

ExportController::ExportController(RunStore* store, TrainingController* controller, ChartArea* charts,
                                   CompareView* compare, UserMessages* messages, QWidget* window)
    : QObject(window),
      m_store(store),
      m_controller(controller),
      m_charts(charts),
      m_compare(compare),
      m_messages(messages),
      m_window(window),
      m_dir(QDir(QStandardPaths::writableLocation(QStandardPaths::DocumentsLocation))
                .filePath(QStringLiteral("precision-lab-export"))) {}

QList<QChartView*> ExportController::allCharts() const {
  QList<QChartView*> charts;
  for (int m = 0; m < m_charts->chartCount(); ++m) charts << m_charts->view(m);
  charts << m_compare->exportCharts();
  return charts;
}

void ExportController::openDialog() {
  ExportDialog dialog(*m_store, m_dir, m_window);
  if (dialog.exec() != QDialog::Accepted) return;
  m_dir = dialog.directory();
  ExportRequest request;
  request.dir = dialog.directory();
  request.runs = dialog.runs();
  request.csv = dialog.csv() && !request.runs.isEmpty();
  request.png = dialog.png();
  request.svg = dialog.svg();
  request.charts = allCharts();
  exportTo(request);
}

bool ExportController::exportTo(const ExportRequest& request) {
  // Charts are drawn from the store as it is now.
  m_controller->drainNow();
  m_charts->refresh();
  m_compare->refresh();
  try {
    const QStringList files = exportRuns(*m_store, request);
    m_messages->status(tr("Exported %1 files to %2").arg(files.size()).arg(QDir::toNativeSeparators(request.dir)),
                       8000);
    return true;
  } catch (const std::exception& e) {
    m_messages->error(tr("Export failed"), QString::fromStdString(e.what()));
    return false;
  }
}
