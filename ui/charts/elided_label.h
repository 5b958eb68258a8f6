// ElidedLabel: a plain-text label that wraps to at most a few lines and ends
// the last one with "…" when the text is longer, the whole text in its
// tooltip. A long line of numbers under a narrow chart keeps its height
// instead of taking the chart's.
#pragma once

#include <QLabel>

// GUI thread only. text() is the whole text; only the painting is cut.
class ElidedLabel : public QLabel {
  Q_OBJECT

 public:
  explicit ElidedLabel(QWidget* parent = nullptr);

  void setMaxLines(int lines);
  int maxLines() const { return m_maxLines; }
  // Sets the text (and the tooltip, when the text does not fit).
  void setFullText(const QString& text);
  // Whether the painted text is cut at the current width.
  bool elided() const;
  // The lines painted at `width`.
  QStringList linesAt(int width) const;

  bool hasHeightForWidth() const override { return true; }
  int heightForWidth(int width) const override;
  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  void updateToolTip();
  int m_maxLines = 2;
};
