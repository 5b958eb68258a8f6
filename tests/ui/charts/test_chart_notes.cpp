// tests/ui/charts: a note drawn on a chart stays inside the plot area, clear
// of the axes and of the markers: "no loss scaling" above the overflow
// markers of a small loss-scale chart (it once covered them), "No accuracy"
// inside a narrow accuracy chart (it once ran over the y axis).
#include <gtest/gtest.h>

#include <QChart>
#include <QChartView>
#include <QGraphicsScene>
#include <QGraphicsSimpleTextItem>
#include <QGraphicsTextItem>
#include <QAbstractTextDocumentLayout>
#include <QLabel>
#include <QTest>
#include <QTextBlock>
#include <QTextDocument>
#include <QTextLayout>
#include <QXYSeries>

#include <memory>

#include "charts/chart_area.h"
#include "charts/chart_style.h"
#include "ui/ui_test_support.h"

namespace {

using ui_test::config;
using ui_test::feed;
using ui_test::step;

// The visible note of `chart` whose text holds `words` (a rich or a simple
// text item), or null.
QGraphicsItem* noteOf(QChart* chart, const QString& words) {
  for (QGraphicsItem* item : chart->scene()->items()) {
    if (!item->isVisible()) continue;
    if (auto* text = dynamic_cast<QGraphicsTextItem*>(item); text && text->toPlainText().contains(words)) return item;
    if (auto* simple = dynamic_cast<QGraphicsSimpleTextItem*>(item); simple && simple->text().contains(words))
      return item;
  }
  return nullptr;
}

class ChartNotesTest : public ::testing::TestWithParam<QSize> {
 protected:
  static void SetUpTestSuite() { ui_test::ensureApplication(); }
  void SetUp() override {
    m_store = std::make_unique<RunStore>();
    m_area = std::make_unique<ChartArea>(m_store.get());
    m_area->resize(GetParam());
    m_area->show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(m_area.get()));
  }
  void draw() {
    for (int i = 0; i < 3; ++i) {
      ui_test::settle();
      m_area->refresh();
    }
    ui_test::settle();
  }
  int addRun(const std::string& recipe) {
    return m_store->addRun(QStringLiteral("run %1").arg(m_store->count() + 1), QString::fromStdString(recipe),
                           chart_style::recipeColour(QString::fromStdString(recipe)), config(recipe));
  }
  std::unique_ptr<RunStore> m_store;
  std::unique_ptr<ChartArea> m_area;
};

TEST_P(ChartNotesTest, NoLossScalingSitsAboveTheOverflowMarkers) {
  const int fp16 = addRun("fp16");
  const int mixed = addRun("mixed-fp16");
  // Overflows in the first steps at the highest scale: markers in the
  // top-left corner, where the note goes; then a long fall to 2^2, so a
  // unit of the axis is a few pixels only.
  std::vector<engine::Record> records;
  double scale = 65536.0 * 256;  // 2^24
  for (int s = 1; s <= 400; ++s) {
    engine::StepMetrics m = step(mixed, s, 1.0, scale);
    m.overflow = m.skipped = s <= 3 || (s >= 100 && s < 120);
    if (m.overflow) scale /= 2;
    records.push_back(m);
    records.push_back(step(fp16, s, 1.0));
  }
  feed(*m_store, records);
  draw();
  QChart* chart = m_area->chart(ChartArea::LossScale);
  QGraphicsItem* note = noteOf(chart, QStringLiteral("no loss scaling"));
  ASSERT_NE(note, nullptr);
  const QRectF box = note->sceneBoundingRect();
  const QRectF plot = chart->plotArea();
  EXPECT_TRUE(plot.contains(box)) << "note " << box.x() << "," << box.y() << " " << box.width() << "x" << box.height()
                                  << " outside the plot " << plot.x() << "," << plot.y() << " " << plot.width() << "x"
                                  << plot.height();
  auto* overflow = m_area->runSeries(ChartArea::LossScale, mixed, ChartArea::Markers);
  ASSERT_NE(overflow, nullptr);
  ASSERT_GT(overflow->count(), 0);
  for (const QPointF& p : overflow->points()) {
    const QPointF at = chart->mapToPosition(p, overflow);
    const QRectF marker(at - QPointF(5, 5), QSizeF(10, 10));
    EXPECT_FALSE(box.intersects(marker)) << "the note covers the overflow marker at step " << p.x();
  }
}

TEST_P(ChartNotesTest, NoAccuracyStaysInsideThePlot) {
  const int a = addRun("fp32");
  std::vector<engine::Record> records;
  for (int s = 1; s <= 100; ++s) records.push_back(step(a, s, 1.0 / s));  // a regression: no accuracy
  feed(*m_store, records);
  draw();
  QChart* chart = m_area->chart(ChartArea::Accuracy);
  QGraphicsItem* note = noteOf(chart, QStringLiteral("No accuracy"));
  ASSERT_NE(note, nullptr);
  EXPECT_TRUE(chart->plotArea().contains(note->sceneBoundingRect()))
      << "note left edge " << note->sceneBoundingRect().left() << ", plot's " << chart->plotArea().left();
}

// After 15 quick start/stop cycles the shared legend wrapped mid-name
// ("mixed-" at a line's end, "fp16" on the next): every name stays on one line.
TEST_P(ChartNotesTest, TheSharedLegendNeverBreaksAName) {
  const char* recipes[] = {"fp32", "mixed-fp16", "mixed-bf16", "fp16", "fp8"};
  std::vector<engine::Record> records;
  for (int k = 0; k < 15; ++k) {
    const int id = addRun(recipes[k % 5]);
    records.push_back(step(id, 1, 1.0));
  }
  feed(*m_store, records);
  draw();
  QLabel* legend = m_area->sharedLegend();
  ASSERT_TRUE(legend->wordWrap());
  QTextDocument doc;
  doc.setDefaultFont(legend->font());
  doc.setHtml(legend->text());
  doc.setTextWidth(legend->contentsRect().width());
  doc.documentLayout();  // lays the text out
  QStringList lines;
  for (QTextBlock b = doc.begin(); b.isValid(); b = b.next())
    for (int i = 0; i < b.layout()->lineCount(); ++i) {
      const QTextLine line = b.layout()->lineAt(i);
      lines << b.text().mid(line.textStart(), line.textLength()).replace(QChar(0x00A0), QLatin1Char(' ')).replace(QChar(0x2011), QLatin1Char('-'));
    }
  EXPECT_GT(lines.size(), 1) << "the legend should need more than one line here";
  for (int id = 0; id < m_store->count(); ++id) {
    const QString name = m_area->runLabel(m_store->run(id));
    bool whole = false;
    for (const QString& l : lines) whole = whole || l.contains(name);
    EXPECT_TRUE(whole) << name.toStdString() << " is broken across lines: " << lines.join(" | ").toStdString();
  }
}

// The area at 1280x720's chart room and at a cramped one.
INSTANTIATE_TEST_SUITE_P(Sizes, ChartNotesTest, ::testing::Values(QSize(940, 520), QSize(620, 420)));

}  // namespace
