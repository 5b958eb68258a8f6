// ui/lecture: the explorer's rows for the OCP MX element formats (FP6, FP4,
// E8M0: bits, values, every code, ULP steps) and the block view — its
// numbers for hand-worked blocks, the outlier slider (the per-tensor side
// flushes, the block side only block 1), typed and live values, and its
// place in the Lecture menu. PL_SCREENSHOT_DIR=dir also writes
// block-view.png (1600x1000), block-view-720p.png (1280x720) and
// format-explorer.png (the Values tab, 1240x1000) there.
#include <gtest/gtest.h>

#include <QAction>
#include <QDir>
#include <QPlainTextEdit>
#include <QPixmap>
#include <QSlider>
#include <QTabWidget>
#include <QTableWidget>
#include <QTest>

#include <cmath>
#include <vector>

#include "charts/chart_style.h"
#include "charts/number_text.h"
#include "lecture/bit_cells.h"
#include "lecture/block_compare.h"
#include "lecture/block_strip.h"
#include "lecture/block_view.h"
#include "lecture/format_explorer.h"
#include "lecture/lecture_menu.h"
#include "main_window.h"
#include "numeric/convert.h"
#include "numeric/inspect.h"
#include "session/run_store.h"
#include "session/training_controller.h"
#include "../ui_test_support.h"
#include "../window_parts.h"

namespace {

using engine::Format;

QString q(const std::string& s) { return QString::fromStdString(s); }

// 64 weight-like values of both signs, 0.01 .. 0.07: FP4 holds each of them
// to within its rounding under either scaling, until an outlier comes.
std::vector<float> spreadValues(int n = 64) {
  std::vector<float> v;
  for (int i = 0; i < n; ++i) v.push_back((i % 2 ? -0.01f : 0.01f) * static_cast<float>(1 + i % 7));
  return v;
}

QString cell(const BlockView& view, int block, int row, int column) {
  const QTableWidgetItem* item = view.table(block)->item(row, column);
  return item ? item->text() : QString();
}

}  // namespace

// ---- the explorer's element-format rows ------------------------------------------

TEST(FormatExplorerElements, TypingFiveShowsEachElementFormatRoundedToNearestEven) {
  ui_test::ensureApplication();
  FormatExplorer e;
  ASSERT_TRUE(e.setValueText(QStringLiteral("5")));
  // FP4-E2M1 holds 4 and 6: 5 is the tie and goes to the even code 0|11|0 = 4.
  EXPECT_EQ(e.valueText(Format::E2M1), QStringLiteral("4"));
  EXPECT_EQ(e.hexText(Format::E2M1), QStringLiteral("0x06"));
  EXPECT_EQ(e.bitsText(Format::E2M1), QStringLiteral("0|11|0"));
  EXPECT_EQ(e.classText(Format::E2M1), QStringLiteral("normal"));
  EXPECT_TRUE(e.errorText(Format::E2M1).contains(QStringLiteral("relative 0.2")));
  // FP6 holds 5 exactly (1.25 x 2^2) in both layouts.
  EXPECT_EQ(e.valueText(Format::E2M3), QStringLiteral("5"));
  EXPECT_EQ(e.bitsText(Format::E2M3), QStringLiteral("0|11|010"));
  EXPECT_EQ(e.valueText(Format::E3M2), QStringLiteral("5"));
  EXPECT_EQ(e.bitsText(Format::E3M2), QStringLiteral("0|101|01"));
  // E8M0: the nearest power of two (5 < 1.5 x 4), no sign bit.
  EXPECT_EQ(e.valueText(Format::E8M0), QStringLiteral("4"));
  EXPECT_EQ(e.hexText(Format::E8M0), QStringLiteral("0x81"));
  EXPECT_EQ(e.bitsText(Format::E8M0), QStringLiteral("10000001"));
  // Past their max the MX element formats saturate (there is no inf).
  e.setValue(100.0f);
  EXPECT_EQ(e.valueText(Format::E2M1), QStringLiteral("6"));
  EXPECT_EQ(e.classText(Format::E2M1), QStringLiteral("normal (saturated)"));
  EXPECT_EQ(e.valueText(Format::E2M3), QStringLiteral("7.5"));
  EXPECT_EQ(e.valueText(Format::E3M2), QStringLiteral("28"));
  // Every row is what engine::inspect says, for values of every class.
  for (float x : {0.0f, -0.0f, 0.1f, -0.3f, 0.25f, 0.26f, 0.75f, 1.0f, 2.5f, 7.0f, 7.75f, 29.0f, 1e-3f, 1e30f,
                  std::ldexp(1.0f, -127), std::ldexp(1.0f, -130), 3.0e38f}) {
    e.setValue(x);
    for (Format f : engine::kElementFormats) {
      const engine::Inspection i = engine::inspect(f, x, false);
      SCOPED_TRACE(std::string(engine::format_name(f)) + " of " + engine::shortest_decimal(x));
      EXPECT_EQ(e.inspection(f).bits, i.bits);
      EXPECT_EQ(e.bitsText(f), q(engine::binary_fields(f, i.field_bits)));
      EXPECT_EQ(e.hexText(f), q(engine::hex_bits(f, i.bits)));
      EXPECT_EQ(e.classText(f), q(engine::class_text(i)));
      EXPECT_EQ(e.valueText(f), number_text::exactDecimal(i.value));
    }
  }
}

