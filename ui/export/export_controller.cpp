// ExportController: asks what to export, draws the charts from the store as
// it is now, and writes the files.
#include "export/export_controller.h"

#include <QChartView>
#include <QDir>
#include <QEventLoop>
#include <QStandardPaths>
#include <QWidget>

#include <exception>
#include <memory>

#include "charts/chart_area.h"
#include "charts/live_chart_view.h"
#include "compare/compare_view.h"
#include "export/export_dialog.h"
#include "export/export_task.h"
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
  if (exporting()) {
    m_messages->status(tr("An export is still running; try again when it has finished"), 5000);
    return;
  }
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
  startExport(request);
}

bool ExportController::startExport(const ExportRequest& request) {
  if (exporting()) {
    m_messages->status(tr("An export is still running; try again when it has finished"), 5000);
    return false;
  }
  // Charts are drawn from the store as it is now.
  m_controller->drainNow();
  m_charts->refresh();
  m_compare->refresh();
  std::unique_ptr<ExportPlan> plan;
  try {
    plan = std::make_unique<ExportPlan>(*m_store, request);
  } catch (const std::exception& e) {
    m_messages->error(tr("Export failed"), QString::fromStdString(e.what()));
    emit exportFinished(false, {});
    return false;
  }
  auto* task = new ExportTask(std::move(plan), this);
  m_task = task;
  const QString dir = QDir::toNativeSeparators(request.dir);
  connect(task, &ExportTask::finished, this, [this, task, dir](bool ok) {
    const QStringList files = task->files();
    m_lastLongestSliceMs = task->longestSliceMs();
    if (ok)
      m_messages->status(tr("Exported %1 files to %2").arg(files.size()).arg(dir), 8000);
    else
      m_messages->error(tr("Export failed"), task->error());
    m_task = nullptr;
    task->deleteLater();
    emit exportFinished(ok, files);
  });
  m_messages->status(tr("Exporting to %1...").arg(dir));
  task->start();
  return true;
}

bool ExportController::exportTo(const ExportRequest& request) {
  bool result = false;
  QEventLoop loop;
  connect(this, &ExportController::exportFinished, &loop, [&](bool ok) {
    result = ok;
    loop.quit();
  });
  if (!startExport(request)) return false;
  loop.exec();
  return result;
}
