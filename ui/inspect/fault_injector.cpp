// FaultInjector: picks a live run, sends the fault, and says where it goes.
#include "inspect/fault_injector.h"

#include <QWidget>

#include "inspect/fault_dialog.h"
#include "session/event_notices.h"
#include "session/run_store.h"
#include "session/training_controller.h"
#include "session/user_messages.h"

FaultInjector::FaultInjector(RunStore* store, TrainingController* controller, EventNotices* notices,
                             UserMessages* messages, std::function<int()> liveFocus, QWidget* window)
    : QObject(window),
      m_store(store),
      m_controller(controller),
      m_notices(notices),
      m_messages(messages),
      m_liveFocus(std::move(liveFocus)),
      m_window(window) {}

void FaultInjector::openDialog() {
  QVector<int> live;
  for (int id : m_controller->currentRuns())
    if (m_store->run(id).live()) live << id;
  if (live.isEmpty()) {
    m_messages->error(tr("Inject NaN"), tr("No run is training: start one first"));
    return;
  }
  FaultDialog dialog(*m_store, live, m_window);
  const int focus = m_liveFocus();
  if (focus >= 0) dialog.setRun(focus);
  if (dialog.exec() != QDialog::Accepted) return;
  inject(dialog.runId(), dialog.target(), dialog.layer(), dialog.inf());
}

bool FaultInjector::inject(int storeId, engine::FaultTarget target, const std::string& layer, bool inf) {
  if (!m_controller->injectFault(storeId, target, layer, inf)) {
    m_messages->error(tr("Inject NaN"), tr("That run is not training"));
    return false;
  }
  m_notices->expectFault(storeId);
  const QString where = target == engine::FaultTarget::Loss
                            ? tr("the loss")
                            : tr("%1's %2").arg(QString::fromStdString(layer),
                                                QString::fromLatin1(engine::fault_target_name(target)));
  m_messages->status(
      tr("%1: %2 into %3 at the next step").arg(m_store->run(storeId).name, inf ? tr("+inf") : tr("NaN"), where), 8000);
  return true;
}
