// tests/ui/compare: the summary table keeps the result (3 significant
// digits, scientific below 1e-3, the loss as a multiple of FP32's) and the
// small multiples show every loss, the first ones included.
#include <gtest/gtest.h>

#include <QChart>
#include <QLineSeries>
#include <QTableWidget>
#include <QTest>
#include <QValueAxis>

#include <memory>

#include "charts/chart_style.h"
#include "charts/live_chart_view.h"
#include "compare/compare_view.h"
#include "ui/ui_test_support.h"

namespace {

using ui_test::config;
using ui_test::feed;
using ui_test::step;

class CompareViewTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ui_test::ensureApplication(); }
  void SetUp() override {
    m_store = std::make_unique<RunStore>();
    m_view = std::make_unique<CompareView>(m_store.get());
    m_view->resize(1200, 700);
    m_view->show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(m_view.get()));
    m_group = m_store->newCompareGroup();
  }
  int addRun(const std::string& recipe) {
    return m_store->addRun(QStringLiteral("run %1").arg(m_store->count() + 1), QString::fromStdString(recipe),
                           chart_style::runColour(m_store->count()), config(recipe), m_group);
  }
  std::unique_ptr<RunStore> m_store;
  std::unique_ptr<CompareView> m_view;
  int m_group = -1;
};

// tiny-gradients: fp32 ends at 2.5e-11, fp16 at 3.5e-9 — 140x apart. Today
// both read "0.0000" and the difference "+0.0000".
TEST_F(CompareViewTest, TinyLossesKeepTheirDigitsAndTheRatioToFp32) {
  const int fp32 = addRun("fp32");
  const int fp16 = addRun("fp16");
  feed(*m_store, {step(fp32, 1, 0.02), step(fp16, 1, 0.02), step(fp32, 2, 2.5e-11), step(fp16, 2, 3.5e-9)});
  m_view->setGroup(m_group);
  m_view->refresh();
  QTableWidget* t = m_view->summaryTable();
  ASSERT_EQ(t->rowCount(), 2);
  EXPECT_EQ(t->item(0, CompareView::FinalLoss)->text(), QStringLiteral("2.50e-11"));
  EXPECT_EQ(t->item(1, CompareView::FinalLoss)->text(), QStringLiteral("3.50e-9"));
  EXPECT_EQ(t->item(1, CompareView::LossRatio)->text(), QStringLiteral("140x"));
  EXPECT_EQ(t->item(1, CompareView::LossDiff)->text(), QStringLiteral("+3.48e-9"));
  EXPECT_EQ(t->item(0, CompareView::LossDiff)->text(), QStringLiteral("reference"));
  EXPECT_EQ(t->horizontalHeaderItem(CompareView::LossRatio)->text(), QStringLiteral("loss ÷ FP32"));
  EXPECT_EQ(t->item(1, CompareView::FinalScale)->text(), QStringLiteral("—"));  // fp16: no loss scaling, not 2^0
}

TEST_F(CompareViewTest, OrdinaryLossesShowThreeSignificantDigits) {
  const int fp32 = addRun("fp32");
  feed(*m_store, {step(fp32, 1, 2.302585), step(fp32, 2, 0.4567)});
  m_view->setGroup(m_group);
  m_view->refresh();
  EXPECT_EQ(m_view->summaryTable()->item(0, CompareView::FinalLoss)->text(), QStringLiteral("0.457"));
}

// Today the axis followed the 98th percentile: the first losses were cut off.
TEST_F(CompareViewTest, SmallChartsShowTheFirstLosses) {
  const int a = addRun("fp32");
  const int b = addRun("fp16");
  std::vector<engine::Record> records;
  for (int s = 1; s <= 400; ++s) {
    const double loss = s <= 5 ? 9.0 : 0.3;
    records.push_back(step(a, s, loss));
    records.push_back(step(b, s, loss));
  }
  feed(*m_store, records);
  m_view->setGroup(m_group);
  m_view->refresh();
  ASSERT_EQ(m_view->smallCharts().size(), 2);
  for (LiveChartView* v : m_view->smallCharts()) {
    auto* y = qobject_cast<QValueAxis*>(v->chart()->axes(Qt::Vertical).first());
    ASSERT_NE(y, nullptr);
    EXPECT_GE(y->max(), 9.0);
  }
}

}  // namespace