TEST(FormatExplorerElements, EveryCodeOfFp6Fp4AndE8m0RoundTripsThroughItsBits) {
  ui_test::ensureApplication();
  FormatExplorer e;
  for (Format f : engine::kElementFormats) {
    const int bits = engine::format_info(f).bits;
    EXPECT_EQ(e.bitCells(f)->bitCount(), bits) << engine::format_name(f);
    for (std::uint32_t code = 0; code < (1u << bits); ++code) {
      e.setBits(f, code);
      ASSERT_EQ(e.inspection(f).bits, code) << engine::format_name(f);
      EXPECT_EQ(e.valueText(f), number_text::exactDecimal(engine::decode(f, code)));
      EXPECT_EQ(e.bitsText(f), q(engine::binary_fields(f, code)));
      for (int bit = 0; bit < bits; ++bit) {
        e.flipBit(f, bit);
        ASSERT_EQ(e.inspection(f).bits, code ^ (1u << bit)) << engine::format_name(f) << " code " << code;
        e.flipBit(f, bit);
      }
      // A bit beyond the format is no bit.
      e.flipBit(f, bits);
      EXPECT_EQ(e.inspection(f).bits, code);
    }
  }
  // OCP: FP4 has neither inf nor NaN; E8M0 0x00 is 2^-127 and 0xFF NaN.
  e.setBits(Format::E2M1, 0x7);
  EXPECT_EQ(e.valueText(Format::E2M1), QStringLiteral("6"));
  e.setBits(Format::E2M1, 0xF);
  EXPECT_EQ(e.valueText(Format::E2M1), QStringLiteral("-6"));
  e.setBits(Format::E8M0, 0x00);
  EXPECT_EQ(e.valueText(Format::E8M0), number_text::exactDecimal(std::ldexp(1.0, -127)));
  EXPECT_EQ(e.classText(Format::E8M0), QStringLiteral("normal"));
  e.setBits(Format::E8M0, 0xFF);
  EXPECT_EQ(e.classText(Format::E8M0), QStringLiteral("nan"));
}

