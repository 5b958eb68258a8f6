// SamplesView: the Samples tab: each text run's latest continuation of the shared prompt, side by side.
#pragma once

#include <QPointer>
#include <QString>
#include <QTimer>
#include <QVector>
#include <QWidget>

#include <cstddef>
#include <cstdint>

class QHBoxLayout;
class QLabel;
class RunStore;

// One column per run ticked in the runs list that is a gpt on a text set
// or has written text (engine::TextSample, at each of its evaluations), in
// the store's order (before its first evaluation it says so; a failed run
// says why, under its last text if any): a
// header in the recipe's colour (chart_style::recipeStyle) with the run's
// name, the step the text was taken at, then the prompt (marked: shaded and
// italic) and the continuation, as the model wrote it (line breaks kept).
// It reads the RunStore and redraws at most once a frame when records
// arrive, so a class sees every evaluation's text as it comes. GUI thread.
class SamplesView : public QWidget {
  Q_OBJECT

 public:
  explicit SamplesView(RunStore* store, QWidget* parent = nullptr);

  // Larger type for the presentation view.
  void setPresentation(bool on);
  // Redraws from the store now (the coalescing timer calls it).
  void refresh();

  // What is shown, for tests: per column with a text, the run id, the step
  // and the continuation; the prompt of the first such column ("" when none).
  struct Shown {
    int run = -1;
    std::int64_t step = 0;
    QString text;
  };
  QVector<Shown> shown() const { return m_shown; }
  QString prompt() const { return m_prompt; }

 private:
  struct Column {
    int run = -1;
    QWidget* box = nullptr;
    QLabel* title = nullptr;
    QLabel* step = nullptr;
    QLabel* body = nullptr;
    // What the column shows: redrawn only when a text arrives or the run's
    // name or total changes, not at every step's record.
    std::size_t texts = 0;
    QString name;
    std::int64_t total = 0;
    bool failed = false;
  };
  void restyle(Column& c);

  RunStore* m_store;
  QTimer m_coalesce;
  QHBoxLayout* m_columnsLayout = nullptr;
  QLabel* m_empty = nullptr;
  QVector<Column> m_columns;
  QVector<Shown> m_shown;
  QString m_prompt;
  bool m_presentation = false;
};
