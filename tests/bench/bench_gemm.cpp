// bench_gemm: GEMM and convolution throughput of the CPU backend on the
// models' training shapes (FP32, native BF16, FP16 decoded to f32, E4M3
// decoded to bf16), as
// GFLOP/s and as a percentage of the machine's FMA peak measured at start-up
// in the same run.
//
//   build/dev/tests/bench/bench_gemm                      all benchmarks
//   build/dev/tests/bench/bench_gemm --benchmark_filter=mlp
//   DNNL_VERBOSE=1 build/dev/tests/bench/bench_gemm ...   oneDNN's kernel names
#include <benchmark/benchmark.h>
#include <omp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "numeric/convert.h"
#include "numeric/format.h"
#include "fma_peak.h"



namespace {

using engine::Format;
using i64 = std::int64_t;
using Clock = std::chrono::steady_clock;

FmaPeak g_peak;

// ---- data --------------------------------------------------------------------
// n values of format f in its storage width (FP32/TF32: float), N(0, 1).
std::vector<std::uint8_t> random_values(Format f, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  const std::size_t es = engine::storage_bytes(f);
  std::vector<std::uint8_t> out(n * es);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t bits = engine::encode(f, d(rng));
    std::memcpy(out.data() + i * es, &bits, es);
  }
  return out;
}

std::vector<float> random_f32(std::size_t n, std::uint64_t seed) {
  std::vector<float> v(n);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (auto& x : v) x = d(rng);
  return v;
}

// The backend every benchmark shares: all cores, as the app creates it.
engine::CpuBackend& backend() {
  static engine::CpuBackend be;
  return be;
}

void report(benchmark::State& st, double flops_per_iter, double seconds) {
  const double gflops = flops_per_iter * static_cast<double>(st.iterations()) / seconds / 1e9;
  st.counters["GFLOP/s"] = gflops;
  if (g_peak.all > 0.0) st.counters["peak%"] = 100.0 * gflops / g_peak.all;
}

// ---- GEMM --------------------------------------------------------------------
struct GemmShape {
  const char* name;
  i64 m, n, k;
  bool ta, tb, bias;
  i64 batch = 1;  // > 1: batch x 4 products (attention: batch x heads), contiguous
};

void bm_gemm(benchmark::State& st, engine::Backend& be, const GemmShape& s, Format f, Format acc) {
  const i64 a_rows = s.ta ? s.k : s.m, a_cols = s.ta ? s.m : s.k;
  const i64 b_rows = s.tb ? s.n : s.k, b_cols = s.tb ? s.k : s.n;
  const i64 products = s.batch > 1 ? s.batch * 4 : 1;
  const auto a = random_values(f, static_cast<std::size_t>(products * a_rows * a_cols), 1);
  const auto b = random_values(f, static_cast<std::size_t>(products * b_rows * b_cols), 2);
  std::vector<float> c(static_cast<std::size_t>(products * s.m * s.n)),
      bias = random_f32(static_cast<std::size_t>(s.n), 3);
  engine::GemmArgs g;
  g.m = s.m;
  g.n = s.n;
  g.k = s.k;
  g.a = {a.data(), f, s.ta, a_cols};
  g.b = {b.data(), f, s.tb, b_cols};
  g.c = c.data();
  g.ldc = s.n;
  g.bias = s.bias ? bias.data() : nullptr;
  g.accumulate = acc;
  // FP8 layers scale their products back by 1 / (scale_a scale_b).
  if (f == Format::E4M3 || f == Format::E5M2) g.alpha = 0.25f;
  if (products > 1) {
    g.batch[0] = s.batch;
    g.batch[1] = 4;
    g.a.batch_stride[0] = 4 * a_rows * a_cols;
    g.a.batch_stride[1] = a_rows * a_cols;
    g.b.batch_stride[0] = 4 * b_rows * b_cols;
    g.b.batch_stride[1] = b_rows * b_cols;
    g.c_batch_stride[0] = 4 * s.m * s.n;
    g.c_batch_stride[1] = s.m * s.n;
  }
  be.gemm(g);  // creates and caches the primitive: not timed
  const auto t0 = Clock::now();
  for (auto _ : st) {
    be.gemm(g);
    benchmark::ClobberMemory();
  }
  report(st, 2.0 * static_cast<double>(products * s.m * s.n * s.k), std::chrono::duration<double>(Clock::now() - t0).count());
  if (auto* cpu = dynamic_cast<engine::CpuBackend*>(&be)) {
    const std::string impl = cpu->last_gemm_impl();
    st.SetLabel(impl.empty() ? "own kernel" : impl);
  }
}