TEST(FormatExplorerElements, UlpStepsWalkFp4AndE8m0AndStopAtTheEnds) {
  ui_test::ensureApplication();
  FormatExplorer e;
  // FP4-E2M1's non-negative values, one ULP at a time.
  e.selectFormat(Format::E2M1);
  e.setBits(Format::E2M1, 0x0);
  QStringList walk{e.valueText(Format::E2M1)};
  while (e.stepUlp(+1)) {
    walk << e.valueText(Format::E2M1);
    ASSERT_LT(walk.size(), 20);
  }
  EXPECT_EQ(walk, (QStringList{"0", "0.5", "1", "1.5", "2", "3", "4", "6"}));
  EXPECT_TRUE(e.gapText(Format::E2M1).contains(QStringLiteral("↑ next none"))) << e.gapText(Format::E2M1).toStdString();
  EXPECT_TRUE(e.stepUlp(-1));
  EXPECT_EQ(e.valueText(Format::E2M1), QStringLiteral("4"));
  e.setBits(Format::E2M1, 0xF);  // -6: nothing below
  EXPECT_FALSE(e.stepUlp(-1));
  EXPECT_EQ(e.valueText(Format::E2M1), QStringLiteral("-6"));
  // FP6-E3M2 at its max (28) has no next value either.
  e.selectFormat(Format::E3M2);
  e.setBits(Format::E3M2, 0x1F);
  EXPECT_EQ(e.valueText(Format::E3M2), QStringLiteral("28"));
  EXPECT_FALSE(e.stepUlp(+1));
  // E8M0: consecutive powers of two, 2^127 the last.
  e.selectFormat(Format::E8M0);
  e.setBits(Format::E8M0, 0x7F);
  EXPECT_EQ(e.valueText(Format::E8M0), QStringLiteral("1"));
  EXPECT_TRUE(e.stepUlp(+1));
  EXPECT_EQ(e.valueText(Format::E8M0), QStringLiteral("2"));
  e.setBits(Format::E8M0, 0xFE);
  EXPECT_FALSE(e.stepUlp(+1));
  EXPECT_TRUE(e.stepUlp(-1));
  EXPECT_EQ(e.hexText(Format::E8M0), QStringLiteral("0xFD"));
}

TEST(FormatExplorerElements, AClickFlipsAnE8m0AndAnFp4Bit) {
  ui_test::ensureApplication();
  FormatExplorer e;
  e.resize(1240, 1000);
  e.show();
  ui_test::settle();
  e.setValue(1.0f);
  for (Format f : {Format::E2M1, Format::E8M0}) {
    BitCells* cells = e.bitCells(f);
    for (int bit : {0, cells->bitCount() - 1}) {
      const std::uint32_t was = e.inspection(f).bits;
      QTest::mouseClick(cells, Qt::LeftButton, {}, cells->cellRect(bit).center());
      EXPECT_EQ(e.inspection(f).bits, was ^ (1u << bit)) << engine::format_name(f) << " bit " << bit;
    }
  }
}

// ---- the block comparison: hand-worked blocks -------------------------------------

TEST(BlockCompare, MxFp4OfOnesHasScale2ToTheMinus2AndElementsOf4) {
  // OCP MX: X = floor(log2(amax)) - emax(E2M1) = 0 - 2 = -2: the E8M0 code
  // 127 - 2 = 125 = 0x7D; each element is 1 / 2^-2 = 4 = 0|11|0, exact.
  const BlockComparison c = compareBlocks(Format::MXFP4, std::vector<float>(64, 1.0f));
  ASSERT_EQ(c.blocks(), 2);
  EXPECT_EQ(c.blockSize, 32);
  for (const SharedScale& s : c.scales) {
    EXPECT_EQ(s.code, 0x7D);
    EXPECT_EQ(s.value, 0.25f);
    EXPECT_EQ(s.count, 32);
  }
  for (const QuantizedElement& e : c.block) {
    EXPECT_EQ(e.code, 0x6u);
    EXPECT_EQ(e.value, 1.0f);
    EXPECT_EQ(e.relError, 0.0);
  }
  // One per-tensor scale: 6 / amax 1 = 6; 1 x 6 = 6 = 0|11|1; 6 / 6 = 1.
  EXPECT_EQ(c.perTensorScale, 6.0f);
  for (const QuantizedElement& e : c.tensor) {
    EXPECT_EQ(e.code, 0x7u);
    EXPECT_EQ(e.value, 1.0f);
  }
  EXPECT_EQ(c.summary(false).rmsRelError, 0.0);
  EXPECT_EQ(c.summary(true).flushed, 0);
  EXPECT_EQ(c.summary(true).nonzero, 64);
}

