// Bulk cast throughput per format, direction and path (GB/s counts bytes
// read plus bytes written), next to memcpy of the FP32 array in the same run.
// Run: build/dev/tests/bench/bench_cast [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "numeric/cast.h"
#include "numeric/format.h"

namespace {

using engine::CastOptions;
using engine::CastPath;
using engine::Format;

constexpr std::size_t kElements = std::size_t{4} << 20;  // 4 Mi: 16 MiB of FP32
constexpr CastPath kPaths[] = {CastPath::Scalar, CastPath::F16C, CastPath::AVX512, CastPath::AVX512BF16};
constexpr Format kFormats[] = {Format::TF32, Format::BF16, Format::FP16, Format::E5M2, Format::E4M3};

// 64-byte aligned buffers like engine::Tensor's storage, plus `offset`
// bytes (the misaligned variants use one element's worth).
struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<std::uint8_t, FreeDeleter>;
Buffer aligned_buffer(std::size_t bytes) {
  return Buffer(static_cast<std::uint8_t*>(std::aligned_alloc(64, (bytes + 64 + 63) / 64 * 64)));
}

// Activation-like data: normal with a spread of magnitudes, no NaN.
const float* source(std::size_t offset_elements = 0) {
  static const Buffer data = [] {
    Buffer b = aligned_buffer((kElements + 16) * sizeof(float));
    auto* v = reinterpret_cast<float*>(b.get());
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_int_distribution<int> scale(-8, 8);
    for (std::size_t i = 0; i < kElements + 16; ++i) v[i] = std::ldexp(nd(rng), scale(rng));
    return b;
  }();
  return reinterpret_cast<const float*>(data.get()) + offset_elements;
}

void set_rate(benchmark::State& state, double bytes_per_iteration) {
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes_per_iteration) * state.iterations());
  state.counters["GB/s"] =
      benchmark::Counter(bytes_per_iteration / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void bm_memcpy(benchmark::State& state, std::size_t n) {
  const float* src = source();
  Buffer dst = aligned_buffer(n * sizeof(float));
  for (auto _ : state) {
    std::memcpy(dst.get(), src, n * sizeof(float));
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
  }
  set_rate(state, 2.0 * n * sizeof(float));
}

std::string coverage_label(CastPath p, Format f, bool from_f32) {
  return engine::cast_path_covers(p, f, from_f32) ? "" : "scalar fallback";
}

void bm_from_f32(benchmark::State& state, CastPath p, Format f, bool stochastic, std::size_t offset,
                 std::size_t n) {
  if (!engine::cast_path_supported(p)) {
    state.SkipWithError("path not supported by this CPU");
    return;
  }
  const float* src = source(offset);
  const std::size_t w = engine::storage_bytes(f);
  Buffer dst_buffer = aligned_buffer((n + offset) * w);
  std::uint8_t* dst = dst_buffer.get() + offset * w;
  CastOptions opt;
  opt.stochastic = stochastic;
  opt.seed = 7;
  for (auto _ : state) {
    engine::cast_from_f32_path(p, f, src, dst, n, opt);
    benchmark::DoNotOptimize(dst);
    benchmark::ClobberMemory();
  }
  set_rate(state, static_cast<double>(n) * (4 + w));
  state.SetLabel(stochastic ? "stochastic: scalar loop" : coverage_label(p, f, true));
}

void bm_to_f32(benchmark::State& state, CastPath p, Format f, std::size_t offset, std::size_t n) {
  if (!engine::cast_path_supported(p)) {
    state.SkipWithError("path not supported by this CPU");
    return;
  }
  const std::size_t w = engine::storage_bytes(f);
  Buffer src_buffer = aligned_buffer((n + offset) * w);
  std::uint8_t* src = src_buffer.get() + offset * w;
  engine::cast_from_f32_path(CastPath::Scalar, f, source(), src, n);
  Buffer dst_buffer = aligned_buffer((n + offset) * sizeof(float));
  float* dst = reinterpret_cast<float*>(dst_buffer.get()) + offset;
  for (auto _ : state) {
    engine::cast_to_f32_path(p, f, src, dst, n);
    benchmark::DoNotOptimize(dst);
    benchmark::ClobberMemory();
  }
  set_rate(state, static_cast<double>(n) * (w + 4));
  state.SetLabel(coverage_label(p, f, false));
}

void bm_quantize(benchmark::State& state, CastPath p, Format f, std::size_t offset, std::size_t n) {
  if (!engine::cast_path_supported(p)) {
    state.SkipWithError("path not supported by this CPU");
    return;
  }
  Buffer buffer = aligned_buffer((n + offset) * sizeof(float));
  float* x = reinterpret_cast<float*>(buffer.get()) + offset;
  std::memcpy(x, source(), n * sizeof(float));
  for (auto _ : state) {
    // Re-rounding rounded values is idempotent, so every iteration does the
    // same work on the same kind of data.
    engine::quantize_inplace_path(p, f, x, n);
    benchmark::DoNotOptimize(x);
    benchmark::ClobberMemory();
  }
  set_rate(state, 2.0 * n * sizeof(float));
  state.SetLabel(coverage_label(p, f, true));
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const double min_time = 0.2;
  auto reg = [&](const std::string& name, auto fn, auto... args) {
    benchmark::RegisterBenchmark(name.c_str(), fn, args...)->MinTime(min_time)->UseRealTime();
  };
  // 4 Mi elements (16 MiB of FP32: memory/L3 bound, the figure that
  // matters for tensors) and 64 Ki elements (256 KiB: stays in L2, shows the
  // kernels' own cost).
  struct Size {
    std::size_t n;
    const char* name;
  };
  const Size sizes[] = {{kElements, "4Mi"}, {std::size_t{64} << 10, "64Ki"}};
  for (const Size& sz : sizes) {
    const std::string size = std::string("/") + sz.name;
    reg("memcpy_f32" + size, bm_memcpy, sz.n);
    for (Format f : kFormats) {
      for (CastPath p : kPaths) {
        const std::string tail = std::string(engine::format_key(f)) + "/" + engine::cast_path_name(p) + size;
        reg("from_f32/" + tail, bm_from_f32, p, f, false, std::size_t{0}, sz.n);
        if (f != Format::TF32) reg("to_f32/" + tail, bm_to_f32, p, f, std::size_t{0}, sz.n);  // TF32 -> FP32: a copy
        reg("quantize/" + tail, bm_quantize, p, f, std::size_t{0}, sz.n);
      }
    }
  }
  // The default path one element off 64-byte alignment (a tensor slice),
  // and stochastic rounding (always the scalar loop).
  const CastPath best = engine::best_cast_path();
  for (Format f : kFormats) {
    const std::string tail = std::string(engine::format_key(f)) + "/" + engine::cast_path_name(best) + "/4Mi";
    reg("from_f32/" + tail + "/misaligned", bm_from_f32, best, f, false, std::size_t{1}, kElements);
    if (f != Format::TF32) reg("to_f32/" + tail + "/misaligned", bm_to_f32, best, f, std::size_t{1}, kElements);
    reg("quantize/" + tail + "/misaligned", bm_quantize, best, f, std::size_t{1}, kElements);
    reg("from_f32_sr/" + tail, bm_from_f32, best, f, true, std::size_t{0}, kElements);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
