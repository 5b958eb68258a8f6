// tests/ui/charts: a live change is marked on every chart over steps at the
// step from which it applied, and the marker is in the chart's exports.
#include <gtest/gtest.h>

#include <QChartView>
#include <QFile>
#include <QImage>
#include <QTemporaryDir>
#include <QTest>
#include <QValueAxis>

#include <memory>

#include "charts/chart_area.h"
#include "charts/chart_export.h"
#include "charts/chart_style.h"
#include "charts/step_markers.h"
#include "session/change_markers.h"
#include "session/run_store.h"
#include "ui/ui_test_support.h"

namespace {

TEST(StepMarkers, APrecisionChangeIsMarkedOnEveryStepChartAndExported) {
  ui_test::ensureApplication();
  RunStore store;
  ChartArea area(&store);
  ChangeMarkers markers(&store, &area, nullptr);
  area.resize(1200, 700);
  area.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&area));
  const QColor colour = chart_style::runColour(0);
  store.addRun(QStringLiteral("run 1"), QStringLiteral("fp32"), colour, ui_test::config("fp32"));
  std::vector<engine::Record> records;
  for (int s = 1; s <= 100; ++s) records.emplace_back(ui_test::step(0, s, 2.0 - s * 0.01));
  // The engine records a change applied after step 40: it ran from step 41.
  engine::Event change{0, 40, engine::EventKind::PrecisionChange, "fc2", "", 0};
  change.precision.compute = engine::Format::FP16;
  records.emplace_back(change);
  ui_test::feed(store, records);
  ui_test::settle();
  area.refresh();
  ui_test::settle();

  int marked = 0;
  for (int m = 0; m < area.chartCount(); ++m) {
    StepMarkers* s = markers.markersOf(m);
    if (!s) continue;
    ++marked;
    SCOPED_TRACE(area.title(m).toStdString());
    ASSERT_EQ(s->markers().size(), 1);
    EXPECT_EQ(s->markers()[0].step, 41.0);
    EXPECT_EQ(s->markers()[0].text, QStringLiteral("fc2 → FP16"));
    // The line sits where step 41 is on the x axis.
    ASSERT_TRUE(s->shown(0));
    const QRectF plot = area.chart(m)->plotArea();
    const QValueAxis* x = area.xAxis(m);
    EXPECT_NEAR(s->lineX(0), plot.left() + (41.0 - x->min()) / (x->max() - x->min()) * plot.width(), 0.5);
  }
  EXPECT_GE(marked, 4);

  // Exports draw it: the SVG holds the label, the PNG the line's colour
  // down the column of step 41.
  const int loss = area.chartIndex(QStringLiteral("loss"));
  ASSERT_GE(loss, 0);
  QTemporaryDir dir;
  const QString svg = dir.filePath(QStringLiteral("loss.svg"));
  QString error;
  ASSERT_TRUE(saveChartSvg(area.view(loss), svg, &error)) << error.toStdString();
  QFile f(svg);
  ASSERT_TRUE(f.open(QIODevice::ReadOnly));
  EXPECT_TRUE(QString::fromUtf8(f.readAll()).contains(QStringLiteral("fc2 → FP16")));
  const QImage image = area.view(loss)->grab().toImage();
  const QPointF top = area.view(loss)->mapFromScene(QPointF(markers.markersOf(loss)->lineX(0), area.chart(loss)->plotArea().top()));
  const QPointF bottom =
      area.view(loss)->mapFromScene(QPointF(markers.markersOf(loss)->lineX(0), area.chart(loss)->plotArea().bottom()));
  const double ratio = image.devicePixelRatio();
  int hits = 0;
  for (int y = static_cast<int>(top.y()) + 20; y < static_cast<int>(bottom.y()); ++y)
    for (int dx = -1; dx <= 1; ++dx) {
      const QColor c = image.pixelColor(static_cast<int>((top.x() + dx) * ratio), static_cast<int>(y * ratio));
      if (std::abs(c.red() - colour.red()) < 40 && std::abs(c.green() - colour.green()) < 40 &&
          std::abs(c.blue() - colour.blue()) < 40) {
        ++hits;
        break;
      }
    }
  EXPECT_GT(hits, 20) << "the dashed line is not drawn";

  // Unticked, the run's markers go with its series.
  store.setVisible(0, false);
  EXPECT_FALSE(markers.markersOf(loss)->shown(0));
}

}  // namespace