TEST(BlockCompare, Mxfp8AndNvfp4OfOnesByHand) {
  // MXFP8: emax(E4M3) = 8, X = -8, code 119 = 0x77; 1 / 2^-8 = 256 =
  // 2^8 = E4M3 0|1111|000 = 0x78.
  const BlockComparison m = compareBlocks(Format::MXFP8, std::vector<float>(32, 1.0f));
  ASSERT_EQ(m.blocks(), 1);
  EXPECT_EQ(m.scales[0].code, 0x77);
  EXPECT_EQ(m.block[0].code, 0x78u);
  EXPECT_EQ(m.block[0].value, 1.0f);
  // NVFP4: S_enc = 448 x 6 / 1 = 2688; the block scale E4M3(1 x 2688 / 6) =
  // 448 (0x7E); enc = 1 / (448 / 2688) = 6; E2M1(6) = 0x7; 6 x 448 / 2688 = 1.
  const BlockComparison n = compareBlocks(Format::NVFP4, std::vector<float>(32, 1.0f));
  ASSERT_EQ(n.blocks(), 2);
  EXPECT_EQ(n.blockSize, 16);
  EXPECT_TRUE(n.hasTensorScale);
  EXPECT_EQ(n.tensorScale, 2688.0f);
  EXPECT_EQ(n.scales[1].code, 0x7E);
  EXPECT_EQ(n.scales[1].value, 448.0f);
  EXPECT_EQ(n.block[20].code, 0x7u);
  EXPECT_EQ(n.block[20].value, 1.0f);
  // A tensor amax from the whole tensor sets S_enc (and the per-tensor
  // scale) as a run would: 448 x 6 / 4 = 672.
  const BlockComparison t = compareBlocks(Format::NVFP4, std::vector<float>(32, 1.0f), 4.0);
  EXPECT_EQ(t.tensorScale, 672.0f);
  EXPECT_EQ(t.perTensorScale, 1.5f);
  EXPECT_EQ(t.amax, 4.0);
  EXPECT_EQ(t.block.size(), 32u);
}

TEST(BlockCompare, AnOutlierFlushesThePerTensorSideButOnlyItsOwnBlock) {
  std::vector<float> v = spreadValues();
  const BlockComparison before = compareBlocks(Format::MXFP4, v);
  EXPECT_EQ(before.summary(false).flushed, 0);
  EXPECT_EQ(before.summary(true).flushed, 0);
  v[0] *= 1e4f;
  const BlockComparison after = compareBlocks(Format::MXFP4, v);
  // Per tensor: scale 6 / 100; 0.07 x 0.06 is below FP4's half-smallest
  // subnormal (0.25): everything but the outlier flushes.
  EXPECT_EQ(after.summary(true).flushed, 63);
  // Block: block 1's scale is 2^4 (100 -> 2^6, minus emax 2): its other 31
  // values flush; block 2 keeps its own scale and every bit.
  EXPECT_EQ(after.summary(false, 0).flushed, 31);
  EXPECT_EQ(after.summary(false, 1).flushed, 0);
  EXPECT_GT(after.summary(true).flushed, after.summary(false).flushed);
  EXPECT_EQ(after.scales[1].code, before.scales[1].code);
  for (int i = 32; i < 64; ++i) {
    EXPECT_EQ(after.block[static_cast<std::size_t>(i)].code, before.block[static_cast<std::size_t>(i)].code);
    EXPECT_EQ(after.block[static_cast<std::size_t>(i)].value, before.block[static_cast<std::size_t>(i)].value);
  }
  EXPECT_GT(after.summary(true).rmsRelError, after.summary(false).rmsRelError);
}

// ---- the block view ------------------------------------------------------------------

