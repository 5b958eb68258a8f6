// ElidedLabel: QTextLayout lines, the last one elided.
#include "charts/elided_label.h"

#include <QPainter>
#include <QResizeEvent>
#include <QTextLayout>

#include <algorithm>

ElidedLabel::ElidedLabel(QWidget* parent) : QLabel(parent) {
  setTextFormat(Qt::PlainText);
  setWordWrap(true);
  setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
}

void ElidedLabel::setMaxLines(int lines) {
  m_maxLines = std::max(1, lines);
  updateGeometry();
  updateToolTip();
  update();
}

void ElidedLabel::setFullText(const QString& text) {
  if (text == this->text()) return;
  setText(text);
  updateToolTip();
}

QStringList ElidedLabel::linesAt(int width) const {
  QStringList out;
  const QString t = text();
  if (t.isEmpty() || width <= 0) return out;
  QTextLayout layout(t, font());
  QTextOption option;
  option.setWrapMode(QTextOption::WrapAtWordBoundaryOrAnywhere);
  layout.setTextOption(option);
  layout.beginLayout();
  for (;;) {
    QTextLine line = layout.createLine();
    if (!line.isValid()) break;
    line.setLineWidth(width);
    if (out.size() == m_maxLines - 1) {
      // The last line: the rest of the text, cut to the width.
      const QString rest = t.mid(line.textStart()).simplified();
      out << fontMetrics().elidedText(rest, Qt::ElideRight, width);
      break;
    }
    out << t.mid(line.textStart(), line.textLength()).trimmed();
  }
  layout.endLayout();
  return out;
}

bool ElidedLabel::elided() const {
  const QStringList lines = linesAt(contentsRect().width());
  return !lines.isEmpty() && lines.back().endsWith(QChar(0x2026)) && !text().endsWith(QChar(0x2026));
}

int ElidedLabel::heightForWidth(int width) const {
  const int w = width - contentsMargins().left() - contentsMargins().right();
  const int lines = std::max<int>(1, static_cast<int>(linesAt(w).size()));
  return lines * fontMetrics().lineSpacing() + contentsMargins().top() + contentsMargins().bottom() + 2;
}

QSize ElidedLabel::sizeHint() const {
  const int w = width() > 0 ? width() : 300;
  return {fontMetrics().averageCharWidth() * 20, heightForWidth(w)};
}

QSize ElidedLabel::minimumSizeHint() const { return {0, fontMetrics().lineSpacing() + 2}; }

void ElidedLabel::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setPen(palette().color(QPalette::WindowText));
  p.setFont(font());
  const QRect r = contentsRect();
  int y = r.top() + fontMetrics().ascent() + 1;
  for (const QString& line : linesAt(r.width())) {
    p.drawText(r.left(), y, line);
    y += fontMetrics().lineSpacing();
  }
}

void ElidedLabel::resizeEvent(QResizeEvent* event) {
  QLabel::resizeEvent(event);
  updateToolTip();
}

void ElidedLabel::updateToolTip() {
  const QString tip = elided() ? text() : QString();
  if (toolTip() != tip) setToolTip(tip);
}
