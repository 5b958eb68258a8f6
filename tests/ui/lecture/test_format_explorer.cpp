// ui/lecture/format_explorer: the explorer shows what engine::inspect (the
// code behind `precision-lab-cli formats`) says, for values of every
// boundary class; every FP8 code round-trips through bit flips; typing,
// dragging and the arrow keys move the value.
#include <gtest/gtest.h>

#include <QLabel>
#include <QLineEdit>
#include <QTest>

#include <cfloat>
#include <cmath>
#include <limits>

#include "charts/number_text.h"
#include "lecture/bit_cells.h"
#include "lecture/format_explorer.h"
#include "lecture/number_line.h"
#include "numeric/inspect.h"
#include "../ui_test_support.h"

namespace {

using engine::Format;

QString q(const std::string& s) { return QString::fromStdString(s); }

// The row of format f shows inspection `i`: bits, hex, class and exact value.
void expectRow(const FormatExplorer& e, Format f, const engine::Inspection& i, const QString& what) {
  SCOPED_TRACE(qPrintable(QStringLiteral("%1 in %2").arg(what, QString::fromLatin1(engine::format_name(f)))));
  EXPECT_EQ(e.inspection(f).bits, i.bits);
  EXPECT_EQ(e.bitsText(f), q(engine::binary_fields(f, i.field_bits)));
  EXPECT_EQ(e.hexText(f), q(engine::hex_bits(f, i.bits)));
  EXPECT_EQ(e.classText(f), q(engine::class_text(i)));
  EXPECT_EQ(e.valueText(f), number_text::exactDecimal(i.value));
}

}  // namespace

TEST(FormatExplorer, ShowsTheSameBitsAndClassAsTheCli) {
  ui_test::ensureApplication();
  FormatExplorer e;
  const float inf = std::numeric_limits<float>::infinity();
  // Every boundary class: zeros, normals, the largest finite values and
  // just past them (overflow, NaN for E4M3), subnormals, values that flush
  // to zero, infinities and NaN, in every format.
  const float values[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.1f, 1.0f / 3.0f, 65504.0f, 65519.0f, 65520.0f, 1e5f,
                          5.9604645e-8f, 2.9802322e-8f, 2.0e-8f, 6.1035156e-5f, 6.0e-5f, 448.0f, 464.0f, 480.0f,
                          -500.0f, 57344.0f, 61440.0f, 0.001953125f, 0.0009765625f, 0.0009f, 240.0f, 1.5258789e-5f,
                          std::ldexp(1.0f, -17), std::ldexp(1.0f, -18), 1e-40f, std::ldexp(1.0f, -149),
                          std::ldexp(1.0f, -126), FLT_MAX, 3.0e38f, inf, -inf,
                          std::numeric_limits<float>::quiet_NaN(), 1.0f + std::ldexp(1.0f, -11), 3.3895314e38f};
  for (bool saturate : {false, true}) {
    e.setSaturate(saturate);
    for (float x : values) {
      e.setValue(x);
      for (Format f : engine::kAllFormats)
        expectRow(e, f, engine::inspect(f, x, saturate),
                  QStringLiteral("%1%2").arg(q(engine::shortest_decimal(x)), saturate ? " saturating" : ""));
    }
  }
  // The classes the explorer must name all occur.
  e.setSaturate(false);
  e.setValue(65520.0f);
  EXPECT_EQ(e.classText(Format::FP16), QStringLiteral("inf (overflow)"));
  e.setValue(480.0f);
  EXPECT_EQ(e.classText(Format::E4M3), QStringLiteral("nan (overflow)"));
  e.setValue(2.0e-8f);
  EXPECT_EQ(e.classText(Format::FP16), QStringLiteral("zero (underflow)"));
  e.setValue(5.9604645e-8f);
  EXPECT_EQ(e.classText(Format::FP16), QStringLiteral("subnormal"));
  EXPECT_EQ(e.valueText(Format::FP16), QStringLiteral("0.000000059604644775390625"));
  e.setSaturate(true);
  e.setValue(1000.0f);
  EXPECT_EQ(e.classText(Format::E4M3), QStringLiteral("normal (saturated)"));
  EXPECT_EQ(e.valueText(Format::E4M3), QStringLiteral("448"));
}

