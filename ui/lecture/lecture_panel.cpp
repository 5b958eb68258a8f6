// LecturePanel: title, explanation, runs and claims of a lesson.
#include "lecture/lecture_panel.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QResizeEvent>
#include <QScrollArea>
#include <QTextDocument>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <iterator>

#include "charts/chart_style.h"
#include "charts/number_text.h"

namespace {

QLabel* wrapped(const QString& objectName) {
  auto* l = new QLabel;
  l->setObjectName(objectName);
  l->setWordWrap(true);
  l->setTextInteractionFlags(Qt::TextSelectableByMouse);
  l->setAlignment(Qt::AlignLeft | Qt::AlignTop);
  return l;
}

// A claim's number: a count (steps, backoffs, events) as an integer, "17"
// rather than "17.0"; anything else to three significant digits.
QString claimNumber(const engine::Claim& c, double v) {
  static const char* const counts[] = {"overflow_steps", "skipped_steps", "scale_backoffs", "scale_growths",
                                       "attributed_overflows"};
  const bool count = c.vs.empty() && std::find(std::begin(counts), std::end(counts), c.metric) != std::end(counts);
  if (count && std::isfinite(v) && v == std::round(v) && std::fabs(v) < 1e15)
    return QString::number(static_cast<qint64>(v));
  return number_text::significant(v);
}

QString bound(const engine::Claim& c) {
  if (c.min && c.max) return QStringLiteral("in [%1, %2]").arg(claimNumber(c, *c.min), claimNumber(c, *c.max));
  if (c.min) return QStringLiteral("≥ %1").arg(claimNumber(c, *c.min));
  if (c.max) return QStringLiteral("≤ %1").arg(claimNumber(c, *c.max));
  return QString();
}

}  // namespace

LecturePanel::LecturePanel(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("lecturePanel"));
  m_title = wrapped(QStringLiteral("lectureTitle"));
  QFont tf = m_title->font();
  tf.setBold(true);
  tf.setPointSizeF(tf.pointSizeF() * 1.3);
  m_title->setFont(tf);
  m_close = new QToolButton(this);
  m_close->setObjectName(QStringLiteral("lectureClose"));
  m_close->setText(QStringLiteral("✕"));
  m_close->setAutoRaise(true);
  m_close->setToolTip(tr("Leave the lesson: Start runs the setup panel's settings again"));
  connect(m_close, &QToolButton::clicked, this, &LecturePanel::closeRequested);
  m_explanation = wrapped(QStringLiteral("lectureExplanation"));
  m_runs = wrapped(QStringLiteral("lectureRuns"));
  m_runs->setTextFormat(Qt::RichText);
  m_claimsHeading = new QLabel(tr("What the lesson claims"));
  QFont hf = m_claimsHeading->font();
  hf.setBold(true);
  m_claimsHeading->setFont(hf);
  m_claims = wrapped(QStringLiteral("lectureClaims"));
  m_claims->setTextFormat(Qt::RichText);

  auto* content = new QWidget;
  m_content = content;
  auto* v = new QVBoxLayout(content);
  v->setContentsMargins(8, 6, 8, 6);
  v->setSpacing(8);
  auto* head = new QHBoxLayout;
  head->addWidget(m_title, 1);
  head->addWidget(m_close, 0, Qt::AlignTop);
  v->addLayout(head);
  v->addWidget(m_explanation);
  v->addWidget(m_runs);
  v->addWidget(m_claimsHeading);
  v->addWidget(m_claims);
  v->addStretch(1);
  auto* scroll = new QScrollArea(this);
  m_scroll = scroll;
  scroll->setWidget(content);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  outer->addWidget(scroll);
  setMinimumWidth(220);
}

void LecturePanel::setPreset(const engine::Preset& preset) {
  m_preset = preset;
  m_title->setText(QString::fromStdString(preset.title));
  m_explanation->setText(QString::fromStdString(preset.explanation));
  QStringList names;
  if (preset.kind == engine::PresetKind::Solve) {
    for (const engine::SolveRun& r : preset.solve_runs) names << QString::fromStdString(r.name).toHtmlEscaped();
    const engine::SolveProblem& p = preset.problem;
    m_runs->setText(tr("<b>Start</b> (F5) solves a %1 x %1 system, κ = %2, with %3 runs: %4")
                        .arg(p.n)
                        .arg(QString::number(p.cond, 'g', 3))
                        .arg(preset.solve_runs.size())
                        .arg(names.join(QStringLiteral(", "))));
  } else {
    for (const engine::PresetRun& r : preset.runs) names << QString::fromStdString(r.name).toHtmlEscaped();
    QString steps;
    if (!preset.runs.empty() && preset.runs.front().config.steps > 0)
      steps = tr(", %1 steps each").arg(preset.runs.front().config.steps);
    m_runs->setText(tr("<b>Start</b> (F5) runs %1 side by side%2: %3")
                        .arg(preset.runs.size())
                        .arg(steps, names.join(QStringLiteral(", "))));
  }
  resetClaims();
  fitPresentation();
}

void LecturePanel::resetClaims() {
  m_results.clear();
  m_note.clear();
  showClaims();
}

void LecturePanel::setClaimResults(const std::vector<engine::ClaimResult>& results, const QString& note) {
  m_results = results;
  m_note = note;
  showClaims();
}