TEST(BlockView, ShowsTheHandWorkedMxfp4BlockInItsTablesAndCaptions) {
  ui_test::ensureApplication();
  BlockView view;
  view.setFormat(Format::MXFP4);
  view.setValues(std::vector<float>(64, 1.0f));
  EXPECT_EQ(view.comparison().input.size(), 64u);
  for (int b = 0; b < 2; ++b) {
    ASSERT_EQ(view.table(b)->rowCount(), 32);
    EXPECT_TRUE(view.blockCaption(b).contains(QStringLiteral("shared scale 0x7D = 2^-2 = 0.25")))
        << view.blockCaption(b).toStdString();
    EXPECT_EQ(cell(view, b, 3, BlockView::Input), QStringLiteral("1"));
    EXPECT_EQ(cell(view, b, 3, BlockView::BlockCode), QStringLiteral("0|11|0"));
    EXPECT_EQ(cell(view, b, 3, BlockView::BlockValue), QStringLiteral("1"));
    EXPECT_EQ(cell(view, b, 3, BlockView::BlockError), QStringLiteral("0%"));
    EXPECT_EQ(cell(view, b, 3, BlockView::TensorCode), QStringLiteral("0|11|1"));
    EXPECT_EQ(cell(view, b, 3, BlockView::TensorValue), QStringLiteral("1"));
  }
  EXPECT_EQ(cell(view, 1, 0, BlockView::Index), QStringLiteral("33"));
  EXPECT_TRUE(view.scaleText(true).contains(QStringLiteral("scale = 6 / amax 1 = 6"))) << view.scaleText(true).toStdString();
  EXPECT_TRUE(view.summaryText(false).startsWith(QStringLiteral("RMS relative error 0% · 0 of 64")))
      << view.summaryText(false).toStdString();
  // NVFP4: blocks of 16 and the FP32 tensor scale in the caption.
  view.setFormat(Format::NVFP4);
  EXPECT_EQ(view.comparison().input.size(), 32u);
  ASSERT_EQ(view.table(0)->rowCount(), 16);
  EXPECT_TRUE(view.blockCaption(1).contains(QStringLiteral("0x7E = 448 (FP8-E4M3), ÷ S_enc 2688")))
      << view.blockCaption(1).toStdString();
  EXPECT_TRUE(view.scaleText(false).contains(QStringLiteral("2688"))) << view.scaleText(false).toStdString();
  // Fewer values than two blocks: a short block, and no second one.
  view.setFormat(Format::MXFP8);
  view.setValues(std::vector<float>(20, 1.0f));
  EXPECT_EQ(view.table(0)->rowCount(), 20);
  EXPECT_EQ(view.table(1)->rowCount(), 0);
  EXPECT_TRUE(view.blockCaption(1).contains(QStringLiteral("no values")));
  EXPECT_TRUE(view.sourceText().contains(QStringLiteral("20 values"))) << view.sourceText().toStdString();
}

