// BitCells: painting and hit-testing the bit cells.
#include "lecture/bit_cells.h"

#include <QMouseEvent>
#include <QPainter>

#include <algorithm>

#include "charts/chart_style.h"
#include "numeric/inspect.h"

namespace {
constexpr int kFieldGap = 4;  // pixels between sign, exponent and mantissa
}

BitCells::BitCells(engine::Format format, QWidget* parent) : QWidget(parent), m_format(format) {
  const engine::FormatInfo& fi = engine::format_info(format);
  m_exp = fi.exp_bits;
  m_man = fi.man_bits;
  // `bits` counts the encoding's bits: sign, exponent and mantissa, or for
  // the unsigned E8M0 exponent bits alone (FP6: 6, FP4: 4, TF32: 19).
  m_total = fi.bits;
  m_sign = m_total > m_exp + m_man;
  setObjectName(QStringLiteral("bits-%1").arg(QString::fromLatin1(engine::format_key(format))));
  setCursor(Qt::PointingHandCursor);
  setToolTip(tr("Sign, exponent and mantissa bits: click a bit to flip it"));
  setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
}

void BitCells::setFieldBits(std::uint32_t fieldBits) {
  if (m_bits == fieldBits) return;
  m_bits = fieldBits;
  update();
}

int BitCells::cellWidth() const {
  const int avail = width() - 2 * kFieldGap;
  return std::clamp(avail / std::max(m_total, 1), 6, 22);
}

QRect BitCells::cellRect(int bit) const {
  const int i = m_total - 1 - bit;  // cell index from the left
  const int signCells = m_sign ? 1 : 0;
  const int gaps = (m_sign && i >= 1 ? 1 : 0) + (m_man > 0 && i >= signCells + m_exp ? 1 : 0);
  const int w = cellWidth();
  return QRect(i * w + gaps * kFieldGap, 0, w, height());
}

QString BitCells::text() const { return QString::fromStdString(engine::binary_fields(m_format, m_bits)); }

QSize BitCells::sizeHint() const {
  return QSize(m_total * 15 + 2 * kFieldGap, fontMetrics().height() + 8);
}

QSize BitCells::minimumSizeHint() const { return QSize(m_total * 8 + 2 * kFieldGap, fontMetrics().height() + 6); }

void BitCells::paintEvent(QPaintEvent*) {
  QPainter p(this);
  QFont f = font();
  f.setFamily(QStringLiteral("monospace"));
  f.setStyleHint(QFont::Monospace);
  p.setFont(f);
  for (int bit = m_total - 1; bit >= 0; --bit) {
    const QRect r = cellRect(bit).adjusted(0, 0, -1, -1);
    const QColor fill = m_sign && bit == m_total - 1 ? chart_style::kSignBit
                        : bit >= m_man     ? chart_style::kExponentBit
                                           : chart_style::kMantissaBit;
    const bool one = (m_bits >> bit) & 1u;
    p.fillRect(r, one ? fill.darker(125) : fill.lighter(112));
    p.setPen(QColor(255, 255, 255));
    p.drawRect(r);
    p.setPen(chart_style::kBitInk);
    QFont bf = f;
    bf.setBold(one);
    p.setFont(bf);
    p.drawText(r, Qt::AlignCenter, one ? QStringLiteral("1") : QStringLiteral("0"));
  }
}

void BitCells::mousePressEvent(QMouseEvent* event) {
  if (event->button() != Qt::LeftButton) return;
  for (int bit = 0; bit < m_total; ++bit)
    if (cellRect(bit).contains(event->position().toPoint())) {
      emit bitClicked(bit);
      return;
    }
}
