// EventNotices: scans each run's new events once per frame and says what
// matters in the status bar; keeps the runs list's status column current.
#include "session/event_notices.h"

#include <QTimer>

#include "numeric/format.h"
#include "panels/runs_list.h"
#include "session/run_store.h"
#include "session/training_controller.h"
#include "session/user_messages.h"

EventNotices::EventNotices(RunStore* store, TrainingController* controller, RunsList* runs, UserMessages* messages,
                           QObject* parent)
    : QObject(parent), m_store(store), m_controller(controller), m_runs(runs), m_messages(messages) {}

QString EventNotices::stateText(const RunData& r) {
  if (r.interrupted) return tr("interrupted");
  // The reason beside the word (diverged at step N: ...); the tooltip has it whole.
  if (r.state == engine::RunState::Failed && !r.message.isEmpty()) return tr("failed: %1").arg(r.message);
  if (r.state == engine::RunState::Running && r.totalSteps > 0 && !r.steps.empty())
    return tr("running %1%").arg(static_cast<int>(100.0 * static_cast<double>(r.steps.back().step) /
                                                  static_cast<double>(r.totalSteps)));
  return QString::fromLatin1(engine::run_state_name(r.state));
}

void EventNotices::onFrame() {
  for (int id : m_controller->currentRuns()) {
    const RunData& r = m_store->run(id);
    m_runs->setRunStatus(id, stateText(r), r.message, r.state == engine::RunState::Failed);
  }
  scanEvents();
}

void EventNotices::onRunChanged(int id) {
  const RunData& r = m_store->run(id);
  m_runs->setRunStatus(id, stateText(r), r.message, r.state == engine::RunState::Failed);
  if (m_runs->isRunChecked(id) != r.visible) m_runs->setRunChecked(id, r.visible);
  if (r.state != engine::RunState::Failed) return;
  const QString message = tr("%1 failed: %2").arg(r.name, r.message);
  if (m_messages->quiet())
    m_messages->error(tr("Run failed"), message);
  else  // after the current event: the toolbar is updated before the (modal) box
    QTimer::singleShot(0, this, [this, message] { m_messages->error(tr("Run failed"), message); });
}

// Divergence, precision changes applied by the engine, and errors of queued
// commands; an overflow only where it is news.
void EventNotices::scanEvents() {
  if (m_eventsSeen.size() < m_store->count()) m_eventsSeen.resize(m_store->count());
  for (int id : m_controller->currentRuns()) {
    const RunData& r = m_store->run(id);
    std::size_t& seen = m_eventsSeen[id];
    for (; seen < r.events.size(); ++seen) {
      const engine::Event& e = r.events[seen];
      if (e.kind == engine::EventKind::NanLoss && (seen == 0 || r.events[seen - 1].kind != engine::EventKind::NanLoss)) {
        bool first = true;
        for (std::size_t k = 0; k < seen; ++k) first = first && r.events[k].kind != engine::EventKind::NanLoss;
        if (first)
          m_messages->status(
              tr("%1 diverged at step %2: the loss is NaN (marked ★ on the loss chart)").arg(r.name).arg(e.step),
              10000);
      } else if (e.kind == engine::EventKind::Overflow && e.count > 0 &&
                 (m_faultPending.contains(id) || !r.scalesLoss())) {
        // Overflows are routine under dynamic loss scaling (the loss-scale
        // chart marks them); elsewhere, or after an injected NaN, one is news.
        m_faultPending.remove(id);
        m_messages->status(tr("%1: %2 non-finite values in %3's %4 at step %5 (marked ▲ on the loss-scale chart)")
                               .arg(r.name)
                               .arg(e.count)
                               .arg(e.layer.empty() ? tr("the model") : QString::fromStdString(e.layer),
                                    QString::fromStdString(e.tensor))
                               .arg(e.step),
                           10000);
      } else if (e.kind == engine::EventKind::PrecisionChange) {
        const QString formats = QStringLiteral("%1/%2/%3/%4")
                                    .arg(QString::fromLatin1(engine::format_name(e.precision.compute)),
                                         QString::fromLatin1(engine::format_name(e.precision.storage)),
                                         QString::fromLatin1(engine::format_name(e.precision.accumulate)),
                                         QString::fromLatin1(engine::format_name(e.precision.grad)));
        m_messages->status(tr("%1: %2 now computes/stores/accumulates/grads in %3 (from step %4)")
                               .arg(r.name, QString::fromStdString(e.layer), formats)
                               .arg(e.step + 1),
                           8000);
      } else if (e.kind == engine::EventKind::Error) {
        m_messages->error(tr("Engine"), tr("%1: %2").arg(r.name, QString::fromStdString(e.tensor)));
      }
    }
  }
}
