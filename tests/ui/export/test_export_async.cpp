// tests/ui/export: Ctrl+E's export of a five-run comparison does not hold
// the event loop (a 20 ms heartbeat keeps beating, late by < 200 ms of the UI
// thread's own time), every file is complete when exportFinished() fires, a
// second export is refused while one runs, and closing the window during an
// export neither crashes nor leaves a half file. Prints where the time goes.
#include <gtest/gtest.h>

#include <QChartView>
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QImage>
#include <QSignalSpy>
#include <QSvgRenderer>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "charts/chart_export.h"
#include "compare/compare_view.h"
#include "export/export_controller.h"
#include "export/exporter.h"
#include "main_window.h"
#include "report/csv.h"
#include "session/run_store.h"
#include "session/user_messages.h"
#include "ui/ui_test_support.h"
#include "ui/window_parts.h"

namespace {

double threadCpuMs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

double msSince(const QElapsedTimer& t) { return static_cast<double>(t.nsecsElapsed()) / 1e6; }

// A 20 ms timer's lateness, counting only the UI thread's own CPU time in
// each interval (as the monkey's "cpu" measure: on a shared 2-core machine
// the rest of a late beat is waiting for a core).
class Heartbeat : public QObject {
 public:
  Heartbeat() {
    m_timer.setInterval(kBeatMs);
    m_timer.setTimerType(Qt::PreciseTimer);
    connect(&m_timer, &QTimer::timeout, this, [this] { beat(); });
    m_clock.start();
    m_lastCpu = threadCpuMs();
    m_timer.start();
  }
  int beats() const { return m_beats; }
  double maxOwnLateMs() const { return m_maxOwn; }
  double maxLateMs() const { return m_maxLate; }

 private:
  static constexpr int kBeatMs = 20;
  void beat() {
    const double now = msSince(m_clock), cpu = threadCpuMs();
    const double late = std::max(0.0, now - m_last - kBeatMs);
    m_maxLate = std::max(m_maxLate, late);
    m_maxOwn = std::max(m_maxOwn, std::min(late, cpu - m_lastCpu));
    m_last = now;
    m_lastCpu = cpu;
    ++m_beats;
  }
  QTimer m_timer;
  QElapsedTimer m_clock;
  double m_last = 0.0, m_lastCpu = 0.0, m_maxOwn = 0.0, m_maxLate = 0.0;
  int m_beats = 0;
};

class ExportAsyncTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ui_test::ensureApplication(); }
  void SetUp() override {
    m_window = std::make_unique<MainWindow>();
    m_window->part<UserMessages>()->setQuiet(true);
    m_window->resize(1400, 900);
    m_window->show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(m_window.get()));
    // A finished five-recipe comparison, 2000 steps each.
    RunStore& s = *m_window->part<RunStore>();
    const int group = s.newCompareGroup();
    const char* recipes[] = {"fp32", "fp16", "bf16", "mixed-fp16", "mixed-bf16"};
    QVector<int> ids;
    for (int k = 0; k < 5; ++k)
      ids << s.addRun(QStringLiteral("run %1").arg(k + 1), QString::fromLatin1(recipes[k]), QColor::fromHsv(k * 70, 200, 200),
                      ui_test::config(recipes[k]), group);
    std::vector<engine::Record> records;
    for (int step = 1; step <= 2000; ++step)
      for (int k = 0; k < 5; ++k) {
        records.push_back(ui_test::step(k, step, 0.2 + 0.1 * k + 2.0 * std::exp(-step / 300.0)));
        if (step % 100 == 0) records.emplace_back(engine::EvalMetrics{k, step, 0, 0.3, 0.8 + 0.02 * k});
      }
    s.append(records, ids);
    m_window->part<CompareView>()->setGroup(group);
    ui_test::settle();
    ASSERT_TRUE(m_dir.isValid());
  }
  void TearDown() override { m_window.reset(); }

  ExportController* exporter() const { return m_window->part<ExportController>(); }
  ExportRequest request() const {
    ExportRequest r;
    r.dir = m_dir.filePath(QStringLiteral("out"));
    r.runs = {0, 1, 2, 3, 4};
    r.charts = exporter()->allCharts();
    return r;
  }
  // No QSaveFile temporary is left in the folder.
  QStringList leftovers() const {
    return QDir(m_dir.filePath(QStringLiteral("out"))).entryList({QStringLiteral("*.new"), QStringLiteral("*.tmp*"),
                                                                  QStringLiteral(".*")}, QDir::Files | QDir::Hidden);
  }

  std::unique_ptr<MainWindow> m_window;
  QTemporaryDir m_dir;
};

