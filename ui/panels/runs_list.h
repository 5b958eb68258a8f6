// RunsList: the runs of this session — name, recipe, colour on the charts,
// status — one row each.
#pragma once

#include <QColor>
#include <QTreeView>

class QStandardItemModel;

// GUI thread only.
class RunsList : public QTreeView {
  Q_OBJECT

 public:
  enum Column { Name = 0, Recipe, Colour, Status, ColumnCount };

  explicit RunsList(QWidget* parent = nullptr);

  // Appends a run (ticked: drawn on the charts) and returns its row; rows
  // are never removed, so a row is the run's store id.
  int addRun(const QString& name, const QString& recipe, const QColor& colour, const QString& status);
  // `detail` becomes the status tooltip (a failure's message); failed runs
  // are shown in red.
  void setRunStatus(int row, const QString& status, const QString& detail = {}, bool failed = false);
  QString runStatus(int row) const;
  void setRunChecked(int row, bool checked);
  bool isRunChecked(int row) const;
  int runCount() const;
  // The run of the current row, or -1.
  int currentRun() const;
  QStandardItemModel* runsModel() const { return m_model; }

  // The colour the next run gets: a fixed palette, so a recipe keeps its
  // colour between sessions when runs are started in the same order.
  QColor nextColour() const;
  // The palette colour of the run with index `index` (store id).
  static QColor paletteColour(int index);

 signals:
  // The user ticked or unticked a run (overlay on the charts).
  void runCheckedChanged(int row, bool checked);
  void currentRunChanged(int row);

 private:
  QStandardItemModel* m_model = nullptr;
};
