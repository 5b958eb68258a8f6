// tests/ui/compare: the summary table tells the truth (the validation loss
// and its ratio to FP32's at the same evaluation, the training loss as a
// mean of the last 100 steps, every column labelled) and fits the tab; the
// small multiples show every loss, the first ones included, and mark where a
// run diverged. The difference
// mode and the recipes' styles: test_difference.cpp.
#include <gtest/gtest.h>

#include <QChart>
#include <QHeaderView>
#include <QScrollBar>
#include <QSet>
#include <QLineSeries>
#include <QTableWidget>
#include <QTest>
#include <QValueAxis>

#include <cmath>
#include <memory>

#include "charts/chart_style.h"
#include "charts/live_chart_view.h"
#include "charts/number_text.h"
#include "charts/step_markers.h"
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
                           chart_style::recipeColour(QString::fromStdString(recipe)), config(recipe), m_group);
  }
  // The records shown in the group's table, the view as wide as the
  // Compare tab at 1280x720.
  QTableWidget* tableAt1280(const std::vector<engine::Record>& records);
  std::unique_ptr<RunStore> m_store;
  std::unique_ptr<CompareView> m_view;
  int m_group = -1;
};

QTableWidget* CompareViewTest::tableAt1280(const std::vector<engine::Record>& records) {
  feed(*m_store, records);
  m_view->setGroup(m_group);
  m_view->resize(940, 640);
  m_view->refresh();
  ui_test::settle();
  return m_view->summaryTable();
}

engine::EvalMetrics eval(int id, std::int64_t at, double loss, double accuracy = -1.0) {
  engine::EvalMetrics e;
  e.run_id = id;
  e.step = at;
  e.val_loss = loss;
  e.val_accuracy = accuracy;
  return e;
}

// tiny-gradients: fp32's validation loss 2.5e-11, fp16's 3.5e-9 — 140x apart.
// Once both read "0.0000".
TEST_F(CompareViewTest, TinyLossesKeepTheirDigitsAndTheRatioToFp32) {
  const int fp32 = addRun("fp32");
  const int fp16 = addRun("fp16");
  feed(*m_store, {step(fp32, 1, 0.02), step(fp16, 1, 0.02), step(fp32, 2, 2.5e-11), step(fp16, 2, 3.5e-9),
                  eval(fp32, 2, 2.5e-11), eval(fp16, 2, 3.5e-9)});
  m_view->setGroup(m_group);
  m_view->refresh();
  QTableWidget* t = m_view->summaryTable();
  ASSERT_EQ(t->rowCount(), 2);
  EXPECT_EQ(t->item(0, CompareView::ValLoss)->text(), QStringLiteral("2.500e-11"));
  EXPECT_EQ(t->item(1, CompareView::ValLoss)->text(), QStringLiteral("3.500e-9"));
  EXPECT_EQ(t->item(1, CompareView::ValLossRatio)->text(), QStringLiteral("140x"));
  EXPECT_EQ(t->item(0, CompareView::ValLossRatio)->text(), QStringLiteral("1x (ref.)"));
  EXPECT_EQ(t->item(1, CompareView::FinalScale)->text(), QStringLiteral("—"));  // fp16: no loss scaling, not 2^0
}

// The numbers: the last training batch put fp16 at 1.31x FP32 while
// the validation losses were 0.3149 and 0.3140. The table reads the
// validation loss (and its ratio, 1.003x) and the training loss only as the
// mean of the last 100 steps.
TEST_F(CompareViewTest, TheRatioIsOfValidationLossesNotOfTheLastBatch) {
  const int fp32 = addRun("fp32");
  const int fp16 = addRun("fp16");
  std::vector<engine::Record> records;
  double sum32 = 0, sum16 = 0;
  for (int s = 1; s <= 300; ++s) {
    // Noisy batches: fp16's last one is 1.31x fp32's.
    const double a = 0.30 + 0.05 * std::sin(s * 0.7), b = s == 300 ? 1.31 * a : 0.30 + 0.05 * std::cos(s * 0.9);
    records.push_back(step(fp32, s, a));
    records.push_back(step(fp16, s, b));
    if (s > 200) sum32 += a, sum16 += b;
  }
  records.push_back(eval(fp32, 300, 0.3140, 0.8812));
  records.push_back(eval(fp16, 300, 0.3149, 0.8790));
  feed(*m_store, records);
  m_view->setGroup(m_group);
  m_view->refresh();
  QTableWidget* t = m_view->summaryTable();
  EXPECT_EQ(t->item(0, CompareView::ValLoss)->text(), QStringLiteral("0.3140"));
  EXPECT_EQ(t->item(1, CompareView::ValLoss)->text(), QStringLiteral("0.3149"));
  EXPECT_EQ(t->item(1, CompareView::ValLossRatio)->text(), QStringLiteral("1.003x"));
  EXPECT_EQ(t->item(0, CompareView::ValAccuracy)->text(), QStringLiteral("88.12"));
  EXPECT_EQ(t->item(1, CompareView::ValAccuracy)->text(), QStringLiteral("87.90"));
  EXPECT_EQ(t->item(1, CompareView::AccuracyDiff)->text(), QStringLiteral("-0.22"));
  EXPECT_FALSE(t->item(1, CompareView::AccuracyDiff)->data(Qt::UserRole).toBool());
  // The training loss: the mean of the last 100 steps, as the header says.
  ASSERT_EQ(CompareView::kTrainMeanSteps, 100);
  EXPECT_TRUE(t->horizontalHeaderItem(CompareView::TrainLossMean)->text().contains(QStringLiteral("100")));
  EXPECT_EQ(t->item(0, CompareView::TrainLossMean)->text(), number_text::significant(sum32 / 100, 3));
  EXPECT_EQ(t->item(1, CompareView::TrainLossMean)->text(), number_text::significant(sum16 / 100, 3));
  EXPECT_NEAR(CompareView::trainLossMean(m_store->run(fp16)).mean, sum16 / 100, 1e-12);
  // No column holds the last batch's loss (1.31 x fp32's).
  for (int c = 0; c < t->columnCount(); ++c)
    EXPECT_NE(t->item(1, c)->text(), QStringLiteral("1.31x")) << c;
}

