// BlockStrip: one block's elements as a row of cells coloured by what the
// quantization did to each — exact, a relative error growing from green to
// amber, flushed to zero in red, an input of 0 in grey — with one element
// (the outlier) outlined. The block view draws one per block and side, so
// an outlier's damage is seen at a glance; a click picks an element.
#pragma once

#include <QWidget>

#include <vector>

#include "lecture/block_compare.h"

// GUI thread only. Shows numbers it is given; computes none.
class BlockStrip : public QWidget {
  Q_OBJECT

 public:
  explicit BlockStrip(QWidget* parent = nullptr);

  // Elements [first, first + count) of `side` (inputs from `input`) in
  // `cells` cells (the block size: a short block leaves cells empty);
  // `marked`: the outlined element's index in the same numbering, or -1.
  // `codeFormat`: the element format, for the tooltips' codes.
  void setElements(const std::vector<float>& input, const std::vector<QuantizedElement>& side, int first, int count,
                   int cells, int marked, engine::Format codeFormat);
  void clear();
  int count() const { return m_count; }
  int first() const { return m_first; }
  // The colour a cell gets (for the legend and the tests).
  static QColor colourFor(float input, const QuantizedElement& e);
  QRect cellRect(int i) const;  // i: 0 .. count-1

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 signals:
  // An element was clicked: its index (first + i).
  void elementClicked(int index);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  bool event(QEvent* event) override;  // per-cell tooltips

 private:
  std::vector<float> m_input;
  std::vector<QuantizedElement> m_side;
  int m_first = 0;
  int m_count = 0;
  int m_slots = 32;  // cells drawn (a short block leaves the rest empty)
  int m_marked = -1;
  engine::Format m_codeFormat = engine::Format::E4M3;
};
