// The solver against LAPACK in one run: our LU-IR (an LU in a low format,
// refined to FP64 accuracy) and OpenBLAS's dgesv (FP64 LU) and dsgesv (FP32
// LU, FP64 refinement) on the same matrix, kappa = 1e2, at 1 and 2 OpenBLAS
// threads; the summary after the table gives each of ours as a speed ratio
// over dgesv at its best thread count (> 1: ours is faster).
// Run: build/release/tests/bench/bench_solve [--sizes 1024,4096] [--threads N] [--benchmark_filter=...]
// (--threads: the engine's threads, default all cores; OpenBLAS runs at 1 and 2 either way).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/registry.h"
#include "engine/solve/lapack.h"
#include "solve/refine.h"


namespace {

using Clock = std::chrono::steady_clock;

struct Problem {
  engine::Matrix a;
  std::vector<double> col, x, b;
};

// The kappa = 1e2 matrix of size n from seed 1. Making one of n = 4096 takes
// minutes, so it is kept in $TMPDIR (or /tmp) as raw doubles beside its
// size, and read back when the file is there and whole.
engine::Matrix cached_matrix(int n) {
  const char* dir = std::getenv("TMPDIR");
  const std::string path = std::string(dir && *dir ? dir : "/tmp") + "/pl_bench_solve_n" + std::to_string(n) +
                           "_k1e2_s1.f64";
  engine::Matrix m;
  m.n = n;
  m.a.resize(static_cast<std::size_t>(n) * static_cast<std::size_t>(n));
  const std::size_t bytes = m.a.size() * sizeof(double);
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    const bool whole = std::fread(m.a.data(), 1, bytes, f) == bytes && std::fgetc(f) == EOF;
    std::fclose(f);
    if (whole) return m;
  }
  m = engine::random_matrix(n, 1e2, 1);
  const std::string tmp = path + ".part";
  if (std::FILE* f = std::fopen(tmp.c_str(), "wb")) {
    const bool ok = std::fwrite(m.a.data(), 1, bytes, f) == bytes;
    if (std::fclose(f) == 0 && ok) std::rename(tmp.c_str(), path.c_str());
    else std::remove(tmp.c_str());
  }
  return m;
}

