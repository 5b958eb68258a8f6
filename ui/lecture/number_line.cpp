// NumberLine: zones, thresholds and the marker on a log2 axis.
#include "lecture/number_line.h"

#include <QMouseEvent>
#include <QPainter>

#include <algorithm>
#include <cmath>

#include "charts/chart_style.h"
#include "numeric/inspect.h"

namespace {
QString pow2(double e) { return QStringLiteral("2^%1").arg(QString::number(e, 'g', 4)); }
}  // namespace

NumberLine::NumberLine(engine::Format format, QWidget* parent) : QWidget(parent), m_format(format) {
  setObjectName(QStringLiteral("line-%1").arg(QString::fromLatin1(engine::format_key(format))));
  const engine::FormatInfo& fi = engine::format_info(format);
  const engine::RoundingThresholds t = engine::rounding_thresholds(format);
  m_underflow = t.underflow;
  m_minSub = fi.min_subnormal;
  m_minNormal = fi.min_normal;
  m_max = fi.max;
  m_overflow = t.overflow;
  m_lo = std::floor(std::log2(m_minSub)) - 3;
  m_hi = std::ceil(std::log2(m_overflow)) + 3;
  // E8M0 holds no zero: below its smallest power of two it saturates to it,
  // as above its largest; the MX element formats saturate at ±max.
  m_hasZero = format != engine::Format::E8M0;
  setCursor(Qt::SizeHorCursor);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  if (!m_hasZero)
    setToolTip(tr("%1 on a log2 scale: powers of two from %2 to %3, green; red, beyond them, saturates to the "
                  "nearest end (0 becomes %2, a negative value NaN). Drag to pick a magnitude.")
                   .arg(QString::fromLatin1(fi.name), pow2(std::log2(m_minNormal)), pow2(std::log2(m_max))));
  else if (!fi.has_inf && !fi.has_nan)
    setToolTip(tr("%1 on a log2 scale: red flushes to zero (|x| ≤ %2) or saturates to ±%5 (|x| > %3), amber is "
                  "subnormal (below %4), green is the normal range up to %5. No inf, no NaN. Drag to pick a "
                  "magnitude.")
                   .arg(QString::fromLatin1(fi.name), pow2(std::log2(m_underflow)), QString::number(m_overflow, 'g', 6),
                        pow2(std::log2(m_minNormal)), QString::number(m_max, 'g', 6)));
  else
    setToolTip(tr("%1 on a log2 scale: red flushes to zero (|x| ≤ %2) or overflows (|x| > %3), amber is "
                  "subnormal (below %4), green is the normal range up to %5. Drag to pick a magnitude.")
                   .arg(QString::fromLatin1(fi.name), pow2(std::log2(m_underflow)), QString::number(m_overflow, 'g', 6),
                        pow2(std::log2(m_minNormal)), QString::number(m_max, 'g', 6)));
}

void NumberLine::setValue(double stored, double input) {
  m_stored = stored;
  m_input = input;
  update();
}

QRectF NumberLine::bar() const {
  const int textH = fontMetrics().height();
  return QRectF(4, 2, width() - 8, std::max(8, height() - textH - 4));
}

double NumberLine::xOf(double magnitude) const {
  const QRectF b = bar();
  if (!(magnitude > 0)) return b.left();
  if (std::isinf(magnitude)) return b.right();
  const double e = std::clamp(std::log2(magnitude), m_lo, m_hi);
  return b.left() + (e - m_lo) / (m_hi - m_lo) * b.width();
}

double NumberLine::magnitudeAt(double x) const {
  const QRectF b = bar();
  const double f = std::clamp((x - b.left()) / b.width(), 0.0, 1.0);
  return std::exp2(m_lo + f * (m_hi - m_lo));
}