TEST(FormatExplorer, EveryFp8CodeRoundTripsThroughABitFlip) {
  ui_test::ensureApplication();
  FormatExplorer e;
  for (Format f : {Format::E5M2, Format::E4M3}) {
    for (std::uint32_t code = 0; code < 256; ++code) {
      e.setBits(f, code);
      const engine::Inspection i = engine::inspect_bits(f, code);
      expectRow(e, f, i, QStringLiteral("code 0x%1").arg(code, 2, 16, QLatin1Char('0')));
      for (int bit = 0; bit < 8; ++bit) {
        e.flipBit(f, bit);
        ASSERT_EQ(e.inspection(f).bits, code ^ (1u << bit)) << engine::format_name(f) << " code " << code;
        EXPECT_EQ(e.valueText(f), number_text::exactDecimal(engine::inspect_bits(f, code ^ (1u << bit)).value));
        e.flipBit(f, bit);
        ASSERT_EQ(e.inspection(f).bits, code) << engine::format_name(f) << " code " << code << " bit " << bit;
      }
      expectRow(e, f, i, QStringLiteral("code 0x%1 after the flips").arg(code, 2, 16, QLatin1Char('0')));
    }
  }
  // OCP E4M3: no infinity; S.1111.111 is NaN and S.1111.110 is 448.
  e.setBits(Format::E4M3, 0x7F);
  EXPECT_EQ(e.classText(Format::E4M3), QStringLiteral("nan"));
  e.setBits(Format::E4M3, 0x7E);
  EXPECT_EQ(e.valueText(Format::E4M3), QStringLiteral("448"));
  e.setBits(Format::E5M2, 0x7C);
  EXPECT_EQ(e.classText(Format::E5M2), QStringLiteral("inf"));
}

TEST(FormatExplorer, AClickOnABitFlipsIt) {
  ui_test::ensureApplication();
  FormatExplorer e;
  e.resize(1200, 640);
  e.show();
  ui_test::settle();
  for (Format f : engine::kAllFormats) {
    e.setValue(1.0f);
    BitCells* cells = e.bitCells(f);
    const std::uint32_t before = e.inspection(f).bits;
    const int shift = f == Format::TF32 ? 13 : 0;
    for (int bit : {0, 1, cells->bitCount() - 2, cells->bitCount() - 1}) {
      const std::uint32_t was = e.inspection(f).bits;
      QTest::mouseClick(cells, Qt::LeftButton, {}, cells->cellRect(bit).center());
      EXPECT_EQ(e.inspection(f).bits, was ^ (1u << (bit + shift))) << engine::format_name(f) << " bit " << bit;
      QTest::mouseClick(cells, Qt::LeftButton, {}, cells->cellRect(bit).center());
      EXPECT_EQ(e.inspection(f).bits, was);
    }
    EXPECT_EQ(e.inspection(f).bits, before);
  }
  // A flipped bit shows its value in every other format, rounded there.
  e.setValue(1.0f);
  e.flipBit(Format::FP16, 14);  // 0x3C00 (1.0) with the exponent all ones: 0x7C00, inf
  EXPECT_EQ(e.hexText(Format::FP16), QStringLiteral("0x7C00"));
  EXPECT_EQ(e.classText(Format::FP16), QStringLiteral("inf"));
  EXPECT_EQ(e.classText(Format::FP32), QStringLiteral("inf"));
}

