// bench_train: training throughput (samples/s) per model and recipe, the
// ratios to the fp32 recipe in the same run, and the fraction of the
// machine's FMA peak (measured in the same run) the whole mlp step reaches.
// The language model `gpt` runs at nanoGPT's CPU "baby" shape (4 layers, 4
// heads, width 128, context 64) at batch 32 with AdamW (lr 1e-3, weight
// decay 0.1, clip 1.0: the PyTorch peer's step) on the Jargon File
// (jargon-text; without it a token stream of its vocabulary size stands
// in); its rows add a tokens/s counter (samples/s x the context).
//
//   build/release/tests/bench/bench_train
//   build/release/tests/bench/bench_train --benchmark_filter=mlp
//   build/release/tests/bench/bench_train --benchmark_filter=mlp
//       --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
//     (recipes interleaved, the best repetition of each in the summary: the
//     way to compare recipes on a machine shared with other work)
//
// On a machine with an NVIDIA GPU (the CUDA backend built and a device):
//   bench_train --backend=cuda            the same table on the GPU
//   bench_train --backend=both            CPU and GPU in one run, with the
//                                         GPU's ratio to the CPU per recipe
//   bench_train --backend=both --wide     adds "mlp-wide" (784-4096-4096-
//                                         4096-10, batch 1024): a size where
//                                         the GPU's advantage shows
//   bench_train --size gpu                every model at the GPU size (train/
//                                         model_defaults.h "gpu": the mlp
//                                         784-4096-4096-4096-10 at batch 1024,
//                                         the cnn 128,256 channels at 512, the
//                                         transformer 8x1024, 16 heads at 512,
//                                         the gpt 8x768, 12 heads, context 256
//                                         at 64), as `run --size gpu` trains
//                                         them; --size default is the above
// GPU rows are named train/<model>@cuda/<recipe>.
//   bench_train --threads=N               the CPU backend on N threads
//                                         (default: every core)
//   bench_train --no-native-bf16          the CPU backend without its native
//                                         bf16 kernels (BF16 and FP8 GEMMs
//                                         decode to f32), as on a CPU without
//                                         AVX512-BF16; with DNNL_MAX_CPU_ISA=AVX2
//                                         close to an AVX2 machine
//   bench_train --paired[=ROUNDS]         ratios robust to a VM's speed
//       [--models=mlp,cnn,transformer,gpt] changing over minutes: every
//                                         recipe's Run is built first, then
//                                         each round times a slice of steps
//                                         (about 0.1 s) of every recipe in
//                                         turn; printed are each recipe's
//                                         median step and the median and
//                                         quartiles of its per-round ratio
//                                         to fp32 (default 15 rounds)
//
// Uses Fashion-MNIST when installed, else a synthetic set of the same shape
// (the throughput does not depend on the pixel values).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda_backend.h"
#include "data/dataset.h"
#include "fma_peak.h"
#include "gpt_baby.h"
#include "numeric/cast.h"
#include "train/model_defaults.h"
#include "train/run.h"
#include "train/run_config.h"

