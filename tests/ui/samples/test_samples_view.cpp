// tests/ui/samples: the Samples tab shows each text run's latest continuation after an evaluation, one column
// per run in its recipe's colour with the step and the prompt marked; the compare table and the status line
// read a text run's bits per token and perplexity.
#include <gtest/gtest.h>

#include <QLabel>
#include <QStatusBar>
#include <QTableWidget>
#include <QTest>

#include <cmath>
#include <memory>

#include "charts/chart_style.h"
#include "compare/compare_view.h"
#include "panels/status_readouts.h"
#include "samples/samples_view.h"
#include "ui/ui_test_support.h"

namespace {

using ui_test::feed;
using ui_test::step;

engine::RunConfig textConfig(const std::string& recipe) {
  engine::RunConfig c = ui_test::config(recipe);
  c.model = "gpt";
  c.dataset = "jargon";
  return c;
}

engine::TextSample sample(int id, std::int64_t at, const std::string& text) {
  return {id, at, "The hacker", text};
}

engine::EvalMetrics eval(int id, std::int64_t at, double loss) {
  engine::EvalMetrics e;
  e.run_id = id;
  e.step = at;
  e.val_loss = loss;
  e.val_accuracy = 0.4;
  e.per_token = true;
  return e;
}

class SamplesViewTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ui_test::ensureApplication(); }
  void SetUp() override {
    m_store = std::make_unique<RunStore>();
    m_view = std::make_unique<SamplesView>(m_store.get());
    m_view->resize(1000, 500);
    m_view->show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(m_view.get()));
  }
  int addRun(const std::string& recipe) {
    const QString r = QString::fromStdString(recipe);
    return m_store->addRun(QStringLiteral("run %1").arg(m_store->count() + 1), r, chart_style::recipeColour(r),
                           textConfig(recipe));
  }
  std::unique_ptr<RunStore> m_store;
  std::unique_ptr<SamplesView> m_view;
};

TEST_F(SamplesViewTest, EachRunsLatestTextAfterAnEvaluation) {
  m_view->refresh();
  EXPECT_TRUE(m_view->findChild<QLabel*>(QStringLiteral("samplesEmpty"))->isVisible());
  const int fp32 = addRun("fp32"), fp16 = addRun("fp16");
  m_view->refresh();
  // A gpt on text has its column from the start.
  EXPECT_TRUE(m_view->shown().isEmpty());
  EXPECT_FALSE(m_view->findChild<QLabel*>(QStringLiteral("samplesEmpty"))->isVisible());
  ASSERT_EQ(m_view->findChildren<QLabel*>(QStringLiteral("sampleStep")).size(), 2);
  EXPECT_EQ(m_view->findChildren<QLabel*>(QStringLiteral("sampleStep"))[0]->text(), QStringLiteral("no evaluation yet"));

  feed(*m_store, {step(fp32, 50, 2.0), step(fp16, 50, 2.1), eval(fp32, 50, 1.9), sample(fp32, 50, " wrote the code"),
                  eval(fp16, 50, 2.4), sample(fp16, 50, " wr<o>te\ncode")});
  // The view redraws on its own within a frame of the store's signal.
  ASSERT_TRUE(ui_test::waitFor([&] { return m_view->shown().size() == 2; }, 2000));
  EXPECT_EQ(m_view->shown()[0].run, fp32);
  EXPECT_EQ(m_view->shown()[0].text, QStringLiteral(" wrote the code"));
  EXPECT_EQ(m_view->shown()[1].text, QStringLiteral(" wr<o>te\ncode"));
  EXPECT_EQ(m_view->prompt(), QStringLiteral("The hacker"));
  EXPECT_FALSE(m_view->findChild<QLabel*>(QStringLiteral("samplesEmpty"))->isVisible());

  // The next evaluation's text replaces the first.
  feed(*m_store, {eval(fp32, 100, 1.5), sample(fp32, 100, " hacked the kernel")});
  ASSERT_TRUE(ui_test::waitFor([&] { return m_view->shown()[0].step == 100; }, 2000));
  EXPECT_EQ(m_view->shown()[0].text, QStringLiteral(" hacked the kernel"));
  EXPECT_EQ(m_view->shown()[1].step, 50);

  // On screen: a column per run, its name in the recipe's colour, the step,
  // the prompt marked apart from the text (escaped, line breaks kept).
  const QList<QLabel*> titles = m_view->findChildren<QLabel*>(QStringLiteral("sampleTitle"));
  const QList<QLabel*> steps = m_view->findChildren<QLabel*>(QStringLiteral("sampleStep"));
  const QList<QLabel*> bodies = m_view->findChildren<QLabel*>(QStringLiteral("sampleText"));
  ASSERT_EQ(bodies.size(), 2);
  ASSERT_EQ(titles.size(), 2);
  EXPECT_TRUE(titles[0]->text().contains(chart_style::recipeStyle(QStringLiteral("fp32")).colour.name()));
  EXPECT_TRUE(titles[1]->text().contains(chart_style::recipeStyle(QStringLiteral("fp16")).colour.name()));
  EXPECT_TRUE(titles[1]->text().contains(QStringLiteral("run 2 · fp16"))) << titles[1]->text().toStdString();
  EXPECT_TRUE(steps[0]->text().startsWith(QStringLiteral("step 100"))) << steps[0]->text().toStdString();
  EXPECT_TRUE(bodies[0]->text().contains(QStringLiteral("font-style:italic\">The hacker</span> hacked the kernel")))
      << bodies[0]->text().toStdString();
  EXPECT_TRUE(bodies[1]->text().contains(QStringLiteral(" wr&lt;o&gt;te<br>code"))) << bodies[1]->text().toStdString();
  for (QLabel* b : bodies) EXPECT_GT(b->width(), 300) << "two columns share 1000 px";

  // A run that fails says why, under its last text; one that failed before
  // any text says it wrote nothing.
  const int fp8 = addRun("fp8");
  feed(*m_store, {engine::RunStatus{fp16, engine::RunState::Failed, "diverged at step 60", 100},
                  engine::RunStatus{fp8, engine::RunState::Failed,
                                    "diverged at step 3: 117002 gradient values were inf or NaN and no loss scaler "
                                    "skipped the step, so the weights are no longer finite",
                                    100}});
  ASSERT_TRUE(ui_test::waitFor(
      [&] { return m_view->findChildren<QLabel*>(QStringLiteral("sampleStep")).size() == 3; }, 2000));
  const QList<QLabel*> failedSteps = m_view->findChildren<QLabel*>(QStringLiteral("sampleStep"));
  EXPECT_EQ(failedSteps[1]->text(), QStringLiteral("step 50 of 100 · failed: diverged at step 60"));
  EXPECT_TRUE(failedSteps[2]->text().startsWith(QStringLiteral("failed: diverged at step 3: 117002")));
  EXPECT_EQ(m_view->findChildren<QLabel*>(QStringLiteral("sampleText"))[2]->text(),
            QStringLiteral("(it wrote nothing before it failed)"));
  EXPECT_EQ(m_view->shown().size(), 2);
  // Three equal columns, whatever each holds.
  ui_test::settle();
  const QList<QWidget*> boxes = m_view->findChildren<QWidget*>(QStringLiteral("sampleColumn"));
  ASSERT_EQ(boxes.size(), 3);
  for (QWidget* b : boxes) EXPECT_NEAR(b->width(), boxes[0]->width(), 2);
  EXPECT_LE(boxes[2]->geometry().right(), m_view->width());
  m_store->setVisible(fp8, false);

  // Unticked in the runs list: its column goes.
  m_store->setVisible(fp32, false);
  ASSERT_TRUE(ui_test::waitFor([&] { return m_view->shown().size() == 1; }, 2000));
  EXPECT_EQ(m_view->shown()[0].run, fp16);

  // Presentation: larger type.
  const double before = m_view->findChild<QLabel*>(QStringLiteral("sampleText"))->font().pointSizeF();
  m_view->setPresentation(true);
  EXPECT_GT(m_view->findChild<QLabel*>(QStringLiteral("sampleText"))->font().pointSizeF(), before);
}

