// NumberLine: one format's magnitudes on a logarithmic line — the band that
// flushes to zero, the subnormal band, the normal range and the overflow
// threshold (for formats without inf, where they saturate) — with the
// current value marked; dragging along it picks a magnitude.
#pragma once

#include <QWidget>

#include "numeric/format.h"

// GUI thread only. Thresholds from engine::format_info and
// engine::rounding_thresholds.
class NumberLine : public QWidget {
  Q_OBJECT

 public:
  explicit NumberLine(engine::Format format, QWidget* parent = nullptr);

  // `stored`: the value as the format holds it; `input`: the value asked about.
  void setValue(double stored, double input);
  // log2 range drawn: from below the smallest subnormal to beyond overflow.
  double log2Min() const { return m_lo; }
  double log2Max() const { return m_hi; }
  // The x pixel of |v| (the ends for 0 and inf) and its inverse.
  double xOf(double magnitude) const;
  double magnitudeAt(double x) const;

  QSize sizeHint() const override { return QSize(360, 40); }
  QSize minimumSizeHint() const override { return QSize(200, 34); }

 signals:
  // A magnitude picked by pressing or dragging on the line.
  void magnitudeDragged(double magnitude);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;

 private:
  QRectF bar() const;

  engine::Format m_format;
  double m_lo = 0, m_hi = 0;
  double m_underflow = 0, m_minSub = 0, m_minNormal = 0, m_max = 0, m_overflow = 0;
  double m_stored = 0, m_input = 0;
  bool m_hasZero = true;  // false for E8M0
};
