// tests/ui/compare: the "difference to FP32" mode — its numbers against the
// runs' records (centred moving mean, FP32's noise band, validation
// differences), the note without an FP32 run, the drawing order — and each
// recipe's fixed, distinct colour and dash pattern, the recipes'
// descriptions, a legend that never breaks a name, and run N as run_id N.
#include <gtest/gtest.h>

#include <QAreaSeries>
#include <QChart>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QImage>
#include <QLegend>
#include <QTemporaryDir>
#include <QLineSeries>
#include <QScatterSeries>
#include <QSet>
#include <QTest>
#include <QValueAxis>

#include <cmath>
#include <memory>

#include "amp/recipe.h"
#include "charts/chart_style.h"
#include "charts/live_chart_view.h"
#include "compare/compare_dialog.h"
#include "compare/compare_view.h"
#include "compare/difference.h"
#include "compare/difference_chart.h"
#include "compare/recipe_legend.h"
#include "export/exporter.h"
#include "ui/ui_test_support.h"

namespace {

using ui_test::config;
using ui_test::feed;
using ui_test::step;

class DifferenceTest : public ::testing::Test {
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
  int addRun(const QString& recipe) {
    return m_store->addRun(QStringLiteral("run %1").arg(m_store->count() + 1), recipe,
                           chart_style::recipeColour(recipe), config(recipe.toStdString()), m_group);
  }
  // Steps 1..n of `id`: loss f(s), batch accuracy g(s) (fraction).
  void feedRun(int id, int n, const std::function<double(int)>& loss, const std::function<double(int)>& acc) {
    std::vector<engine::Record> records;
    for (int s = 1; s <= n; ++s) {
      engine::StepMetrics m = step(id, s, loss(s));
      m.train_accuracy = acc(s);
      records.push_back(m);
    }
    feed(*m_store, records);
  }
  std::unique_ptr<RunStore> m_store;
  std::unique_ptr<CompareView> m_view;
  int m_group = -1;
};

// Hand-computed: run - fp32 = 0.01 * (s % 3) at step s; the centred mean
// over s-h..s+h with h = 5 (11 steps).
TEST_F(DifferenceTest, TheSmoothedDifferenceIsTheCentredMeanOfRunMinusFp32) {
  const int fp32 = addRun(QStringLiteral("fp32"));
  const int fp16 = addRun(QStringLiteral("fp16"));
  feedRun(fp32, 60, [](int s) { return 1.0 / s; }, [](int) { return 0.5; });
  feedRun(fp16, 60, [](int s) { return 1.0 / s + 0.01 * (s % 3); }, [](int s) { return s <= 30 ? 0.5 : 0.52; });
  const int h = difference::halfWindow(60);
  ASSERT_EQ(h, 5);
  const QList<QPointF> d = difference::smoothedDifference(m_store->run(fp16), m_store->run(fp32),
                                                          difference::Quantity::Loss, h);
  ASSERT_EQ(d.size(), 60);
  for (const QPointF& p : d) {
    const int s = static_cast<int>(p.x());
    double sum = 0;
    int n = 0;
    for (int k = std::max(1, s - h); k <= std::min(60, s + h); ++k, ++n) sum += 0.01 * (k % 3);
    EXPECT_NEAR(p.y(), sum / n, 1e-12) << "step " << s;
  }
  // Accuracy in points: +2 from step 31 on, smoothed across the change.
  const QList<QPointF> a = difference::smoothedDifference(m_store->run(fp16), m_store->run(fp32),
                                                          difference::Quantity::Accuracy, h);
  ASSERT_EQ(a.size(), 60);
  EXPECT_NEAR(a[9].y(), 0.0, 1e-9);     // step 10: all of its window before the change
  EXPECT_NEAR(a[49].y(), 2.0, 1e-9);    // step 50
  EXPECT_NEAR(a[29].y(), 2.0 * 5 / 11, 1e-9);  // step 30: 5 of its 11 steps after it
}

// FP32's noise band: the root mean square of its batch values around its
// own moving mean. A loss alternating +-0.1 about a constant has a band of
// 0.1 (to the moving mean's own error); a flat one has none.
TEST_F(DifferenceTest, TheNoiseBandIsFp32sBatchToBatchSpread) {
  const int fp32 = addRun(QStringLiteral("fp32"));
  feedRun(fp32, 200, [](int s) { return 1.0 + (s % 2 ? 0.1 : -0.1); }, [](int) { return 0.5; });
  const difference::Band band = difference::noiseBand(m_store->run(fp32), difference::Quantity::Loss, 5);
  ASSERT_EQ(band.upper.size(), 200);
  ASSERT_EQ(band.lower.size(), 200);
  for (int i = 10; i < 190; ++i) {
    // An 11-step mean of an alternating series is off by 0.1/11 (six of
    // one sign): the residuals are 0.1 +- 0.009.
    EXPECT_NEAR(band.upper[i].y(), 0.1, 0.01) << i;
    EXPECT_DOUBLE_EQ(band.lower[i].y(), -band.upper[i].y());
  }
  const difference::Band flat = difference::noiseBand(m_store->run(fp32), difference::Quantity::Accuracy, 5);
  for (const QPointF& p : flat.upper) EXPECT_NEAR(p.y(), 0.0, 1e-12);
}

TEST_F(DifferenceTest, TheChartsDrawEveryRunMinusFp32OverItsBandWithFp32OnTop) {
  const int fp16 = addRun(QStringLiteral("fp16"));  // added before fp32: the order is the recipes'
  const int fp32 = addRun(QStringLiteral("fp32"));
  const int mixed = addRun(QStringLiteral("mixed-fp16"));
  feedRun(fp16, 300, [](int s) { return 2.0 / s + 0.05; }, [](int) { return 0.8; });
  feedRun(fp32, 300, [](int s) { return 2.0 / s + (s % 2 ? 0.02 : -0.02); }, [](int) { return 0.8; });
  feedRun(mixed, 300, [](int s) { return 2.0 / s + 0.001; }, [](int) { return 0.79; });
  feed(*m_store, {engine::EvalMetrics{fp32, 300, 0, 0.40, 0.85}, engine::EvalMetrics{fp16, 300, 0, 0.43, 0.84},
                  engine::EvalMetrics{mixed, 300, 0, 0.401, 0.85}});
  m_view->setGroup(m_group);
  m_view->setMode(CompareView::Mode::Difference);
  ui_test::settle();
  EXPECT_EQ(m_view->modeCombo()->currentIndex(), static_cast<int>(CompareView::Mode::Difference));
  DifferenceChart* loss = m_view->lossDifference();
  EXPECT_TRUE(loss->view()->isVisible());
  EXPECT_FALSE(m_view->smallCharts().front()->isVisible());
  EXPECT_EQ(loss->referenceRun(), fp32);
  EXPECT_TRUE(loss->note().isEmpty()) << loss->note().toStdString();
  // Each point is run - fp32, smoothed: fp16 is +0.05 (the +-0.02 of fp32's
  // batches averages out in the middle of the run).
  const QList<QPointF> pts = loss->differenceSeries(fp16)->points();
  ASSERT_FALSE(pts.isEmpty());
  for (const QPointF& p : pts)
    if (p.x() > 20 && p.x() < 280) EXPECT_NEAR(p.y(), 0.05, 0.003) << p.x();
  for (const QPointF& p : loss->differenceSeries(fp32)->points()) EXPECT_EQ(p.y(), 0.0);
  // The validation difference at step 300: 0.43 - 0.40.
  const QList<QPointF> val = loss->validationSeries(fp16)->points();
  ASSERT_EQ(val.size(), 1);
  EXPECT_NEAR(val[0].y(), 0.03, 1e-12);
  // The band: fp32's +-0.02.
  const QList<QPointF> band = loss->noiseBand()->upperSeries()->points();
  ASSERT_FALSE(band.isEmpty());
  EXPECT_NEAR(band[band.size() / 2].y(), 0.02, 0.002);
  // The y axis holds the largest difference, symmetric about 0.
  auto* y = qobject_cast<QValueAxis*>(loss->chart()->axes(Qt::Vertical).first());
  EXPECT_GE(y->max(), 0.05);
  EXPECT_EQ(y->min(), -y->max());
  // Accuracy in points: mixed is 1 point below.
  for (const QPointF& p : m_view->accuracyDifference()->differenceSeries(mixed)->points())
    EXPECT_NEAR(p.y(), -1.0, 1e-9);
  // FP32 is drawn last (on top); the others in the recipes' order.
  const QList<QAbstractSeries*> series = loss->chart()->series();
  const qsizetype i16 = series.indexOf(loss->differenceSeries(fp16));
  const qsizetype iMixed = series.indexOf(loss->differenceSeries(mixed));
  const qsizetype i32 = series.indexOf(loss->differenceSeries(fp32));
  EXPECT_LT(i16, iMixed);
  EXPECT_LT(iMixed, i32);
  // The title says how it is smoothed.
  EXPECT_TRUE(loss->chart()->title().contains(QStringLiteral("centred mean of 11 steps")))
      << loss->chart()->title().toStdString();
  // The export draws the charts the mode shows; back to the small multiples.
  EXPECT_EQ(m_view->exportCharts().size(), 2);
  m_view->setMode(CompareView::Mode::EachRun);
  ui_test::settle();
  EXPECT_FALSE(loss->view()->isVisible());
  EXPECT_EQ(m_view->exportCharts().size(), 3);
}

// Without an FP32 run the chart says so, rather than draw nothing.
TEST_F(DifferenceTest, WithoutAnFp32RunTheChartSaysSo) {
  const int fp16 = addRun(QStringLiteral("fp16"));
  const int bf16 = addRun(QStringLiteral("mixed-bf16"));
  feedRun(fp16, 50, [](int) { return 1.0; }, [](int) { return 0.5; });
  feedRun(bf16, 50, [](int) { return 1.1; }, [](int) { return 0.5; });
  m_view->setGroup(m_group);
  m_view->setMode(CompareView::Mode::Difference);
  ui_test::settle();
  for (DifferenceChart* d : {m_view->lossDifference(), m_view->accuracyDifference()}) {
    EXPECT_EQ(d->referenceRun(), -1);
    EXPECT_TRUE(d->note().contains(QStringLiteral("No FP32 run"))) << d->note().toStdString();
    EXPECT_EQ(d->differenceSeries(fp16)->count(), 0);
  }
}

// A regression has no accuracy: the accuracy chart says so.
TEST_F(DifferenceTest, ARegressionSaysItHasNoAccuracy) {
  const int fp32 = addRun(QStringLiteral("fp32"));
  const int fp16 = addRun(QStringLiteral("fp16"));
  feedRun(fp32, 50, [](int) { return 1.0; }, [](int) { return -1.0; });
  feedRun(fp16, 50, [](int) { return 1.1; }, [](int) { return -1.0; });
  m_view->setGroup(m_group);
  m_view->setMode(CompareView::Mode::Difference);
  ui_test::settle();
  EXPECT_TRUE(m_view->lossDifference()->note().isEmpty());
  EXPECT_TRUE(m_view->accuracyDifference()->note().contains(QStringLiteral("No accuracy")));
}

// One colour and one dash pattern per recipe, the same on every call and in
// every comparison, and no two recipes alike in either.
TEST(RecipeStyle, EachRecipeHasOneFixedDistinctColourAndDashPattern) {
  QSet<QRgb> colours;
  QSet<QString> dashes;
  const std::vector<std::string>& names = engine::recipe_names();
  for (const std::string& n : names) {
    const QString r = QString::fromStdString(n);
    const chart_style::RecipeStyle a = chart_style::recipeStyle(r);
    const chart_style::RecipeStyle b = chart_style::recipeStyle(r);
    EXPECT_EQ(a.colour, b.colour) << n;
    EXPECT_EQ(a.dashes, b.dashes) << n;
    EXPECT_EQ(chart_style::recipeColour(r), a.colour) << n;
    colours.insert(a.colour.rgb());
    QStringList d;
    for (qreal x : a.dashes) d << QString::number(x);
    dashes.insert(d.join(QLatin1Char(',')));
    EXPECT_NE(a.colour, QColor(Qt::white)) << n;
  }
  EXPECT_EQ(colours.size(), static_cast<qsizetype>(names.size()));
  EXPECT_EQ(dashes.size(), static_cast<qsizetype>(names.size()));
  // fp32 is black and solid, and drawn after every other recipe.
  EXPECT_EQ(chart_style::recipeStyle(QStringLiteral("fp32")).colour, QColor(Qt::black));
  EXPECT_TRUE(chart_style::recipeStyle(QStringLiteral("fp32")).dashes.isEmpty());
  for (const std::string& n : names)
    if (n != "fp32")
      EXPECT_LT(chart_style::recipeStyle(QString::fromStdString(n)).order,
                chart_style::recipeStyle(QStringLiteral("fp32")).order);
  // A second run of a recipe: a lighter shade of the same colour, not another recipe's.
  const QColor second = chart_style::recipeColour(QStringLiteral("fp16"), 1);
  EXPECT_NE(second, chart_style::recipeColour(QStringLiteral("fp16")));
  EXPECT_NEAR(second.hueF(), chart_style::recipeColour(QStringLiteral("fp16")).hueF(), 0.02);
  // The pen carries the pattern.
  EXPECT_EQ(chart_style::recipePen(QStringLiteral("fp16"), Qt::red, 2).dashPattern(),
            chart_style::recipeStyle(QStringLiteral("fp16")).dashes);
}

// The compare dialog listed "mxfp8 —" with nothing after the dash.
TEST(RecipeDescriptions, EveryRecipeTheDialogListsHasADescription) {
  for (const std::string& n : engine::recipe_names())
    EXPECT_GT(CompareDialog::describeRecipe(QString::fromStdString(n)).size(), 10) << n;
  EXPECT_TRUE(CompareDialog::describeRecipe(QStringLiteral("mxfp4")).contains(QStringLiteral("MXFP4")));
}

// After 15 runs a legend row is full: the next name moves whole to the next
// row, never broken or elided.
TEST(Legend, ANameIsNeverBrokenOrCut) {
  ui_test::ensureApplication();
  RecipeLegend legend;
  QVector<RecipeLegend::Entry> entries;
  for (int k = 0; k < 15; ++k) {
    RecipeLegend::Entry e;
    e.label = QStringLiteral("run %1 · mixed-fp16").arg(k + 1);
    e.pen = chart_style::recipePen(QStringLiteral("mixed-fp16"), chart_style::recipeColour(QStringLiteral("mixed-fp16"), k), 2);
    entries << e;
  }
  legend.setEntries(entries);
  const QFontMetrics fm(legend.font());
  for (int width : {300, 480, 900}) {
    const QVector<QRect> rects = legend.entryRects(width);
    ASSERT_EQ(rects.size(), entries.size());
    for (int i = 0; i < rects.size(); ++i) {
      EXPECT_LE(rects[i].right(), width) << "entry " << i << " at width " << width;
      EXPECT_GE(rects[i].width(), fm.horizontalAdvance(entries[i].label)) << i;
      if (i > 0) EXPECT_TRUE(rects[i].top() > rects[i - 1].top() || rects[i].left() > rects[i - 1].right());
    }
    EXPECT_EQ(legend.heightForWidth(width), rects.back().bottom() + 1);
  }
}

// The window's "run 3" is run_id 3 in an exported file.
TEST(RunNumbers, AnExportNumbersRunsAsTheWindowDoes) {
  ui_test::ensureApplication();
  RunStore store;
  for (int k = 1; k <= 3; ++k)
    store.addRun(QStringLiteral("run %1").arg(k), QStringLiteral("fp32"), Qt::black, config("fp32"));
  feed(store, {step(2, 1, 0.5)});
  const engine::RunExport x = store.run(2).toExport();
  EXPECT_EQ(x.name, "run 3");
  EXPECT_EQ(x.run_id, 3);
  EXPECT_EQ(x.summary.run_id, 3);
  ASSERT_EQ(x.history.steps.size(), 1u);
  EXPECT_EQ(x.history.steps[0].run_id, 3);
}

}  // namespace

