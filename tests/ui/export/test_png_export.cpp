// tests/ui/export: an exported PNG shows the whole chart (axes, legend, every
// series) at the export size: scaled down it matches the SVG of the same
// chart rendered by Qt, and its plot area holds every run's colour. Both go
// through exportRuns(), the writer Ctrl+E uses. A text run's export holds its
// samples.jsonl and its final weights.
#include <gtest/gtest.h>

#include <QChart>
#include <QChartView>
#include <QDir>
#include <QFile>
#include <QImage>
#include <QPainter>
#include <QSvgRenderer>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <cstdio>
#include <memory>

#include "charts/chart_area.h"
#include "charts/chart_export.h"
#include "charts/chart_style.h"
#include "export/exporter.h"
#include "ui/ui_test_support.h"

namespace {

using ui_test::config;
using ui_test::feed;
using ui_test::step;

class PngExportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ui_test::ensureApplication(); }
  void SetUp() override {
    m_store = std::make_unique<RunStore>();
    m_area = std::make_unique<ChartArea>(m_store.get());
    m_area->resize(1200, 700);
    m_area->show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(m_area.get()));
    // Three runs on three separate curves, so each colour has its own pixels.
    const char* recipes[] = {"fp32", "fp16", "mixed-fp16"};
    for (int k = 0; k < 3; ++k)
      m_store->addRun(QStringLiteral("run %1").arg(k + 1), QString::fromLatin1(recipes[k]),
                      chart_style::recipeColour(QString::fromLatin1(recipes[k])), config(recipes[k]));
    std::vector<engine::Record> records;
    for (int s = 1; s <= 300; ++s)
      for (int k = 0; k < 3; ++k) records.push_back(step(k, s, 0.3 + 0.6 * k + 1.5 * std::exp(-s / 60.0)));
    feed(*m_store, records);
    ui_test::settle();
    m_area->refresh();
    ui_test::settle();
  }
  // loss.png and loss.svg, written as Ctrl+E writes them.
  void exportLoss() {
    ASSERT_TRUE(m_dir.isValid());
    ExportRequest request;
    request.dir = m_dir.path();
    request.csv = false;
    request.charts << m_area->view(ChartArea::Loss);
    exportRuns(*m_store, request);
    m_png = QImage(QDir(m_dir.path()).filePath(QStringLiteral("loss.png")));
    if (const QString keep = qEnvironmentVariable("PL_EXPORT_KEEP"); !keep.isEmpty()) {
      QFile::copy(QDir(m_dir.path()).filePath(QStringLiteral("loss.png")), keep + QStringLiteral("/loss.png"));
      QFile::copy(QDir(m_dir.path()).filePath(QStringLiteral("loss.svg")), keep + QStringLiteral("/loss.svg"));
    }
    ASSERT_FALSE(m_png.isNull());
  }
  std::unique_ptr<RunStore> m_store;
  std::unique_ptr<ChartArea> m_area;
  QTemporaryDir m_dir;
  QImage m_png;
};

// The mean absolute difference of two same-sized pictures, 0..1 per channel,
// over the pixels where either has ink (not white): a chart is mostly white,
// and a mean over every pixel would forgive a picture of the wrong thing.
double meanInkDifference(const QImage& a, const QImage& b) {
  const QImage x = a.convertToFormat(QImage::Format_RGB32);
  const QImage y = b.convertToFormat(QImage::Format_RGB32);
  auto ink = [](QRgb p) { return qRed(p) < 235 || qGreen(p) < 235 || qBlue(p) < 235; };
  double sum = 0;
  long long n = 0;
  for (int r = 0; r < x.height(); ++r) {
    const auto* p = reinterpret_cast<const QRgb*>(x.constScanLine(r));
    const auto* q = reinterpret_cast<const QRgb*>(y.constScanLine(r));
    for (int c = 0; c < x.width(); ++c) {
      if (!ink(p[c]) && !ink(q[c])) continue;
      ++n;
      sum += std::abs(qRed(p[c]) - qRed(q[c])) + std::abs(qGreen(p[c]) - qGreen(q[c])) +
             std::abs(qBlue(p[c]) - qBlue(q[c]));
    }
  }
  return n == 0 ? 0.0 : sum / (3.0 * 255.0 * static_cast<double>(n));
}