void NumberLine::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  const QRectF b = bar();
  auto zone = [&](double from, double to, const QColor& c) {
    const double x0 = from <= 0 ? b.left() : xOf(from), x1 = std::isinf(to) ? b.right() : xOf(to);
    p.fillRect(QRectF(x0, b.top(), x1 - x0, b.height()), c);
  };
  if (m_hasZero) {
    zone(0, m_underflow, chart_style::kUnderflowZone);
    zone(m_underflow, m_minNormal, chart_style::kSubnormalZone);
  } else {
    zone(0, m_minNormal, chart_style::kOverflowZone);  // saturates to the smallest value
  }
  // Up to the overflow threshold, not max: what lies between rounds to max
  // (FP4's 6 to 7 is a seventh of its line).
  zone(m_minNormal, m_overflow, chart_style::kNormalZone);
  zone(m_overflow, INFINITY, chart_style::kOverflowZone);
  // Thresholds: smallest subnormal, smallest normal, largest finite.
  QFont small = font();
  small.setPointSizeF(small.pointSizeF() * 0.85);
  p.setFont(small);
  const QFontMetrics fm(small);
  // Labels that would overlap (FP32's subnormal band is narrow on a line
  // 280 binades long) try the tick's other side, else are left to the tooltip.
  QList<QRectF> placed;
  auto tick = [&](double v, const QString& label, const QColor& c, Qt::Alignment align) {
    const double x = xOf(v);
    p.setPen(QPen(c, 1.5));
    p.drawLine(QPointF(x, b.top()), QPointF(x, b.bottom() + 2));
    const double w = fm.horizontalAdvance(label);
    const double y = b.bottom() + 2;
    const Qt::Alignment other = align == Qt::AlignRight ? Qt::AlignLeft : Qt::AlignRight;
    for (Qt::Alignment a : {align, other}) {
      double left = a == Qt::AlignRight ? x - w : x;
      left = std::clamp(left, 0.0, static_cast<double>(width()) - w);
      const QRectF r(left, y, w, fm.height());
      bool free = true;
      for (const QRectF& other : placed) free = free && !other.adjusted(-4, 0, 4, 0).intersects(r);
      if (!free) continue;
      placed << r;
      p.setPen(chart_style::kBitInk);
      p.drawText(QPointF(left, y + fm.ascent()), label);
      return;
    }
  };
  tick(m_minNormal, pow2(std::log2(m_minNormal)), chart_style::kCautionLine, Qt::AlignLeft);
  if (m_minSub < m_minNormal) tick(m_minSub, pow2(std::log2(m_minSub)), chart_style::kAlarmLine, Qt::AlignRight);
  tick(m_max, m_hasZero ? QString::number(m_max, 'g', 6) : pow2(std::log2(m_max)), chart_style::kAlarmLine,
       Qt::AlignRight);
  // The value asked about (thin) and the value stored (a bold marker).
  if (std::isfinite(m_input) && m_input != 0 && m_input != m_stored) {
    p.setPen(QPen(chart_style::kNeutral, 1, Qt::DashLine));
    const double x = xOf(std::fabs(m_input));
    p.drawLine(QPointF(x, b.top()), QPointF(x, b.bottom()));
  }
  if (!std::isnan(m_stored)) {
    const double x = xOf(std::fabs(m_stored));
    p.setPen(QPen(chart_style::kMarker, 3));
    p.drawLine(QPointF(x, b.top() - 1), QPointF(x, b.bottom() + 1));
  }
  p.setPen(QPen(chart_style::kNeutral, 1));
  p.setBrush(Qt::NoBrush);
  p.drawRect(b);
}

void NumberLine::mousePressEvent(QMouseEvent* event) {
  if (event->button() == Qt::LeftButton) emit magnitudeDragged(magnitudeAt(event->position().x()));
}

void NumberLine::mouseMoveEvent(QMouseEvent* event) {
  if (event->buttons() & Qt::LeftButton) emit magnitudeDragged(magnitudeAt(event->position().x()));
}