// ---- convolution ---------------------------------------------------------------
enum class ConvDir { Forward, BackwardData, BackwardWeights };

void bm_conv(benchmark::State& st, const engine::ConvShape& s, ConvDir dir, Format f) {
  engine::CpuBackend& be = backend();
  const i64 oh = s.out_h(), ow = s.out_w();
  auto x = random_f32(static_cast<std::size_t>(s.n * s.c_in * s.h * s.w), 4);
  auto w = random_f32(static_cast<std::size_t>(s.c_out * s.c_in * s.kh * s.kw), 5);
  auto y = random_f32(static_cast<std::size_t>(s.n * s.c_out * oh * ow), 6);
  auto b = random_f32(static_cast<std::size_t>(s.c_out), 7);
  // The caller's contract: values already rounded to the compute format.
  for (auto* v : {&x, &w, &y})
    for (auto& e : *v) e = engine::quantize(f, e);
  auto run = [&] {
    switch (dir) {
      case ConvDir::Forward: be.conv2d_forward(s, f, x.data(), w.data(), b.data(), y.data()); break;
      case ConvDir::BackwardData: be.conv2d_backward_data(s, f, y.data(), w.data(), x.data()); break;
      case ConvDir::BackwardWeights:
        be.conv2d_backward_weights(s, f, x.data(), y.data(), w.data(), b.data());
        break;
    }
  };
  run();
  const auto t0 = Clock::now();
  for (auto _ : st) {
    run();
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * static_cast<double>(s.n * s.c_out * oh * ow * s.c_in * s.kh * s.kw);
  report(st, flops, std::chrono::duration<double>(Clock::now() - t0).count());
  st.SetLabel(be.last_conv_impl());
}

// ---- a busy neighbour ------------------------------------------------------------
// The GUI thread draws while the trainer computes: one more runnable thread
// than cores. This runs a GEMM with a spinning thread beside it, on a
// backend with `threads` OpenMP threads (OMP_WAIT_POLICY applies).
void bm_gemm_busy_neighbour(benchmark::State& st, const GemmShape& s, int threads) {
  engine::CpuBackendOptions o;
  o.threads = threads;
  engine::CpuBackend be(o);
  std::atomic<bool> stop{false};
  std::thread neighbour([&stop] {
    volatile double x = 1.0;
    while (!stop.load(std::memory_order_relaxed)) x = x * 1.0000001 + 1e-9;
  });
  bm_gemm(st, be, s, Format::FP32, Format::FP32);
  stop = true;
  neighbour.join();
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  g_peak = measure_fma_peak();
  const engine::BackendInfo info = backend().info();
  std::printf("FMA peak (%s): 1 thread %.1f GFLOP/s, %d threads %.1f GFLOP/s; backend: %s, %d threads, native bf16: %s\n",
              g_peak.isa, g_peak.one, g_peak.threads, g_peak.all, info.device.c_str(), info.threads,
              info.native_bf16 ? "yes" : "no");
  std::fflush(stdout);
  benchmark::AddCustomContext("fma_peak_isa", g_peak.isa);
  benchmark::AddCustomContext("fma_peak_1thread_GFLOPs", std::to_string(g_peak.one));
  benchmark::AddCustomContext("fma_peak_all_threads_GFLOPs", std::to_string(g_peak.all));
  benchmark::AddCustomContext("backend_native_bf16", info.native_bf16 ? "yes" : "no");

  // The MLP 784-256-128-10 at batch 128. Weights are [out x in]:
  // forward y = x W^T + b; backward dW = dy^T x, dx = dy W.
  static const GemmShape mlp[] = {
      {"fc1_fwd", 128, 256, 784, false, true, true}, {"fc1_dW", 256, 784, 128, true, false, false},
      {"fc1_dx", 128, 784, 256, false, false, false}, {"fc2_fwd", 128, 128, 256, false, true, true},
      {"fc2_dW", 128, 256, 128, true, false, false},  {"fc2_dx", 128, 256, 128, false, false, false},
      {"fc3_fwd", 128, 10, 128, false, true, true},   {"fc3_dW", 10, 128, 128, true, false, false},
      {"fc3_dx", 128, 128, 10, false, false, false},
  };
  // The CNN's convolutions (batch 128, 5x5, pad 2) as the GEMMs an im2col
  // lowering would run: conv1 1->32 on 28x28, conv2 32->64 on 14x14.
  static const GemmShape cnn[] = {
      {"conv1_im2col_fwd", 128 * 28 * 28, 32, 1 * 25, false, true, true},
      {"conv2_im2col_fwd", 128 * 14 * 14, 64, 32 * 25, false, true, true},
  };
  // The transformer's attention (batch 128, 4 heads, 16 tokens of 16):
  // scores = q k^T, out = p v, and backward's dp = dout v^T, dv = p^T dout.
  static const GemmShape attention[] = {
      {"scores", 16, 16, 16, false, true, false, 128}, {"out", 16, 16, 16, false, false, false, 128},
      {"dv", 16, 16, 16, true, false, false, 128},
  };
  // The transformer's linear layers (batch 128 x 16 tokens, width 64, MLP
  // 128): qkv and fc1 forward, their input gradients and weight gradients.
  static const GemmShape transformer[] = {
      {"qkv_fwd", 2048, 192, 64, false, true, true},  {"qkv_dx", 2048, 64, 192, false, false, false},
      {"qkv_dW", 192, 64, 2048, true, false, false},  {"fc1_fwd", 2048, 128, 64, false, true, true},
      {"fc2_fwd", 2048, 64, 128, false, true, true},  {"fc1_dW", 128, 64, 2048, true, false, false},
  };
  const Format formats[] = {Format::FP32, Format::BF16, Format::FP16, Format::E4M3};
  auto add_gemm = [](const std::string& group, const GemmShape& s, Format f, Format acc) {
    std::string name = group + "/" + s.name + "/" + engine::format_name(f);
    if (acc != Format::FP32) name += "/acc_" + std::string(engine::format_name(acc));
    benchmark::RegisterBenchmark(name.c_str(), [s, f, acc](benchmark::State& st) { bm_gemm(st, backend(), s, f, acc); })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  };
  for (const GemmShape& s : mlp)
    for (Format f : formats) add_gemm("mlp", s, f, Format::FP32);
  for (const GemmShape& s : attention)
    for (Format f : formats) add_gemm("attention", s, f, Format::FP32);
  for (const GemmShape& s : cnn)
    for (Format f : formats) add_gemm("cnn", s, f, Format::FP32);
  for (const GemmShape& s : transformer)
    for (Format f : formats) add_gemm("transformer", s, f, Format::FP32);
  // FP8 (decoded to bf16) and the FP16-accumulation demonstration kernel.
  add_gemm("mlp", mlp[0], Format::E4M3, Format::FP32);
  add_gemm("mlp", mlp[0], Format::FP16, Format::FP16);
  add_gemm("mlp", mlp[0], Format::BF16, Format::BF16);

  static const engine::ConvShape conv1{128, 1, 28, 28, 32, 5, 5, 1, 2}, conv2{128, 32, 14, 14, 64, 5, 5, 1, 2};
  const std::pair<const char*, const engine::ConvShape*> convs[] = {{"conv1", &conv1}, {"conv2", &conv2}};
  const std::pair<const char*, ConvDir> dirs[] = {
      {"fwd", ConvDir::Forward}, {"bwd_data", ConvDir::BackwardData}, {"bwd_weights", ConvDir::BackwardWeights}};
  for (const auto& [cname, shape] : convs)
    for (const auto& [dname, dir] : dirs)
      for (Format f : {Format::FP32, Format::BF16}) {
        const std::string name = std::string("cnn/") + cname + "_" + dname + "/" + engine::format_name(f);
        const engine::ConvShape s = *shape;
        const ConvDir d = dir;
        benchmark::RegisterBenchmark(name.c_str(), [s, d, f](benchmark::State& st) { bm_conv(st, s, d, f); })
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }

  for (int threads : {1, omp_get_num_procs()}) {
    const std::string name = "busy_neighbour/fc1_fwd/FP32/threads:" + std::to_string(threads);
    benchmark::RegisterBenchmark(name.c_str(), [threads](benchmark::State& st) {
      bm_gemm_busy_neighbour(st, mlp[0], threads);
    })->UseRealTime()->Unit(benchmark::kMicrosecond);
  }

  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