// Pixels of `image` inside `rect` within `tolerance` of `colour` (per channel).
int pixelsNear(const QImage& image, const QRect& rect, const QColor& colour, int tolerance = 40) {
  int n = 0;
  const QRect r = rect.intersected(image.rect());
  for (int y = r.top(); y <= r.bottom(); ++y)
    for (int x = r.left(); x <= r.right(); ++x) {
      const QColor c = image.pixelColor(x, y);
      if (std::abs(c.red() - colour.red()) <= tolerance && std::abs(c.green() - colour.green()) <= tolerance &&
          std::abs(c.blue() - colour.blue()) <= tolerance)
        ++n;
    }
  return n;
}

// Today the PNG held a blown-up top-left corner: the "2.50" tick and a stub
// (measured here: 0.26 from the SVG against 0.08 for the whole chart).
TEST_F(PngExportTest, ThePngScaledDownMatchesTheSvgOfTheSameChart) {
  exportLoss();
  QChartView* view = m_area->view(ChartArea::Loss);
  EXPECT_GE(m_png.width(), 2 * view->width());
  EXPECT_NEAR(static_cast<double>(m_png.width()) / m_png.height(),
              static_cast<double>(view->width()) / view->height(), 0.01);
  QSvgRenderer svg(QDir(m_dir.path()).filePath(QStringLiteral("loss.svg")));
  ASSERT_TRUE(svg.isValid());
  QImage reference(view->size(), QImage::Format_RGB32);
  reference.fill(Qt::white);
  {
    QPainter p(&reference);
    p.setRenderHint(QPainter::Antialiasing);
    svg.render(&p, QRectF(QPointF(0, 0), QSizeF(view->size())));
  }
  // Compared a little blurred (a third of the view's size): antialiasing and
  // hinting differ between a raster at 2x and a vector at 1x, the picture
  // must not.
  const QSize coarse = view->size() / 3;
  const QImage small = m_png.scaled(coarse, Qt::IgnoreAspectRatio, Qt::SmoothTransformation);
  const QImage svgSmall = reference.scaled(coarse, Qt::IgnoreAspectRatio, Qt::SmoothTransformation);
  const double diff = meanInkDifference(small, svgSmall);
  std::printf("PNG vs SVG: mean difference %.4f over the inked pixels (full size %.4f)\n", diff,
              meanInkDifference(m_png.scaled(view->size(), Qt::IgnoreAspectRatio, Qt::SmoothTransformation), reference));
  EXPECT_LT(diff, 0.13) << "the PNG, scaled down, is not the chart the SVG shows";
  // And the SVG is not blank: a blank picture would match a blank PNG.
  QImage white(reference.size(), QImage::Format_RGB32);
  white.fill(Qt::white);
  EXPECT_GT(meanInkDifference(svgSmall, white.scaled(coarse)), 0.1);
}

