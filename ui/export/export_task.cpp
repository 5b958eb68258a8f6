// ExportTask: slices on the GUI thread (a QTimer per turn), writes on a
// one-thread pool (in order, so the first failure is the first file).
#include "export/export_task.h"

#include <QElapsedTimer>
#include <QMutexLocker>
#include <QTimer>

#include <exception>

#include "export/exporter.h"

namespace {
// Drawn charts waiting for the writer: drawing waits while the worker is
// this far behind, so that closing the window waits for little.
constexpr int kMaxQueued = 2;
// How often a waiting export looks at the worker again.
constexpr int kPollMs = 5;
}  // namespace

ExportTask::ExportTask(std::unique_ptr<ExportPlan> plan, QObject* parent) : QObject(parent), m_plan(std::move(plan)) {
  m_pool.setMaxThreadCount(1);
}

ExportTask::~ExportTask() {
  m_stop = true;
  m_pool.waitForDone();
}

void ExportTask::start() {
  enqueue([plan = m_plan.get()] { return plan->writeCsv(); });
  QTimer::singleShot(0, this, &ExportTask::step);
}

QStringList ExportTask::files() const {
  QMutexLocker lock(&m_mutex);
  return m_files;
}

QString ExportTask::error() const {
  QMutexLocker lock(&m_mutex);
  return m_error;
}

void ExportTask::fail(const QString& error) {
  QMutexLocker lock(&m_mutex);
  if (m_error.isEmpty()) m_error = error;
  m_stop = true;
}

void ExportTask::enqueue(std::function<QStringList()> work) {
  ++m_queued;
  m_pool.start([this, work = std::move(work)] {
    if (!m_stop) {
      try {
        const QStringList written = work();
        QMutexLocker lock(&m_mutex);
        m_files << written;
      } catch (const std::exception& e) {
        fail(QString::fromStdString(e.what()));
      }
    }
    --m_queued;
  });
}

void ExportTask::step() {
  const int slices = 2 * m_plan->chartCount();
  if (m_stop || m_next >= slices) {
    // Done drawing (or failed): finished once the worker is idle.
    if (m_queued > 0) {
      QTimer::singleShot(kPollMs, this, &ExportTask::step);
      return;
    }
    m_finished = true;
    emit finished(error().isEmpty());
    return;
  }
  if (m_queued > kMaxQueued) {
    QTimer::singleShot(kPollMs, this, &ExportTask::step);
    return;
  }
  QElapsedTimer slice;
  slice.start();
  const int chart = m_next / 2;
  const bool png = m_next % 2 == 0;
  ++m_next;
  try {
    DrawnChart drawn = m_plan->draw(chart, png, !png);
    if (!drawn.pngFile.isEmpty() || !drawn.svgFile.isEmpty())
      enqueue([drawn = std::move(drawn)] { return ExportPlan::write(drawn); });
  } catch (const std::exception& e) {
    fail(QString::fromStdString(e.what()));
  }
  m_longestSliceMs = std::max(m_longestSliceMs, static_cast<double>(slice.nsecsElapsed()) / 1e6);
  QTimer::singleShot(0, this, &ExportTask::step);
}
