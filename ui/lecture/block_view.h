// BlockView: why block scaling — two blocks of values (64 for MX, 32 for
// NVFP4) quantized in a block format (MXFP8, MXFP8-E5M2, MXFP6, MXFP6-E3M2,
// MXFP4, NVFP4), each block with its shared scale, and beside them the same
// values under ONE per-tensor scale in the same element format. An outlier
// slider multiplies one element of block 1 by 1 .. 10^4: the per-tensor side
// loses every value's precision (small ones flush to zero), the block side
// only block 1's. Values are typed (or pasted) or taken from a live run: a
// layer's weight or gradient block from the latest inspected step. Every
// number comes from the engine (lecture/block_compare.h).
#pragma once

#include <QString>
#include <QWidget>

#include <vector>

#include "lecture/block_compare.h"
#include "numeric/format.h"

class BlockStrip;
class QButtonGroup;
class QComboBox;
class QLabel;
class QPlainTextEdit;
class QRadioButton;
class QSlider;
class QSpinBox;
class QStackedWidget;
class QTableWidget;
class RunStore;

// GUI thread only. Subscribes to RunStore::inspected when given a store.
class BlockView : public QWidget {
  Q_OBJECT

 public:
  explicit BlockView(QWidget* parent = nullptr);

  // Where live blocks come from (RunData::inspection); may be null.
  void setRunStore(RunStore* store);

  // One of engine::kBlockFormats.
  void setFormat(engine::Format f);
  engine::Format format() const { return m_format; }

  enum class Source { Typed, Live };
  void setSource(Source s);
  Source source() const { return m_source; }

  // Typed values: whitespace, comma or semicolon separated numbers
  // ("0.1", "-6e-3", "2^-4", "inf", "nan"); the first two blocks' worth are
  // used. False (nothing changes, the note says which token) when a token
  // is not a number. Switches to the typed source.
  bool setValuesText(const QString& text);
  void setValues(const std::vector<float>& values);
  // A layer's block of the latest inspection of store run `storeId`: its
  // weight or its (unscaled) weight gradient. Switches to the live source;
  // false when that run or layer has no block.
  bool selectLive(int storeId, const QString& layer, bool gradient);

  // Multiplies element `element` (0-based, in block 1) by `factor`
  // (clamped to 1 .. 10^4; the slider is logarithmic).
  void setOutlier(int element, double factor);
  int outlierElement() const { return m_outlier; }
  double outlierFactor() const { return m_factor; }

  // What is shown.
  const BlockComparison& comparison() const { return m_cmp; }
  enum Column { Index = 0, Input, BlockCode, BlockValue, BlockError, TensorCode, TensorValue, TensorError, ColumnCount };
  QTableWidget* table(int block) const { return m_blocks[block].table; }
  QString blockCaption(int block) const;       // "Block 1 · values 1–32 · shared scale 0x7D = 2^-2 = 0.25 ..."
  QString summaryText(bool perTensor) const;   // "RMS relative error 3.2% · 0 of 64 flushed to zero"
  QString scaleText(bool perTensor) const;     // the side's heading: how its scale is made
  QString sourceText() const;                  // where the values come from (typed, or run/step/layer)
  QString outlierText() const;
  BlockStrip* strip(int block, bool perTensor) const;
  QSlider* outlierSlider() const { return m_slider; }
  QPlainTextEdit* valuesEdit() const { return m_edit; }
  QComboBox* formatCombo() const { return m_formatCombo; }

  // Sixty-four values that look like a layer's weights (a fixed pseudo-random
  // normal sample, sd 0.05, three significant digits), as text.
  static QString exampleValuesText();

 private:
  struct BlockPanel {
    QLabel* caption = nullptr;
    QLabel* stripLabel = nullptr;
    BlockStrip* blockStrip = nullptr;
    BlockStrip* tensorStrip = nullptr;
    QTableWidget* table = nullptr;
  };
  void recompute();
  void showComparison();
  void fillTable(int b);
  void refreshLive();        // the run and layer pickers, from the store
  void loadLive();           // the picked layer's block into m_base
  void setBase(const std::vector<float>& values, double tensorAmax);
  void pickOutlierDefault();
  int blockSize() const;

  engine::Format m_format = engine::Format::MXFP4;
  Source m_source = Source::Typed;
  std::vector<float> m_typed;        // the typed values
  std::vector<float> m_base;         // the values before the outlier
  double m_tensorAmax = 0.0;         // live: the whole tensor's amax
  int m_outlier = 0;
  bool m_outlierChosen = false;      // picked by the user: kept when the values change
  double m_factor = 1.0;
  BlockComparison m_cmp;
  RunStore* m_store = nullptr;
  int m_latestRun = -1;
  QString m_liveText;

  QComboBox* m_formatCombo = nullptr;
  QRadioButton* m_typedRadio = nullptr;
  QRadioButton* m_liveRadio = nullptr;
  QStackedWidget* m_sourceStack = nullptr;
  QPlainTextEdit* m_edit = nullptr;
  QLabel* m_editNote = nullptr;
  QLabel* m_liveLabel = nullptr;
  QComboBox* m_runCombo = nullptr;
  QComboBox* m_layerCombo = nullptr;
  QComboBox* m_tensorCombo = nullptr;
  QSpinBox* m_outlierSpin = nullptr;
  QSlider* m_slider = nullptr;
  QLabel* m_factorLabel = nullptr;
  QLabel* m_outlierNote = nullptr;
  QLabel* m_sideTitle[2] = {nullptr, nullptr};    // [0] block side, [1] per-tensor side
  QLabel* m_sideScale[2] = {nullptr, nullptr};
  QLabel* m_sideSummary[2] = {nullptr, nullptr};
  BlockPanel m_blocks[2];
  bool m_updating = false;
};