namespace {

// The difference charts export as they show, with their legend (hidden on
// screen, where one RecipeLegend names the runs for both): the PNG holds
// every run's colour, and the chart's legend names each recipe.
TEST_F(DifferenceTest, TheDifferenceChartsExportWithTheirLegend) {
  const int fp32 = addRun(QStringLiteral("fp32"));
  const int fp16 = addRun(QStringLiteral("fp16"));
  const int fp8 = addRun(QStringLiteral("fp8"));
  feedRun(fp32, 300, [](int s) { return 2.0 / s + (s % 2 ? 0.02 : -0.02); }, [](int) { return 0.8; });
  feedRun(fp16, 300, [](int s) { return 2.0 / s + 0.05; }, [](int) { return 0.81; });
  feedRun(fp8, 300, [](int s) { return 2.0 / s - 0.04; }, [](int) { return 0.78; });
  m_view->setGroup(m_group);
  m_view->setMode(CompareView::Mode::Difference);
  ui_test::settle();
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  ExportRequest request;
  request.dir = dir.path();
  request.csv = false;
  request.charts = m_view->exportCharts();
  const QStringList files = exportRuns(*m_store, request);
  EXPECT_TRUE(files.contains(QDir(dir.path()).filePath(QStringLiteral("compare-loss-minus-fp32.png"))))
      << files.join(QLatin1Char(' ')).toStdString();
  const QImage png(QDir(dir.path()).filePath(QStringLiteral("compare-loss-minus-fp32.png")));
  ASSERT_FALSE(png.isNull());
  if (const QString keep = qEnvironmentVariable("PL_EXPORT_KEEP"); !keep.isEmpty())
    png.save(keep + QStringLiteral("/compare-loss-minus-fp32.png"));
  for (int id : {fp16, fp8}) {
    const QColor c = m_store->run(id).colour;
    int n = 0;
    for (int y = 0; y < png.height(); y += 1)
      for (int x = 0; x < png.width(); x += 1) {
        const QColor p = png.pixelColor(x, y);
        n += std::abs(p.red() - c.red()) < 30 && std::abs(p.green() - c.green()) < 30 && std::abs(p.blue() - c.blue()) < 30;
      }
    EXPECT_GT(n, 200) << m_store->run(id).recipe.toStdString();
  }
  // The SVG names the recipes (its legend's text), and on screen the chart
  // keeps its legend hidden again.
  QFile svg(QDir(dir.path()).filePath(QStringLiteral("compare-loss-minus-fp32.svg")));
  ASSERT_TRUE(svg.open(QIODevice::ReadOnly));
  const QString text = QString::fromUtf8(svg.readAll());
  for (const char* r : {"fp16", "fp8", "FP32 noise"}) EXPECT_TRUE(text.contains(QLatin1String(r))) << r;
  EXPECT_FALSE(m_view->lossDifference()->chart()->legend()->isVisible());
  // The on-screen legend: the band, each run in drawing order (fp32 last), the dots.
  const QVector<RecipeLegend::Entry> entries = m_view->differenceLegend()->entries();
  ASSERT_EQ(entries.size(), 5);
  EXPECT_EQ(entries[0].kind, RecipeLegend::Entry::Band);
  EXPECT_EQ(entries[1].label, QStringLiteral("fp16"));
  EXPECT_EQ(entries[1].pen.dashPattern(), chart_style::recipeStyle(QStringLiteral("fp16")).dashes);
  EXPECT_TRUE(entries[3].label.startsWith(QStringLiteral("fp32")));
  EXPECT_EQ(entries[4].kind, RecipeLegend::Entry::Dot);
}

}  // namespace

namespace {

// Eight recipes in difference mode at the 1280x720 tab's width: the legend
// takes the rows it needs at that width (not one row per entry) and the tab
// asks for no more height than a 720-pixel screen leaves it (it made the
// window 783 pixels tall).
TEST_F(DifferenceTest, EightRecipesFitTheTabOfA720PixelScreen) {
  for (const std::string& n : engine::recipe_names())
    if (n != "custom") feedRun(addRun(QString::fromStdString(n)), 100, [](int s) { return 1.0 / s; }, [](int) { return 0.5; });
  m_view->setGroup(m_group);
  m_view->setMode(CompareView::Mode::Difference);
  // About what the tab gets in a 1280x720 window.
  m_view->resize(940, 470);
  ui_test::settle();
  RecipeLegend* legend = m_view->differenceLegend();
  EXPECT_LE(legend->minimumSizeHint().height(), legend->heightForWidth(legend->width()));
  EXPECT_LE(legend->heightForWidth(legend->width()), 3 * legend->fontMetrics().height() + 12);
  EXPECT_LE(m_view->minimumSizeHint().height(), m_view->height());
}

}  // namespace