TEST(BlockView, TheOutlierSliderRuinsThePerTensorSideAndOnlyBlockOne) {
  ui_test::ensureApplication();
  BlockView view;
  view.resize(1400, 900);
  view.show();
  ui_test::settle();
  view.setFormat(Format::MXFP4);
  view.setValues(spreadValues());
  const BlockComparison before = view.comparison();
  QStringList block2Before;
  for (int r = 0; r < 32; ++r)
    block2Before << cell(view, 1, r, BlockView::BlockCode) + cell(view, 1, r, BlockView::BlockValue);
  // The slider's top: 10^4, on element 1.
  view.setOutlier(0, 1.0);
  view.outlierSlider()->setValue(view.outlierSlider()->maximum());
  EXPECT_DOUBLE_EQ(view.outlierFactor(), 1e4);
  const BlockComparison& after = view.comparison();
  EXPECT_EQ(after.input[0], 100.0f);
  EXPECT_GT(after.summary(true).flushed, after.summary(false).flushed);
  EXPECT_EQ(after.summary(true).flushed, 63);
  EXPECT_EQ(after.summary(false, 1).flushed, 0);
  QStringList block2After;
  for (int r = 0; r < 32; ++r)
    block2After << cell(view, 1, r, BlockView::BlockCode) + cell(view, 1, r, BlockView::BlockValue);
  EXPECT_EQ(block2After, block2Before);
  EXPECT_EQ(after.scales[1].code, before.scales[1].code);
  // What a reader sees: flushed cells in both tables of the per-tensor
  // side, red strips, and the summaries.
  EXPECT_EQ(cell(view, 1, 4, BlockView::TensorError), QStringLiteral("flushed to 0"));
  EXPECT_EQ(cell(view, 1, 4, BlockView::TensorValue), QStringLiteral("0"));
  EXPECT_NE(cell(view, 1, 4, BlockView::BlockError), QStringLiteral("flushed to 0"));
  EXPECT_EQ(cell(view, 0, 0, BlockView::Index), QStringLiteral("1 ◆"));
  EXPECT_TRUE(view.summaryText(true).contains(QStringLiteral("63 of 64 nonzero values flushed")))
      << view.summaryText(true).toStdString();
  EXPECT_TRUE(view.summaryText(false).contains(QStringLiteral("31 of 64"))) << view.summaryText(false).toStdString();
  EXPECT_TRUE(view.outlierText().contains(QStringLiteral("× 10000"))) << view.outlierText().toStdString();
  const QuantizedElement& flushed = after.tensor[40];
  EXPECT_EQ(BlockStrip::colourFor(after.input[40], flushed), chart_style::kAlarm);
  EXPECT_NE(BlockStrip::colourFor(after.input[40], after.block[40]), chart_style::kAlarm);
  // NVFP4: block 2 keeps every value from flushing (its E4M3 scale moves a
  // little with the tensor's FP32 scale, but no value is lost).
  view.setFormat(Format::NVFP4);
  EXPECT_EQ(view.comparison().summary(false, 1).flushed, 0);
  EXPECT_GT(view.comparison().summary(true).flushed, view.comparison().summary(false).flushed);
  // Back to 1: nothing flushes anywhere.
  view.outlierSlider()->setValue(0);
  EXPECT_EQ(view.comparison().summary(true).flushed, 0);
  EXPECT_EQ(view.comparison().summary(false).flushed, 0);
}

TEST(BlockView, AClickOnABlockOneCellPicksTheOutlier) {
  ui_test::ensureApplication();
  BlockView view;
  view.resize(1400, 900);
  view.show();
  ui_test::settle();
  view.setValues(spreadValues());
  BlockStrip* s = view.strip(0, true);
  ASSERT_EQ(s->count(), 32);
  QTest::mouseClick(s, Qt::LeftButton, {}, s->cellRect(9).center());
  EXPECT_EQ(view.outlierElement(), 9);
}

TEST(BlockView, TypedValuesAreParsedAndAPastedListWorks) {
  ui_test::ensureApplication();
  BlockView view;
  EXPECT_EQ(view.comparison().input.size(), 64u);  // the example values
  EXPECT_TRUE(view.setValuesText(QStringLiteral("1, 2; 3\n-4\t2^-3  0.5e-1")));
  const std::vector<float> want{1.0f, 2.0f, 3.0f, -4.0f, 0.125f, 0.05f};
  EXPECT_EQ(view.comparison().input, want);
  EXPECT_FALSE(view.setValuesText(QStringLiteral("1 two 3")));
  EXPECT_EQ(view.comparison().input, want);
  EXPECT_TRUE(view.sourceText().contains(QStringLiteral("“two”"))) << view.sourceText().toStdString();
  // Typing into the list (a paste) recomputes.
  view.valuesEdit()->setPlainText(QStringLiteral("0.5 0.5 0.5"));
  EXPECT_EQ(view.comparison().input.size(), 3u);
  // More than two blocks: the first 64.
  view.setValuesText(BlockView::exampleValuesText() + QStringLiteral(" 9 9 9"));
  EXPECT_EQ(view.comparison().input.size(), 64u);
  EXPECT_TRUE(view.sourceText().contains(QStringLiteral("67 values: the first 64"))) << view.sourceText().toStdString();
}