TEST(FormatExplorer, TypeDragAndStepOneUlp) {
  ui_test::ensureApplication();
  FormatExplorer e;
  e.resize(1200, 640);
  e.show();
  ui_test::settle();
  // Typed, with 2^k spelled out.
  QLineEdit* edit = e.valueEdit();
  edit->setFocus();
  edit->selectAll();
  QTest::keyClicks(edit, QStringLiteral("2^-24"));
  EXPECT_EQ(e.hexText(Format::FP16), QStringLiteral("0x0001"));
  EXPECT_EQ(e.classText(Format::FP16), QStringLiteral("subnormal"));
  EXPECT_EQ(e.classText(Format::BF16), QStringLiteral("normal"));
  EXPECT_FALSE(e.setValueText(QStringLiteral("one")));
  EXPECT_EQ(e.hexText(Format::FP16), QStringLiteral("0x0001"));

  // One ULP of the selected format with the arrow keys.
  e.selectFormat(Format::FP16);
  e.setValue(1.0f);
  QTest::keyClick(edit, Qt::Key_Up);
  EXPECT_EQ(e.valueText(Format::FP16), QStringLiteral("1.0009765625"));
  EXPECT_EQ(e.hexText(Format::FP16), QStringLiteral("0x3C01"));
  QTest::keyClick(edit, Qt::Key_Down);
  QTest::keyClick(edit, Qt::Key_Down);
  EXPECT_EQ(e.valueText(Format::FP16), QStringLiteral("0.99951171875"));
  e.selectFormat(Format::E4M3);
  e.setBits(Format::E4M3, 0x7E);  // 448, the largest: no next value
  EXPECT_FALSE(e.stepUlp(+1));
  EXPECT_EQ(e.hexText(Format::E4M3), QStringLiteral("0x7E"));
  EXPECT_TRUE(e.stepUlp(-1));
  EXPECT_EQ(e.valueText(Format::E4M3), QStringLiteral("416"));
  EXPECT_EQ(e.gapText(Format::E4M3).contains(QStringLiteral("448")), true);
  e.setBits(Format::E4M3, 0x00);
  EXPECT_TRUE(e.stepUlp(+1));
  EXPECT_EQ(e.valueText(Format::E4M3), QStringLiteral("0.001953125"));  // 2^-9, the smallest subnormal

  // Dragging on FP16's line to 2^-20: a subnormal there, normal in BF16.
  NumberLine* line = e.numberLine(Format::FP16);
  const int x = static_cast<int>(std::lround(line->xOf(std::ldexp(1.0, -20))));
  QTest::mousePress(line, Qt::LeftButton, {}, QPoint(x, 5));
  QTest::mouseRelease(line, Qt::LeftButton, {}, QPoint(x, 5));
  EXPECT_NEAR(std::log2(std::fabs(e.value())), -20.0, 0.5);
  EXPECT_EQ(e.classText(Format::FP16), QStringLiteral("subnormal"));
  EXPECT_EQ(e.classText(Format::BF16), QStringLiteral("normal"));
  // Errors and gaps are numbers from inspect.
  e.setValue(0.1f);
  const engine::Inspection i = engine::inspect(Format::FP16, 0.1f);
  EXPECT_TRUE(e.errorText(Format::FP16).contains(number_text::significant(i.abs_error, 3)));
  EXPECT_TRUE(e.gapText(Format::FP16).contains(number_text::significant(i.gap_up, 3)));
}

// "1e400" was reported as "not a number": it is a number, beyond a double.
TEST(FormatExplorer, ANumberNoDoubleHoldsIsOutOfRangeNotNotANumber) {
  ui_test::ensureApplication();
  FormatExplorer e;
  e.show();
  auto* edit = e.findChild<QLineEdit*>(QStringLiteral("explorerValue"));
  ASSERT_NE(edit, nullptr);
  auto* note = e.findChild<QLabel*>(QStringLiteral("explorerParseNote"));
  ASSERT_NE(note, nullptr);
  auto noteText = [note] { return note->text(); };
  // As typed: the whole text at once (keystrokes would pass through 1e40,
  // which is a number, shown as inf).
  auto type = [edit](const QString& text) {
    edit->setText(text);
    emit edit->textEdited(text);
  };
  type(QStringLiteral("1e400"));
  EXPECT_TRUE(noteText().contains(QLatin1String("out of range"))) << noteText().toStdString();
  EXPECT_TRUE(noteText().contains(QLatin1String("1.8e308"))) << noteText().toStdString();
  type(QStringLiteral("-1e-400"));
  EXPECT_TRUE(noteText().contains(QLatin1String("out of range"))) << noteText().toStdString();
  type(QStringLiteral("abc"));
  EXPECT_EQ(noteText(), QStringLiteral("not a number"));
  type(QStringLiteral("1e30"));
  EXPECT_EQ(noteText(), QString());
  EXPECT_EQ(FormatExplorer::unparsedNote(QStringLiteral("12x")), QStringLiteral("not a number"));
}
