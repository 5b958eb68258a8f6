// HistoryController: the past runs on disk — the History tab listed at start
// (and after every run), a past run opened onto the charts, Compare and
// Export, and the notice that some runs were interrupted.
#pragma once

#include <QObject>
#include <QString>

class ChartArea;
class CompareView;
class EventNotices;
class HistoryPanel;
class QSplitter;
class QTabWidget;
class RunStore;
class RunsList;
class TrainingController;
class UserMessages;

// GUI thread only.
class HistoryController : public QObject {
  Q_OBJECT

 public:
  struct Parts {
    RunStore* store;
    TrainingController* controller;
    HistoryPanel* history;
    RunsList* runs;
    QTabWidget* runsTabs;  // Runs / History
    QSplitter* bottom;     // the precision table beside runsTabs
    ChartArea* charts;
    CompareView* compare;
    EventNotices* notices;
    UserMessages* messages;
  };
  HistoryController(const Parts& parts, QObject* parent);

  // Loads a run folder (read_journal) into the store with every chart, the
  // Compare tab and Export; an interrupted run says so. A folder that cannot
  // be read is shown as an error (its one line) and false returned.
  bool open(const QString& dir);
  // The History tab, listing the data folder again.
  void show();
  // Lists the data folder again (a run's folder status is final once its
  // training ended).
  void relist();

 signals:
  void opened();

 private:
  Parts m_parts;
};
