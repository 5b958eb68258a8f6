// bench_cuda_gemm: GEMM throughput of the CUDA backend (cuBLASLt) per shape
// and format, in TFLOP/s and as a percentage of the card's dense peak for
// that format (the datasheet's figure, known for A100 and H100; other cards
// print TFLOP/s only). Needs the CUDA backend and a device; without one it
// says why and exits 1.
//
//   build/release/tests/bench/bench_cuda_gemm
//   build/release/tests/bench/bench_cuda_gemm --benchmark_filter=8192
//
// Each timed iteration queues the GEMM and waits for it (a 4-byte download:
// the backend's one synchronous call), so a small shape's figure includes
// the launch and the wait: the cost a training step pays per GEMM.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda_backend.h"
#include "numeric/convert.h"
#include "numeric/format.h"

namespace {

using engine::Format;
using i64 = std::int64_t;
using Clock = std::chrono::steady_clock;

std::unique_ptr<engine::Backend> g_be;
std::string g_device;

// Dense Tensor Core peaks in TFLOP/s from NVIDIA's datasheets (without
// sparsity): FP32 (CUDA cores), TF32, FP16/BF16, FP8. 0: unknown.
struct Peak {
  const char* name;
  double fp32, tf32, half, fp8;
};
constexpr Peak kPeaks[] = {
    {"H100 SXM", 67, 494.7, 989.4, 1978.9}, {"H100 80GB HBM3", 67, 494.7, 989.4, 1978.9},
    {"H100 PCIe", 51, 378, 756, 1513},      {"H100 NVL", 60, 835.0 / 2, 1671.0 / 2, 3341.0 / 2},
    {"H200", 67, 494.7, 989.4, 1978.9},     {"A100", 19.5, 156, 312, 0},
};

double peak_of(Format f) {
  for (const Peak& p : kPeaks)
    if (g_device.find(p.name) != std::string::npos) {
      switch (f) {
        case Format::FP32: return p.fp32;
        case Format::TF32: return p.tf32;
        case Format::FP16:
        case Format::BF16: return p.half;
        case Format::E4M3:
        case Format::E5M2: return p.fp8;
        default: return 0;
      }
    }
  return 0;
}

struct Shape {
  std::string name;
  i64 m, n, k;
  bool ta, tb;
};

// A device buffer of n values of format f (random normal values, encoded).
void* device_values(Format f, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  const std::size_t es = engine::storage_bytes(f);
  std::vector<std::uint8_t> bytes(n * es);
  for (std::size_t i = 0; i < n; ++i) {
    const float v = d(rng);
    std::uint32_t bits = 0;
    if (f == Format::FP32 || f == Format::TF32) std::memcpy(&bits, &v, 4);
    else bits = engine::encode(f, v);
    std::memcpy(bytes.data() + i * es, &bits, es);
  }
  void* p = g_be->allocate(bytes.size());
  g_be->upload(p, bytes.data(), bytes.size());
  return p;
}

void bm_gemm(benchmark::State& st, const Shape& s, Format f) {
  const i64 a_rows = s.ta ? s.k : s.m, a_cols = s.ta ? s.m : s.k;
  const i64 b_rows = s.tb ? s.n : s.k, b_cols = s.tb ? s.k : s.n;
  void* a = device_values(f, static_cast<std::size_t>(a_rows * a_cols), 1);
  void* b = device_values(f, static_cast<std::size_t>(b_rows * b_cols), 2);
  auto* c = static_cast<float*>(g_be->allocate(static_cast<std::size_t>(s.m * s.n) * 4));
  engine::GemmArgs g;
  g.m = s.m;
  g.n = s.n;
  g.k = s.k;
  g.a = {a, f, s.ta, a_cols};
  g.b = {b, f, s.tb, b_cols};
  g.c = c;
  g.ldc = s.n;
  float sink = 0;
  g_be->gemm(g);  // plan and heuristic: not timed
  g_be->download(&sink, c, sizeof sink);
  for (auto _ : st) {
    const auto t0 = Clock::now();
    g_be->gemm(g);
    g_be->download(&sink, c, sizeof sink);
    st.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  const double flops = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
  st.counters["TFLOP/s"] = benchmark::Counter(flops * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
  if (const double peak = peak_of(f); peak > 0)
    st.counters["peak%"] = benchmark::Counter(flops * 1e-12 * 100.0 / peak, benchmark::Counter::kIsIterationInvariantRate);
  g_be->release(a);
  g_be->release(b);
  g_be->release(c);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  try {
    g_be = engine::make_cuda_backend();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_gemm: %s\n", e.what());
    return 1;
  }
  g_device = g_be->info().device;
  std::printf("device: %s; peaks from the datasheet: %s\n", g_device.c_str(),
              peak_of(Format::FP16) > 0 ? "known" : "unknown for this card (TFLOP/s only)");
  std::vector<Shape> shapes;
  for (i64 n : {1024, 4096, 8192}) shapes.push_back({"square_" + std::to_string(n), n, n, n, false, true});
  // The training shapes: the mlp's first layer at batch 128 and the wide
  // mlp's hidden layer at batch 1024 (bench_train --wide), forward (x W^T).
  shapes.push_back({"mlp_fc1_fwd", 128, 256, 784, false, true});
  shapes.push_back({"wide_fc2_fwd", 1024, 4096, 4096, false, true});
  shapes.push_back({"wide_fc2_dW", 4096, 4096, 1024, true, false});
  for (const Shape& s : shapes)
    for (Format f : {Format::FP32, Format::TF32, Format::FP16, Format::BF16, Format::E4M3})
      benchmark::RegisterBenchmark(("gemm/" + s.name + "/" + engine::format_name(f)).c_str(),
                                   [s, f](benchmark::State& st) { bm_gemm(st, s, f); })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  g_be.reset();
  return 0;
}
