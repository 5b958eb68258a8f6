// tests/ui/charts: every number a chart shows tells the truth and the charts work on any screen: gradient line, loss log axis,
// loss-scale chart without unscaled runs, whole names in the legend, CPU
// emulation apart from the memory total, zoom, enlarge, export size and names.
#include <gtest/gtest.h>

#include <QAreaSeries>
#include <QChart>
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QImage>
#include <QLabel>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QSet>
#include <QTemporaryDir>
#include <QTest>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <memory>

#include "charts/chart_area.h"
#include "charts/chart_export.h"
#include "charts/chart_registry.h"
#include "charts/chart_style.h"
#include "charts/gradient_panel.h"
#include "charts/live_chart_view.h"
#include "charts/number_text.h"
#include "export/exporter.h"
#include "ui/ui_test_support.h"

namespace {

using ui_test::config;
using ui_test::feed;
using ui_test::step;

class ChartsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ui_test::ensureApplication(); }
  void SetUp() override {
    m_store = std::make_unique<RunStore>();
    m_area = std::make_unique<ChartArea>(m_store.get());
    m_area->resize(1200, 700);
    m_area->show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(m_area.get()));
  }
  void TearDown() override {
    m_area.reset();
    m_store.reset();
  }
  int addRun(const std::string& recipe, const QString& name) {
    return m_store->addRun(name, QString::fromStdString(recipe), chart_style::runColour(m_store->count()),
                           config(recipe));
  }
  void draw() {
    ui_test::settle();
    m_area->refresh();
    ui_test::settle();
  }
  std::unique_ptr<RunStore> m_store;
  std::unique_ptr<ChartArea> m_area;
};

engine::GradStats grad(int run, const std::string& layer, double underflow) {
  engine::GradStats g;
  g.run_id = run;
  g.step = 100;
  g.layer = layer;
  g.format = "fp16";
  g.log2_lo = -40;
  g.histogram.assign(40, 0);
  g.histogram[10] = 900;  // 2^-30: below FP16's smallest subnormal
  g.histogram[30] = 100;
  g.total = 1000;
  g.underflow_unscaled = underflow;
  return g;
}

TEST(NumberText, EveryValueStaysANumber) {
  EXPECT_EQ(number_text::significant(3.5e-9), QStringLiteral("3.50e-9"));
  EXPECT_EQ(number_text::significant(2.5e-11), QStringLiteral("2.50e-11"));
  EXPECT_EQ(number_text::significant(0.123456), QStringLiteral("0.123"));
  EXPECT_EQ(number_text::significant(2.3456), QStringLiteral("2.35"));
  EXPECT_EQ(number_text::significant(140.2), QStringLiteral("140"));
  EXPECT_EQ(number_text::ratio(140.0), QStringLiteral("140x"));
  EXPECT_EQ(number_text::percent(3.1e-5), QStringLiteral("0.0031%"));
  EXPECT_EQ(number_text::percent(0.994), QStringLiteral("99.4%"));
  EXPECT_FALSE(number_text::percent(1e-9).contains(QLatin1Char('<')));
  EXPECT_TRUE(number_text::percent(1e-9).startsWith(QStringLiteral("1.0e-7"))) << number_text::percent(1e-9).toStdString();
}