namespace {

FmaPeak g_peak;
std::shared_ptr<const engine::DatasetPair> g_data, g_text;
std::unique_ptr<engine::Backend> g_cpu, g_cuda;
std::map<std::string, std::map<std::string, double>> g_rate;  // model -> recipe -> samples/s
std::map<std::string, std::map<std::string, std::vector<double>>> g_reps;  // every repetition's samples/s
std::string g_size = "default";  // --size: every model's shape and batch (engine::apply_size)

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

// The gpt's context at the benchmark's size.
std::int64_t gpt_context() {
  engine::RunConfig c;
  bench::set_gpt_baby(c);
  if (g_size != "default") engine::apply_size(c, g_size);
  return c.context;
}

// Training FLOPs per sample of the default mlp (784-256-128-10): forward
// x W^T, dW = dy^T x for every layer, dx for every layer but the first.
constexpr double kMlpFlopsPerSample =
    2.0 * (784 * 256 + 256 * 128 + 128 * 10) * 2.0 + 2.0 * (256 * 128 + 128 * 10);

// A Run of one benchmarked model and recipe, warmed up: primitives
// created, buffers sized.
std::unique_ptr<engine::Run> warm_run(engine::Backend& backend, const std::string& model, const std::string& recipe) {
  engine::RunConfig c;
  c.model = model;
  c.recipe = recipe;
  c.dataset = "fashion-mnist";
  c.batch = 128;
  c.epochs = 1000;
  c.seed = 0;
  if (model == "mlp-wide") {
    c.model = "mlp";
    c.widths = {4096, 4096, 4096};
    c.batch = 1024;
  }
  if (model == "gpt") bench::set_gpt_baby(c);
  // The shape and batch of the size (the optimizer settings stay): the
  // engine's one sizing function, as the CLI's --size.
  if (g_size != "default" && model != "mlp-wide") engine::apply_size(c, g_size);
  if (model == "gpt" && !g_text) g_text = bench::gpt_text(c.context);  // read once, on the first gpt row
  auto run = std::make_unique<engine::Run>(0, c, model == "gpt" ? g_text : g_data, backend);
  std::vector<engine::Record> out;
  for (int i = 0; i < 3; ++i) {
    run->step(out);
    out.clear();
  }
  return run;
}

void BM_Train(benchmark::State& st, engine::Backend& backend, const std::string& model, const std::string& recipe) {
  // A recipe that diverges (the gpt in fp16 without a loss scaler ends its
  // run within a few steps) has no throughput: its row says why instead.
  std::unique_ptr<engine::Run> owned;
  try {
    owned = warm_run(backend, model, recipe);
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
    return;
  }
  engine::Run& run = *owned;
  const engine::RunConfig& c = run.config();
  std::vector<engine::Record> out;
  for (auto _ : st) {
    try {
      run.step(out);
    } catch (const std::exception& e) {
      st.SkipWithError(e.what());
      break;
    }
    out.clear();
  }
  const double samples = static_cast<double>(st.iterations()) * static_cast<double>(c.batch);
  st.counters["samples/s"] = benchmark::Counter(samples, benchmark::Counter::kIsRate);
  st.SetItemsProcessed(static_cast<std::int64_t>(samples));
  if (c.model == "gpt")
    st.counters["tokens/s"] = benchmark::Counter(samples * static_cast<double>(c.context), benchmark::Counter::kIsRate);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

// The q-quantile (0..1) of v, nearest rank.
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

// --paired: recipes of one model timed in alternating slices, so that a
// change in the machine's speed falls on all of them alike.
void paired(engine::Backend& backend, const std::vector<std::string>& models, int rounds) {
  const bool native_bf16 = backend.info().native_bf16;
  using Clock = std::chrono::steady_clock;
  const std::vector<std::string> recipes = {"fp32", "mixed-bf16", "fp8", "fp16", "mixed-fp16"};
  std::printf("\npaired rounds (%d): ms per step (median round), ratio to fp32 per round: median [quartiles]\n",
              rounds);
  for (const std::string& model : models) {
    std::vector<std::unique_ptr<engine::Run>> runs;
    std::vector<engine::Record> out;
    // A recipe whose run ends (diverges) is left out, with the reason.
    std::vector<std::string> dropped(recipes.size());
    for (std::size_t i = 0; i < recipes.size(); ++i) {
      try {
        runs.push_back(warm_run(backend, model, recipes[i]));
      } catch (const std::exception& e) {
        if (i == 0) throw;  // fp32 is every ratio's base
        runs.push_back(nullptr);
        dropped[i] = e.what();
      }
    }
    // Steps per slice: about 0.1 s of the slowest recipe, measured once.
    const auto t0 = Clock::now();
    runs[0]->step(out);
    out.clear();
    const double one = std::chrono::duration<double>(Clock::now() - t0).count();
    const int slice = std::max(2, static_cast<int>(0.1 / std::max(one, 1e-6)));
    std::vector<std::vector<double>> ms(recipes.size());
    for (int round = 0; round < rounds; ++round)
      for (std::size_t k = 0; k < recipes.size(); ++k) {
        // Rotated order: no recipe always follows the same one.
        const std::size_t i = (k + static_cast<std::size_t>(round)) % recipes.size();
        if (!runs[i]) continue;
        const auto s0 = Clock::now();
        try {
          for (int j = 0; j < slice; ++j) {
            runs[i]->step(out);
            out.clear();
          }
        } catch (const std::exception& e) {
          if (i == 0) throw;
          runs[i].reset();
          dropped[i] = e.what();
          continue;
        }
        ms[i].push_back(std::chrono::duration<double, std::milli>(Clock::now() - s0).count() / slice);
      }
    std::string verdict;
    for (std::size_t i = 0; i < recipes.size(); ++i) {
      if (!runs[i]) {
        std::printf("  %-12s %-11s not timed: %s\n", model.c_str(), recipes[i].c_str(), dropped[i].c_str());
        continue;
      }
      std::vector<double> ratio;
      for (int round = 0; round < rounds; ++round) ratio.push_back(ms[0][round] / ms[i][round]);
      const double med = median(ratio);
      std::printf("  %-12s %-11s %8.3f ms  %5.2fx fp32 [%4.2f %4.2f]\n", model.c_str(), recipes[i].c_str(),
                  median(ms[i]), med, quantile(ratio, 0.25), quantile(ratio, 0.75));
      // The performance issue's bars against our fp32 (median ratio): with
      // native bf16, mixed-bf16 >= 1.3x and fp8 >= 1.2x; without, no
      // low-precision recipe below 0.9x; the emulated FP16 recipes >= 0.85x.
      const std::string& r = recipes[i];
      double bar = 0.0;
      if (r == "fp16" || r == "mixed-fp16") bar = native_bf16 ? 0.85 : 0.9;
      else if (r == "mixed-bf16") bar = native_bf16 ? 1.3 : 0.9;
      else if (r == "fp8") bar = native_bf16 ? 1.2 : 0.9;
      if (bar > 0.0 && med < bar) {
        char line[64];
        std::snprintf(line, sizeof line, " %s %.2fx < %.2fx;", r.c_str(), med, bar);
        verdict += line;
      }
    }
    std::printf("  %-12s targets (%s bf16): %s\n", model.c_str(), native_bf16 ? "native" : "no native",
                verdict.empty() ? "met" : ("missed:" + verdict).c_str());
  }
}

void summary() {
  // Best and median repetition: a VM whose speed changes between (or
  // within) processes can hand one benchmark a fast spell the others did
  // not get; where the two ratios disagree, the run measured the machine.
  std::printf("\nsamples/s (best repetition) and ratio to fp32 (same run; median repetition's ratio after):\n");
  for (const auto& [model, rates] : g_rate) {
    const auto it = rates.find("fp32");
    const double base = it != rates.end() ? it->second : 0.0;
    const double base_median = median(g_reps[model]["fp32"]);
    for (const auto& [recipe, r] : rates) {
      const double m = median(g_reps[model][recipe]);
      std::printf("  %-12s %-11s %10.0f samples/s  %5.2fx fp32   median %5.2fx", model.c_str(), recipe.c_str(), r,
                  base > 0 ? r / base : 0.0, base_median > 0 ? m / base_median : 0.0);
      if (model.rfind("gpt", 0) == 0) std::printf("   %8.0f tokens/s", r * static_cast<double>(gpt_context()));
      std::printf("\n");
    }
  }
  // The GPU against the CPU, recipe by recipe (--backend=both).
  for (const auto& [model, rates] : g_rate) {
    const auto at = model.find("@cuda");
    if (at == std::string::npos) continue;
    const auto cpu = g_rate.find(model.substr(0, at));
    if (cpu == g_rate.end()) continue;
    for (const auto& [recipe, r] : rates)
      if (auto c = cpu->second.find(recipe); c != cpu->second.end() && c->second > 0)
        std::printf("  %-12s %-11s GPU / CPU %.1fx\n", model.substr(0, at).c_str(), recipe.c_str(), r / c->second);
  }
  // The FLOP count is the default mlp's.
  if (auto m = g_rate.find("mlp"); m != g_rate.end() && g_peak.all > 0 && g_size == "default") {
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
      g_reps[name.substr(a + 1, b - a - 1)][recipe].push_back(static_cast<double>(it->second));
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace

int main(int argc, char** argv) {
  // Our own flags, taken out before Google Benchmark reads the rest.
  std::string backends = "cpu";
  bool wide = false;
  int threads = 0;  // the CPU backend's threads; 0: every core
  int paired_rounds = 0;
  bool native_bf16 = true;
  std::vector<std::string> paired_models = {"mlp", "cnn", "transformer", "gpt"};
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--backend=", 0) == 0) backends = a.substr(10);
    else if (a == "--wide") wide = true;
    else if (a.rfind("--size=", 0) == 0) g_size = a.substr(7);
    else if (a == "--size" && i + 1 < argc) g_size = argv[++i];
    else if (a.rfind("--threads=", 0) == 0) threads = std::atoi(a.c_str() + 10);
    else if (a == "--no-native-bf16") native_bf16 = false;
    else if (a == "--paired") paired_rounds = 15;
    else if (a.rfind("--paired=", 0) == 0) paired_rounds = std::max(1, std::atoi(a.c_str() + 9));
    else if (a.rfind("--models=", 0) == 0) {
      paired_models.clear();
      std::string list = a.substr(9);
      for (std::size_t at = 0; at <= list.size();) {
        const std::size_t comma = std::min(list.find(',', at), list.size());
        if (comma > at) paired_models.push_back(list.substr(at, comma - at));
        at = comma + 1;
      }
    } else argv[kept++] = argv[i];
  }
  argc = kept;
  {
    const auto& sizes = engine::size_names();
    if (std::find(sizes.begin(), sizes.end(), g_size) == sizes.end()) {
      std::fprintf(stderr, "bench_train: --size must be default or gpu (got '%s')\n", g_size.c_str());
      return 2;
    }
  }
  if (backends != "cpu" && backends != "cuda" && backends != "both") {
    std::fprintf(stderr, "bench_train: --backend must be cpu, cuda or both (got '%s')\n", backends.c_str());
    return 2;
  }
  g_peak = measure_fma_peak();
  g_data = images();
  if (backends != "cuda") {
    engine::CpuBackendOptions o;
    o.threads = threads;
    o.allow_native_bf16 = native_bf16;
    g_cpu = std::make_unique<engine::CpuBackend>(o);
  }
  if (backends != "cpu") {
    try {
      g_cuda = engine::make_cuda_backend();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_train: --backend=%s: %s\n", backends.c_str(), e.what());
      return 1;
    }
  }
  for (engine::Backend* be : {g_cpu.get(), g_cuda.get()}) {
    if (!be) continue;
    const engine::BackendInfo info = be->info();
    std::printf("FMA peak (%s): 1 thread %.1f GFLOP/s, %d threads %.1f GFLOP/s; %s: %s, %d threads, native bf16: %s, "
                "own AVX-512 kernels: %s, casts: %s; data: %s\n",
                g_peak.isa, g_peak.one, g_peak.threads, g_peak.all, info.name.c_str(), info.device.c_str(),
                info.threads, info.native_bf16 ? "yes" : "no", engine::cpu_runs_avx512() ? "yes" : "no",
                engine::cast_path_name(engine::best_cast_path()), g_data->train.name.c_str());
  }
  if (g_size != "default") {
    for (const char* m : {"mlp", "cnn", "transformer", "gpt"}) {
      engine::RunConfig c;
      c.model = m;
      if (c.model == "gpt") bench::set_gpt_baby(c);
      engine::apply_size(c, g_size);
      const engine::ModelShape sh = engine::model_shape(c);
      std::string shape;
      for (std::int64_t w : c.model == "mlp" ? sh.widths : sh.channels) shape += (shape.empty() ? "" : ",") + std::to_string(w);
      if (c.model == "transformer" || c.model == "gpt")
        shape = "depth " + std::to_string(sh.depth) + ", width " + std::to_string(sh.width) + ", heads " +
                std::to_string(sh.heads) + (c.model == "gpt" ? ", context " + std::to_string(c.context) : "");
      else shape = (c.model == "mlp" ? "widths " : "channels ") + shape;
      std::printf("size %s: %-11s %s, batch %lld\n", g_size.c_str(), m, shape.c_str(), static_cast<long long>(c.batch));
    }
  }
  if (paired_rounds > 0) {
    engine::Backend* be = g_cpu ? g_cpu.get() : g_cuda.get();
    try {
      paired(*be, paired_models, paired_rounds);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_train: --paired: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  std::vector<std::string> models = {"mlp", "cnn", "transformer", "gpt"};
  if (wide) models.push_back("mlp-wide");
  for (engine::Backend* be : {g_cpu.get(), g_cuda.get()}) {
    if (!be) continue;
    const std::string suffix = be == g_cuda.get() ? "@cuda" : "";
    for (const std::string& model : models)
      for (const char* recipe : {"fp32", "fp16", "mixed-fp16", "mixed-bf16", "fp8", "mxfp8", "mxfp4", "nvfp4"})
        benchmark::RegisterBenchmark(("train/" + model + suffix + "/" + recipe).c_str(),
                                     [be, m = model, r = std::string(recipe)](benchmark::State& st) {
                                       BM_Train(st, *be, m, r);
                                     })
            ->Unit(benchmark::kMillisecond)
            ->MinTime(model == "mlp" ? 1.0 : 2.0)
            ->UseRealTime();
  }
  benchmark::Initialize(&argc, argv);
  Collector reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  summary();
  benchmark::Shutdown();
  return 0;
}
