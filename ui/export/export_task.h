// ExportTask: one export run without holding the event loop — the charts
// are drawn on the GUI thread one per event-loop turn, and the PNG encoding,
// the SVG bytes and the CSV files are written on a worker thread.
#pragma once

#include <QMutex>
#include <QObject>
#include <QString>
#include <QStringList>
#include <QThreadPool>

#include <atomic>
#include <functional>
#include <memory>

class ExportPlan;

// Created, started and destroyed on the GUI thread. Destroying it while it
// runs stops drawing, lets the file being written finish (each file is
// atomic: QSaveFile) and waits for the worker.
class ExportTask : public QObject {
  Q_OBJECT

 public:
  explicit ExportTask(std::unique_ptr<ExportPlan> plan, QObject* parent = nullptr);
  ~ExportTask() override;

  void start();
  bool isFinished() const { return m_finished; }
  // Valid once finished() was emitted: every file written, or the first
  // failure as one line naming the file (empty on success).
  QStringList files() const;
  QString error() const;
  // The longest single GUI-thread slice this export took, in ms.
  double longestSliceMs() const { return m_longestSliceMs; }

 signals:
  // Every file is complete (committed) when this fires.
  void finished(bool ok);

 private:
  void step();
  void enqueue(std::function<QStringList()> work);
  void fail(const QString& error);

  std::unique_ptr<ExportPlan> m_plan;
  int m_next = 0;  // the next slice: chart m_next / 2, its PNG (even) or SVG (odd)
  bool m_finished = false;
  double m_longestSliceMs = 0.0;
  std::atomic<int> m_queued{0};
  std::atomic<bool> m_stop{false};
  mutable QMutex m_mutex;
  QStringList m_files;  // under m_mutex
  QString m_error;      // under m_mutex
  QThreadPool m_pool;   // last member: destroyed, and waited for, first
};