// Today: "<0.01%" in a rich-text label swallowed the words after it, the
// first layer was shown, and no error against FP32 was given.
TEST_F(ChartsTest, GradientLineIsPlainTextWithEveryFractionAndTheMostUnderflowingLayer) {
  const int id = addRun("fp16", QStringLiteral("run 1"));
  engine::GradStats fc1 = grad(id, "fc1", 0.1);
  engine::GradStats fc3 = grad(id, "fc3", 0.994);
  fc3.subnormal_unscaled = 3.1e-5;
  fc3.overflow_unscaled = 0.0;
  fc3.zeros = 1000;  // FP16's own gradient: all flushed to zero
  fc3.shadow = true; // the histogram is the exact (FP32 shadow) gradient's
  fc3.output_error = 0.021;
  fc3.grad_error = 0.99;
  feed(*m_store, {step(id, 100, 0.5), fc1, fc3});
  draw();
  GradientPanel* panel = m_area->gradientPanel();
  EXPECT_EQ(panel->layer(), QStringLiteral("fc3"));
  QLabel* line = panel->fractionsLabel();
  EXPECT_EQ(line->textFormat(), Qt::PlainText);
  const QString text = line->text();
  EXPECT_TRUE(text.contains(QStringLiteral("99.4%"))) << text.toStdString();
  EXPECT_TRUE(text.contains(QStringLiteral("0.0031%"))) << text.toStdString();
  EXPECT_TRUE(text.contains(QStringLiteral("overflow 0%"))) << text.toStdString();
  EXPECT_TRUE(text.contains(QStringLiteral("output 0.021"))) << text.toStdString();
  EXPECT_TRUE(text.contains(QStringLiteral("grad 0.99"))) << text.toStdString();
  EXPECT_FALSE(text.contains(QLatin1Char('<')));
  // Drawn although the layer's own gradient is all zeros.
  ASSERT_NE(panel->histogram(id), nullptr);
  EXPECT_GT(panel->histogram(id)->count(), 0);
  // The user's choice wins over the default.
  panel->setLayer(QStringLiteral("fc1"));
  EXPECT_EQ(panel->layer(), QStringLiteral("fc1"));
}

TEST_F(ChartsTest, LossAxisIsLogarithmicWhenLossesSpanMoreThanThreeDecades) {
  const int id = addRun("fp32", QStringLiteral("run 1"));
  std::vector<engine::Record> records;
  for (int s = 1; s <= 100; ++s) records.push_back(step(id, s, std::pow(10.0, -s / 10.0)));  // 0.8 .. 1e-10
  feed(*m_store, records);
  draw();
  EXPECT_TRUE(m_area->lossLogScale());
  auto* log = qobject_cast<QLogValueAxis*>(m_area->lossAxis());
  ASSERT_NE(log, nullptr);
  EXPECT_LE(log->min(), 1e-10);
  EXPECT_TRUE(m_area->logScaleCheck()->isChecked());
  // The user turns it off: it stays off.
  m_area->setLossLogScale(false);
  draw();
  EXPECT_NE(qobject_cast<QValueAxis*>(m_area->lossAxis()), nullptr);
  EXPECT_FALSE(m_area->lossLogScale());
}

TEST_F(ChartsTest, LossAxisStaysLinearForOrdinaryLosses) {
  const int id = addRun("fp32", QStringLiteral("run 1"));
  feed(*m_store, {step(id, 1, 2.3), step(id, 2, 1.1), step(id, 3, 0.4)});
  draw();
  EXPECT_FALSE(m_area->lossLogScale());
  EXPECT_NE(m_area->yAxis(ChartArea::Loss), nullptr);
}

// Today: fp32 drew a flat line at 2^0 and its tooltip said 2^0.
TEST_F(ChartsTest, RunsWithoutLossScalingAreAbsentFromTheLossScaleChart) {
  const int fp32 = addRun("fp32", QStringLiteral("run 1"));
  const int mixed = addRun("mixed-fp16", QStringLiteral("run 2"));
  std::vector<engine::Record> records;
  for (int s = 1; s <= 20; ++s) {
    records.push_back(step(fp32, s, 1.0));
    records.push_back(step(mixed, s, 1.0, 65536.0));
  }
  feed(*m_store, records);
  draw();
  QXYSeries* unscaled = m_area->runSeries(ChartArea::LossScale, fp32);
  QXYSeries* scaled = m_area->runSeries(ChartArea::LossScale, mixed);
  ASSERT_NE(unscaled, nullptr);
  ASSERT_NE(scaled, nullptr);
  EXPECT_FALSE(unscaled->isVisible());
  EXPECT_TRUE(scaled->isVisible());
  EXPECT_GE(m_area->yAxis(ChartArea::LossScale)->min(), 10.0);  // not stretched down to 2^0
  EXPECT_TRUE(m_area->lossScaleNote().contains(QStringLiteral("no loss scaling"))) << m_area->lossScaleNote().toStdString();
  EXPECT_TRUE(m_area->lossScaleNote().contains(QStringLiteral("fp32")));
  auto* view = qobject_cast<LiveChartView*>(m_area->view(ChartArea::LossScale));
  const QString tip = view->showValueAt(QPointF(10, 16));
  EXPECT_TRUE(tip.contains(QStringLiteral("run 1: — (no loss scaling)"))) << tip.toStdString();
  EXPECT_FALSE(tip.contains(QStringLiteral("2^0"))) << tip.toStdString();
  EXPECT_TRUE(tip.contains(QStringLiteral("2^16"))) << tip.toStdString();
}

