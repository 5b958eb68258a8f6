// ExportController: File > Export — the dialog, and writing the chosen runs'
// CSV files and every chart of the window as PNG/SVG.
#pragma once

#include <QList>
#include <QObject>
#include <QPointer>
#include <QString>
#include <QStringList>

#include "export/export_task.h"

class ChartArea;
class CompareView;
class QChartView;
class QWidget;
class RunStore;
class TrainingController;
class UserMessages;
struct ExportRequest;

// GUI thread only.
class ExportController : public QObject {
  Q_OBJECT

 public:
  ExportController(RunStore* store, TrainingController* controller, ChartArea* charts, CompareView* compare,
                   UserMessages* messages, QWidget* window);

  void openDialog();
  // Starts writing what `request` asks for and returns at once: the charts
  // are drawn a slice per event-loop turn, the files written on a worker
  // thread; exportFinished() follows, and a failure is shown, not thrown.
  // False (and a message) when an export is still running or cannot start.
  bool startExport(const ExportRequest& request);
  // startExport(), then waits for it (the event loop runs meanwhile).
  bool exportTo(const ExportRequest& request);
  bool exporting() const { return m_task != nullptr; }
  // The longest single GUI-thread slice of the last finished export, in ms
  // (the monkey test reports it).
  double lastLongestSliceMs() const { return m_lastLongestSliceMs; }
  // Every chart of the window (Live tab, then the Compare small multiples).
  QList<QChartView*> allCharts() const;

 signals:
  // Every file is complete when this fires; `files` are those written.
  void exportFinished(bool ok, const QStringList& files);

 private:
  RunStore* m_store;
  TrainingController* m_controller;
  ChartArea* m_charts;
  CompareView* m_compare;
  UserMessages* m_messages;
  QWidget* m_window;
  QString m_dir;  // the dialog's folder, kept between exports
  // The export running now; a child, so the window's destruction stops it
  // and waits for its worker.
  QPointer<ExportTask> m_task;
  double m_lastLongestSliceMs = 0.0;
};
