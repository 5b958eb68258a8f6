// bench_train: training throughput (samples/s) per model and recipe, the
// ratios to the fp32 recipe in the same run, and the fraction of the
// machine's FMA peak (measured in the same run) the whole mlp step reaches.
//
//   build/release/tests/bench/bench_train
//   build/release/tests/bench/bench_train --benchmark_filter=mlp
//   build/release/tests/bench/bench_train --benchmark_filter=mlp
//       --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
//     (recipes interleaved, the best repetition of each in the summary: the
//     way to compare recipes on a machine shared with other work)
//
// Uses Fashion-MNIST when installed, else a synthetic set of the same shape
// (the throughput does not depend on the pixel values).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "data/dataset.h"
#include "fma_peak.h"
#include "train/run.h"
#include "train/run_config.h"

namespace {

FmaPeak g_peak;
std::shared_ptr<const engine::DatasetPair> g_data;
std::unique_ptr<engine::Backend> g_backend;
std::map<std::string, std::map<std::string, double>> g_rate;  // model -> recipe -> samples/s

std::shared_ptr<const engine::DatasetPair> images() {
  if (std::filesystem::exists(engine::kFashionMnistDir))
    return std::make_shared<const engine::DatasetPair>(engine::load_dataset("fashion-mnist", 0));
  engine::DatasetPair p;
  for (engine::Dataset* d : {&p.train, &p.test}) {
    d->name = "synthetic-28x28";
    d->shape = {1, 28, 28, 784};
    d->count = 10000;
    d->classes = 10;
    d->inputs.assign(d->count * 784, 0.0f);
    d->labels.resize(d->count);
    for (std::size_t i = 0; i < d->count; ++i) {
      d->labels[i] = static_cast<std::int32_t>(i % 10);
      for (std::size_t j = 0; j < 784; ++j) d->inputs[i * 784 + j] = ((i * 31 + j * 17) % 255) / 255.0f - 0.5f;
    }
  }
  return std::make_shared<const engine::DatasetPair>(std::move(p));
}

// Training FLOPs per sample of the default mlp (784-256-128-10): forward
// x W^T, dW = dy^T x for every layer, dx for every layer but the first.
constexpr double kMlpFlopsPerSample =
    2.0 * (784 * 256 + 256 * 128 + 128 * 10) * 2.0 + 2.0 * (256 * 128 + 128 * 10);

void BM_Train(benchmark::State& st, const std::string& model, const std::string& recipe) {
  engine::RunConfig c;
  c.model = model;
  c.recipe = recipe;
  c.dataset = "fashion-mnist";
  c.batch = 128;
  c.epochs = 1000;
  c.seed = 0;
  engine::Run run(0, c, g_data, *g_backend);
  std::vector<engine::Record> out;
  for (int i = 0; i < 3; ++i) {  // warm-up: primitives created, buffers sized
    run.step(out);
    out.clear();
  }
  for (auto _ : st) {
    run.step(out);
    out.clear();
  }
  const double samples = static_cast<double>(st.iterations()) * static_cast<double>(c.batch);
  st.counters["samples/s"] = benchmark::Counter(samples, benchmark::Counter::kIsRate);
  st.SetItemsProcessed(static_cast<std::int64_t>(samples));
}

void summary() {
  std::printf("\nsamples/s (best repetition) and ratio to fp32 (same run):\n");
  for (const auto& [model, rates] : g_rate) {
    const auto it = rates.find("fp32");
    const double base = it != rates.end() ? it->second : 0.0;
    for (const auto& [recipe, r] : rates)
      std::printf("  %-12s %-11s %10.0f samples/s  %5.2fx fp32\n", model.c_str(), recipe.c_str(), r,
                  base > 0 ? r / base : 0.0);
  }
  if (auto m = g_rate.find("mlp"); m != g_rate.end() && g_peak.all > 0) {
    for (const char* r : {"fp32", "mixed-bf16"}) {
      auto it = m->second.find(r);
      if (it == m->second.end()) continue;
      const double gflops = it->second * kMlpFlopsPerSample / 1e9;
      std::printf("mlp %s whole training step: %.1f GFLOP/s = %.0f%% of the %d-thread FMA peak (%.0f GFLOP/s, %s)\n",
                  r, gflops, 100.0 * gflops / g_peak.all, g_peak.threads, g_peak.all, g_peak.isa);
    }
  }
}

class Collector : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      const std::string name = r.benchmark_name();  // "train/<model>/<recipe>"
      const auto a = name.find('/'), b = name.find('/', a + 1);
      if (a == std::string::npos || b == std::string::npos) continue;
      const auto c = name.find('/', b + 1);  // options follow: "/min_time:...", "/real_time"
      const std::string recipe = name.substr(b + 1, c == std::string::npos ? std::string::npos : c - b - 1);
      const auto it = r.counters.find("samples/s");
      if (it == r.counters.end() || r.run_type == Run::RT_Aggregate) continue;
      // With --benchmark_repetitions the best repetition counts: on a shared
      // 2-core machine the slow ones measure the neighbours, not the code.
      double& best = g_rate[name.substr(a + 1, b - a - 1)][recipe];
      best = std::max(best, static_cast<double>(it->second));
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace

int main(int argc, char** argv) {
  g_peak = measure_fma_peak();
  g_data = images();
  g_backend = engine::make_cpu_backend(0);
  const engine::BackendInfo info = g_backend->info();
  std::printf("FMA peak (%s): 1 thread %.1f GFLOP/s, %d threads %.1f GFLOP/s; %s, %d threads, native bf16: %s; data: %s\n",
              g_peak.isa, g_peak.one, g_peak.threads, g_peak.all, info.device.c_str(), info.threads,
              info.native_bf16 ? "yes" : "no", g_data->train.name.c_str());
  for (const char* model : {"mlp", "cnn", "transformer"})
    for (const char* recipe : {"fp32", "fp16", "mixed-fp16", "mixed-bf16", "fp8", "mxfp8", "mxfp4", "nvfp4"})
      benchmark::RegisterBenchmark((std::string("train/") + model + "/" + recipe).c_str(),
                                   [m = std::string(model), r = std::string(recipe)](benchmark::State& st) {
                                     BM_Train(st, m, r);
                                   })
          ->Unit(benchmark::kMillisecond)
          ->MinTime(std::string(model) == "mlp" ? 1.0 : 2.0)
          ->UseRealTime();
  benchmark::Initialize(&argc, argv);
  Collector reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  summary();
  benchmark::Shutdown();
  return 0;
}