// A run on a GPU: the memory chart names the device's own figure
// (cudaMemGetInfo) beside the recipe's bands; on the CPU there is none.
TEST_F(ChartsTest, MemoryChartNamesTheGpusOwnMemoryOnlyForADeviceRun) {
  const int cpu = addRun("fp32", QStringLiteral("run 1"));
  std::vector<engine::Record> records;
  for (int s = 1; s <= 5; ++s) records.push_back(step(cpu, s, 1.0));
  feed(*m_store, records);
  draw();
  EXPECT_TRUE(m_area->deviceMemoryNote().isEmpty()) << m_area->deviceMemoryNote().toStdString();
  const int gpu = addRun("mixed-bf16", QStringLiteral("run 2"));
  records.clear();
  for (int s = 1; s <= 5; ++s) {
    engine::StepMetrics m = step(gpu, s, 1.0);
    m.device_used = 1536ll << 20;  // 1536 MiB
    m.device_total = 80ll << 30;   // 80 GiB
    records.push_back(m);
  }
  feed(*m_store, records);
  draw();
  EXPECT_EQ(m_area->deviceMemoryNote(),
            QStringLiteral("GPU memory in use: 1536 MiB of 80.0 GiB (cudaMemGetInfo: the whole device)"));
}

// The backend's own allocation (device_allocated) is a dotted line of its
// own beside the recipe's stack, at the figure the steps carry; a CPU run
// (which reports none) has no such line and no legend entry for it.
TEST_F(ChartsTest, MemoryChartDrawsTheDeviceAllocationAsItsOwnLine) {
  auto deviceLegendShown = [this] {
    for (QLegendMarker* mk : m_area->chart(ChartArea::Memory)->legend()->markers())
      if (mk->isVisible() && mk->label() == QStringLiteral("device allocation")) return true;
    return false;
  };
  const int cpu = addRun("fp32", QStringLiteral("run 1"));
  std::vector<engine::Record> records;
  for (int s = 1; s <= 20; ++s) records.push_back(step(cpu, s, 1.0));
  feed(*m_store, records);
  draw();
  QXYSeries* none = m_area->runSeries(ChartArea::Memory, cpu, ChartArea::Secondary);
  ASSERT_NE(none, nullptr);
  EXPECT_FALSE(none->isVisible());
  EXPECT_EQ(none->count(), 0);
  EXPECT_FALSE(deviceLegendShown());

  const int gpu = addRun("mixed-bf16", QStringLiteral("run 2"));
  records.clear();
  for (int s = 1; s <= 20; ++s) {
    engine::StepMetrics m = step(gpu, s, 1.0);
    m.device_allocated = (s < 10 ? 96ll : 160ll) << 20;  // 96 MiB, then 160 MiB
    records.push_back(m);
  }
  feed(*m_store, records);
  draw();
  QXYSeries* device = m_area->runSeries(ChartArea::Memory, gpu, ChartArea::Secondary);
  ASSERT_NE(device, nullptr);
  EXPECT_TRUE(device->isVisible());
  ASSERT_GT(device->count(), 0);
  double lo = 1e300, hi = 0;
  for (const QPointF& p : device->points()) {
    lo = std::min(lo, p.y());
    hi = std::max(hi, p.y());
  }
  EXPECT_DOUBLE_EQ(lo, 96.0);
  EXPECT_DOUBLE_EQ(hi, 160.0);
  EXPECT_EQ(device->points().back().x(), 20.0);
  EXPECT_NE(device, m_area->runSeries(ChartArea::Memory, gpu));  // not the total's line
  EXPECT_TRUE(deviceLegendShown());
  // The axis reaches the device's figure even where it tops the recipe's.
  EXPECT_GE(m_area->chart(ChartArea::Memory)->axes(Qt::Vertical).front()->property("max").toDouble(), 160.0);
  auto* view = qobject_cast<LiveChartView*>(m_area->view(ChartArea::Memory));
  const QString tip = view->showValueAt(QPointF(15, 1));
  EXPECT_TRUE(tip.contains(QStringLiteral("device allocation 160"))) << tip.toStdString();
}

