// FaultInjector: Run > Inject NaN… — the dialog, and a NaN (or inf) sent
// into a live run at its next step.
#pragma once

#include <QObject>

#include <functional>
#include <string>

#include "train/commands.h"

class EventNotices;
class QWidget;
class RunStore;
class TrainingController;
class UserMessages;

// GUI thread only.
class FaultInjector : public QObject {
  Q_OBJECT

 public:
  // `liveFocus` names the run the dialog proposes (-1: none).
  FaultInjector(RunStore* store, TrainingController* controller, EventNotices* notices, UserMessages* messages,
                std::function<int()> liveFocus, QWidget* window);

  void openDialog();
  // A NaN (inf) in store run `storeId` at its next step; false (and the
  // reason shown) when that run is not live.
  bool inject(int storeId, engine::FaultTarget target, const std::string& layer, bool inf);

 private:
  RunStore* m_store;
  TrainingController* m_controller;
  EventNotices* m_notices;
  UserMessages* m_messages;
  std::function<int()> m_liveFocus;
  QWidget* m_window;
};
