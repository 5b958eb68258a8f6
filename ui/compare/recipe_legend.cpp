// RecipeLegend: a flow of (swatch, name) entries, laid out by entryRects().
#include "compare/recipe_legend.h"

#include <QPainter>

#include <algorithm>

namespace {
constexpr int kSwatch = 34;   // the line sample's length: two dash periods of the longest pattern
constexpr int kGap = 6;       // swatch to name
constexpr int kSpacing = 18;  // between entries
constexpr int kPad = 2;
}  // namespace

RecipeLegend::RecipeLegend(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("recipeLegend"));
  QSizePolicy p(QSizePolicy::Preferred, QSizePolicy::Preferred);
  p.setHeightForWidth(true);
  setSizePolicy(p);
}

void RecipeLegend::setEntries(const QVector<Entry>& entries) {
  m_entries = entries;
  updateGeometry();
  update();
}

int RecipeLegend::entryWidth(const Entry& e) const {
  return kSwatch + kGap + fontMetrics().horizontalAdvance(e.label);
}

QVector<QRect> RecipeLegend::entryRects(int width) const {
  QVector<QRect> rects;
  const int line = fontMetrics().height() + 2 * kPad;
  int x = kPad, y = 0;
  for (const Entry& e : m_entries) {
    const int w = entryWidth(e);
    // A new row when this entry does not fit (never at the row's start).
    if (x > kPad && x + w > width - kPad) {
      x = kPad;
      y += line;
    }
    rects << QRect(x, y, w, line);
    x += w + kSpacing;
  }
  return rects;
}

int RecipeLegend::heightForWidth(int width) const {
  const QVector<QRect> rects = entryRects(width);
  return rects.isEmpty() ? fontMetrics().height() : rects.back().bottom() + 1;
}

QSize RecipeLegend::sizeHint() const {
  int w = kPad;
  for (const Entry& e : m_entries) w += entryWidth(e) + kSpacing;
  return {w, fontMetrics().height() + 2 * kPad};
}

QSize RecipeLegend::minimumSizeHint() const {
  // As narrow as the widest entry (the others flow onto more rows), and as
  // tall as the rows at the width it has now: the rows at its narrowest
  // would make the window taller for nothing.
  int w = 0;
  for (const Entry& e : m_entries) w = std::max(w, entryWidth(e));
  w += 2 * kPad;
  return {w, heightForWidth(std::max(w, width()))};
}

void RecipeLegend::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  // A new width may need another number of rows.
  if (heightForWidth(width()) != height()) updateGeometry();
}

void RecipeLegend::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  const QVector<QRect> rects = entryRects(width());
  for (int i = 0; i < m_entries.size(); ++i) {
    const Entry& e = m_entries[i];
    const QRect r = rects[i];
    const int cy = r.center().y();
    const QRect swatch(r.left(), cy - 5, kSwatch, 10);
    switch (e.kind) {
      case Entry::Line:
        p.setPen(e.pen);
        p.drawLine(QPointF(swatch.left(), cy + 0.5), QPointF(swatch.right(), cy + 0.5));
        break;
      case Entry::Band:
        p.fillRect(swatch, e.fill);
        break;
      case Entry::Dot:
        p.setPen(QPen(Qt::white, 1));
        p.setBrush(e.pen.color());
        p.drawEllipse(QPointF(swatch.center()), 4, 4);
        break;
    }
    p.setPen(palette().color(QPalette::WindowText));
    p.drawText(QRect(swatch.right() + kGap, r.top(), r.width() - kSwatch - kGap, r.height()),
               Qt::AlignLeft | Qt::AlignVCenter, e.label);
  }
}