// Today: "mixed-f…" and "mixed-…" with five runs; no legend for the dashed totals.
TEST_F(ChartsTest, LegendNamesEveryRunInFull) {
  const QStringList recipes = {"fp32", "fp16", "mixed-fp16", "mixed-bf16", "fp8"};
  std::vector<engine::Record> records;
  for (const QString& r : recipes) {
    const int id = addRun(r.toStdString(), QStringLiteral("run %1").arg(m_store->count() + 1));
    for (int s = 1; s <= 5; ++s) records.push_back(step(id, s, 1.0));
  }
  feed(*m_store, records);
  m_area->resize(1280, 600);
  draw();
  const QString legend = m_area->sharedLegend()->text();
  // Hyphens are non-breaking (&#8209;): a name never wraps at its hyphen.
  for (const QString& r : recipes)
    EXPECT_TRUE(legend.contains(QStringLiteral(">&nbsp;") + QString(r).replace(QLatin1Char('-'), QStringLiteral("&#8209;"))))
        << r.toStdString();
  EXPECT_TRUE(m_area->sharedLegend()->isVisible());
  // The shared legend fits: every entry on screen (wrapped, never elided).
  EXPECT_GE(m_area->sharedLegend()->height(), m_area->sharedLegend()->heightForWidth(m_area->sharedLegend()->width()));
  bool totals = false;
  for (QLegendMarker* m : m_area->chart(ChartArea::Memory)->legend()->markers())
    totals = totals || (m->isVisible() && m->label().contains(QStringLiteral("totals")));
  EXPECT_TRUE(totals);
}

// Today: emulation buffers were in the total (FP16 "cost more" than FP32).
TEST_F(ChartsTest, CpuEmulationIsShownApartFromTheTotal) {
  const int id = addRun("fp16", QStringLiteral("run 1"));
  std::vector<engine::Record> records;
  for (int s = 1; s <= 10; ++s) {
    engine::StepMetrics m = step(id, s, 1.0);
    m.mem.emulation = 3 << 20;
    records.push_back(m);
  }
  feed(*m_store, records);
  draw();
  QAreaSeries* emulation = m_area->emulationArea();
  ASSERT_NE(emulation, nullptr);
  ASSERT_GT(emulation->upperSeries()->count(), 0);
  const double total = 2.0;  // MiB: weights + grads
  EXPECT_NEAR(emulation->upperSeries()->at(0).y(), total + 3.0, 1e-9);
  EXPECT_NEAR(m_area->memoryArea(5)->upperSeries()->at(0).y(), total, 1e-9);  // the stack stops at the total
  EXPECT_TRUE(emulation->name().contains(QStringLiteral("not in total")));
  auto* view = qobject_cast<LiveChartView*>(m_area->view(ChartArea::Memory));
  const QString tip = view->showValueAt(QPointF(5, 1));
  EXPECT_TRUE(tip.contains(QStringLiteral("CPU emulation"))) << tip.toStdString();
  EXPECT_TRUE(tip.contains(QStringLiteral("total 2"))) << tip.toStdString();
}