TEST_F(SamplesViewTest, TheCompareTableAndStatusLineReadBitsPerToken) {
  const int group = m_store->newCompareGroup();
  const int fp32 = m_store->addRun(QStringLiteral("fp32"), QStringLiteral("fp32"), Qt::black, textConfig("fp32"), group);
  feed(*m_store, {step(fp32, 10, 2.0), eval(fp32, 10, std::log(8.0))});
  CompareView compare(m_store.get());
  compare.setGroup(group);
  compare.refresh();
  QTableWidget* t = compare.summaryTable();
  EXPECT_FALSE(t->isColumnHidden(CompareView::ValBitsPerToken));
  EXPECT_EQ(t->item(0, CompareView::ValBitsPerToken)->text(), QStringLiteral("3.000 (8.000)"));

  QStatusBar bar;
  StatusReadouts readouts(&bar);
  readouts.showRun(&m_store->run(fp32));
  auto* tokens = bar.findChild<QLabel*>(QStringLiteral("statusTokens"));
  ASSERT_NE(tokens, nullptr);
  EXPECT_FALSE(tokens->isHidden());
  EXPECT_EQ(tokens->text(), QStringLiteral("val 3.000 bits/token, perplexity 8.0"));

  // A run that is not text: no such column, no such read-out.
  RunStore images;
  const int g = images.newCompareGroup();
  const int mlp = images.addRun(QStringLiteral("fp32"), QStringLiteral("fp32"), Qt::black, ui_test::config("fp32"), g);
  engine::EvalMetrics e = eval(mlp, 10, 0.5);
  e.per_token = false;
  feed(images, {step(mlp, 10, 0.5), e});
  CompareView plain(&images);
  plain.setGroup(g);
  plain.refresh();
  EXPECT_TRUE(plain.summaryTable()->isColumnHidden(CompareView::ValBitsPerToken));
  readouts.showRun(&images.run(mlp));
  EXPECT_TRUE(tokens->isHidden());
}

}  // namespace
