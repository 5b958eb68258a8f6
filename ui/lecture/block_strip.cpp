// BlockStrip: painting, colours and hit-testing of the element cells.
#include "lecture/block_strip.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

#include <algorithm>
#include <cmath>

#include "charts/chart_style.h"
#include "charts/number_text.h"
#include "numeric/inspect.h"

namespace {

constexpr int kGap = 2;  // pixels between cells

// Exact green through yellow to amber, by log10 of the relative error from
// 1e-4 (and below) to 1: bright enough to tell apart on a projector.
const QColor kExact{0x3C, 0xA5, 0x5C};
const QColor kMid{0xF2, 0xD3, 0x4B};
const QColor kLarge{0xE0, 0x78, 0x1E};
const QColor kZeroInput{0xD8, 0xD8, 0xD8};

QColor mix(const QColor& a, const QColor& b, double t) {
  return QColor::fromRgbF(static_cast<float>(a.redF() + (b.redF() - a.redF()) * t),
                          static_cast<float>(a.greenF() + (b.greenF() - a.greenF()) * t),
                          static_cast<float>(a.blueF() + (b.blueF() - a.blueF()) * t));
}

}  // namespace

BlockStrip::BlockStrip(QWidget* parent) : QWidget(parent) {
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  setCursor(Qt::PointingHandCursor);
  setMouseTracking(false);
}

void BlockStrip::setElements(const std::vector<float>& input, const std::vector<QuantizedElement>& side, int first,
                             int count, int cells, int marked, engine::Format codeFormat) {
  m_input = input;
  m_side = side;
  m_first = first;
  m_count = std::max(0, std::min<int>(count, static_cast<int>(side.size()) - first));
  m_slots = std::max(cells, 1);
  m_marked = marked;
  m_codeFormat = codeFormat;
  update();
}

void BlockStrip::clear() {
  m_input.clear();
  m_side.clear();
  m_count = 0;
  m_marked = -1;
  update();
}

QColor BlockStrip::colourFor(float input, const QuantizedElement& e) {
  if (!std::isfinite(input) || input == 0.0f) return kZeroInput;
  if (e.flushed || std::isnan(e.relError)) return chart_style::kAlarm;
  if (e.relError == 0.0) return kExact;
  const double t = std::clamp((std::log10(e.relError) + 4.0) / 4.0, 0.0, 1.0);
  return t < 0.5 ? mix(kExact, kMid, t * 2.0) : mix(kMid, kLarge, (t - 0.5) * 2.0);
}

QRect BlockStrip::cellRect(int i) const {
  const double w = static_cast<double>(width() - kGap) / m_slots;
  const int x0 = static_cast<int>(std::lround(i * w)) + kGap;
  const int x1 = static_cast<int>(std::lround((i + 1) * w));
  return QRect(x0, 2, std::max(2, x1 - x0), height() - 4);
}

QSize BlockStrip::sizeHint() const { return QSize(m_slots * 16, fontMetrics().height() + 14); }

QSize BlockStrip::minimumSizeHint() const { return QSize(m_slots * 6, fontMetrics().height() + 10); }

void BlockStrip::paintEvent(QPaintEvent*) {
  QPainter p(this);
  for (int i = 0; i < m_slots; ++i) {
    const QRect r = cellRect(i);
    if (i >= m_count) {
      p.setPen(QPen(QColor(0xC0, 0xC0, 0xC0), 1, Qt::DotLine));
      p.setBrush(Qt::NoBrush);
      p.drawRect(r.adjusted(0, 0, -1, -1));
      continue;
    }
    const int index = m_first + i;
    p.fillRect(r, colourFor(m_input[static_cast<std::size_t>(index)], m_side[static_cast<std::size_t>(index)]));
  }
  if (m_marked >= m_first && m_marked < m_first + m_count) {
    p.setPen(QPen(chart_style::kMarker, 3));
    p.setBrush(Qt::NoBrush);
    p.drawRect(cellRect(m_marked - m_first).adjusted(1, 1, -2, -2));
  }
}

void BlockStrip::mousePressEvent(QMouseEvent* event) {
  if (event->button() != Qt::LeftButton) return;
  for (int i = 0; i < m_count; ++i)
    if (cellRect(i).contains(event->position().toPoint())) {
      emit elementClicked(m_first + i);
      return;
    }
}

bool BlockStrip::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    for (int i = 0; i < m_count; ++i) {
      if (!cellRect(i).contains(help->pos())) continue;
      const std::size_t k = static_cast<std::size_t>(m_first + i);
      const QuantizedElement& e = m_side[k];
      const QString error = e.flushed ? tr("flushed to zero")
                                      : tr("relative error %1").arg(number_text::percent(e.relError));
      QToolTip::showText(help->globalPos(),
                         tr("#%1: %2 → %3 (%4), code %5")
                             .arg(k + 1)
                             .arg(QString::fromStdString(engine::shortest_decimal(m_input[k])),
                                  QString::fromStdString(engine::shortest_decimal(e.value)), error,
                                  QString::fromStdString(engine::binary_fields(m_codeFormat, e.code))),
                         this);
      return true;
    }
    QToolTip::hideText();
    event->ignore();
    return true;
  }
  return QWidget::event(event);
}
