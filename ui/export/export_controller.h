// ExportController: File > Export — the dialog, and writing the chosen runs'
// CSV files and every chart of the window as PNG/SVG.
#pragma once

#include <QList>
#include <QObject>
#include <QString>

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
  // Writes what `request` asks for; a failure is shown, not thrown.
  bool exportTo(const ExportRequest& request);
  // Every chart of the window (Live tab, then the Compare small multiples).
  QList<QChartView*> allCharts() const;

 private:
  RunStore* m_store;
  TrainingController* m_controller;
  ChartArea* m_charts;
  CompareView* m_compare;
  UserMessages* m_messages;
  QWidget* m_window;
  QString m_dir;  // the dialog's folder, kept between exports
};