TEST_F(PngExportTest, ThePlotAreaHoldsEveryRunsColourAndTheAxesAreInThePicture) {
  exportLoss();
  QChartView* view = m_area->view(ChartArea::Loss);
  const double scale = static_cast<double>(m_png.width()) / view->width();
  const QRectF plotScene = view->chart()->plotArea();
  const QRect plotView = view->mapFromScene(plotScene).boundingRect();
  const QRect plot(QPoint(static_cast<int>(plotView.left() * scale), static_cast<int>(plotView.top() * scale)),
                   QPoint(static_cast<int>(plotView.right() * scale), static_cast<int>(plotView.bottom() * scale)));
  ASSERT_TRUE(m_png.rect().contains(plot)) << "the plot area lies outside the picture";
  // The plot is a good part of the picture, not a corner blown up.
  EXPECT_GT(plot.width(), m_png.width() / 2);
  for (int id = 0; id < m_store->count(); ++id) {
    // The run's colour as the loss line draws it: translucent over white.
    const QColor run = m_store->run(id).colour;
    const double a = chart_style::kOverlayAlpha / 255.0;
    const QColor colour(static_cast<int>(run.red() * a + 255 * (1 - a)), static_cast<int>(run.green() * a + 255 * (1 - a)),
                        static_cast<int>(run.blue() * a + 255 * (1 - a)));
    EXPECT_GT(pixelsNear(m_png, plot, colour), 100 * scale)
        << m_store->run(id).recipe.toStdString() << " (" << colour.name().toStdString() << ") is not in the plot";
  }
  // Ink left of the plot (the y axis's labels) and below it (the x axis's).
  const QRect left(0, plot.top(), plot.left(), plot.height());
  const QRect below(plot.left(), plot.bottom() + 1, plot.width(), m_png.height() - plot.bottom() - 1);
  EXPECT_GT(pixelsNear(m_png, left, QColor(0, 0, 0), 110), 50) << "no y-axis labels in the picture";
  EXPECT_GT(pixelsNear(m_png, below, QColor(0, 0, 0), 110), 50) << "no x-axis labels in the picture";
}

// A text run's export holds what the run wrote (samples.jsonl, the export's
// run numbering) and its final weights from its run folder, byte for byte:
// the reason a gpt was trained, and what `sample` continues from.
TEST(TextRunExport, HoldsTheSamplesAndTheWeights) {
  ui_test::ensureApplication();
  RunStore store;
  engine::RunConfig c = config("fp32");
  c.model = "gpt";
  c.dataset = "jargon";
  store.addRun(QStringLiteral("run 1"), QStringLiteral("fp32"), chart_style::recipeColour(QStringLiteral("fp32")), c);
  QTemporaryDir folder, out;
  ASSERT_TRUE(folder.isValid() && out.isValid());
  const QByteArray weights("PLWEIGHT\x01\x00\x00\x00 any bytes: the export copies the file as it is", 59);
  {
    QFile f(QDir(folder.path()).filePath(QStringLiteral("weights-3.bin")));
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write(weights);
  }
  store.setFolder(0, folder.path(), 3);  // run 3 of its folder
  engine::TextSample t;
  t.run_id = 0;
  t.step = 10;
  t.prompt = "The hacker ";
  t.text = "wrote \"code\"\nat night";
  feed(store, {step(0, 10, 2.5), engine::Record(t)});

  ExportRequest request;
  request.dir = out.path();
  request.png = request.svg = false;
  request.runs = {0};
  const QStringList written = exportRuns(store, request);
  const QDir dir(out.path());
  EXPECT_TRUE(written.contains(dir.filePath(QStringLiteral("samples.jsonl")))) << written.join(' ').toStdString();
  QFile samples(dir.filePath(QStringLiteral("samples.jsonl")));
  ASSERT_TRUE(samples.open(QIODevice::ReadOnly));
  EXPECT_EQ(samples.readAll().toStdString(),
            "{\"prompt\":\"The hacker \",\"run\":\"run 1\",\"run_id\":1,\"step\":10,"
            "\"text\":\"wrote \\\"code\\\"\\nat night\"}\n");
  QFile copy(dir.filePath(QStringLiteral("weights-1.bin")));  // the export's run 1
  ASSERT_TRUE(copy.open(QIODevice::ReadOnly)) << "no weights in the export";
  EXPECT_EQ(copy.readAll(), weights);

  // A run without a folder (or text) exports its CSV files only.
  QTemporaryDir plainOut;
  store.addRun(QStringLiteral("run 2"), QStringLiteral("fp16"), chart_style::recipeColour(QStringLiteral("fp16")),
               config("fp16"));
  request.dir = plainOut.path();
  request.runs = {1};
  exportRuns(store, request);
  EXPECT_FALSE(QDir(plainOut.path()).exists(QStringLiteral("samples.jsonl")));
  EXPECT_TRUE(QDir(plainOut.path()).entryList({QStringLiteral("weights-*")}).isEmpty());
}

}  // namespace