// A run evaluated later than FP32 (FP32 stopped early) is compared at the
// last step both have, and says which.
TEST_F(CompareViewTest, TheRatioComparesEvaluationsOfTheSameStep) {
  const int fp32 = addRun("fp32");
  const int fp16 = addRun("fp16");
  feed(*m_store, {step(fp32, 1, 1.0), step(fp16, 1, 1.0), eval(fp32, 100, 0.50, 0.80), eval(fp16, 100, 0.60, 0.79),
                  eval(fp16, 200, 0.10, 0.95)});
  m_view->setGroup(m_group);
  m_view->refresh();
  QTableWidget* t = m_view->summaryTable();
  EXPECT_EQ(t->item(1, CompareView::ValLoss)->text(), QStringLiteral("0.1000"));  // its own last evaluation
  EXPECT_EQ(t->item(1, CompareView::ValLossRatio)->text(), QStringLiteral("1.20x"));  // 0.60 / 0.50 at step 100
  EXPECT_TRUE(t->item(1, CompareView::ValLossRatio)->toolTip().contains(QStringLiteral("step 100")));
  EXPECT_EQ(t->item(1, CompareView::AccuracyDiff)->text(), QStringLiteral("-1.00"));
  EXPECT_TRUE(t->item(1, CompareView::AccuracyDiff)->data(Qt::UserRole).toBool());  // > 0.5 points
}

// Every column says what it holds, in its header and its tooltip.
TEST_F(CompareViewTest, EveryColumnIsLabelledWithATooltip) {
  QTableWidget* t = m_view->summaryTable();
  QSet<QString> names;
  for (int c = 0; c < t->columnCount(); ++c) {
    QTableWidgetItem* h = t->horizontalHeaderItem(c);
    ASSERT_NE(h, nullptr) << c;
    EXPECT_FALSE(h->text().isEmpty()) << c;
    EXPECT_GT(h->toolTip().size(), 10) << h->text().toStdString();
    names.insert(h->text());
  }
  EXPECT_EQ(names.size(), t->columnCount());
  EXPECT_TRUE(t->horizontalHeaderItem(CompareView::ValLoss)->toolTip().contains(QStringLiteral("validation set")));
}

