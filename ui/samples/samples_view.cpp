// SamplesView: one column per text run, rebuilt when the runs shown change, its text when a run's history does.
#include "samples/samples_view.h"

#include <QFrame>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>

#include <algorithm>

#include "charts/chart_style.h"
#include "data/text.h"
#include "session/run_store.h"

namespace {

// The text as rich text that keeps the model's spaces and line breaks.
QString escaped(const std::string& s) {
  return QString::fromStdString(s).toHtmlEscaped().replace(QLatin1Char('\n'), QStringLiteral("<br>"));
}

}  // namespace

SamplesView::SamplesView(RunStore* store, QWidget* parent) : QWidget(parent), m_store(store) {
  setObjectName(QStringLiteral("samplesView"));
  auto* layout = new QVBoxLayout(this);
  m_empty = new QLabel(tr("A gpt trained on a text set (jargon, or a text file) writes a continuation of the same "
                          "prompt at each evaluation; every run's latest appears here, side by side."));
  m_empty->setObjectName(QStringLiteral("samplesEmpty"));
  m_empty->setWordWrap(true);
  m_empty->setForegroundRole(QPalette::PlaceholderText);
  layout->addWidget(m_empty);
  m_columnsLayout = new QHBoxLayout;
  m_columnsLayout->setSpacing(12);
  layout->addLayout(m_columnsLayout, 1);
  // Records arrive ~30 times a second: one redraw per frame at most.
  m_coalesce.setSingleShot(true);
  m_coalesce.setInterval(33);
  connect(&m_coalesce, &QTimer::timeout, this, &SamplesView::refresh);
  auto later = [this] {
    if (!m_coalesce.isActive()) m_coalesce.start();
  };
  connect(store, &RunStore::appended, this, later);
  connect(store, &RunStore::runAdded, this, later);
  connect(store, &RunStore::runChanged, this, later);
  refresh();
}

void SamplesView::setPresentation(bool on) {
  m_presentation = on;
  for (Column& c : m_columns) restyle(c);
}

void SamplesView::restyle(Column& c) {
  QFont body = font();
  body.setFamily(QStringLiteral("monospace"));
  body.setStyleHint(QFont::Monospace);
  body.setPointSizeF(m_presentation ? 16.0 : std::max(9.0, font().pointSizeF()));
  c.body->setFont(body);
  QFont title = font();
  title.setBold(true);
  title.setPointSizeF(m_presentation ? 18.0 : font().pointSizeF() + 1.0);
  c.title->setFont(title);
  QFont step = font();
  if (m_presentation) step.setPointSizeF(14.0);
  c.step->setFont(step);
}

void SamplesView::refresh() {
  QVector<int> runs;
  for (int id = 0; id < m_store->count(); ++id) {
    const RunData& r = m_store->run(id);
    // A gpt on a text set has a column from its start: before its first
    // evaluation it says so, and a run that failed says why (an FP16 run
    // that diverged before it wrote anything is part of the lesson).
    const bool writes = r.config.model == "gpt" && engine::is_text_spec(r.config.dataset);
    if (r.visible && (writes || !r.texts.empty())) runs << id;
  }
  bool same = runs.size() == m_columns.size();
  for (int k = 0; same && k < runs.size(); ++k) same = m_columns[k].run == runs[k];
  if (!same) {
    for (Column& c : m_columns) delete c.box;
    m_columns.clear();
    for (int id : runs) {
      Column c;
      c.run = id;
      auto* box = new QFrame;
      box->setObjectName(QStringLiteral("sampleColumn"));
      box->setFrameShape(QFrame::StyledPanel);
      // Equal shares of the width whatever each holds (a long failure
      // message must not push the other runs off the screen).
      box->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
      box->setMinimumWidth(140);
      auto* v = new QVBoxLayout(box);
      c.title = new QLabel;
      c.title->setObjectName(QStringLiteral("sampleTitle"));
      c.step = new QLabel;
      c.step->setObjectName(QStringLiteral("sampleStep"));
      c.step->setForegroundRole(QPalette::PlaceholderText);
      c.step->setWordWrap(true);
      c.body = new QLabel;
      c.body->setObjectName(QStringLiteral("sampleText"));
      c.body->setTextFormat(Qt::RichText);
      c.body->setWordWrap(true);
      c.body->setAlignment(Qt::AlignLeft | Qt::AlignTop);
      c.body->setTextInteractionFlags(Qt::TextSelectableByMouse);
      c.body->setMinimumWidth(120);
      v->addWidget(c.title);
      v->addWidget(c.step);
      v->addWidget(c.body, 1);
      c.box = box;
      restyle(c);
      m_columnsLayout->addWidget(box, 1);
      m_columns << c;
    }
  }
  m_shown.clear();
  m_prompt.clear();
  for (Column& c : m_columns) {
    const RunData& r = m_store->run(c.run);
    const bool failed = r.state == engine::RunState::Failed;
    if (!r.texts.empty()) {
      const engine::TextSample& t = r.texts.back();
      m_shown.push_back({c.run, t.step, QString::fromStdString(t.text)});
      if (m_prompt.isEmpty()) m_prompt = QString::fromStdString(t.prompt);
    }
    if (c.texts == r.texts.size() && c.name == r.name && c.total == r.totalSteps && c.failed == failed) continue;
    c.texts = r.texts.size();
    c.name = r.name;
    c.total = r.totalSteps;
    c.failed = failed;
    const QColor colour = chart_style::recipeStyle(r.recipe).colour;
    // The recipe beside the run's name, unless the name says it already.
    const QString label = r.name.contains(r.recipe) ? r.name : r.name + QStringLiteral(" · ") + r.recipe;
    c.title->setText(QStringLiteral("<span style=\"color:%1\">&#9632;</span> %2")
                         .arg(colour.name(), label.toHtmlEscaped()));
    c.title->setToolTip(r.recipe);
    c.box->setStyleSheet(QStringLiteral("QFrame#sampleColumn { border-top: 4px solid %1; }").arg(colour.name()));
    const QString why = failed ? tr("failed: %1").arg(r.message) : QString();
    c.step->setStyleSheet(failed ? QStringLiteral("color:%1").arg(chart_style::kAlarmLine.name()) : QString());
    if (r.texts.empty()) {
      c.step->setText(failed ? why : tr("no evaluation yet"));
      c.step->setToolTip(why);
      c.body->setText(failed ? tr("(it wrote nothing before it failed)") : QString());
      continue;
    }
    const engine::TextSample& t = r.texts.back();
    const QString at = tr("step %1 of %2").arg(t.step).arg(r.totalSteps > 0 ? r.totalSteps : t.step);
    c.step->setText(failed ? at + QStringLiteral(" · ") + why : at);
    c.step->setToolTip(why);
    // The prompt shaded and in italics, the model's words after it.
    c.body->setText(QStringLiteral("<div style=\"white-space:pre-wrap\"><span style=\"background:#e4e4e4;"
                                   "color:#555555;font-style:italic\">%1</span>%2</div>")
                        .arg(escaped(t.prompt), escaped(t.text)));
  }
  m_empty->setVisible(m_columns.isEmpty());
}