const Problem& problem(int n) {
  static std::map<int, std::unique_ptr<Problem>> cache;
  auto& p = cache[n];
  if (!p) {
    p = std::make_unique<Problem>();
    const auto t0 = Clock::now();
    p->a = cached_matrix(n);
    p->x = engine::random_vector(n, 2);
    p->b.resize(static_cast<std::size_t>(n));
    engine::matvec(p->a, p->x.data(), p->b.data());
    p->col = solvetest::column_major(p->a);
    std::fprintf(stderr, "bench_solve: the n = %d matrix (kappa 1e2) took %.1f s to make or read\n", n,
                 std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return *p;
}

int g_threads = 0;  // --threads: the engine's (0: all cores)

engine::Backend& cpu() {
  static engine::BackendChoice be = engine::make_backend("cpu", g_threads);
  return *be.backend;
}

// Best (shortest) seconds per solver and size, for the summary.
std::map<std::string, double>& best() {
  static std::map<std::string, double> m;
  return m;
}
std::map<std::string, bool>& ran() {
  static std::map<std::string, bool> m;
  return m;
}
void keep_best(const std::string& key, double s) {
  auto it = best().find(key);
  if (it == best().end() || s < it->second) best()[key] = s;
}

// "bf16-lu-ir": the LU held in BF16; "bf16-tc-...": held in FP32, the
// trailing update's operands in BF16 (Tensor Core mode); "...-gmres-ir":
// GMRES-IR, its inner solve in FP64; "...-gmres-ir-fp32": in FP32.
engine::RefineConfig config_of(std::string label) {
  engine::RefineConfig c;
  if (label.ends_with("-fp32")) {
    c.gmres = engine::Arith::FP32;
    label.resize(label.size() - 5);
  }
  if (label.ends_with("-gmres-ir")) c.method = engine::Method::GmresIr;
  label = label.substr(0, label.rfind('-', label.rfind('-') - 1));
  const bool tc = label.ends_with("-tc");
  c.lu.factor = *engine::parse_factor_format(tc ? label.substr(0, label.size() - 3) : label);
  if (tc) c.lu.storage = engine::LuConfig::Storage::FP32;
  return c;
}

void bm_ours(benchmark::State& state, const char* factor, int n) {
  const Problem& p = problem(n);
  const engine::RefineConfig c = config_of(factor);
  ran()[std::string(factor) + "/" + std::to_string(n)] = true;
  engine::SolveResult r;
  // Buffers kept from one solve to the next, as a caller solving system
  // after system keeps them (LAPACK's WORK, cuSOLVER's workspace): the
  // first solve maps them in, the timed ones reuse them.
  static engine::SolveWorkspace ws;
  for (auto _ : state) {
    r = engine::solve_refine(p.a, p.b, &p.x, c, &cpu(), &ws);
    const double s = r.factor_seconds + r.refine_seconds;
    state.SetIterationTime(s);
    if (r.converged) keep_best(std::string(factor) + "/" + std::to_string(n), s);  // only answers count
  }
  state.counters["iterations"] = r.iterations;
  state.counters["gmres"] = r.gmres_iterations;
  state.counters["backward_error"] = r.backward_error;
  state.counters["forward_error"] = r.forward_error;
  state.counters["factor_s"] = r.factor_seconds;
  if (!r.converged) state.SkipWithError(("did not converge: " + r.reason).c_str());
}

void bm_lapack(benchmark::State& state, bool mixed, int n, int threads) {
  const Problem& p = problem(n);
  openblas_set_num_threads(threads);
  solvetest::LapackSolution s;
  solvetest::LapackWork work;  // dsgesv's WORK and SWORK, kept as ours are
  for (auto _ : state) {
    std::vector<double> a = p.col;  // dgesv overwrites A: the copy is not timed
    const auto t0 = Clock::now();
    s = mixed ? solvetest::lapack_dsgesv(std::move(a), p.b, n, &work) : solvetest::lapack_dgesv(std::move(a), p.b, n);
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    state.SetIterationTime(sec);
    keep_best(std::string(mixed ? "dsgesv" : "dgesv") + "/" + std::to_string(n), sec);
  }
  state.counters["forward_error"] = solvetest::relative_difference(s.x, p.x);
  if (mixed) state.counters["iterations"] = s.iter;
  if (s.info != 0) state.SkipWithError("LAPACK info != 0");
  openblas_set_num_threads(1);  // idle OpenBLAS threads must not spin beside ours
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes = {1024};
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      g_threads = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--sizes") == 0 && i + 1 < argc) {
      sizes.clear();
      for (char* t = std::strtok(argv[++i], ","); t; t = std::strtok(nullptr, ",")) sizes.push_back(std::atoi(t));
    } else {
      rest.push_back(argv[i]);
    }
  }
  int rc = static_cast<int>(rest.size());
  for (int n : sizes) problem(n);  // made on every core, before the engine's count is set
  cpu();
  openblas_set_num_threads(1);
  const char* kFormats[] = {"bf16-tc-lu-ir", "bf16-tc-gmres-ir", "bf16-tc-gmres-ir-fp32", "fp16-tc-lu-ir",
                            "bf16-lu-ir",    "fp16-lu-ir",       "fp32-lu-ir"};
  for (int n : sizes) {
    for (const char* f : kFormats)
      benchmark::RegisterBenchmark(("ours/" + std::string(f) + "/" + std::to_string(n)).c_str(), bm_ours, f, n)
          ->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);
    for (int t : {1, 2}) {
      benchmark::RegisterBenchmark(("dgesv/" + std::to_string(n) + "/threads:" + std::to_string(t)).c_str(), bm_lapack,
                                   false, n, t)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);
      benchmark::RegisterBenchmark(("dsgesv/" + std::to_string(n) + "/threads:" + std::to_string(t)).c_str(), bm_lapack,
                                   true, n, t)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);
    }
  }
  benchmark::Initialize(&rc, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  const engine::BackendInfo info = cpu().info();
  std::printf("\nspeed over OpenBLAS dgesv at its best thread count (best times; > 1: faster; %s, %d threads, %s):\n",
              info.device.c_str(), info.threads, info.native_bf16 ? "native bf16" : "no native bf16");
  for (int n : sizes) {
    const auto d = best().find("dgesv/" + std::to_string(n));
    if (d == best().end()) continue;
    std::printf("  n = %d: dgesv %.1f ms\n", n, d->second * 1e3);
    for (const char* s : {"bf16-tc-lu-ir", "bf16-tc-gmres-ir", "bf16-tc-gmres-ir-fp32", "fp16-tc-lu-ir", "bf16-lu-ir",
                          "fp16-lu-ir", "fp32-lu-ir", "dsgesv"}) {
      const auto o = best().find(std::string(s) + "/" + std::to_string(n));
      if (o != best().end())
        std::printf("    %-21s %8.1f ms  %.2fx\n", s, o->second * 1e3, d->second / o->second);
      else if (ran().count(std::string(s) + "/" + std::to_string(n)))
        std::printf("    %-21s did not converge\n", s);
    }
  }
  return 0;
}