void LecturePanel::showClaims() {
  QStringList lines;
  if (m_results.empty()) {
    for (const engine::Claim& c : m_preset.expect)
      lines << QStringLiteral("&#9675; %1 %2")
                   .arg(QString::fromStdString(engine::claim_label(c)).toHtmlEscaped(), bound(c).toHtmlEscaped());
    if (!lines.isEmpty()) lines << tr("<i>Checked when the runs end.</i>");
  } else {
    for (const engine::ClaimResult& r : m_results) {
      if (r.skipped) {
        // Neither held nor broken: the machine could not measure it.
        lines << QStringLiteral("<span style='color:%1'><b>%2</b></span> %3 %4: %5")
                     .arg(palette().color(QPalette::PlaceholderText).name(), tr("SKIP"),
                          QString::fromStdString(engine::claim_label(r.claim)).toHtmlEscaped(),
                          bound(r.claim).toHtmlEscaped(), QString::fromStdString(r.reason).toHtmlEscaped());
        continue;
      }
      const QColor colour = r.pass ? chart_style::kPass : chart_style::kFail;
      lines << QStringLiteral("<span style='color:%1'><b>%2</b></span> %3 = %4 %5")
                   .arg(colour.name(), r.pass ? QStringLiteral("PASS") : QStringLiteral("FAIL"),
                        QString::fromStdString(engine::claim_label(r.claim)).toHtmlEscaped(),
                        claimNumber(r.claim, r.value), bound(r.claim).toHtmlEscaped());
    }
    if (!m_note.isEmpty()) lines << QStringLiteral("<i>%1</i>").arg(m_note.toHtmlEscaped());
  }
  m_claimsHeading->setVisible(!lines.isEmpty());
  m_claims->setText(lines.join(QStringLiteral("<br>")));
  fitPresentation();
}

QString LecturePanel::title() const { return m_title->text(); }
QString LecturePanel::explanation() const { return m_explanation->text(); }

QString LecturePanel::claimsText() const {
  QTextDocument doc;
  doc.setHtml(m_claims->text());
  return doc.toPlainText();
}

void LecturePanel::setPresentation(bool on) {
  m_presentation = on;
  // The room sees the runs on the charts' legend: the line that says what
  // Start does is for the teacher's screen.
  m_runs->setVisible(!on);
  m_close->setVisible(!on);
  QPalette p = palette();
  if (on) {
    p.setColor(QPalette::WindowText, chart_style::presentation::kInk);
    p.setColor(QPalette::Text, chart_style::presentation::kInk);
  }
  for (QLabel* l : {m_title, m_explanation, m_runs, m_claimsHeading, m_claims}) l->setPalette(on ? p : QPalette());
  m_fitWidth = -1;  // fit again, whatever the size
  if (on)
    fitPresentation();
  else
    applyType(0.0);
}

void LecturePanel::applyType(double scale) {
  using namespace chart_style::presentation;
  const bool on = scale > 0;
  chart_style::setPresentationFont(m_title, on, kHeadingPt * scale, true);
  chart_style::setPresentationFont(m_explanation, on, kTextPt * scale);
  chart_style::setPresentationFont(m_claimsHeading, on, kTextPt * scale, true);
  chart_style::setPresentationFont(m_claims, on, (kTextPt - 2) * scale);
}

// Presentation view: the largest type (down to 60%, in steps of 5%) at which
// the title, the explanation and every claim fit the panel without
// scrolling: a long lesson on a 720-pixel projector shows its claims. Each
// try sets four fonts and lays the text out: the first fitting size is found
// by bisection (at most four tries, not nine), a panel whose size and text
// have not changed keeps the type it has (a window going full screen
// resizes it several times in one turn of the event loop), and a size and
// text fitted before take their type again without a try (presentation
// view toggled again: each try lays out every claim's rich text).
void LecturePanel::fitPresentation() {
  if (!m_presentation) return;
  const int width = m_scroll->width();
  const int height = m_scroll->height();
  const QString text = m_title->text() + QChar(1) + m_explanation->text() + QChar(1) + m_claims->text() +
                       (m_claimsHeading->isVisibleTo(this) ? QChar(2) : QChar(3));
  if (width == m_fitWidth && height == m_fitHeight && text == m_fitText) return;
  m_fitWidth = width;
  m_fitHeight = height;
  m_fitText = text;
  constexpr int kSmallest = 8;  // 1.0 - 8 * 0.05 = 60%
  auto scaleAt = [](int i) { return 1.0 - 0.05 * i; };
  const QString key = QString::number(width) + QLatin1Char('x') + QString::number(height) + QChar(1) + text;
  if (const auto known = m_fitted.constFind(key); known != m_fitted.constEnd()) {
    applyType(scaleAt(*known));
    m_typeScale = scaleAt(*known);
    return;
  }
  int applied = -1;
  auto fits = [&](int i) {
    applyType(scaleAt(i));
    applied = i;
    ++m_fitMeasurements;
    return width < 50 || m_content->layout()->totalHeightForWidth(width) <= height;
  };
  // The text's height only grows with its type: the first size that fits,
  // or the smallest when none does.
  int lo = 0, hi = kSmallest;
  if (fits(0)) {
    hi = 0;
  } else {
    lo = 1;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (fits(mid))
        hi = mid;
      else
        lo = mid + 1;
    }
  }
  if (applied != hi) applyType(scaleAt(hi));
  m_typeScale = scaleAt(hi);
  if (m_fitted.size() >= 64) m_fitted.clear();
  m_fitted.insert(key, hi);
}

void LecturePanel::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  fitPresentation();
}