TEST(BlockView, LiveBlocksComeFromTheLatestInspectedStep) {
  ui_test::ensureApplication();
  RunStore store;
  BlockView view;
  view.setRunStore(&store);
  // Nothing inspected: the view says how to get a block.
  view.setSource(BlockView::Source::Live);
  EXPECT_TRUE(view.sourceText().contains(QStringLiteral("Press Step (F10"))) << view.sourceText().toStdString();
  EXPECT_TRUE(view.comparison().input.empty());
  EXPECT_EQ(view.table(0)->rowCount(), 0);

  const int id = store.addRun(QStringLiteral("run 1"), QStringLiteral("mxfp4"), Qt::blue, ui_test::config("mxfp4"));
  engine::StepInspection in;
  in.run_id = id;
  in.step = 7;
  engine::LayerInspection relu;
  relu.layer = "relu1";
  engine::LayerInspection fc1;
  fc1.layer = "fc1";
  fc1.has_weights = true;
  for (int i = 0; i < 32; ++i) {
    fc1.weight_block.push_back(0.02f * static_cast<float>(i % 5 + 1));
    fc1.grad_block.push_back(1e-4f * static_cast<float>(i % 3 + 1));
  }
  fc1.weight_amax = 0.1;
  fc1.grad_amax = 0.05;  // elsewhere in the tensor, far above this block's 3e-4
  in.layers = {fc1, relu};
  ui_test::feed(store, {in});
  // The inspection arrived: the live source follows it.
  EXPECT_TRUE(view.sourceText().contains(QStringLiteral("run 1 (mxfp4), step 7 · layer fc1"))) << view.sourceText().toStdString();
  EXPECT_EQ(view.comparison().input, fc1.weight_block);
  EXPECT_EQ(view.comparison().blocks(), 1);  // 32 values: one MX block
  EXPECT_TRUE(view.sourceText().contains(QStringLiteral("32 values: 1 MXFP4 block"))) << view.sourceText().toStdString();

  // The gradient: its tensor's amax sets the per-tensor scale, and the
  // block, whose own scale fits it, keeps what one tensor scale flushes.
  ASSERT_TRUE(view.selectLive(id, QStringLiteral("fc1"), true));
  EXPECT_EQ(view.comparison().input, fc1.grad_block);
  EXPECT_EQ(view.comparison().amax, 0.05);
  EXPECT_EQ(view.comparison().perTensorScale, 6.0f / 0.05f);
  EXPECT_GT(view.comparison().summary(true).flushed, 0);
  EXPECT_EQ(view.comparison().summary(false).flushed, 0);
  EXPECT_TRUE(view.sourceText().contains(QStringLiteral("weight gradient"))) << view.sourceText().toStdString();
  EXPECT_FALSE(view.selectLive(id, QStringLiteral("relu1"), false));  // no weights, no block
  EXPECT_FALSE(view.selectLive(id + 1, QStringLiteral("fc1"), false));

  // A later step replaces it.
  in.step = 8;
  in.layers[0].grad_block.assign(32, 2e-4f);
  ui_test::feed(store, {in});
  EXPECT_TRUE(view.sourceText().contains(QStringLiteral("step 8"))) << view.sourceText().toStdString();
  EXPECT_EQ(view.comparison().input[0], 2e-4f);
  // Back to typed values.
  view.setSource(BlockView::Source::Typed);
  EXPECT_EQ(view.comparison().input.size(), 64u);
}

