// RecipeLegend: the difference charts' one legend — each entry a short line
// in the run's own pen (colour and dash pattern), a grey swatch for FP32's
// noise band or a dot for the validation points, then its name. Entries
// flow onto more rows when the width is short; a name is never broken or
// elided.
#pragma once

#include <QPen>
#include <QString>
#include <QVector>
#include <QWidget>

// GUI thread only.
class RecipeLegend : public QWidget {
  Q_OBJECT

 public:
  struct Entry {
    enum Kind { Line, Band, Dot };
    Kind kind = Line;
    QString label;
    QPen pen;       // Line: the series' pen; Dot: its colour
    QColor fill;    // Band
  };

  explicit RecipeLegend(QWidget* parent = nullptr);
  void setEntries(const QVector<Entry>& entries);
  const QVector<Entry>& entries() const { return m_entries; }

  // Each entry's rectangle at width `width` (tests: no entry is cut).
  QVector<QRect> entryRects(int width) const;

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;
  bool hasHeightForWidth() const override { return true; }
  int heightForWidth(int width) const override;

 protected:
  void paintEvent(QPaintEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  int entryWidth(const Entry& e) const;

  QVector<Entry> m_entries;
};