// The compare tab at 1280x720 is about 940 px wide: every column shows
// whole with four runs; narrower, the table scrolls sideways instead of
// asking for a wider window, and still shows every row. (Once, the table
// was as wide as its contents and its last column was cut at 1280x720.)
TEST_F(CompareViewTest, TheTableFitsTheTabAt1280AndScrollsWhenNarrower) {
  for (const char* r : {"fp32", "fp16", "mixed-fp16", "fp8"}) addRun(r);
  std::vector<engine::Record> records;
  for (int id = 0; id < 4; ++id) {
    for (int s = 1; s <= 200; ++s) records.push_back(step(id, s, 0.4, id >= 2 ? 65536.0 : 1.0));
    records.push_back(eval(id, 200, 0.3149, 0.8544));
  }
  QTableWidget* t = tableAt1280(records);
  EXPECT_LE(t->horizontalHeader()->length(), t->viewport()->width());
  EXPECT_FALSE(t->horizontalScrollBar()->isVisible());
  // The table asks for no width of its own (the small charts set the tab's least width).
  EXPECT_LT(t->minimumSizeHint().width(), 300);
  m_view->resize(640, 640);
  ui_test::settle();
  EXPECT_EQ(m_view->width(), 640);
  EXPECT_TRUE(t->horizontalScrollBar()->isVisible());
  int rows = 0;
  for (int r = 0; r < t->rowCount(); ++r) rows += t->rowHeight(r);
  EXPECT_GE(t->viewport()->height(), rows);
}
// A text comparison shows one more column, the validation bits per token
// (and perplexity): at 1280x720 (the tab ~940 px wide) every column still
// shows whole, with the widest figures a gpt comparison gives, and no
// sideways scroll bar.
TEST_F(CompareViewTest, ATextComparisonsTableFitsTheTabAt1280) {
  const std::vector<std::string> recipes = {"fp32", "fp16", "mixed-fp16", "mixed-bf16"};
  for (const std::string& recipe : recipes) {
    engine::RunConfig c = config(recipe);
    c.model = "gpt";
    c.dataset = "jargon";
    m_store->addRun(QStringLiteral("run %1").arg(m_store->count() + 1), QString::fromStdString(recipe),
                    chart_style::recipeColour(QString::fromStdString(recipe)), c, m_group);
  }
  std::vector<engine::Record> records;
  for (int id = 0; id < 4; ++id) {
    for (int s = 1; s <= 1000; ++s) {
      engine::StepMetrics m = step(id, s, 1.8512 + 0.001 * id, id == 2 ? 32768.0 : 1.0);
      m.overflow = m.skipped = id == 2 && s % 300 == 0;
      m.mem.activations = 93'000'000;  // a baby-shape gpt's tens of megabytes
      m.wall_ms = 25.0;
      m.samples_per_second = 1280.0;
      records.push_back(m);
    }
    engine::EvalMetrics e = eval(id, 1000, 1.8433 + 0.0071 * id, 0.4512 - 0.0031 * id);
    e.per_token = true;
    records.push_back(e);
  }
  QTableWidget* t = tableAt1280(records);
  ASSERT_FALSE(t->isColumnHidden(CompareView::ValBitsPerToken));
  EXPECT_FALSE(t->item(0, CompareView::ValBitsPerToken)->text().isEmpty());
  int widths = 0;
  QStringList columns;
  for (int c = 0; c < t->columnCount(); ++c)
    if (!t->isColumnHidden(c)) {
      widths += t->columnWidth(c);
      columns << QStringLiteral("%1=%2").arg(t->horizontalHeaderItem(c)->text().replace(QLatin1Char('\n'), QLatin1Char(' '))).arg(t->columnWidth(c));
    }
  EXPECT_LE(t->horizontalHeader()->length(), t->viewport()->width()) << columns.join(QStringLiteral(", ")).toStdString();
  EXPECT_FALSE(t->horizontalScrollBar()->isVisible());
  // Every cell's text whole: no column narrower than what it holds.
  for (int c = 0; c < t->columnCount(); ++c) {
    if (t->isColumnHidden(c)) continue;
    for (int r = 0; r < t->rowCount(); ++r)
      EXPECT_GE(t->columnWidth(c), t->fontMetrics().horizontalAdvance(t->item(r, c)->text()))
          << t->horizontalHeaderItem(c)->text().toStdString() << " row " << r;
  }
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

// A run that diverged at step 2 leaves its small chart all but empty: the
// chart marks the step and says why, as the Live tab's charts mark events.
TEST_F(CompareViewTest, ADivergedRunsSmallChartMarksTheStep) {
  const int a = addRun("fp32");
  const int b = addRun("fp16");
  std::vector<engine::Record> records;
  for (int s = 1; s <= 300; ++s) records.push_back(step(a, s, 4.0 - s / 100.0));
  records.push_back(step(b, 1, 4.0));
  records.push_back(step(b, 2, 3.9));  // finite, but its gradients were not
  engine::RunStatus failed;
  failed.run_id = b;
  failed.state = engine::RunState::Failed;
  failed.message = "diverged at step 2: 12 gradient values were inf or NaN and no loss scaler skipped the step";
  records.push_back(failed);
  feed(*m_store, records);
  m_view->setGroup(m_group);
  m_view->refresh();
  ui_test::settle();
  ASSERT_NE(m_view->smallMarkers(a), nullptr);
  EXPECT_TRUE(m_view->smallMarkers(a)->markers().isEmpty());
  StepMarkers* marks = m_view->smallMarkers(b);
  ASSERT_NE(marks, nullptr);
  ASSERT_EQ(marks->markers().size(), 1);
  EXPECT_EQ(marks->markers().front().step, 2.0);
  EXPECT_EQ(marks->markers().front().text, QStringLiteral("diverged at step 2"));
  EXPECT_TRUE(marks->shown(0));
  EXPECT_FALSE(std::isnan(marks->lineX(0)));

  // A NaN loss first: the mark goes to the first non-finite loss.
  RunData nan;
  nan.state = engine::RunState::Failed;
  nan.message = QStringLiteral("diverged at step 14: the loss has been inf or NaN for 10 steps");
  for (int s = 1; s <= 14; ++s) nan.steps.push_back(step(0, s, s < 5 ? 2.0 : std::nan("")));
  EXPECT_EQ(CompareView::divergenceStep(nan), 5);
  nan.message = QStringLiteral("cannot allocate");  // failed, but not diverged
  EXPECT_EQ(CompareView::divergenceStep(nan), -1);
}

}  // namespace