TEST_F(ChartsTest, ZoomHoldsUntilResetAndDoubleClickEnlarges) {
  const int id = addRun("fp32", QStringLiteral("run 1"));
  std::vector<engine::Record> records;
  for (int s = 1; s <= 200; ++s) records.push_back(step(id, s, 1.0 / s));
  feed(*m_store, records);
  draw();
  auto* view = qobject_cast<LiveChartView*>(m_area->view(ChartArea::Accuracy));
  QValueAxis* x = m_area->xAxis(ChartArea::Accuracy);
  const double before = x->max();
  view->zoomAt(view->chart()->plotArea().center(), 0.5);
  EXPECT_TRUE(view->isZoomed());
  const double zoomed = x->max() - x->min();
  EXPECT_LT(zoomed, before * 0.7);
  feed(*m_store, {step(id, 201, 0.1)});
  draw();
  EXPECT_DOUBLE_EQ(x->max() - x->min(), zoomed);  // a new frame does not undo the zoom
  view->resetZoom();
  draw();
  EXPECT_FALSE(view->isZoomed());
  EXPECT_EQ(x->min(), 0.0);

  QTest::mouseDClick(view->viewport(), Qt::LeftButton, {}, view->viewport()->rect().center());
  ui_test::settle();
  EXPECT_EQ(m_area->enlarged(), view);
  EXPECT_FALSE(m_area->view(ChartArea::Loss)->isVisible());
  EXPECT_TRUE(view->isVisible());
  QTest::mouseDClick(view->viewport(), Qt::LeftButton, {}, view->viewport()->rect().center());
  ui_test::settle();
  EXPECT_EQ(m_area->enlarged(), nullptr);
  EXPECT_TRUE(m_area->view(ChartArea::Loss)->isVisible());
}

// Today: 354x306 PNGs named after the title only.
TEST_F(ChartsTest, PngExportIsLargeEnoughForSlidesAndNamedForRunAndLayer) {
  const int id = addRun("fp16", QStringLiteral("run 3"));
  feed(*m_store, {step(id, 1, 1.0), step(id, 2, 0.5), grad(id, "fc3", 0.9)});
  draw();
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  ExportRequest request;
  request.dir = dir.path();
  request.csv = false;
  request.svg = false;
  for (int m = 0; m < m_area->chartCount(); ++m) request.charts << m_area->view(static_cast<ChartArea::Metric>(m));
  const QStringList files = exportRuns(*m_store, request);
  QStringList names;
  for (const QString& f : files) names << QFileInfo(f).fileName();
  for (const char* expected : {"loss.png", "loss-scale.png", "memory-run-3.png", "accuracy.png", "gradients-fc3.png"})
    EXPECT_TRUE(names.contains(QString::fromLatin1(expected))) << expected << " in " << names.join(", ").toStdString();
  const QImage image(QDir(dir.path()).filePath(QStringLiteral("loss.png")));
  ASSERT_FALSE(image.isNull());
  const int onScreen = m_area->view(ChartArea::Loss)->width();
  EXPECT_TRUE(image.width() >= 1920 || image.width() >= 2 * onScreen) << image.width();
  EXPECT_GE(image.width(), 2 * onScreen);
}

}  // namespace

namespace {

// The area makes exactly the registered charts, in PL_LIVE_CHARTS order, each
// under the key a lesson's `watch` names it by, in a cell of its own.
TEST_F(ChartsTest, TheAreaMakesTheRegisteredChartsInOrder) {
  ASSERT_EQ(m_area->chartCount(), static_cast<int>(liveCharts().size()));
  const QStringList keys{"loss", "loss_scale", "memory", "accuracy", "gradients"};
  ASSERT_EQ(m_area->chartCount(), keys.size());
  for (int m = 0; m < keys.size(); ++m) {
    EXPECT_EQ(m_area->chartIndex(keys[m]), m) << keys[m].toStdString();
    EXPECT_TRUE(m_area->view(m)->isVisible()) << m;
  }
  EXPECT_EQ(m_area->chartIndex(QStringLiteral("no-such-chart")), -1);
  EXPECT_EQ(m_area->chartIndex(QStringLiteral("loss")), ChartArea::Loss);
  EXPECT_EQ(m_area->chartIndex(QStringLiteral("gradients")), ChartArea::Gradients);
  // No two charts share a cell of the usual grid.
  QSet<QPair<int, int>> cells;
  for (int m = 0; m < m_area->chartCount(); ++m) {
    const QRect r = m_area->view(m)->geometry();
    EXPECT_GT(r.width(), 0) << m;
    cells.insert({m_area->view(m)->mapTo(m_area.get(), QPoint(0, 0)).x(),
                  m_area->view(m)->mapTo(m_area.get(), QPoint(0, 0)).y()});
  }
  EXPECT_EQ(cells.size(), m_area->chartCount());
}

}  // namespace