// The engine's own inspection (Step on an mxfp4 run) reaches the view: fc2's
// weight block, 32 values along a row of its 128 x 256 weight.
TEST(BlockView, StepOnAnMxfp4RunGivesTheViewALiveBlock) {
  ui_test::ensureApplication();
  MainWindow w;
  w.part<UserMessages>()->setQuiet(true);
  engine::RunConfig c = ui_test::config("mxfp4");
  c.steps = 50;
  c.threads = 1;
  w.part<PrecisionTableController>()->setBaseConfig(c);
  BlockView* view = w.formatExplorer()->blockView();
  view->setSource(BlockView::Source::Live);
  EXPECT_TRUE(view->sourceText().contains(QStringLiteral("Press Step")));
  w.part<RunLauncher>()->stepOnce();
  ASSERT_EQ(w.part<TrainingController>()->currentRuns().size(), 1);
  const int id = w.part<TrainingController>()->currentRuns().front();
  ASSERT_TRUE(ui_test::waitFor([&] { return w.part<RunStore>()->run(id).inspection.has_value(); }, 20000));
  const engine::LayerInspection* fc2 = nullptr;
  for (const engine::LayerInspection& li : w.part<RunStore>()->run(id).inspection->layers)
    if (li.layer == "fc2") fc2 = &li;
  ASSERT_NE(fc2, nullptr);
  ASSERT_EQ(fc2->weight_block.size(), 64u);  // two MX blocks
  ASSERT_TRUE(view->selectLive(id, QStringLiteral("fc2"), false));
  EXPECT_EQ(view->comparison().input, fc2->weight_block);
  EXPECT_EQ(view->comparison().amax, fc2->weight_amax);
  EXPECT_GT(view->comparison().amax, 0.0);
  EXPECT_TRUE(view->sourceText().contains(QStringLiteral("step 1 · layer fc2"))) << view->sourceText().toStdString();
  ASSERT_TRUE(view->selectLive(id, QStringLiteral("fc2"), true));
  EXPECT_EQ(view->comparison().input, fc2->grad_block);
  w.part<TrainingController>()->shutdown();
}

TEST(BlockView, TheLectureMenuOpensTheExplorerOnItsBlocksTab) {
  ui_test::ensureApplication();
  MainWindow w;
  w.part<UserMessages>()->setQuiet(true);
  ASSERT_NE(w.findChild<QAction*>(QStringLiteral("actionBlockView")), nullptr);
  EXPECT_TRUE(w.part<LectureMenu>()->actions().contains(w.findChild<QAction*>(QStringLiteral("actionBlockView"))));
  w.findChild<QAction*>(QStringLiteral("actionBlockView"))->trigger();
  FormatExplorer* e = w.formatExplorer();
  EXPECT_TRUE(e->isVisible());
  EXPECT_EQ(e->tabs()->currentIndex(), 1);
  EXPECT_TRUE(e->blockView()->isVisible());
  w.findChild<QAction*>(QStringLiteral("actionFormatExplorer"))->trigger();
  EXPECT_EQ(e->tabs()->currentIndex(), 0);
  e->close();
}

// Not a check: the documentation's picture, when asked for.
TEST(BlockView, Screenshot) {
  const QString dir = qEnvironmentVariable("PL_SCREENSHOT_DIR");
  if (dir.isEmpty()) GTEST_SKIP() << "set PL_SCREENSHOT_DIR to write block-view.png";
  ui_test::ensureApplication();
  MainWindow w;
  w.part<UserMessages>()->setQuiet(true);
  w.showBlockView();
  FormatExplorer* e = w.formatExplorer();
  BlockView* view = e->blockView();
  view->setFormat(Format::MXFP4);
  view->setValuesText(BlockView::exampleValuesText());
  view->setOutlier(view->outlierElement(), 1000.0);
  for (const auto& [size, file] : {std::pair{QSize(1600, 1000), QStringLiteral("block-view.png")},
                                   std::pair{QSize(1280, 720), QStringLiteral("block-view-720p.png")}}) {
    e->resize(size);
    ui_test::settle();
    QTest::qWait(200);
    ui_test::settle();
    EXPECT_EQ(e->size(), size);
    EXPECT_TRUE(e->grab().save(QDir(dir).filePath(file)));
  }
  // The Values tab with all ten rows (format-explorer.png).
  e->showValues();
  e->setValueText(QStringLiteral("6e-05"));
  e->resize(1240, 1000);
  ui_test::settle();
  QTest::qWait(200);
  ui_test::settle();
  EXPECT_TRUE(e->grab().save(QDir(dir).filePath(QStringLiteral("format-explorer.png"))));
}
