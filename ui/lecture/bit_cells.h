// BitCells: one format's bits as a row of cells coloured by field — sign,
// exponent, mantissa (Float Toy's convention) — where a click flips a bit.
// Any width: FP32's 32 bits down to FP4's 4, and E8M0's 8 unsigned
// exponent bits.
#pragma once

#include <QWidget>

#include <cstdint>

#include "numeric/format.h"

// GUI thread only. Knows only the field widths (format_info); the bits
// come from engine::inspect (Inspection::field_bits).
class BitCells : public QWidget {
  Q_OBJECT

 public:
  explicit BitCells(engine::Format format, QWidget* parent = nullptr);

  // sign|exponent|mantissa, right-aligned (Inspection::field_bits).
  void setFieldBits(std::uint32_t fieldBits);
  std::uint32_t fieldBits() const { return m_bits; }
  int bitCount() const { return m_total; }
  engine::Format format() const { return m_format; }
  // The cell of field bit `bit` (0: the mantissa's last bit).
  QRect cellRect(int bit) const;
  // "0|01111|0000000000", as the CLI writes it (engine::binary_fields).
  QString text() const;

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 signals:
  void bitClicked(int bit);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;

 private:
  int cellWidth() const;

  engine::Format m_format;
  int m_total = 0;
  int m_exp = 0;
  int m_man = 0;
  bool m_sign = true;  // E8M0 has none
  std::uint32_t m_bits = 0;
};
