// bench_ui: chart redraw cost with long histories — 3 runs x 100,000 steps.
// One frame = the store gains a step per run (as when training), refresh()
// re-decimates every changed series to the plot's pixel columns and gives
// each one replace(), then the charts are rendered (QWidget::grab: the full
// paint, raster, under the offscreen platform). Also, for contrast, the
// same 100k points given to a chart without decimation.
//   QT_QPA_PLATFORM=offscreen build/dev/tests/bench/bench_ui
#include <benchmark/benchmark.h>

#include <QApplication>
#include <QChart>
#include <QChartView>
#include <QLineSeries>
#include <QValueAxis>

#include <cmath>
#include <memory>
#include <vector>

#include "charts/chart_area.h"
#include "charts/decimate.h"
#include "session/run_store.h"

namespace {

constexpr std::int64_t kSteps = 100000;
constexpr int kRuns = 3;

// A plausible loss curve: exponential decay plus batch noise, an overflow
// (and halved scale) every 2,000 steps for the mixed run, memory constant
// but for a smaller last batch per epoch.
engine::StepMetrics syntheticStep(int run, std::int64_t step) {
  engine::StepMetrics m;
  m.run_id = run;
  m.step = step;
  m.epoch = step / 469;
  const double noise = std::sin(static_cast<double>(step) * 12.9898 + run) * 43758.5453;
  m.loss = 0.3 + 2.0 * std::exp(-static_cast<double>(step) / 3000.0) + 0.1 * (noise - std::floor(noise));
  m.loss_scale = run == 2 ? std::exp2(16 - static_cast<double>((step / 2000) % 4)) : 1.0;
  m.overflow = run == 2 && step % 2000 == 0;
  m.skipped = m.overflow;
  m.mem.weights = 1 << 20;
  m.mem.master = run == 2 ? 2 << 20 : 0;
  m.mem.grads = 1 << 20;
  m.mem.optimizer = 1 << 20;
  m.mem.activations = step % 469 == 0 ? 200000 : 300000;
  m.mem.workspace = 50000;
  m.wall_ms = 2.0;
  m.samples_per_second = 64000;
  m.train_accuracy = 0.8 + 0.1 * (noise - std::floor(noise));
  return m;
}

struct Fixture {
  RunStore store;
  ChartArea* area = nullptr;
  std::unique_ptr<QWidget> window;
  QVector<int> ids;
  std::int64_t next = kSteps + 1;

  Fixture() {
    for (int r = 0; r < kRuns; ++r)
      ids << store.addRun(QStringLiteral("run %1").arg(r + 1), r == 0 ? "fp32" : r == 1 ? "fp16" : "mixed-fp16",
                          QColor::fromHsv(r * 120, 200, 200), engine::RunConfig{});
    std::vector<engine::Record> records;
    records.reserve(kSteps * kRuns + 1000);
    for (std::int64_t s = 1; s <= kSteps; ++s)
      for (int r = 0; r < kRuns; ++r) {
        records.emplace_back(syntheticStep(r, s));
        if (s % 469 == 0) records.emplace_back(engine::EvalMetrics{r, s, s / 469, 0.4, 0.85});
      }
    store.append(records, ids);
    window = std::make_unique<QWidget>();
    area = new ChartArea(&store, window.get());
    area->resize(1080, 700);  // the Live tab at the app's default 1400x900
    window->resize(1080, 700);
    window->show();
    QApplication::processEvents();
    area->refresh();
    QApplication::processEvents();
  }

  // One frame of live data: a step per run, as the 30 Hz drain delivers.
  void grow() {
    std::vector<engine::Record> records;
    for (int r = 0; r < kRuns; ++r) records.emplace_back(syntheticStep(r, next));
    ++next;
    store.append(records, ids);
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

// refresh(): decimation of 3 x 100k steps for every chart + one replace() per series.
void BM_RefreshThreeRuns100k(benchmark::State& state) {
  Fixture& f = fixture();
  for (auto _ : state) {
    f.grow();
    f.area->refresh();
  }
  state.counters["points_in_loss_series"] =
      static_cast<double>(f.area->runSeries(ChartArea::Loss, 0)->count());
}
BENCHMARK(BM_RefreshThreeRuns100k)->Unit(benchmark::kMillisecond)->MinTime(2.0);

// The frame the user sees: refresh() and a full render of one chart.
void BM_RefreshAndRenderLossChart(benchmark::State& state) {
  Fixture& f = fixture();
  QChartView* view = f.area->view(ChartArea::Loss);
  for (auto _ : state) {
    f.grow();
    f.area->refresh();
    QPixmap p = view->grab();
    benchmark::DoNotOptimize(p);
  }
  state.counters["width_px"] = view->width();
}
BENCHMARK(BM_RefreshAndRenderLossChart)->Unit(benchmark::kMillisecond)->MinTime(2.0);

// Every chart of the Live tab: refresh() and a render of the whole area.
void BM_RefreshAndRenderAllCharts(benchmark::State& state) {
  Fixture& f = fixture();
  for (auto _ : state) {
    f.grow();
    f.area->refresh();
    QPixmap p = f.area->grab();
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_RefreshAndRenderAllCharts)->Unit(benchmark::kMillisecond)->MinTime(2.0);

// Decimation alone: 100k samples to 700 columns.
void BM_Decimate100k(benchmark::State& state) {
  const RunData& r = fixture().store.run(0);
  for (auto _ : state) {
    QList<QPointF> pts = decimateMinMax(
        static_cast<std::int64_t>(r.steps.size()),
        [&r](std::int64_t i) {
          const auto& m = r.steps[static_cast<std::size_t>(i)];
          return QPointF(static_cast<double>(m.step), m.loss);
        },
        0, 200000, 700);
    benchmark::DoNotOptimize(pts);
  }
}
BENCHMARK(BM_Decimate100k)->Unit(benchmark::kMillisecond);

// Contrast: 3 x 100k points replaced without decimation and rendered.
void BM_UndecimatedThreeRuns100k(benchmark::State& state) {
  QChart* chart = new QChart;
  QChartView view(chart);
  view.resize(345, 300);
  auto* x = new QValueAxis;
  auto* y = new QValueAxis;
  x->setRange(0, 200000);
  y->setRange(0, 2.5);
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  std::vector<QLineSeries*> series;
  QList<QList<QPointF>> data(kRuns);
  for (int r = 0; r < kRuns; ++r) {
    for (const auto& m : fixture().store.run(r).steps) data[r].append(QPointF(static_cast<double>(m.step), m.loss));
    auto* s = new QLineSeries;
    chart->addSeries(s);
    s->attachAxis(x);
    s->attachAxis(y);
    series.push_back(s);
  }
  view.show();
  for (auto _ : state) {
    for (int r = 0; r < kRuns; ++r) series[static_cast<std::size_t>(r)]->replace(data[r]);
    QPixmap p = view.grab();
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_UndecimatedThreeRuns100k)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
