// FormatExplorer: one value in every format side by side (README.md
// "Lessons") — the six tensor formats and the OCP Microscaling element
// formats FP6-E3M2, FP6-E2M3, FP4-E2M1 and the E8M0 block scale: bits
// coloured by sign, exponent and mantissa (a click flips a bit), hex, the
// exact decimal value, the rounding error (absolute and relative), the gap
// to the previous and next values, the class, and a logarithmic number line
// per format. Type a value, drag along a line, or step one ULP of the
// selected format with the arrow keys. Everything it shows comes from
// engine/numeric/inspect, as `precision-lab-cli formats`. A second tab, the
// block view (lecture/block_view.h), shows block-scaled formats.
#pragma once

#include <QDialog>

#include <array>
#include <cstdint>
#include <optional>

#include "numeric/format.h"
#include "numeric/inspect.h"

class BitCells;
class BlockView;
class NumberLine;
class RunStore;
class QTabWidget;
class QCheckBox;
class QLabel;
class QLineEdit;
class QRadioButton;

// GUI thread only.
class FormatExplorer : public QDialog {
  Q_OBJECT

 public:
  // The rows, top to bottom: the tensor formats, then the element formats.
  static constexpr int kRowCount = engine::kFormatCount + engine::kElementFormatCount;
  static const std::array<engine::Format, kRowCount>& rowFormats();

  explicit FormatExplorer(QWidget* parent = nullptr);

  // The block view's live source (may be null).
  void setRunStore(RunStore* store);
  BlockView* blockView() const { return m_blockView; }
  QTabWidget* tabs() const { return m_tabs; }
  // Brings the Blocks tab (or the Values tab) to the front.
  void showBlocks();
  void showValues();
  QSize sizeHint() const override;

  // A value typed (or dragged): every format rounds it (RNE; saturating
  // where the checkbox says so).
  void setValue(float x);
  // Parses what the value field takes: a decimal ("0.1", "-6e-8"), "2^-24",
  // "-2^15", "inf", "nan". False (and nothing changes) when it cannot.
  bool setValueText(const QString& text);
  // The note for a text setValueText refused: "not a number", or out of
  // range for a decimal no double holds ("1e400").
  static QString unparsedNote(const QString& text);
  float value() const { return m_input; }
  // A bit pattern of one format (its container bits, as Inspection::bits):
  // that row shows it as it is, the others round its value.
  void setBits(engine::Format f, std::uint32_t bits);
  // Flips field bit `bit` (0: the mantissa's last) of format f's row.
  void flipBit(engine::Format f, int bit);
  // One ULP up (+1) or down (-1) from the selected format's value.
  bool stepUlp(int direction);
  void selectFormat(engine::Format f);
  engine::Format selectedFormat() const { return m_selected; }
  void setSaturate(bool on);

  // What a row shows.
  const engine::Inspection& inspection(engine::Format f) const { return m_shown[index(f)]; }
  QString bitsText(engine::Format f) const;   // "0|01111|0000000000" from the bit cells
  QString hexText(engine::Format f) const;
  QString classText(engine::Format f) const;
  QString valueText(engine::Format f) const;  // the exact decimal value
  QString errorText(engine::Format f) const;
  QString gapText(engine::Format f) const;
  BitCells* bitCells(engine::Format f) const { return m_rows[index(f)].bits; }
  NumberLine* numberLine(engine::Format f) const { return m_rows[index(f)].line; }
  QLineEdit* valueEdit() const { return m_edit; }

 protected:
  void keyPressEvent(QKeyEvent* event) override;
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  struct Row {
    QRadioButton* name = nullptr;
    BitCells* bits = nullptr;
    QLabel* hex = nullptr;
    QLabel* cls = nullptr;
    QLineEdit* exact = nullptr;
    QLabel* error = nullptr;
    QLabel* gaps = nullptr;
    NumberLine* line = nullptr;
  };
  // Rows are indexed by the enum: the tensor formats, then the element
  // formats, are its first kRowCount values.
  static int index(engine::Format f) { return static_cast<int>(f); }
  void recompute();
  void showRow(engine::Format f);

  float m_input = 1.0f;
  bool m_saturate = false;
  // The row whose bits were set directly (a click, an ULP step), if any.
  std::optional<std::pair<engine::Format, std::uint32_t>> m_pinned;
  engine::Format m_selected = engine::Format::FP16;
  std::array<engine::Inspection, kRowCount> m_shown{};
  std::array<Row, kRowCount> m_rows{};
  QTabWidget* m_tabs = nullptr;
  BlockView* m_blockView = nullptr;
  QLineEdit* m_edit = nullptr;
  QCheckBox* m_saturateCheck = nullptr;
  QLabel* m_parseNote = nullptr;
};