// Where a synchronous export's time goes (everything on the UI thread, as
// before): the numbers the split was designed from.
TEST_F(ExportAsyncTest, WhereTheTimeGoes) {
  const ExportRequest r = request();
  QElapsedTimer t;
  t.start();
  const ExportPlan plan(*m_window->part<RunStore>(), r);
  const double snapshot = msSince(t);
  t.restart();
  plan.writeCsv();
  const double csv = msSince(t);
  double drawPng = 0, drawSvg = 0, encode = 0, writeSvg = 0, worstDraw = 0;
  for (int k = 0; k < plan.chartCount(); ++k) {
    t.restart();
    DrawnChart png = plan.draw(k, true, false);
    const double d1 = msSince(t);
    t.restart();
    DrawnChart svg = plan.draw(k, false, true);
    const double d2 = msSince(t);
    t.restart();
    ExportPlan::write(png);
    encode += msSince(t);
    t.restart();
    ExportPlan::write(svg);
    writeSvg += msSince(t);
    drawPng += d1;
    drawSvg += d2;
    worstDraw = std::max({worstDraw, d1, d2});
  }
  std::printf("export of %d charts + CSV of 5 runs: snapshot %.0f ms, CSV %.0f ms, record PNG drawing %.0f ms, draw SVG "
              "%.0f ms (longest single draw %.0f ms), PNG rasterise+encode+write %.0f ms, SVG write %.0f ms; total %.0f "
              "ms\n",
              plan.chartCount(), snapshot, csv, drawPng, drawSvg, worstDraw, encode, writeSvg,
              snapshot + csv + drawPng + drawSvg + encode + writeSvg);
  EXPECT_GT(plan.chartCount(), 5);
}

TEST_F(ExportAsyncTest, TheEventLoopTurnsDuringAnExportAndTheFilesAreCompleteAtFinished) {
  QSignalSpy done(exporter(), &ExportController::exportFinished);
  const int charts = static_cast<int>(request().charts.size());
  Heartbeat heartbeat;
  QTest::qWait(100);  // a few beats before
  const int before = heartbeat.beats();
  QElapsedTimer t;
  t.start();
  ASSERT_TRUE(exporter()->startExport(request()));
  const double startMs = msSince(t);
  EXPECT_TRUE(exporter()->exporting()) << "startExport() returned after the export";
  ASSERT_TRUE(done.count() > 0 || done.wait(60000));
  const double totalMs = msSince(t);
  const int beats = heartbeat.beats() - before;
  QTest::qWait(60);  // the beat after the last slice counts too
  std::printf("export: startExport() %.0f ms, finished after %.0f ms, %d heartbeats meanwhile, worst lateness %.0f ms "
              "(own %.0f ms)\n", startMs, totalMs, beats, heartbeat.maxLateMs(), heartbeat.maxOwnLateMs());
  EXPECT_GE(beats, 5) << "the event loop did not turn during the export";
  EXPECT_LT(heartbeat.maxOwnLateMs(), 200.0);
  EXPECT_FALSE(exporter()->exporting());

  ASSERT_EQ(done.count(), 1);
  ASSERT_TRUE(done[0][0].toBool()) << m_window->part<UserMessages>()->lastError().toStdString();
  const QStringList files = done[0][1].toStringList();
  // Every chart as PNG and SVG, and the six CSV/JSON files.
  EXPECT_EQ(files.size(), 2 * charts + 6);
  for (const QString& f : files) {
    ASSERT_TRUE(QFileInfo::exists(f)) << f.toStdString();
    if (f.endsWith(QLatin1String(".png"))) {
      const QImage image(f);
      EXPECT_FALSE(image.isNull()) << f.toStdString();
      EXPECT_GE(image.width(), 1920) << f.toStdString();
    } else if (f.endsWith(QLatin1String(".svg"))) {
      EXPECT_TRUE(QSvgRenderer(f).isValid()) << f.toStdString();
    }
  }
  const engine::CsvTable steps =
      engine::read_csv(QDir(m_dir.filePath(QStringLiteral("out"))).filePath(QStringLiteral("steps.csv")).toStdString());
  EXPECT_EQ(steps.rows.size(), 5u * 2000u);
  EXPECT_TRUE(leftovers().isEmpty()) << leftovers().join(QLatin1Char(' ')).toStdString();
}

TEST_F(ExportAsyncTest, ASecondExportWhileOneRunsIsRefused) {
  QSignalSpy done(exporter(), &ExportController::exportFinished);
  ASSERT_TRUE(exporter()->startExport(request()));
  EXPECT_FALSE(exporter()->startExport(request()));
  ASSERT_TRUE(done.wait(60000));
  EXPECT_EQ(done.count(), 1);
  EXPECT_TRUE(done[0][0].toBool());
  // And once it has finished, the next one runs.
  EXPECT_TRUE(exporter()->exportTo(request()));
}

TEST_F(ExportAsyncTest, ClosingTheWindowDuringAnExportLeavesNoHalfFile) {
  ASSERT_TRUE(exporter()->startExport(request()));
  QTest::qWait(50);  // some charts drawn, some files being written
  m_window.reset();  // waits for the worker
  EXPECT_TRUE(leftovers().isEmpty()) << leftovers().join(QLatin1Char(' ')).toStdString();
  for (const QString& f : QDir(m_dir.filePath(QStringLiteral("out"))).entryList({QStringLiteral("*.png")}, QDir::Files))
    EXPECT_FALSE(QImage(QDir(m_dir.filePath(QStringLiteral("out"))).filePath(f)).isNull()) << f.toStdString();
}

TEST_F(ExportAsyncTest, AFailureNamesTheFile) {
  // A folder where loss.png should go: its QSaveFile cannot commit.
  ASSERT_TRUE(QDir().mkpath(m_dir.filePath(QStringLiteral("out/loss.png"))));
  EXPECT_FALSE(exporter()->exportTo(request()));
  EXPECT_TRUE(m_window->part<UserMessages>()->lastError().contains(QStringLiteral("loss.png")))
      << m_window->part<UserMessages>()->lastError().toStdString();
  EXPECT_FALSE(exporter()->exporting());
}

}  // namespace
