// HistoryController: lists the journal folder and opens past runs.
#include "panels/history_controller.h"

#include <QDir>
#include <QStandardItemModel>
#include <QSplitter>
#include <QTabWidget>
#include <QTimer>

#include <exception>

#include "charts/chart_area.h"
#include "compare/compare_view.h"
#include "panels/history_panel.h"
#include "panels/runs_list.h"
#include "session/event_notices.h"
#include "session/run_folders.h"
#include "session/run_store.h"
#include "session/training_controller.h"
#include "session/user_messages.h"

HistoryController::HistoryController(const Parts& parts, QObject* parent) : QObject(parent), m_parts(parts) {
  HistoryPanel* history = m_parts.history;
  connect(history, &HistoryPanel::openRequested, this, [this](const QString& dir) { open(dir); });
  connect(history, &HistoryPanel::message, this, [this](const QString& text, bool error) {
    if (error)
      m_parts.messages->error(tr("Past runs"), text);
    else
      m_parts.messages->status(text, 6000);
  });
  connect(history, &HistoryPanel::listed, this, [this](int count, int interrupted) {
    m_parts.runsTabs->setTabText(m_parts.runsTabs->indexOf(m_parts.history),
                                 interrupted > 0 ? tr("History (%1, %2 interrupted)").arg(count).arg(interrupted)
                                                 : tr("History (%1)").arg(count));
  });
  connect(m_parts.controller, &TrainingController::folderStarted, history, &HistoryPanel::refresh);
  // History has more columns than the session's runs: it takes the width
  // it needs while it is shown.
  QSplitter* bottom = m_parts.bottom;
  connect(m_parts.runsTabs, &QTabWidget::currentChanged, this, [this, bottom, history] {
    // After the layout has run (the tab may change before the window shows).
    QTimer::singleShot(0, bottom, [this, bottom, history] {
      if (m_parts.runsTabs->currentWidget() != history) return;
      const QList<int> sizes = bottom->sizes();
      const int want = history->sizeHint().width();
      const int total = sizes.value(0) + sizes.value(1);
      if (sizes.size() == 2 && sizes[1] < want && total > want + 300) bottom->setSizes({total - want, want});
    });
  });
  // Listed now (status files only); opened on request.
  history->setRoot(m_parts.controller->journalRoot());
  int interrupted = 0;
  for (const PastRun& p : history->pastRuns()) interrupted += p.interrupted ? 1 : 0;
  if (interrupted > 0)
    m_parts.messages->status(
        tr("%n past run(s) were interrupted (the app ended mid-run): see the History tab", "", interrupted), 15000);
}

bool HistoryController::open(const QString& dir) {
  QVector<int> ids;
  try {
    ids = run_folders::open(*m_parts.store, dir);
  } catch (const std::exception& e) {
    m_parts.messages->error(tr("Cannot open the run"), QString::fromStdString(e.what()));
    return false;
  }
  // The opened runs on the charts; the others step back (re-tick to add).
  RunStore* store = m_parts.store;
  for (int id = 0; id < store->count(); ++id) m_parts.runs->setRunChecked(id, ids.contains(id));
  for (int id : ids) m_parts.notices->onRunChanged(id);
  m_parts.runs->setCurrentIndex(m_parts.runs->runsModel()->index(ids.back(), 0));
  m_parts.charts->setFocusRun(ids.front());
  if (store->run(ids.front()).compareGroup >= 0) m_parts.compare->setGroup(store->run(ids.front()).compareGroup);
  m_parts.charts->refresh();
  m_parts.compare->refresh();
  m_parts.runsTabs->setCurrentWidget(m_parts.runs);
  const RunData& first = store->run(ids.front());
  const std::int64_t steps = first.steps.empty() ? 0 : first.steps.back().step;
  m_parts.messages->status(
      first.interrupted
          ? tr("Opened %1: interrupted at step %2 — everything up to its last second is shown")
                .arg(QDir::toNativeSeparators(dir))
                .arg(steps)
          : tr("Opened %1 (%2 runs)").arg(QDir::toNativeSeparators(dir)).arg(ids.size()),
      10000);
  emit opened();
  return true;
}

void HistoryController::relist() { m_parts.history->refresh(); }

void HistoryController::show() {
  m_parts.history->refresh();
  m_parts.runsTabs->setCurrentWidget(m_parts.history);
}
