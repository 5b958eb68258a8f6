// Backend conformance: every op of engine::Backend, every operand format, on
// every backend, against a scalar reference written here (double precision,
// operands decoded with the numeric reference functions), with a stated
// tolerance per op and format. Built with -ffp-contract=off: the
// reduced-precision references must round exactly where they say.
#include <dnnl.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <deque>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numbers>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/test_configs.h"
#include "backend/backend.h"
#include "backend/fused.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/gelu_simd.h"
#include "backend/cuda/lt_epilogue.h"
#include "backend/cuda_backend.h"
#include "host_cuda_table.h"
#include "engine/support/random_values.h"
#include "data/dataset.h"
#include "tensor/tensor.h"
#include "train/run.h"
#include "train/run_config.h"
#include "numeric/cast.h"
#include "numeric/convert.h"
#include "numeric/format.h"

namespace {

// Reductions write their results to backend memory; these run one and read
// the result back.
template <class T, class Op>
T read_back(engine::Backend& be, Op op) {
  engine::BackendScope scope(be);
  engine::Buffer r;
  r.reserve(2 * sizeof(std::int64_t));
  r.zero(2 * sizeof(std::int64_t));
  op(r);
  T v;
  r.download(&v, sizeof v);
  return v;
}
std::int64_t count_nonfinite(engine::Backend& be, const float* x, std::int64_t n) {
  return read_back<std::int64_t>(be, [&](engine::Buffer& r) { be.count_nonfinite(x, n, r.as<std::int64_t>()); });
}
double sum_squares(engine::Backend& be, const float* x, std::int64_t n) {
  // The loss scaler's fused pass with scale 1 (x * 1 == x).
  return read_back<double>(be, [&](engine::Buffer& r) {
    const engine::GradBuffer g{const_cast<float*>(x), n, nullptr};
    be.unscale_grads(&g, 1, 1.0f, r.as<double>());
  });
}
double mse_forward(engine::Backend& be, const float* p, const float* t, std::int64_t n) {
  return read_back<double>(be, [&](engine::Buffer& r) { be.mse_forward(p, t, n, r.as<double>()); });
}
double cross_entropy_forward(engine::Backend& be, const float* logits, const std::int32_t* labels, std::int64_t rows,
                             std::int64_t classes, float* probs, std::int64_t* correct) {
  engine::BackendScope scope(be);
  engine::Buffer r;
  r.reserve(2 * sizeof(std::int64_t));
  be.cross_entropy_forward(logits, labels, rows, classes, probs, r.as<double>(),
                           correct ? r.as<std::int64_t>() + 1 : nullptr);
  // Only the slots the call writes come back (the count's is written only
  // when asked for; compute-sanitizer's initcheck flags reading it unasked).
  std::int64_t host[2] = {};
  r.download(host, correct ? sizeof host : sizeof host[0]);
  if (correct) *correct = host[1];
  double loss;
  std::memcpy(&loss, &host[0], sizeof loss);
  return loss;
}


using engine::Backend;
using engine::Format;
using i64 = std::int64_t;

// ============================================================================
// Backends under test. A backend is a factory plus how the suite moves
// buffers to and from its memory; adding a backend is one entry in
// targets(). A factory returning nullptr skips every test (no device).
// ============================================================================
struct Target {
  std::string name;
  std::function<std::shared_ptr<Backend>()> make;
  // Device memory. The defaults are host memory (CPU backends take host
  // pointers); a GPU backend supplies its allocation and copies.
  std::function<void*(std::size_t)> alloc = [](std::size_t bytes) {
    return std::aligned_alloc(64, (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64);
  };
  std::function<void(void*)> release = [](void* p) { std::free(p); };
  std::function<void(void* dst, const void* src, std::size_t bytes)> upload =
      [](void* d, const void* s, std::size_t n) { std::memcpy(d, s, n); };
  std::function<void(void* dst, const void* src, std::size_t bytes)> download =
      [](void* d, const void* s, std::size_t n) { std::memcpy(d, s, n); };
  // FP8 x FP8 products on FP8 Tensor Cores (CUDA, sm_89+): Hopper keeps the
  // MMA's partial sums to about 14 bits before they reach the FP32
  // accumulator (the DeepSeek-V3 report; measured on an H100: 2^-14.2 of
  // sum |a b| at worst on 128x256x784), so those products are held to this
  // bound relative to sum |a b| instead of f32 summation's. 0: none.
  double hardware_fp8_rtol = 0.0;
  // A host-memory target's short training runs against the CPU backend's
  // (ShortTrainingRunFollowsTheCpuBackendInEveryRecipe): 0, bit for bit.
  double training_rtol = 0.0;
  // GEMMs that encode their output natively (fused::gemm_encode with C as
  // scratch: cuBLASLt writes FP16/BF16 D from its epilogue) may sum in
  // another algorithm's order than the same backend's FP32-output gemm:
  // codes within this many steps of the format (adjacent codes) of gemm
  // then convert. 0: bit for bit (every host target).
  int encode_code_steps = 0;
};

// gtest prints the parameter of a failing test: the backend's name.
void PrintTo(const Target& t, std::ostream* os) { *os << t.name; }

// The CUDA backend: one instance for the whole process (the suite's
// buffers are its device memory), or none without a device, which skips
// every case of this target.
std::shared_ptr<Backend> cuda_instance() {
  static const std::shared_ptr<Backend> be = []() -> std::shared_ptr<Backend> {
    if (!engine::cuda_backend_unusable_reason().empty()) return nullptr;
    return engine::make_cuda_backend();
  }();
  return be;
}

Target cuda_target() {
  Target t{"cuda", [] { return cuda_instance(); }};
  t.alloc = [](std::size_t bytes) { return cuda_instance()->allocate(std::max<std::size_t>(bytes, 1)); };
  t.release = [](void* p) { cuda_instance()->release(p); };
  t.upload = [](void* d, const void* s, std::size_t n) { cuda_instance()->upload(d, s, n); };
  t.download = [](void* d, const void* s, std::size_t n) { cuda_instance()->download(d, s, n); };
  t.hardware_fp8_rtol = std::ldexp(1.0, -12);
  t.encode_code_steps = 1;
  return t;
}

std::vector<Target> targets() {
  std::vector<Target> t;
  // The CPU backend as the app creates it (native bf16 where the CPU has it).
  t.push_back({"cpu", [] { return engine::make_cpu_backend(); }});
  // The same backend forced onto the path of CPUs without AVX512-BF16:
  // BF16/FP8 decoded to f32.
  t.push_back({"cpu_bf16_decoded", []() -> std::unique_ptr<Backend> {
                 engine::CpuBackendOptions o;
                 o.allow_native_bf16 = false;
                 return std::make_unique<engine::CpuBackend>(o);
               }});
  // The same backend declining every fused op: each runs as its portable
  // composition of core ops (fused::compose), held to the same bits as the
  // fast paths above.
  t.push_back({"cpu_composed", []() -> std::unique_ptr<Backend> {
                 engine::CpuBackendOptions o;
                 o.fast_fused = false;
                 return std::make_unique<engine::CpuBackend>(o);
               }});
  // Sixteen threads, as on a workstation (oversubscribed on a small
  // machine): GEMMs with too few rows for a row slice per thread split
  // into blocks of C (batch 128: 2 x 8 blocks). oneDNN's f32 GEMM may
  // split its sums by thread count (AVX2's gemm:jit: fp32 losses 7e-9
  // apart), so its training runs are held to 1e-6, not bits.
  Target sixteen{"cpu_16_threads", [] { return engine::make_cpu_backend(16); }};
  sixteen.training_rtol = 1e-6;
  t.push_back(sixteen);
  t.push_back(cuda_target());
  // The CUDA Backend's own code over a table of host functions that call
  // the CPU backend (host_cuda_table.h): the mapping of every op to the ABI,
  // checked here where no GPU runs the module.
  t.push_back({"cuda_backend_over_host_table", [] { return std::shared_ptr<Backend>(make_host_table_cuda_backend()); }});
  return t;
}

// A buffer in the backend's memory, filled from (or read back to) the host.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer(const Target& t, const std::vector<T>& host) : m_target(&t), m_n(host.size()) {
    m_ptr = static_cast<T*>(t.alloc(bytes()));
    if (m_n) t.upload(m_ptr, host.data(), bytes());
  }
  ~DeviceBuffer() { m_target->release(m_ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() { return m_ptr; }
  std::vector<T> host() const {
    std::vector<T> h(m_n);
    if (m_n) m_target->download(h.data(), m_ptr, bytes());
    return h;
  }

 private:
  std::size_t bytes() const { return m_n * sizeof(T); }
  const Target* m_target;
  std::size_t m_n;
  T* m_ptr;
};

class Conformance : public ::testing::TestWithParam<Target> {
 protected:
  void SetUp() override {
    be = GetParam().make();
    if (!be) GTEST_SKIP() << GetParam().name << " unavailable: " << engine::cuda_backend_unusable_reason();
  }
  template <class T>
  DeviceBuffer<T> dev(const std::vector<T>& h) {
    return DeviceBuffer<T>(GetParam(), h);
  }
  // An output buffer pre-filled with NaN, so an element the backend fails
  // to write cannot pass for a result.
  DeviceBuffer<float> out(std::size_t n) {
    return DeviceBuffer<float>(GetParam(), std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()));
  }
  std::shared_ptr<Backend> be;
};

INSTANTIATE_TEST_SUITE_P(Backends, Conformance, ::testing::ValuesIn(targets()),
                         [](const ::testing::TestParamInfo<Target>& i) { return i.param.name; });

// ============================================================================
// Helpers
// ============================================================================
using test::normal_values;

bool same_value(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

// |got - ref| <= rtol * mag + atol element-wise; reports the worst element.
void expect_close(const std::vector<float>& got, const std::vector<double>& ref,
                  const std::vector<double>& mag, double rtol, double atol, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  std::size_t bad = 0, worst = 0;
  double worst_ratio = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - ref[i]);
    const double bound = rtol * mag[i] + atol;
    const double ratio = std::isnan(got[i]) ? std::numeric_limits<double>::infinity() : err / bound;
    if (!(err <= bound)) ++bad;
    if (ratio > worst_ratio || (bad == 1 && !(err <= bound))) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements out of tolerance; worst ["
                     << worst << "] got " << got[worst] << " want " << ref[worst] << " (bound "
                     << rtol * mag[worst] + atol << ")";
}

void expect_close(const std::vector<float>& got, const std::vector<double>& ref, double rtol,
                  double atol, const std::string& what) {
  std::vector<double> mag(ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i) mag[i] = std::fabs(ref[i]);
  expect_close(got, ref, mag, rtol, atol, what);
}

// Codes of a format (storage width 1 or 2 bytes) equal, or, both finite,
// within `steps` adjacent codes (sign-magnitude order).
void expect_codes_within(Format f, const std::vector<std::uint8_t>& got, const std::vector<std::uint8_t>& want,
                         int steps, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  if (steps == 0) {
    EXPECT_EQ(got, want) << what;
    return;
  }
  const std::size_t es = engine::storage_bytes(f);
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i + es <= got.size(); i += es) {
    std::uint32_t g = 0, w = 0;
    std::memcpy(&g, got.data() + i, es);
    std::memcpy(&w, want.data() + i, es);
    float gv = 0.0f, wv = 0.0f;
    engine::cast_to_f32(f, got.data() + i, &gv, 1);
    engine::cast_to_f32(f, want.data() + i, &wv, 1);
    const std::int64_t sign = std::int64_t{1} << (8 * es - 1);
    auto ordered = [sign](std::uint32_t c) {
      return (c & sign) ? -static_cast<std::int64_t>(c & (sign - 1)) : static_cast<std::int64_t>(c);
    };
    // Overflow must stay overflow (an output that saturated where the lab's
    // rounding gives inf would hide it from the loss scaler): non-finite
    // codes only as they are.
    const bool ok = !std::isfinite(gv) || !std::isfinite(wv)
                        ? (std::isnan(gv) && std::isnan(wv)) || g == w
                        : std::llabs(ordered(g) - ordered(w)) <= steps;
    if (!ok && bad++ == 0) first = i / es;
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " codes more than " << steps << " steps apart, first at " << first;
}

void expect_bit_equal(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!same_value(got[i], want[i]) && bad++ == 0) first = i;
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " differ; first [" << first
                     << "] got " << got[first] << " want " << want[first];
}

// ============================================================================
// GEMM
// ============================================================================

// A stored GEMM operand: `rows` x `cols` values of format f, row-major with
// leading dimension ld, in the format's storage width. Padding columns hold
// NaN (a backend reading them poisons its result). TF32 operands are stored
// unrounded: rounding them is the backend's job.
struct Operand {
  Format f;
  i64 rows, cols, ld;
  std::vector<std::uint8_t> bytes;
  std::vector<double> value;  // decoded (TF32: rounded) values, rows x ld
  double at(i64 r, i64 c) const { return value[static_cast<std::size_t>(r * ld + c)]; }
};

Operand make_operand(Format f, i64 rows, i64 cols, i64 ld, std::uint64_t seed, float scale) {
  Operand op{f, rows, cols, ld, {}, {}};
  const std::size_t es = engine::storage_bytes(f);
  const std::size_t n = static_cast<std::size_t>(rows * ld);
  op.bytes.resize(n * es);
  op.value.resize(n);
  const std::vector<float> x = normal_values(n, seed, scale);
  for (std::size_t i = 0; i < n; ++i) {
    const bool pad = static_cast<i64>(i) % ld >= cols;
    const float v = pad ? std::numeric_limits<float>::quiet_NaN() : x[i];
    const std::uint32_t bits = f == Format::TF32 ? std::bit_cast<std::uint32_t>(v) : engine::encode(f, v);
    std::memcpy(op.bytes.data() + i * es, &bits, es);  // little endian: the low bytes
    op.value[i] = f == Format::TF32 ? engine::round_to_tf32(v) : engine::decode(f, bits);
  }
  return op;
}

struct GemmCase {
  i64 m, n, k;
  Format fa, fb;
  bool ta, tb;
  float alpha = 1.0f, beta = 0.0f;
  bool bias = false;
  i64 pad = 0;  // extra leading-dimension elements for A, B and C
  Format accumulate = Format::FP32;
  float scale = 1.0f;  // standard deviation of the operands' values
  std::string name() const {
    std::ostringstream s;
    s << m << "x" << n << "x" << k << " " << engine::format_name(fa) << (ta ? "^T" : "") << " * "
      << engine::format_name(fb) << (tb ? "^T" : "") << " alpha=" << alpha << " beta=" << beta
      << (bias ? " +bias" : "") << " pad=" << pad << " acc=" << engine::format_name(accumulate)
      << " scale=" << scale;
    return s.str();
  }
};

struct GemmData {
  Operand a, b;
  std::vector<float> c0, bias;
  i64 ldc;
};

GemmData make_gemm_data(const GemmCase& g, std::uint64_t seed) {
  const i64 a_rows = g.ta ? g.k : g.m, a_cols = g.ta ? g.m : g.k;
  const i64 b_rows = g.tb ? g.n : g.k, b_cols = g.tb ? g.k : g.n;
  auto sd = [&g](Format f) { return (f == Format::E4M3 || f == Format::E5M2) ? 2.0f * g.scale : g.scale; };
  GemmData d{make_operand(g.fa, a_rows, a_cols, a_cols + g.pad, seed, sd(g.fa)),
             make_operand(g.fb, b_rows, b_cols, b_cols + g.pad, seed + 1, sd(g.fb)),
             {},
             {},
             g.n + g.pad};
  d.c0 = normal_values(static_cast<std::size_t>(g.m * d.ldc), seed + 2);
  // beta == 0 must ignore C completely, NaN included.
  if (g.beta == 0.0f) std::fill(d.c0.begin(), d.c0.end(), std::numeric_limits<float>::quiet_NaN());
  if (g.bias) d.bias = normal_values(static_cast<std::size_t>(g.n), seed + 3);
  return d;
}

double op_a(const GemmCase& g, const GemmData& d, i64 i, i64 p) { return g.ta ? d.a.at(p, i) : d.a.at(i, p); }
double op_b(const GemmCase& g, const GemmData& d, i64 p, i64 j) { return g.tb ? d.b.at(j, p) : d.b.at(p, j); }

// Runs the case on the backend; returns C (m x ldc).
std::vector<float> run_gemm(const Target& t, Backend& be, const GemmCase& g, const GemmData& d) {
  DeviceBuffer<std::uint8_t> a(t, d.a.bytes), b(t, d.b.bytes);
  DeviceBuffer<float> c(t, d.c0);
  DeviceBuffer<float> bias(t, d.bias);
  engine::GemmArgs args;
  args.m = g.m;
  args.n = g.n;
  args.k = g.k;
  args.a = {a.get(), g.fa, g.ta, d.a.ld};
  args.b = {b.get(), g.fb, g.tb, d.b.ld};
  args.c = c.get();
  args.ldc = d.ldc;
  args.alpha = g.alpha;
  args.beta = g.beta;
  args.bias = g.bias ? bias.get() : nullptr;
  args.accumulate = g.accumulate;
  be.gemm(args);
  return c.host();
}

// FP32 accumulation: the exact (double) result, and for the tolerance the
// sum of magnitudes |alpha| sum |a b| + |beta c| + |bias|. Every operand
// value is exact in f32 and every product of FP16/BF16/FP8/TF32 values is
// exact in f32, so the only error allowed is f32 summation:
// 1e-6 * (1 + sqrt(k)) relative to that magnitude (a few ulps per sqrt(k)
// terms, far below any rounding of an operand to 16 or 8 bits, which the
// suite would catch at 2^-8 .. 2^-11). FP8 products on FP8 Tensor Cores:
// Target::hardware_fp8_rtol.
void check_gemm_fp32_accumulate(const Target& t, Backend& be, const GemmCase& g, std::uint64_t seed) {
  const GemmData d = make_gemm_data(g, seed);
  const std::vector<float> got = run_gemm(t, be, g, d);
  std::vector<float> got_block;
  std::vector<double> ref, mag;
  for (i64 i = 0; i < g.m; ++i)
    for (i64 j = 0; j < g.n; ++j) {
      double s = 0.0, sa = 0.0;
      for (i64 p = 0; p < g.k; ++p) {
        const double prod = op_a(g, d, i, p) * op_b(g, d, p, j);
        s += prod;
        sa += std::fabs(prod);
      }
      const double c0 = d.c0[static_cast<std::size_t>(i * d.ldc + j)];
      double r = g.alpha * s, mg = std::fabs(g.alpha) * sa;
      if (g.beta != 0.0f) {
        r += g.beta * c0;
        mg += std::fabs(g.beta * c0);
      }
      if (g.bias) {
        r += d.bias[static_cast<std::size_t>(j)];
        mg += std::fabs(d.bias[static_cast<std::size_t>(j)]);
      }
      got_block.push_back(got[static_cast<std::size_t>(i * d.ldc + j)]);
      ref.push_back(r);
      mag.push_back(mg);
    }
  double rtol = 1e-6 * (1.0 + std::sqrt(static_cast<double>(g.k)));
  if (engine::is_fp8(g.fa) && engine::is_fp8(g.fb)) rtol = std::max(rtol, t.hardware_fp8_rtol);
  expect_close(got_block, ref, mag, rtol, 1e-30, g.name());
  // Padding columns of C are not part of the result and must be untouched.
  for (i64 i = 0; i < g.m; ++i)
    for (i64 j = g.n; j < d.ldc; ++j) {
      const std::size_t idx = static_cast<std::size_t>(i * d.ldc + j);
      ASSERT_TRUE(same_value(got[idx], d.c0[idx])) << g.name() << ": wrote C padding at " << i << "," << j;
    }
}

const std::vector<std::pair<Format, Format>>& gemm_format_pairs() {
  static const std::vector<std::pair<Format, Format>> pairs = {
      {Format::FP32, Format::FP32}, {Format::TF32, Format::TF32}, {Format::FP16, Format::FP16},
      {Format::BF16, Format::BF16}, {Format::E4M3, Format::E4M3}, {Format::E5M2, Format::E5M2},
      // Mixed: FP8 forward x FP8 gradient, and pairs that must meet on f32.
      {Format::E4M3, Format::E5M2}, {Format::BF16, Format::E4M3}, {Format::FP16, Format::BF16},
      {Format::FP32, Format::E4M3}, {Format::TF32, Format::FP16}};
  return pairs;
}

TEST_P(Conformance, GemmEveryFormatTransposeAndEpilogue) {
  struct Size {
    i64 m, n, k;
  };
  const Size sizes[] = {{1, 1, 1}, {7, 13, 5}, {64, 33, 129}};
  std::uint64_t seed = 100;
  for (const auto& [fa, fb] : gemm_format_pairs())
    for (const Size& s : sizes)
      for (int t = 0; t < 4; ++t) {
        GemmCase g{s.m, s.n, s.k, fa, fb, (t & 1) != 0, (t & 2) != 0};
        check_gemm_fp32_accumulate(GetParam(), *be, g, ++seed);
        // Full epilogue with strided operands and C.
        g.alpha = 0.5f;
        g.beta = -0.25f;
        g.bias = true;
        g.pad = 3;
        check_gemm_fp32_accumulate(GetParam(), *be, g, ++seed);
        // The training shapes' epilogues: bias (forward) and beta = 1
        // (gradient accumulation).
        g.alpha = 1.0f;
        g.beta = 1.0f;
        g.pad = 0;
        check_gemm_fp32_accumulate(GetParam(), *be, g, ++seed);
        if (HasFailure()) return;
      }
}

TEST_P(Conformance, GemmTrainingShapes) {
  // The MLP layer 784 -> 256 at batch 128: forward x W^T + b, dW = dy^T x,
  // dx = dy W; in the formats the recipes use.
  for (Format f : {Format::FP32, Format::BF16, Format::E4M3}) {
    const Format g_fmt = f == Format::E4M3 ? Format::E5M2 : f;
    // FP8 layers scale their products back by alpha = 1 / (scale_a scale_b):
    // with a bias (a pass over C after the primitive) and without one (the
    // primitive's run-time output scale).
    const float alpha = engine::is_fp8(f) ? 0.37f : 1.0f;
    GemmCase fwd{128, 256, 784, f, f, false, true};
    fwd.bias = true;
    fwd.alpha = alpha;
    check_gemm_fp32_accumulate(GetParam(), *be, fwd, 7);
    GemmCase dw{256, 784, 128, g_fmt, f, true, false}, dx{128, 784, 256, g_fmt, f, false, false};
    dw.alpha = dx.alpha = alpha;
    check_gemm_fp32_accumulate(GetParam(), *be, dw, 8);
    check_gemm_fp32_accumulate(GetParam(), *be, dx, 9);
  }
  // The transformer's weight gradients dy^T x over 2048 tokens: A stored
  // transposed and a long reduction, which the CPU backend splits over its
  // threads when the operands need decoding (each thread decodes and
  // multiplies its own tokens, then the partial products are added). An
  // odd k, strided operands and the whole epilogue too.
  const std::pair<Format, Format> dw_formats[] = {{Format::E5M2, Format::E4M3},
                                                  {Format::FP16, Format::FP16},
                                                  {Format::BF16, Format::BF16},
                                                  {Format::FP32, Format::FP32},
                                                  {Format::E4M3, Format::FP32}};
  std::uint64_t seed = 20;
  for (const auto& [fa, fb] : dw_formats) {
    check_gemm_fp32_accumulate(GetParam(), *be, GemmCase{192, 64, 2048, fa, fb, true, false}, ++seed);
    GemmCase odd{64, 49, 2047, fa, fb, true, false};
    odd.alpha = 0.37f;
    odd.beta = -0.25f;
    odd.bias = true;
    odd.pad = 3;
    check_gemm_fp32_accumulate(GetParam(), *be, odd, ++seed);
    odd.beta = 1.0f;
    odd.pad = 0;
    check_gemm_fp32_accumulate(GetParam(), *be, odd, ++seed);
    if (HasFailure()) return;
  }
}

// GemmOperand::keep: a layer's saved input tagged in its forward GEMM and
// again, as the last use, in its weight gradient, and its output gradient
// dy in the input gradient dy W and then in dy^T x (the CPU backend keeps
// the decoded copy a thread made for the next use), and the weight w in the
// forward product and, last, in dy W. Tagged products give the
// bits of the same products untagged: the mlp's fc1 and fc2, the
// transformer's token-long ones (its weight gradients split by tokens),
// interleaved as a training step interleaves them; then new values under a
// new tag at the same address, and enough tags at once to pass what a
// thread keeps (older copies dropped, decoded again).
TEST_P(Conformance, GemmKeptOperandsGiveTheSameBits) {
  struct Layer {
    i64 rows, in, out;
    Format fx, fdy;
  };
  const Layer layers[] = {{128, 784, 256, Format::E4M3, Format::E5M2},
                          {128, 256, 128, Format::E4M3, Format::E5M2},
                          {2048, 64, 192, Format::FP16, Format::FP16},
                          {2048, 256, 64, Format::BF16, Format::BF16},
                          {2048, 64, 64, Format::E4M3, Format::E5M2},
                          {300, 48, 40, Format::E4M3, Format::E4M3},
                          // The mlp's head: its weight gradient (10 x 128 x 128) runs on one thread.
                          {128, 128, 10, Format::E4M3, Format::E5M2}};
  std::uint64_t seed = 900;
  auto stored = [&](Format f, i64 n, float sd) {
    const std::vector<float> v = normal_values(static_cast<std::size_t>(n), ++seed, sd);
    std::vector<std::uint8_t> b(static_cast<std::size_t>(n) * engine::storage_bytes(f));
    engine::cast_from_f32(f, v.data(), b.data(), v.size());
    return b;
  };
  // Forward y = x W^T + bias and weight gradient dW = dy^T x of each layer,
  // tagged or not; C as the host sees it.
  struct Run {
    std::vector<float> y, dx, dw;
  };
  auto run = [&](const Layer& l, DeviceBuffer<std::uint8_t>& x, DeviceBuffer<std::uint8_t>& w,
                 DeviceBuffer<std::uint8_t>& dy, std::uint64_t tag, std::uint64_t wtag, bool forward, bool backward,
                 Run& out) {
    if (forward) {
      DeviceBuffer<float> y(GetParam(), std::vector<float>(static_cast<std::size_t>(l.rows * l.out)));
      DeviceBuffer<float> bias(GetParam(), normal_values(static_cast<std::size_t>(l.out), 7));
      engine::GemmArgs g;
      g.m = l.rows;
      g.n = l.out;
      g.k = l.in;
      g.a = {x.get(), l.fx, false, l.in};
      g.a.keep = tag;
      g.b = {w.get(), l.fx, true, l.in};
      g.b.keep = wtag;
      g.c = y.get();
      g.ldc = l.out;
      g.alpha = 0.37f;
      g.bias = bias.get();
      be->gemm(g);
      out.y = y.host();
    }
    if (backward) {
      // dx = dy W, then dW = dy^T x: dy tagged for both (its last use in the
      // second), as linear_backward tags it.
      const std::uint64_t dy_tag = tag ? engine::new_keep_tag() : 0;
      DeviceBuffer<float> dx(GetParam(), std::vector<float>(static_cast<std::size_t>(l.rows * l.in)));
      engine::GemmArgs d;
      d.m = l.rows;
      d.n = l.in;
      d.k = l.out;
      d.a = {dy.get(), l.fdy, false, l.out};
      d.a.keep = dy_tag;
      d.a.keep_next = true;
      d.b = {w.get(), l.fx, false, l.in};
      d.b.keep = wtag;
      d.b.keep_last = true;
      d.c = dx.get();
      d.ldc = l.in;
      d.alpha = 0.25f;
      be->gemm(d);
      out.dx = dx.host();
      DeviceBuffer<float> dw(GetParam(), std::vector<float>(static_cast<std::size_t>(l.out * l.in)));
      engine::GemmArgs g;
      g.m = l.out;
      g.n = l.in;
      g.k = l.rows;
      g.a = {dy.get(), l.fdy, true, l.out};
      g.a.keep = dy_tag;
      g.a.keep_last = true;
      g.b = {x.get(), l.fx, false, l.in};
      g.b.keep = tag;
      g.b.keep_last = true;
      g.c = dw.get();
      g.ldc = l.in;
      g.alpha = 0.5f;
      be->gemm(g);
      out.dw = dw.host();
    }
  };
  struct Data {
    std::unique_ptr<DeviceBuffer<std::uint8_t>> x, w, dy;
  };
  std::vector<Data> data;
  std::vector<Run> want(std::size(layers)), got(std::size(layers));
  for (const Layer& l : layers) {
    Data d;
    d.x = std::make_unique<DeviceBuffer<std::uint8_t>>(GetParam(), stored(l.fx, l.rows * l.in, 2.0f));
    d.w = std::make_unique<DeviceBuffer<std::uint8_t>>(GetParam(), stored(l.fx, l.out * l.in, 1.0f));
    d.dy = std::make_unique<DeviceBuffer<std::uint8_t>>(GetParam(), stored(l.fdy, l.rows * l.out, 1.0f));
    data.push_back(std::move(d));
  }
  for (std::size_t i = 0; i < std::size(layers); ++i)
    run(layers[i], *data[i].x, *data[i].w, *data[i].dy, 0, 0, true, true, want[i]);
  // A step: every forward, then the weight gradients last layer first.
  std::vector<std::uint64_t> tags, wtags;
  for (std::size_t i = 0; i < std::size(layers); ++i) {
    tags.push_back(engine::new_keep_tag());
    wtags.push_back(engine::new_keep_tag());
    run(layers[i], *data[i].x, *data[i].w, *data[i].dy, tags[i], wtags[i], true, false, got[i]);
  }
  // On the CPU: copies kept after the forwards, none left after every
  // tag's last use, whichever threads held them.
  auto* cpu = dynamic_cast<engine::CpuBackend*>(be.get());
  if (cpu) {
    EXPECT_GT(cpu->kept_gemm_copies(), 0u) << "nothing kept after the forwards";
  }
  for (std::size_t i = std::size(layers); i-- > 0;)
    run(layers[i], *data[i].x, *data[i].w, *data[i].dy, tags[i], wtags[i], false, true, got[i]);
  if (cpu) {
    EXPECT_EQ(cpu->kept_gemm_copies(), 0u) << "copies left after their tags' last use";
  }
  for (std::size_t i = 0; i < std::size(layers); ++i) {
    const std::string what = "layer " + std::to_string(i) + " " + engine::format_name(layers[i].fx);
    expect_bit_equal(got[i].y, want[i].y, what + " forward");
    expect_bit_equal(got[i].dx, want[i].dx, what + " input gradient");
    expect_bit_equal(got[i].dw, want[i].dw, what + " weight gradient");
  }
  // New values at the same address under a new tag: decoded afresh.
  {
    const Layer& l = layers[0];
    const std::uint64_t tag = engine::new_keep_tag();
    Run before, after, plain;
    run(l, *data[0].x, *data[0].w, *data[0].dy, tag, 0, true, false, before);
    const std::vector<std::uint8_t> other = stored(l.fx, l.rows * l.in, 3.0f);
    GetParam().upload(data[0].x->get(), other.data(), other.size());
    run(l, *data[0].x, *data[0].w, *data[0].dy, 0, 0, true, true, plain);
    const std::uint64_t fresh = engine::new_keep_tag();
    run(l, *data[0].x, *data[0].w, *data[0].dy, fresh, 0, true, false, after);
    run(l, *data[0].x, *data[0].w, *data[0].dy, fresh, 0, false, true, after);
    expect_bit_equal(after.y, plain.y, "new values, new tag: forward");
    expect_bit_equal(after.dw, plain.dw, "new values, new tag: weight gradient");
  }
  // More kept at once than a thread holds: 24 layers of 2048 x 256 FP16
  // inputs (a 2-thread slice decodes 2 MiB of each), forwards in order,
  // weight gradients in reverse.
  {
    const Layer l{2048, 256, 64, Format::FP16, Format::FP16};
    std::vector<Data> many(24);
    std::vector<Run> w(many.size()), g(many.size());
    std::vector<std::uint64_t> ts;
    for (auto& d : many) {
      d.x = std::make_unique<DeviceBuffer<std::uint8_t>>(GetParam(), stored(l.fx, l.rows * l.in, 2.0f));
      d.w = std::make_unique<DeviceBuffer<std::uint8_t>>(GetParam(), stored(l.fx, l.out * l.in, 1.0f));
      d.dy = std::make_unique<DeviceBuffer<std::uint8_t>>(GetParam(), stored(l.fdy, l.rows * l.out, 1.0f));
    }
    for (std::size_t i = 0; i < many.size(); ++i) run(l, *many[i].x, *many[i].w, *many[i].dy, 0, 0, false, true, w[i]);
    for (std::size_t i = 0; i < many.size(); ++i) {
      ts.push_back(engine::new_keep_tag());
      run(l, *many[i].x, *many[i].w, *many[i].dy, ts[i], 0, true, false, g[i]);
    }
    for (std::size_t i = many.size(); i-- > 0;) {
      run(l, *many[i].x, *many[i].w, *many[i].dy, ts[i], 0, false, true, g[i]);
      expect_bit_equal(g[i].dw, w[i].dw, "many kept: weight gradient " + std::to_string(i));
      if (HasFailure()) return;
    }
  }
}

TEST_P(Conformance, GemmDecodesEveryFp8CodeExactly) {
  // C[i] = A[i] * 1 for all 256 codes: every FP8 value (subnormals, the
  // largest, NaN; E5M2's inf) must reach the product exactly, on the bf16
  // path (FP8 x FP8) and on the f32 path (FP8 x FP32).
  // 269 rows: every code, then 13 more (a tail after the 32-wide blocks).
  const int rows = 256 + 13;
  for (Format f : {Format::E4M3, Format::E5M2}) {
    std::vector<std::uint8_t> codes(rows);
    for (int i = 0; i < rows; ++i) codes[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>((i * 7) % 256);
    std::vector<float> want(rows);
    for (int i = 0; i < rows; ++i) want[static_cast<std::size_t>(i)] = engine::decode(f, codes[static_cast<std::size_t>(i)]);
    const std::vector<std::uint8_t> one_fp8{static_cast<std::uint8_t>(engine::encode(f, 1.0f))};
    const std::vector<float> one_f32{1.0f};
    auto a = dev(codes);
    auto b8 = dev(one_fp8);
    auto b32 = dev(one_f32);
    for (bool f32_path : {false, true}) {
      auto c = out(rows);
      engine::GemmArgs g;
      g.m = rows;
      g.n = 1;
      g.k = 1;
      g.a = {a.get(), f, false, 1};
      g.b = f32_path ? engine::GemmOperand{b32.get(), Format::FP32, false, 1}
                     : engine::GemmOperand{b8.get(), f, false, 1};
      g.c = c.get();
      g.ldc = 1;
      be->gemm(g);
      // Values, not bits: a sum that starts at +0 turns -0 * 1 into +0.
      const std::vector<float> got = c.host();
      for (int i = 0; i < rows; ++i) {
        const float g1 = got[static_cast<std::size_t>(i)], w1 = want[static_cast<std::size_t>(i)];
        EXPECT_TRUE(g1 == w1 || (std::isnan(g1) && std::isnan(w1)))
            << engine::format_name(f) << " code " << int{codes[static_cast<std::size_t>(i)]} << (f32_path ? " x FP32" : " x itself") << ": got "
            << g1 << " want " << w1;
      }
    }
  }
}

// gemm_encode: C's codes are the encode of the f32 C the same call wrote
// (element for element, with saturation and stochastic rounding at the
// element's index; without codes, C rounded in place is quantize of it),
// and that C is gemm's: bit for bit where the operands
// are decoded (FP16, FP8: the CPU's sliced path either way), within the
// f32 summation bound where the CPU may split an FP32/BF16 product over the
// threads differently to encode each part as it finishes. Shapes: the
// transformer's forward and dx GEMMs (sliced), forwards with fewer rows
// than columns (the mlp's fc1: split by columns of C, each thread encoding
// its part of every row), and small ones (not).
TEST_P(Conformance, GemmEncodeEqualsGemmThenConvert) {
  struct Case {
    i64 m, n, k;
    Format fa, fb;
    bool trans_b, bias;
    float alpha;
    bool trans_a = false;  // A stored k x m (the weight gradients' dy^T)
  };
  const Case cases[] = {
      {192, 64, 2048, Format::E5M2, Format::E4M3, false, false, 0.37f, true},
      {64, 49, 2047, Format::FP16, Format::FP16, false, true, 1.0f, true},
      {2048, 64, 64, Format::FP16, Format::FP16, true, true, 1.0f},
      {2048, 192, 64, Format::BF16, Format::BF16, true, true, 1.0f},
      {2048, 64, 128, Format::FP16, Format::FP16, false, false, 1.0f},
      {300, 64, 64, Format::E4M3, Format::E4M3, true, true, 0.37f},
      {300, 48, 32, Format::E5M2, Format::E4M3, false, false, 0.5f},
      {512, 64, 64, Format::FP32, Format::FP32, true, true, 1.0f},
      {7, 13, 5, Format::FP16, Format::BF16, true, true, 1.0f},
      {128, 10, 64, Format::BF16, Format::BF16, true, true, 1.0f},
      {64, 200, 96, Format::FP16, Format::FP16, true, true, 1.0f},
      {100, 256, 64, Format::E4M3, Format::E4M3, true, false, 0.37f},
      // BF16 codes as they are (no decode on the bf16 path), columns split.
      {96, 256, 80, Format::BF16, Format::BF16, true, true, 1.0f},
  };
  std::uint64_t seed = 300;
  for (const Case& c : cases)
    for (Format fy : {Format::FP16, Format::BF16, Format::E5M2, Format::E4M3})
      for (int mode = 0; mode < 3; ++mode) {  // plain, saturating, stochastic
        const auto na = static_cast<std::size_t>(c.m * c.k), nb = static_cast<std::size_t>(c.k * c.n),
                   nc = static_cast<std::size_t>(c.m * c.n);
        // Products up to ~1e5: FP16 overflows on some.
        std::vector<float> av = normal_values(na, ++seed, 30.0f), bv = normal_values(nb, ++seed, 20.0f);
        const std::vector<float> biasv = normal_values(static_cast<std::size_t>(c.n), ++seed, 3.0f);
        auto stored = [&](Format f, std::vector<float>& v) {
          std::vector<std::byte> b(v.size() * engine::storage_bytes(f));
          engine::cast_from_f32(f, v.data(), b.data(), v.size());
          engine::cast_to_f32(f, b.data(), v.data(), v.size());  // the values the GEMM sees
          return DeviceBuffer<std::byte>(GetParam(), b);
        };
        auto ad = stored(c.fa, av), bd = stored(c.fb, bv);
        auto biasd = dev(biasv);
        engine::GemmArgs g;
        g.m = c.m;
        g.n = c.n;
        g.k = c.k;
        g.a = {ad.get(), c.fa, c.trans_a, 0};
        g.b = {bd.get(), c.fb, c.trans_b, 0};
        g.alpha = c.alpha;
        g.bias = c.bias ? biasd.get() : nullptr;
        engine::GemmEncode e;
        e.format = fy;
        e.opt.saturate = mode == 1;
        e.opt.stochastic = mode == 2;
        e.opt.seed = 77;
        const std::string what = std::string("gemm_encode ") + std::to_string(c.m) + "x" + std::to_string(c.n) + "x" +
                                 std::to_string(c.k) + " " + engine::format_name(c.fa) + "*" +
                                 engine::format_name(c.fb) + " -> " + engine::format_name(fy) + " mode " +
                                 std::to_string(mode);
        auto c1 = out(nc), c2 = out(nc);
        g.c = c1.get();
        be->gemm(g);
        g.c = c2.get();
        const std::size_t es = engine::storage_bytes(fy);
        DeviceBuffer<std::uint8_t> got(GetParam(), std::vector<std::uint8_t>(nc * es, 0x12u));
        e.codes = got.get();
        engine::fused::gemm_encode(*be, g, e);
        DeviceBuffer<std::uint8_t> want(GetParam(), std::vector<std::uint8_t>(nc * es, 0xABu));
        be->convert(Format::FP32, c2.get(), fy, want.get(), static_cast<i64>(nc), e.opt);
        EXPECT_EQ(got.host(), want.host()) << what << ": codes";
        {
          // C as the caller's scratch (GemmEncode::c_scratch): the same
          // codes, from wherever the backend kept its values.
          engine::GemmEncode scratch = e;
          scratch.c_scratch = true;
          DeviceBuffer<std::uint8_t> got_s(GetParam(), std::vector<std::uint8_t>(nc * es, 0x34u));
          scratch.codes = got_s.get();
          auto c4 = out(nc);
          g.c = c4.get();
          engine::fused::gemm_encode(*be, g, scratch);
          expect_codes_within(fy, got_s.host(), want.host(), GetParam().encode_code_steps,
                              what + ": codes, C as scratch");
        }
        const std::vector<float> h1 = c1.host(), h2 = c2.host();
        if (mode != 2) {
          // Rounded in place (codes null): quantize of the C this path wrote.
          engine::GemmEncode in_place = e;
          in_place.codes = nullptr;
          auto c3 = out(nc);
          g.c = c3.get();
          engine::fused::gemm_encode(*be, g, in_place);
          be->quantize(fy, c2.get(), static_cast<i64>(nc), e.opt.saturate);
          expect_bit_equal(c3.host(), c2.host(), what + ": rounded in place");
        }
        const bool decoded = c.fa != Format::FP32 && c.fa != Format::BF16 && c.fb != Format::FP32 && c.fb != Format::BF16;
        if (decoded) {
          expect_bit_equal(h2, h1, what + ": C");
        } else {
          std::vector<double> ref(nc), mag(nc);
          for (i64 i = 0; i < c.m; ++i)
            for (i64 j = 0; j < c.n; ++j) {
              double s = 0.0;
              for (i64 q = 0; q < c.k; ++q)
                s += std::fabs(static_cast<double>(av[static_cast<std::size_t>(c.trans_a ? q * c.m + i : i * c.k + q)]) *
                               bv[static_cast<std::size_t>(c.trans_b ? j * c.k + q : q * c.n + j)]);
              const auto idx = static_cast<std::size_t>(i * c.n + j);
              ref[idx] = h1[idx];
              mag[idx] = std::fabs(c.alpha) * s;
            }
          expect_close(h2, ref, mag, 2.0 * static_cast<double>(c.k) * 6e-8, 1e-30, what + ": C");
        }
        if (HasFailure()) return;
      }
}

// The GEMMs a Linear layer encodes as they finish (forward y with its bias
// in FP16/BF16, dx and dW in the grad format), with C as scratch: on the
// CUDA backend the ones lt_epilogue.h's plan fuses go to the module's
// gemm_encode entry (cuBLASLt writes D, bias in its epilogue), the others
// (an FP8 layer's unsaturated E5M2 dx, stochastic rounding) to the
// composition. Each must give the codes of its composition on the same
// backend (gemm into C, then convert): bit for bit on the host targets,
// within Target::encode_code_steps on a device. Over the host table the
// entry's calls are counted: the routing is checked where no GPU runs.
// On a device this is the GPU case of the fused paths:
//   test_backend_conformance --gtest_filter='*GemmEncodeFusedLinearPaths*/cuda'
TEST_P(Conformance, GemmEncodeFusedLinearPathsEqualTheirComposition) {
  struct Case {
    const char* what;
    i64 m, n, k;
    Format fa, fb;
    bool trans_a, trans_b, bias;
    Format fy;
    bool saturate, stochastic;
    float alpha;
    bool fused;  // the plan offers it to the module
  };
  const Case cases[] = {
      {"forward y bf16 + bias", 128, 96, 64, Format::BF16, Format::BF16, false, true, true, Format::BF16, false, false,
       1.0f, true},
      {"forward y fp16 + bias", 128, 96, 64, Format::FP16, Format::FP16, false, true, true, Format::FP16, false, false,
       1.0f, true},
      {"forward y bf16 + bias, odd shape", 7, 13, 5, Format::BF16, Format::BF16, false, true, true, Format::BF16,
       false, false, 1.0f, true},
      {"dx bf16", 128, 64, 96, Format::BF16, Format::BF16, false, false, false, Format::BF16, false, false, 1.0f, true},
      {"dW fp16", 96, 64, 128, Format::FP16, Format::FP16, true, false, false, Format::FP16, false, false, 1.0f, true},
      {"fp8 forward to bf16 + bias", 128, 96, 64, Format::E4M3, Format::E4M3, false, true, true, Format::BF16, false,
       false, 0.37f, true},
      {"fp8 dx to e5m2 (unsaturated)", 128, 64, 96, Format::E5M2, Format::E4M3, false, false, false, Format::E5M2,
       false, false, 0.5f, false},
      {"fp8 dx to e4m3 saturating", 128, 64, 96, Format::E4M3, Format::E4M3, false, true, false, Format::E4M3, true,
       false, 0.5f, false},
      {"bf16 stochastic", 64, 32, 48, Format::BF16, Format::BF16, false, true, true, Format::BF16, false, true, 1.0f,
       false},
  };
  const bool host_table = GetParam().name == "cuda_backend_over_host_table";
  std::uint64_t seed = 900;
  for (const Case& c : cases) {
    const auto na = static_cast<std::size_t>(c.m * c.k), nb = static_cast<std::size_t>(c.k * c.n),
               nc = static_cast<std::size_t>(c.m * c.n);
    // Magnitudes that overflow FP16 and E4M3 on a few outputs.
    std::vector<float> av = normal_values(na, ++seed, 30.0f), bv = normal_values(nb, ++seed, 20.0f);
    const std::vector<float> biasv = normal_values(static_cast<std::size_t>(c.n), ++seed, 3.0f);
    auto stored = [&](Format f, const std::vector<float>& v) {
      std::vector<std::byte> b(v.size() * engine::storage_bytes(f));
      engine::cast_from_f32(f, v.data(), b.data(), v.size());
      return DeviceBuffer<std::byte>(GetParam(), b);
    };
    auto ad = stored(c.fa, av), bd = stored(c.fb, bv);
    auto biasd = dev(biasv);
    engine::GemmArgs g;
    g.m = c.m;
    g.n = c.n;
    g.k = c.k;
    g.a = {ad.get(), c.fa, c.trans_a, 0};
    g.b = {bd.get(), c.fb, c.trans_b, 0};
    g.alpha = c.alpha;
    g.bias = c.bias ? biasd.get() : nullptr;
    engine::GemmEncode e;
    e.format = c.fy;
    e.opt.saturate = c.saturate;
    e.opt.stochastic = c.stochastic;
    e.opt.seed = 5;
    e.c_scratch = true;
    const std::size_t es = engine::storage_bytes(c.fy);
    DeviceBuffer<std::uint8_t> got(GetParam(), std::vector<std::uint8_t>(nc * es, 0x5Au));
    DeviceBuffer<std::uint8_t> want(GetParam(), std::vector<std::uint8_t>(nc * es, 0xA5u));
    auto c1 = out(nc), c2 = out(nc);
    g.c = c1.get();
    e.codes = got.get();
    const int calls = host_table_gemm_encode_calls();
    engine::fused::gemm_encode(*be, g, e);
    if (host_table) {
      EXPECT_EQ(host_table_gemm_encode_calls() - calls, c.fused ? 1 : 0) << c.what << ": routing to gemm_encode";
    }
    g.c = c2.get();
    e.codes = want.get();
    ASSERT_TRUE(engine::fused::compose(*be, engine::fused::GemmEncodeOp{g, e})) << c.what;
    expect_codes_within(c.fy, got.host(), want.host(), GetParam().encode_code_steps, c.what);
    if (HasFailure()) return;
  }
}

// FP8 delayed scaling's casts with their amax and bias sums, and the column
// sums of FP16/BF16 codes: each fused op against its composition on the same
// backend, bit for bit on every target (the CUDA module runs the cast in
// one pass: scale_amax_encode, and column_sums16 on the codes). Over the
// host table the module's entries must be reached. On a device:
//   test_backend_conformance --gtest_filter='*FusedCastsEqualTheirCompositionsAndReachTheModule*/cuda'
TEST_P(Conformance, FusedCastsEqualTheirCompositionsAndReachTheModule) {
  const bool host_table = GetParam().name == "cuda_backend_over_host_table";
  const i64 rows = 96, cols = 40, n = rows * cols;
  const i64 pn = 3, pc = 8, phw = 160;  // planes: pn * pc * phw == n
  std::uint64_t seed = 1200;
  auto bytes_of = [](Format f, const std::vector<float>& v) {
    std::vector<std::uint8_t> b(v.size() * engine::storage_bytes(f));
    engine::cast_from_f32(f, v.data(), b.data(), v.size());
    return b;
  };
  for (Format from : {Format::FP32, Format::BF16, Format::FP16})
    for (Format f : {Format::E4M3, Format::E5M2})
      for (int mode = 0; mode < 3; ++mode) {  // plain, saturating, stochastic
        std::vector<float> xv = normal_values(static_cast<std::size_t>(n), ++seed, 40.0f);
        xv[7] = std::numeric_limits<float>::infinity();
        if (mode == 1) xv[11] = -std::numeric_limits<float>::quiet_NaN();
        const std::vector<std::uint8_t> xb = from == Format::FP32 ? bytes_of(Format::FP32, xv) : bytes_of(from, xv);
        DeviceBuffer<std::uint8_t> x(GetParam(), xb);
        engine::CastOptions opt;
        opt.saturate = mode == 1;
        opt.stochastic = mode == 2;
        opt.seed = 3;
        opt.index_offset = 17;
        const float scale = 3.5f;
        const std::string what = std::string(engine::format_name(from)) + " -> " + engine::format_name(f) + " mode " +
                                 std::to_string(mode);
        const std::size_t qn = static_cast<std::size_t>(n) * engine::storage_bytes(f);
        auto codes = [&](std::uint8_t fill) { return DeviceBuffer<std::uint8_t>(GetParam(), std::vector<std::uint8_t>(qn, fill)); };
        auto q1 = codes(0x11), q2 = codes(0x22);
        auto a1 = out(1), a2 = out(1), s1 = out(static_cast<std::size_t>(n)), s2 = out(static_cast<std::size_t>(n));
        auto db1 = out(static_cast<std::size_t>(cols)), db2 = out(static_cast<std::size_t>(cols));
        // The module's entries each fused run reaches over the host table
        // (the compositions' nested fused ops reach them too: not counted).
        auto routed = [&](int expected, const std::function<void()>& run_it, const char* op) {
          const int calls = host_table_fused_cast_calls();
          run_it();
          if (host_table) {
            EXPECT_EQ(host_table_fused_cast_calls() - calls, expected) << what << ": routing of " << op;
          }
        };
        if (from == Format::FP32) {
          const auto* xf = reinterpret_cast<const float*>(x.get());
          routed(1, [&] { engine::fused::run(*be, engine::fused::ScaleAmaxEncodeOp{xf, scale, f, q1.get(), n, opt, a1.get(), s1.get()}); }, "scale_amax_encode");
          ASSERT_TRUE(engine::fused::compose(
              *be, engine::fused::ScaleAmaxEncodeOp{xf, scale, f, q2.get(), n, opt, a2.get(), s2.get()}));
        } else {
          routed(1, [&] { engine::fused::run(*be, engine::fused::ScaleAmaxEncode16Op{from, x.get(), scale, f, q1.get(), n, opt,
                                                                     a1.get(), s1.get()}); }, "scale_amax_encode16");
          ASSERT_TRUE(engine::fused::compose(*be, engine::fused::ScaleAmaxEncode16Op{from, x.get(), scale, f, q2.get(),
                                                                                     n, opt, a2.get(), s2.get()}));
        }
        EXPECT_EQ(q1.host(), q2.host()) << what << ": codes";
        expect_bit_equal(a1.host(), a2.host(), what + ": amax");
        // With the bias gradient's column sums.
        auto q3 = codes(0x33), q4 = codes(0x44);
        // The cast, and for codes column_sums16 on them.
        routed(from == Format::FP32 ? 1 : 2, [&] { engine::fused::run(*be, engine::fused::ScaleAmaxEncodeSumsOp{from, x.get(), rows, cols, scale, f, q3.get(), opt,
                                                                     a1.get(), db1.get(), s1.get()}); }, "scale_amax_encode_sums");
        ASSERT_TRUE(engine::fused::compose(*be, engine::fused::ScaleAmaxEncodeSumsOp{
                                                    from, x.get(), rows, cols, scale, f, q4.get(), opt, a2.get(),
                                                    db2.get(), s2.get()}));
        EXPECT_EQ(q3.host(), q4.host()) << what << ": sums' codes";
        expect_bit_equal(a1.host(), a2.host(), what + ": sums' amax");
        expect_bit_equal(db1.host(), db2.host(), what + ": column sums");
        if (from == Format::FP32) {
          // NCHW planes, with the codes' values decoded and the channel sums.
          const auto* xf = reinterpret_cast<const float*>(x.get());
          auto q5 = codes(0x55), q6 = codes(0x66);
          auto dec1 = out(static_cast<std::size_t>(n)), dec2 = out(static_cast<std::size_t>(n));
          auto cs1 = out(static_cast<std::size_t>(pc)), cs2 = out(static_cast<std::size_t>(pc));
          routed(1, [&] { engine::fused::run(*be, engine::fused::ScaleAmaxEncodePlanesOp{xf, pn, pc, phw, scale, f, q5.get(), opt,
                                                                         a1.get(), dec1.get(), cs1.get(), s1.get()}); }, "scale_amax_encode_planes");
          ASSERT_TRUE(engine::fused::compose(
              *be, engine::fused::ScaleAmaxEncodePlanesOp{xf, pn, pc, phw, scale, f, q6.get(), opt, a2.get(),
                                                          dec2.get(), cs2.get(), s2.get()}));
          EXPECT_EQ(q5.host(), q6.host()) << what << ": planes' codes";
          expect_bit_equal(a1.host(), a2.host(), what + ": planes' amax");
          expect_bit_equal(dec1.host(), dec2.host(), what + ": planes decoded");
          expect_bit_equal(cs1.host(), cs2.host(), what + ": channel sums");
        } else {
          routed(1, [&] { engine::fused::column_sums16(*be, from, x.get(), rows, cols, db1.get(), s1.get()); }, "column_sums16");
          ASSERT_TRUE(engine::fused::compose(*be, engine::fused::ColumnSums16Op{from, x.get(), rows, cols, db2.get(),
                                                                                s2.get()}));
          expect_bit_equal(db1.host(), db2.host(), what + ": column_sums16");
        }
        if (HasFailure()) return;
      }
}

// The pointwise ops on codes (GELU on FP16/BF16, its gradient, ReLU's and
// GELU's gradient from coded dy, the residual add encoded, an activation
// followed by its FP8 cast): each against its composition on the same
// backend, bit for bit on every target (the CUDA module runs each in one
// pass: pointwise_coded, scale_amax_encode with its activation), and over
// the host table each must reach the module. On a device:
//   test_backend_conformance --gtest_filter='*PointwiseOnCodesEqualTheirCompositions*/cuda'
TEST_P(Conformance, PointwiseOnCodesEqualTheirCompositionsAndReachTheModule) {
  const bool host_table = GetParam().name == "cuda_backend_over_host_table";
  const i64 n = 3001;
  std::uint64_t seed = 1500;
  auto codes_of = [&](Format f, const std::vector<float>& v) {
    std::vector<std::uint8_t> b(v.size() * engine::storage_bytes(f));
    engine::cast_from_f32(f, v.data(), b.data(), v.size());
    return DeviceBuffer<std::uint8_t>(GetParam(), b);
  };
  auto blank = [&](Format f, std::uint8_t fill) {
    return DeviceBuffer<std::uint8_t>(GetParam(),
                                      std::vector<std::uint8_t>(static_cast<std::size_t>(n) * engine::storage_bytes(f), fill));
  };
  auto routed = [&](const std::string& what, const std::function<void()>& run_it) {
    const int calls = host_table_fused_cast_calls();
    run_it();
    if (host_table) {
      EXPECT_EQ(host_table_fused_cast_calls() - calls, 1) << what << ": routing";
    }
  };
  std::vector<float> xv = normal_values(static_cast<std::size_t>(n), ++seed, 4.0f);
  std::vector<float> dyv = normal_values(static_cast<std::size_t>(n), ++seed, 3e4f);  // some overflow FP16/FP8
  xv[5] = std::numeric_limits<float>::quiet_NaN();
  xv[6] = -0.0f;
  xv[9] = 0.0f;
  for (Format f : {Format::BF16, Format::FP16}) {
    const std::string fn = engine::format_name(f);
    auto x = codes_of(f, xv), dy = codes_of(f, dyv);
    auto s1 = out(static_cast<std::size_t>(n)), s2 = out(static_cast<std::size_t>(n)), s3 = out(static_cast<std::size_t>(n));
    {
      auto y1 = blank(f, 0x11), y2 = blank(f, 0x22);
      routed("gelu16_forward " + fn, [&] { engine::fused::gelu16_forward(*be, f, x.get(), y1.get(), n, s1.get(), s2.get()); });
      ASSERT_TRUE(engine::fused::compose(*be, engine::fused::Gelu16ForwardOp{f, x.get(), y2.get(), n, s1.get(), s2.get()}));
      EXPECT_EQ(y1.host(), y2.host()) << "gelu16_forward " << fn;
    }
    {
      auto d1 = blank(f, 0x11), d2 = blank(f, 0x22);
      routed("gelu16_backward " + fn, [&] {
        engine::fused::gelu16_backward(*be, f, x.get(), f, dy.get(), d1.get(), n, s1.get(), s2.get(), s3.get());
      });
      ASSERT_TRUE(engine::fused::compose(
          *be, engine::fused::Gelu16BackwardOp{f, x.get(), f, dy.get(), d2.get(), n, s1.get(), s2.get(), s3.get()}));
      EXPECT_EQ(d1.host(), d2.host()) << "gelu16_backward " << fn;
    }
    auto x32 = dev(xv);
    for (engine::Activation act : {engine::Activation::Relu, engine::Activation::Gelu}) {
      const std::string an = act == engine::Activation::Relu ? "relu" : "gelu";
      auto d1 = out(static_cast<std::size_t>(n)), d2 = out(static_cast<std::size_t>(n));
      routed(an + "_backward_coded " + fn, [&] {
        engine::fused::run(*be, engine::fused::ActivationBackwardCodedOp{act, x32.get(), f, dy.get(), d1.get(), n, s1.get()});
      });
      ASSERT_TRUE(engine::fused::compose(
          *be, engine::fused::ActivationBackwardCodedOp{act, x32.get(), f, dy.get(), d2.get(), n, s1.get()}));
      expect_bit_equal(d1.host(), d2.host(), an + "_backward_coded " + fn);
      for (Format q : {Format::E4M3, Format::E5M2}) {
        engine::CastOptions opt;
        opt.saturate = q == Format::E4M3;
        auto q1 = blank(q, 0x11), q2 = blank(q, 0x22);
        auto a1 = out(1), a2 = out(1);
        const std::string what = an + "_forward_encode -> " + engine::format_name(q);
        routed(what, [&] {
          engine::fused::run(*be, engine::fused::ActivationForwardEncodeOp{act, x32.get(), n, 2.5f, q, q1.get(), opt,
                                                                           a1.get(), s1.get()});
        });
        ASSERT_TRUE(engine::fused::compose(*be, engine::fused::ActivationForwardEncodeOp{
                                                    act, x32.get(), n, 2.5f, q, q2.get(), opt, a2.get(), s2.get()}));
        EXPECT_EQ(q1.host(), q2.host()) << what;
        expect_bit_equal(a1.host(), a2.host(), what + ": amax");
      }
    }
    for (int mode = 0; mode < 3; ++mode) {
      engine::CastOptions opt;
      opt.saturate = mode == 1;
      opt.stochastic = mode == 2;
      opt.seed = 9;
      opt.index_offset = 4;
      for (Format fy : {f, Format::E4M3}) {
        auto y1 = blank(fy, 0x11), y2 = blank(fy, 0x22);
        const std::string what = "add_encode " + fn + " -> " + engine::format_name(fy) + " mode " + std::to_string(mode);
        routed(what, [&] {
          engine::fused::add_encode(*be, f, x.get(), Format::FP32, x32.get(), fy, y1.get(), n, opt, s1.get(), s2.get(),
                                    s3.get());
        });
        ASSERT_TRUE(engine::fused::compose(*be, engine::fused::AddEncodeOp{f, x.get(), Format::FP32, x32.get(), fy,
                                                                           y2.get(), n, opt, s1.get(), s2.get(),
                                                                           s3.get()}));
        EXPECT_EQ(y1.host(), y2.host()) << what;
      }
    }
    if (HasFailure()) return;
  }
}

// The epilogue the CUDA module asks cuBLASLt for (backend/cuda/lt_epilogue.h),
// a pure function of the request: what the lab's layers fuse, and each
// refusal with its reason.
TEST(CudaEpiloguePlan, LinearForwardAsksForTheBiasEpilogueWithItsOutputType) {
  using namespace pl_cuda;
  LtRequest r;
  r.m = 128;
  r.n = 100;
  r.k = 64;
  r.a = r.b = PL_CUDA_BF16;
  r.b_trans = true;
  r.bias = true;
  r.d = PL_CUDA_BF16;
  r.c_scratch = true;
  LtPlan p = plan_gemm_epilogue(r);
  EXPECT_TRUE(p.fused);
  EXPECT_EQ(p.epilogue, LtEpilogue::Bias);
  EXPECT_EQ(p.d_type, PL_CUDA_BF16);
  EXPECT_TRUE(p.bias_fp32);
  EXPECT_FALSE(p.gelu_after);
  // The lab's GELU (erf) stays out of the epilogue; the bias stays in.
  r.gelu = LtGelu::Erf;
  p = plan_gemm_epilogue(r);
  EXPECT_TRUE(p.fused);
  EXPECT_EQ(p.epilogue, LtEpilogue::Bias);
  EXPECT_TRUE(p.gelu_after);
  EXPECT_NE(std::string(p.why).find("erf"), std::string::npos) << p.why;
  // A tanh GELU would be cuBLASLt's: GELU_AUX_BIAS, aux ld n rounded up to 8.
  r.gelu = LtGelu::Tanh;
  p = plan_gemm_epilogue(r);
  EXPECT_EQ(p.epilogue, LtEpilogue::GeluAuxBias);
  EXPECT_EQ(p.aux_ld, 104);
  EXPECT_FALSE(p.gelu_after);
  r.bias = false;
  EXPECT_EQ(plan_gemm_epilogue(r).epilogue, LtEpilogue::GeluAux);
  r.gelu = LtGelu::None;
  p = plan_gemm_epilogue(r);
  EXPECT_TRUE(p.fused);
  EXPECT_EQ(p.epilogue, LtEpilogue::Default);
  EXPECT_FALSE(p.bias_fp32);
  r.d = PL_CUDA_FP16;
  r.a = r.b = PL_CUDA_FP16;
  EXPECT_EQ(plan_gemm_epilogue(r).d_type, PL_CUDA_FP16);
}

TEST(CudaEpiloguePlan, DeclinesWhatCuBlasLtWouldRoundOrReadDifferently) {
  using namespace pl_cuda;
  LtRequest base;
  base.m = base.n = base.k = 64;
  base.a = base.b = PL_CUDA_BF16;
  base.b_trans = true;
  base.d = PL_CUDA_BF16;
  base.c_scratch = true;
  ASSERT_TRUE(plan_gemm_epilogue(base).fused);
  auto declined = [](LtRequest r, const char* word) {
    const LtPlan p = plan_gemm_epilogue(r);
    EXPECT_FALSE(p.fused) << word;
    EXPECT_EQ(p.epilogue, LtEpilogue::Default) << word;
    EXPECT_NE(std::string(p.why).find(word), std::string::npos) << "reason '" << p.why << "' lacks '" << word << "'";
  };
  LtRequest r = base;
  r.stochastic = true;
  declined(r, "stochastic");
  r = base;
  r.c_scratch = false;
  declined(r, "reads C");
  r = base;
  r.beta = 1.0f;
  declined(r, "beta");
  r = base;
  r.accumulate = PL_CUDA_BF16;
  declined(r, "accumulation");
  r = base;
  r.batched = true;
  declined(r, "batched");
  r = base;
  r.blocks = true;
  declined(r, "block");
  r = base;
  r.ldc = 72;
  declined(r, "packed");
  r = base;
  r.k = 0;
  declined(r, "empty");
  r = base;
  r.amax = true;
  declined(r, "AMAX_D");
  // FP8 outputs: cuBLASLt saturates, the lab's unsaturated encode does not.
  r = base;
  r.a = r.b = PL_CUDA_E4M3;
  r.fp8_tensor_cores = true;
  r.d = PL_CUDA_E5M2;
  declined(r, "saturates");
  r.saturate = true;  // E5M2 saturating keeps inf in the lab
  declined(r, "saturates");
  r.d = PL_CUDA_E4M3;
  r.bias = true;
  declined(r, "16-bit");
  r.bias = false;
  declined(r, "not wired");
  r.fp8_tensor_cores = false;
  declined(r, "FP8 Tensor Cores");
  // The bias gradient from the GEMM sums in cuBLASLt's order.
  EXPECT_FALSE(plan_bias_grad(base).fused);
}

TEST_P(Conformance, GemmEmptyInnerDimensionIsBetaCPlusBias) {
  GemmCase g{3, 4, 0, Format::FP32, Format::FP32, false, false};
  g.beta = 2.0f;
  g.bias = true;
  GemmData d = make_gemm_data(g, 5);
  const std::vector<float> got = run_gemm(GetParam(), *be, g, d);
  for (i64 i = 0; i < 3; ++i)
    for (i64 j = 0; j < 4; ++j)
      EXPECT_FLOAT_EQ(got[static_cast<std::size_t>(i * 4 + j)],
                      2.0f * d.c0[static_cast<std::size_t>(i * 4 + j)] + d.bias[static_cast<std::size_t>(j)]);
}

// Reduced-precision accumulation: defined k-sequentially (backend.h), so the
// backend must equal this reference bit for bit:
//   s = 0; for p in 0..k-1: s = quantize(acc, s + a*b)   (f32 ops)
//   c = alpha * s; c += beta * c_old; c += bias
void check_gemm_lowp(const Target& t, Backend& be, const GemmCase& g, std::uint64_t seed) {
  const GemmData d = make_gemm_data(g, seed);
  const std::vector<float> got = run_gemm(t, be, g, d);
  std::vector<float> want = d.c0;
  for (i64 i = 0; i < g.m; ++i)
    for (i64 j = 0; j < g.n; ++j) {
      float s = 0.0f;
      for (i64 p = 0; p < g.k; ++p) {
        const float prod = static_cast<float>(op_a(g, d, i, p)) * static_cast<float>(op_b(g, d, p, j));
        s = engine::quantize(g.accumulate, s + prod);
      }
      float& c = want[static_cast<std::size_t>(i * d.ldc + j)];
      float v = g.alpha * s;
      if (g.beta != 0.0f) v += g.beta * c;
      if (g.bias) v += d.bias[static_cast<std::size_t>(j)];
      c = v;
    }
  expect_bit_equal(got, want, g.name());
}

TEST_P(Conformance, GemmLowPrecisionAccumulateEqualsSequentialReferenceExactly) {
  std::uint64_t seed = 900;
  const std::vector<std::pair<Format, Format>> cases = {
      {Format::FP16, Format::FP16}, {Format::BF16, Format::BF16}, {Format::FP32, Format::FP16},
      {Format::E4M3, Format::FP16}, {Format::E5M2, Format::BF16}, {Format::FP32, Format::BF16}};
  for (const auto& [fin, facc] : cases)
    for (int t = 0; t < 4; ++t) {
      GemmCase g{7, 13, 5, fin, fin, (t & 1) != 0, (t & 2) != 0};
      g.accumulate = facc;
      check_gemm_lowp(GetParam(), *be, g, ++seed);
      GemmCase big{64, 33, 129, fin, fin, (t & 1) != 0, (t & 2) != 0, 0.5f, 1.0f, true, 2, facc};
      check_gemm_lowp(GetParam(), *be, big, ++seed);
      // Large enough for the parallel path (m * n * k >= 32k).
      GemmCase par{96, 70, 300, fin, fin, (t & 1) != 0, (t & 2) != 0};
      par.accumulate = facc;
      check_gemm_lowp(GetParam(), *be, par, ++seed);
      // Partial sums in the subnormal range of FP16 (below 2^-14) ...
      GemmCase tiny{9, 17, 40, fin, fin, (t & 1) != 0, (t & 2) != 0};
      tiny.accumulate = facc;
      tiny.scale = 0.003f;
      check_gemm_lowp(GetParam(), *be, tiny, ++seed);
      // ... and past its largest value (65504): inf, then NaN once +inf
      // meets -inf.
      GemmCase huge{9, 17, 40, fin, fin, (t & 1) != 0, (t & 2) != 0};
      huge.accumulate = facc;
      huge.scale = fin == Format::E4M3 || fin == Format::E5M2 ? 60.0f : 150.0f;
      check_gemm_lowp(GetParam(), *be, huge, ++seed);
      if (HasFailure()) return;
    }
}

// The dot product of two FP16 vectors (a 1 x 1 GEMM over k), summed in
// FP16 and in FP32: {FP16 result, FP32 result}.
std::pair<float, float> fp16_dot(const Target& t, Backend& be, const std::vector<std::uint16_t>& a,
                                 const std::vector<std::uint16_t>& b) {
  const i64 k = static_cast<i64>(a.size());
  DeviceBuffer<std::uint16_t> da(t, a), db(t, b);
  DeviceBuffer<float> c(t, std::vector<float>(1, std::numeric_limits<float>::quiet_NaN()));
  engine::GemmArgs args;
  args.m = 1;
  args.n = 1;
  args.k = k;
  args.a = {da.get(), Format::FP16, false, k};
  args.b = {db.get(), Format::FP16, false, 1};
  args.c = c.get();
  args.ldc = 1;
  args.accumulate = Format::FP16;
  be.gemm(args);
  const float fp16 = c.host()[0];
  args.accumulate = Format::FP32;
  be.gemm(args);
  return {fp16, c.host()[0]};
}

TEST_P(Conformance, GemmFp16AccumulationStallsWhereFp32DoesNot) {
  // 4096 products of 1 * 1: an FP16 running sum stops growing at 2048
  // (2048 + 1 rounds back to 2048, ties to even), FP32 reaches 4096.
  const std::vector<std::uint16_t> ones(4096, engine::fp32_to_fp16(1.0f));
  const auto [fp16, fp32] = fp16_dot(GetParam(), *be, ones, ones);
  EXPECT_EQ(fp16, 2048.0f);
  EXPECT_EQ(fp32, 4096.0f);
}

TEST_P(Conformance, GemmFp16AccumulationStallsOnSmallAddends) {
  // 2048 + 4095 products of 2^-4: an FP16 running sum stays 2048 (2048 +
  // 2^-4 rounds back); FP32 holds every partial sum exactly and ends at
  // 2048 + 4095/16. (An H100's own FP16 accumulation, CUBLAS_COMPUTE_16F,
  // gave 2300 here: it is not what the backends run.)
  std::vector<std::uint16_t> a(4096, engine::fp32_to_fp16(0.25f)), b(4096, engine::fp32_to_fp16(0.25f));
  a[0] = engine::fp32_to_fp16(2048.0f);
  b[0] = engine::fp32_to_fp16(1.0f);
  const auto [fp16, fp32] = fp16_dot(GetParam(), *be, a, b);
  EXPECT_EQ(fp16, 2048.0f);
  EXPECT_EQ(fp32, 2048.0f + 4095.0f / 16.0f);
}

// Batched GEMMs in attention's layout: B x H products whose operands are
// strided column slices of one qkv-like buffer [B, T, 3C] (head h at column
// h * d of batch b's rows) or scores-like [B, H, T, T]. One call; each
// product against the double reference, elements outside every product
// untouched.
struct BatchedSide {
  i64 offset, ld, s0, s1, size;  // elements
};
struct BatchedCase {
  std::string what;
  i64 m, n, k;
  BatchedSide a, b, c;
  bool ta, tb;
};

TEST_P(Conformance, BatchedGemmInAttentionLayoutMatchesEveryProduct) {
  // Odd and even lengths: with native bf16 the BF16 products of even k and
  // n <= 16 run on the bf16 dot product (T = 12: a block of 8 rows and 4
  // more, 12 and 8 of 16 columns), the others on the f32 kernel. T = 16
  // with d = 16 and 32 (the default transformer's heads, and two groups of
  // 8 pairs) takes the kernel's register transpose of k for q k^T. T = 64
  // with d = 32 (the gpt's baby shape) runs the bf16 kernel on 4 and 2
  // tiles of 16 columns; T = 42 with d = 50 on masked last tiles and rows
  // left over after the blocks of rows.
  struct Geometry {
    i64 B, H, T, C;
  };
  for (const Geometry& geo : {Geometry{3, 2, 5, 8}, Geometry{2, 3, 12, 24}, Geometry{2, 2, 16, 32}, Geometry{1, 2, 16, 64},
                              Geometry{1, 2, 64, 64}, Geometry{1, 2, 42, 100}}) {
    const i64 B = geo.B, H = geo.H, T = geo.T, C = geo.C, d = C / H, ld = 3 * C;
    const i64 qkv_size = B * T * ld, scores_size = B * H * T * T;
    const BatchedSide q{0, ld, T * ld, d, qkv_size}, k_{C, ld, T * ld, d, qkv_size}, v{2 * C, ld, T * ld, d, qkv_size};
    const BatchedSide scores{0, T, H * T * T, T * T, scores_size};
    const std::vector<BatchedCase> cases = {
        {"scores = q k^T", T, T, d, q, k_, scores, false, true},
        {"dq = dS k", T, d, T, scores, k_, q, false, false},
        {"dk = dS^T q", T, d, T, scores, q, k_, true, false},
        {"out = P v", T, d, T, scores, v, BatchedSide{0, C, T * C, d, B * T * C}, false, false},
        {"dv = P^T dO", T, d, T, scores, BatchedSide{0, C, T * C, d, B * T * C}, v, true, false}};
    const std::vector<std::pair<Format, Format>> formats = {{Format::FP32, Format::FP32}, {Format::TF32, Format::TF32},
                                                            {Format::FP16, Format::FP16}, {Format::BF16, Format::BF16},
                                                            {Format::E4M3, Format::E4M3}, {Format::E5M2, Format::E4M3}};
    std::uint64_t seed = 1300;
    for (const BatchedCase& bc : cases)
      for (const auto& [fa, fb] : formats)
        for (int epilogue = 0; epilogue < 3; ++epilogue) {
          const float alpha = epilogue == 0 ? 0.5f : 1.0f, beta = epilogue == 0 ? 0.0f : epilogue == 1 ? 1.0f : -0.25f;
          const bool bias = epilogue == 2;
          const Operand a = make_operand(fa, 1, bc.a.size, bc.a.size, ++seed, 1.0f);
          const Operand b = make_operand(fb, 1, bc.b.size, bc.b.size, ++seed, 1.0f);
          std::vector<float> c0 = normal_values(static_cast<std::size_t>(bc.c.size), ++seed);
          if (beta == 0.0f) std::fill(c0.begin(), c0.end(), std::numeric_limits<float>::quiet_NaN());
          const std::vector<float> bias_v = normal_values(static_cast<std::size_t>(bc.n), ++seed);
          DeviceBuffer<std::uint8_t> da(GetParam(), a.bytes), db(GetParam(), b.bytes);
          DeviceBuffer<float> dc(GetParam(), c0), dbias(GetParam(), bias_v);
          engine::GemmArgs g;
          g.m = bc.m;
          g.n = bc.n;
          g.k = bc.k;
          g.a = {da.get() + bc.a.offset * static_cast<i64>(engine::storage_bytes(fa)), fa, bc.ta, bc.a.ld};
          g.a.batch_stride[0] = bc.a.s0;
          g.a.batch_stride[1] = bc.a.s1;
          g.b = {db.get() + bc.b.offset * static_cast<i64>(engine::storage_bytes(fb)), fb, bc.tb, bc.b.ld};
          g.b.batch_stride[0] = bc.b.s0;
          g.b.batch_stride[1] = bc.b.s1;
          g.c = dc.get() + bc.c.offset;
          g.ldc = bc.c.ld;
          g.c_batch_stride[0] = bc.c.s0;
          g.c_batch_stride[1] = bc.c.s1;
          g.batch[0] = B;
          g.batch[1] = H;
          g.alpha = alpha;
          g.beta = beta;
          g.bias = bias ? dbias.get() : nullptr;
          be->gemm(g);
          const std::vector<float> got = dc.host();

          std::vector<float> got_products;
          std::vector<double> ref, mag;
          std::vector<bool> written(static_cast<std::size_t>(bc.c.size), false);
          for (i64 bi = 0; bi < B; ++bi)
            for (i64 hi = 0; hi < H; ++hi) {
              const i64 a0 = bc.a.offset + bi * bc.a.s0 + hi * bc.a.s1, b0 = bc.b.offset + bi * bc.b.s0 + hi * bc.b.s1;
              const i64 c_0 = bc.c.offset + bi * bc.c.s0 + hi * bc.c.s1;
              for (i64 i = 0; i < bc.m; ++i)
                for (i64 j = 0; j < bc.n; ++j) {
                  double sum = 0.0, sa = 0.0;
                  for (i64 p = 0; p < bc.k; ++p) {
                    const i64 ai = a0 + (bc.ta ? p * bc.a.ld + i : i * bc.a.ld + p);
                    const i64 bj = b0 + (bc.tb ? j * bc.b.ld + p : p * bc.b.ld + j);
                    const double x = a.value[static_cast<std::size_t>(ai)];
                    const double y = b.value[static_cast<std::size_t>(bj)];
                    sum += x * y;
                    sa += std::fabs(x * y);
                  }
                  const auto ci = static_cast<std::size_t>(c_0 + i * bc.c.ld + j);
                  double r = alpha * sum, mg = std::fabs(alpha) * sa;
                  if (beta != 0.0f) {
                    r += beta * static_cast<double>(c0[ci]);
                    mg += std::fabs(beta * static_cast<double>(c0[ci]));
                  }
                  if (bias) {
                    r += bias_v[static_cast<std::size_t>(j)];
                    mg += std::fabs(bias_v[static_cast<std::size_t>(j)]);
                  }
                  got_products.push_back(got[ci]);
                  ref.push_back(r);
                  mag.push_back(mg);
                  written[ci] = true;
                }
            }
          const std::string what = bc.what + " " + engine::format_name(fa) + " x " + engine::format_name(fb) +
                                   " alpha=" + std::to_string(alpha) + " beta=" + std::to_string(beta) +
                                   (bias ? " +bias" : "");
          expect_close(got_products, ref, mag, 1e-6 * (1.0 + std::sqrt(static_cast<double>(bc.k))), 1e-30, what);
          for (std::size_t i = 0; i < written.size(); ++i)
            if (!written[i]) {
              ASSERT_TRUE(same_value(got[i], c0[i])) << what << ": wrote element " << i << " of no product";
            }
          if (HasFailure()) return;
        }
  }
}

TEST_P(Conformance, BatchedGemmLowPrecisionAccumulateEqualsOneCallPerProduct) {
  // FP16/BF16 accumulation is defined per product (k-sequential): a batched
  // call must equal the same products called one at a time, bit for bit.
  const i64 B = 2, H = 3, T = 6, C = 12, d = C / H, ld = 3 * C;
  for (Format acc : {Format::FP16, Format::BF16}) {
    const Operand qkv = make_operand(Format::FP16, 1, B * T * ld, B * T * ld, 77, 1.0f);
    DeviceBuffer<std::uint8_t> dq(GetParam(), qkv.bytes);
    auto batched = out(static_cast<std::size_t>(B * H * T * T));
    auto single = out(static_cast<std::size_t>(B * H * T * T));
    auto operand = [&](i64 col, bool trans) {
      return engine::GemmOperand{dq.get() + col * 2, Format::FP16, trans, ld};
    };
    engine::GemmArgs g;
    g.m = T;
    g.n = T;
    g.k = d;
    g.alpha = 0.5f;
    g.accumulate = acc;
    g.ldc = T;
    for (i64 bi = 0; bi < B; ++bi)
      for (i64 hi = 0; hi < H; ++hi) {
        g.a = operand(bi * T * ld + hi * d, false);
        g.b = operand(bi * T * ld + C + hi * d, true);
        g.c = single.get() + (bi * H + hi) * T * T;
        be->gemm(g);
      }
    g.a = operand(0, false);
    g.b = operand(C, true);
    g.a.batch_stride[0] = g.b.batch_stride[0] = T * ld;
    g.a.batch_stride[1] = g.b.batch_stride[1] = d;
    g.c = batched.get();
    g.batch[0] = B;
    g.batch[1] = H;
    g.c_batch_stride[0] = H * T * T;
    g.c_batch_stride[1] = T * T;
    be->gemm(g);
    expect_bit_equal(batched.host(), single.host(), std::string("accumulate ") + engine::format_name(acc));
  }
}

// ============================================================================
// Convolution: a direct 7-loop reference in double.
// ============================================================================
struct ConvCase {
  engine::ConvShape s;
  Format compute;
};

i64 idx4(i64 a, i64 b, i64 c, i64 d, i64 B, i64 C, i64 D) { return ((a * B + b) * C + c) * D + d; }

std::vector<float> rounded_values(std::size_t n, std::uint64_t seed, Format f) {
  std::vector<float> v = normal_values(n, seed);
  for (auto& x : v) x = engine::quantize(f, x);
  return v;
}

TEST_P(Conformance, Conv2dForwardAndBackwardMatchDirectReference) {
  const engine::ConvShape shapes[] = {
      // n, c_in, h, w, c_out, kh, kw, stride, pad
      {2, 3, 9, 7, 4, 3, 3, 1, 1},
      {1, 1, 5, 5, 2, 5, 5, 1, 2},     // the CNN's first layer in miniature (c_in = 1)
      {2, 16, 8, 8, 8, 3, 3, 2, 0},    // stride 2, no padding
      {2, 32, 14, 14, 16, 5, 5, 1, 2}, // the CNN's second layer, fewer images/channels
  };
  std::uint64_t seed = 300;
  for (const auto& s : shapes)
    for (Format f : {Format::FP32, Format::BF16, Format::E4M3, Format::FP16}) {
      const i64 oh = s.out_h(), ow = s.out_w();
      const std::size_t nx = static_cast<std::size_t>(s.n * s.c_in * s.h * s.w);
      const std::size_t nw = static_cast<std::size_t>(s.c_out * s.c_in * s.kh * s.kw);
      const std::size_t ny = static_cast<std::size_t>(s.n * s.c_out * oh * ow);
      // Inputs already rounded to the compute format (the caller's job).
      const Format grad_f = f == Format::E4M3 ? Format::E5M2 : f;
      const auto x = rounded_values(nx, ++seed, f), w = rounded_values(nw, ++seed, f);
      const auto dy = rounded_values(ny, ++seed, grad_f);
      const auto bias = normal_values(static_cast<std::size_t>(s.c_out), ++seed);

      std::vector<double> y_ref(ny, 0.0), y_mag(ny, 0.0), dx_ref(nx, 0.0), dx_mag(nx, 0.0),
          dw_ref(nw, 0.0), dw_mag(nw, 0.0), db_ref(static_cast<std::size_t>(s.c_out), 0.0),
          db_mag(static_cast<std::size_t>(s.c_out), 0.0);
      for (i64 n = 0; n < s.n; ++n)
        for (i64 o = 0; o < s.c_out; ++o)
          for (i64 oy = 0; oy < oh; ++oy)
            for (i64 ox = 0; ox < ow; ++ox) {
              const auto yi = static_cast<std::size_t>(idx4(n, o, oy, ox, s.c_out, oh, ow));
              for (i64 c = 0; c < s.c_in; ++c)
                for (i64 ky = 0; ky < s.kh; ++ky)
                  for (i64 kx = 0; kx < s.kw; ++kx) {
                    const i64 iy = oy * s.stride - s.pad + ky, ix = ox * s.stride - s.pad + kx;
                    if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                    const auto xi = static_cast<std::size_t>(idx4(n, c, iy, ix, s.c_in, s.h, s.w));
                    const auto wi = static_cast<std::size_t>(idx4(o, c, ky, kx, s.c_in, s.kh, s.kw));
                    y_ref[yi] += static_cast<double>(x[xi]) * w[wi];
                    y_mag[yi] += std::fabs(static_cast<double>(x[xi]) * w[wi]);
                    dx_ref[xi] += static_cast<double>(dy[yi]) * w[wi];
                    dx_mag[xi] += std::fabs(static_cast<double>(dy[yi]) * w[wi]);
                    dw_ref[wi] += static_cast<double>(dy[yi]) * x[xi];
                    dw_mag[wi] += std::fabs(static_cast<double>(dy[yi]) * x[xi]);
                  }
              y_ref[yi] += bias[static_cast<std::size_t>(o)];
              y_mag[yi] += std::fabs(bias[static_cast<std::size_t>(o)]);
              db_ref[static_cast<std::size_t>(o)] += dy[yi];
              db_mag[static_cast<std::size_t>(o)] += std::fabs(dy[yi]);
            }
      std::ostringstream name;
      name << "conv " << s.n << "x" << s.c_in << "x" << s.h << "x" << s.w << " -> " << s.c_out << " k"
           << s.kh << " s" << s.stride << " p" << s.pad << " " << engine::format_name(f);
      // f32 accumulation of exact products (bf16 kernels accumulate in f32).
      const auto tol = [](i64 terms) { return 1e-6 * (1.0 + std::sqrt(static_cast<double>(terms))); };

      auto xd = dev(x), wd = dev(w), dyd = dev(dy), bd = dev(bias);
      auto y = out(ny), dx = out(nx), dw = out(nw), db = out(static_cast<std::size_t>(s.c_out));
      be->conv2d_forward(s, f, xd.get(), wd.get(), bd.get(), y.get());
      expect_close(y.host(), y_ref, y_mag, tol(s.c_in * s.kh * s.kw), 1e-30, name.str() + " forward");
      // Without bias.
      be->conv2d_forward(s, f, xd.get(), wd.get(), nullptr, y.get());
      std::vector<double> y_nb(y_ref);
      for (std::size_t i = 0; i < ny; ++i) y_nb[i] -= bias[(i / static_cast<std::size_t>(oh * ow)) % static_cast<std::size_t>(s.c_out)];
      expect_close(y.host(), y_nb, y_mag, tol(s.c_in * s.kh * s.kw), 1e-30, name.str() + " forward, no bias");

      be->conv2d_backward_data(s, f, dyd.get(), wd.get(), dx.get());
      expect_close(dx.host(), dx_ref, dx_mag, tol(s.c_out * s.kh * s.kw), 1e-30, name.str() + " backward data");

      be->conv2d_backward_weights(s, f, xd.get(), dyd.get(), dw.get(), db.get());
      expect_close(dw.host(), dw_ref, dw_mag, tol(s.n * oh * ow), 1e-30, name.str() + " backward weights");
      expect_close(db.host(), db_ref, db_mag, tol(s.n * oh * ow), 1e-30, name.str() + " backward bias");
      // db == nullptr: weights only.
      auto dw2 = out(nw);
      be->conv2d_backward_weights(s, f, xd.get(), dyd.get(), dw2.get(), nullptr);
      expect_close(dw2.host(), dw_ref, dw_mag, tol(s.n * oh * ow), 1e-30, name.str() + " backward weights, no db");
      // The same convolutions from BF16 codes of x and dy (and FP32 given
      // as a ConvInput): where the backend takes them, the bits of the f32
      // calls above; a backend may decline (false) and write nothing.
      if (f == Format::BF16 || f == Format::FP32) {
        auto codes = [&](const std::vector<float>& v) {
          std::vector<std::uint16_t> c(v.size());
          for (std::size_t i = 0; i < v.size(); ++i) c[i] = static_cast<std::uint16_t>(engine::encode(Format::BF16, v[i]));
          return c;
        };
        DeviceBuffer<std::uint16_t> xc(GetParam(), codes(x)), dyc(GetParam(), codes(dy));
        const engine::ConvInput x_in = f == Format::BF16 ? engine::ConvInput{Format::BF16, xc.get()}
                                                         : engine::ConvInput{Format::FP32, xd.get()};
        const engine::ConvInput dy_in = f == Format::BF16 ? engine::ConvInput{Format::BF16, dyc.get()}
                                                          : engine::ConvInput{Format::FP32, dyd.get()};
        be->conv2d_forward(s, f, xd.get(), wd.get(), bd.get(), y.get());
        const std::vector<float> y_f32 = y.host(), dx_f32 = dx.host(), dw_f32 = dw.host(), db_f32 = db.host();
        auto y2 = out(ny), dx2 = out(nx), dw3 = out(nw), db2 = out(static_cast<std::size_t>(s.c_out));
        const std::string coded = name.str() + " from " + engine::format_name(x_in.format);
        if (engine::fused::conv2d_forward_coded(*be, s, f, x_in, wd.get(), bd.get(), y2.get()))
          expect_bit_equal(y2.host(), y_f32, coded + " forward");
        if (engine::fused::conv2d_backward_data_coded(*be, s, f, dy_in, wd.get(), dx2.get()))
          expect_bit_equal(dx2.host(), dx_f32, coded + " backward data");
        if (engine::fused::conv2d_backward_weights_coded(*be, s, f, x_in, dy_in, dw3.get(), db2.get())) {
          expect_bit_equal(dw3.host(), dw_f32, coded + " backward weights");
          expect_bit_equal(db2.host(), db_f32, coded + " backward bias");
        }
        // The CPU backend takes FP32 always, and BF16 codes wherever oneDNN
        // runs on AVX-512 (elsewhere its reorder from bf16 is a slow
        // reference loop, and it declines). cpu_composed declines always.
        const int isa = static_cast<int>(dnnl::get_effective_cpu_isa());
        const int avx512 = static_cast<int>(dnnl::cpu_isa::avx512_core);
        if (GetParam().name.rfind("cpu", 0) == 0 && GetParam().name != "cpu_composed" &&
            (f == Format::FP32 || (isa & avx512) == avx512)) {
          EXPECT_TRUE(engine::fused::conv2d_forward_coded(*be, s, f, x_in, wd.get(), nullptr, y2.get())) << coded;
        }
      }
      if (HasFailure()) return;
    }
}

// ============================================================================
// Pooling
// ============================================================================
TEST_P(Conformance, MaxPoolForwardArgmaxAndBackwardAreExact) {
  struct Case {
    i64 n, c, h, w, k;
  };
  // 7x5 with k = 2: the last row and column are outside every window.
  for (const Case& pc : {Case{2, 3, 7, 5, 2}, Case{1, 2, 6, 6, 3}, Case{8, 32, 28, 28, 2}}) {
    const i64 oh = pc.h / pc.k, ow = pc.w / pc.k;
    const std::size_t nx = static_cast<std::size_t>(pc.n * pc.c * pc.h * pc.w);
    const std::size_t ny = static_cast<std::size_t>(pc.n * pc.c * oh * ow);
    // Few distinct values: ties, where the first maximum must win.
    std::vector<float> x = normal_values(nx, 40 + static_cast<std::uint64_t>(pc.h));
    for (auto& v : x) v = std::round(v * 2.0f);
    // A NaN wins its window from every position (x[5]: window (0, 0) below
    // the first; x[3]: the second of window (0, 1); x[h * w + w + 1]: the
    // last of plane 1's first window; x[2 * h * w]: the first of a window).
    for (std::size_t i : {std::size_t{5}, std::size_t{3}, static_cast<std::size_t>(pc.h * pc.w + pc.w + 1),
                          static_cast<std::size_t>(2 * pc.h * pc.w)})
      if (i < nx) x[i] = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> y_ref(ny);
    std::vector<std::int32_t> arg_ref(ny);
    for (i64 p = 0; p < pc.n * pc.c; ++p)
      for (i64 oy = 0; oy < oh; ++oy)
        for (i64 ox = 0; ox < ow; ++ox) {
          float best = 0.0f;
          i64 best_i = -1;
          for (i64 ky = 0; ky < pc.k; ++ky)
            for (i64 kx = 0; kx < pc.k; ++kx) {
              const i64 i = (oy * pc.k + ky) * pc.w + ox * pc.k + kx;
              const float v = x[static_cast<std::size_t>(p * pc.h * pc.w + i)];
              const bool better = best_i < 0 || (!std::isnan(best) && (v > best || std::isnan(v)));
              if (better) {
                best = v;
                best_i = i;
              }
            }
          y_ref[static_cast<std::size_t>((p * oh + oy) * ow + ox)] = best;
          arg_ref[static_cast<std::size_t>((p * oh + oy) * ow + ox)] = static_cast<std::int32_t>(best_i);
        }
    auto xd = dev(x);
    auto y = out(ny);
    DeviceBuffer<std::int32_t> arg(GetParam(), std::vector<std::int32_t>(ny, -7));
    be->maxpool2d_forward(pc.n, pc.c, pc.h, pc.w, pc.k, xd.get(), y.get(), arg.get());
    expect_bit_equal(y.host(), y_ref, "maxpool forward");
    EXPECT_EQ(arg.host(), arg_ref) << "maxpool argmax";

    const std::vector<float> dy = normal_values(ny, 77);
    std::vector<float> dx_ref(nx, 0.0f);
    for (i64 p = 0; p < pc.n * pc.c; ++p)
      for (i64 o = 0; o < oh * ow; ++o)
        dx_ref[static_cast<std::size_t>(p * pc.h * pc.w + arg_ref[static_cast<std::size_t>(p * oh * ow + o)])] +=
            dy[static_cast<std::size_t>(p * oh * ow + o)];
    auto dyd = dev(dy);
    auto dx = out(nx);
    be->maxpool2d_backward(pc.n, pc.c, pc.h, pc.w, pc.k, dyd.get(), arg.get(), dx.get());
    expect_bit_equal(dx.host(), dx_ref, "maxpool backward");
  }
}

// Pooling FP16/BF16 codes directly gives the bits of decode, pool, encode
// through the same backend: every code kind (NaNs signalling and quiet,
// infinities, zeros of both signs, subnormals) and ties; 2x2 windows take
// the CPU's code path, other windows and large planes its fallback.
TEST_P(Conformance, MaxPool16EqualsDecodePoolEncode) {
  struct Case {
    i64 n, c, h, w, k;
  };
  for (Format f : {Format::FP16, Format::BF16})
    for (const Case& pc : {Case{2, 3, 7, 5, 2}, Case{8, 32, 28, 28, 2}, Case{1, 2, 6, 6, 3}, Case{1, 1, 66, 66, 2}}) {
      const i64 oh = pc.h / pc.k, ow = pc.w / pc.k;
      const std::size_t nx = static_cast<std::size_t>(pc.n * pc.c * pc.h * pc.w);
      const std::size_t ny = static_cast<std::size_t>(pc.n * pc.c * oh * ow);
      const bool fp16 = f == Format::FP16;
      const std::uint16_t specials[] = {
          static_cast<std::uint16_t>(fp16 ? 0x7C01u : 0x7F81u),  // signalling NaN
          static_cast<std::uint16_t>(fp16 ? 0xFE00u : 0xFFC0u),  // quiet NaN, sign set
          static_cast<std::uint16_t>(fp16 ? 0x7C00u : 0x7F80u),  // +inf
          static_cast<std::uint16_t>(fp16 ? 0xFC00u : 0xFF80u),  // -inf
          0x0000u, 0x8000u, 0x0001u, 0x8003u,                    // zeros, subnormals
      };
      std::mt19937_64 rng(900 + static_cast<std::uint64_t>(pc.h) + (fp16 ? 1u : 0u));
      std::vector<std::uint16_t> x(nx);
      // Few distinct small values (ties), a special every ~20 codes.
      for (auto& v : x) {
        const std::uint64_t r = rng();
        if (r % 20 == 0) {
          v = specials[(r >> 8) % std::size(specials)];
        } else {
          const float val = static_cast<float>(static_cast<int>((r >> 16) % 9) - 4);
          std::uint16_t code = 0;
          engine::cast_from_f32(f, &val, &code, 1);
          v = code;
        }
      }
      DeviceBuffer<std::uint16_t> xd(GetParam(), x);
      // Reference: decode, the f32 pool, encode, on this backend.
      auto x32 = out(nx);
      auto y32 = out(ny);
      be->convert(f, xd.get(), Format::FP32, x32.get(), static_cast<i64>(nx), {});
      DeviceBuffer<std::int32_t> arg_ref(GetParam(), std::vector<std::int32_t>(ny, -7));
      be->maxpool2d_forward(pc.n, pc.c, pc.h, pc.w, pc.k, x32.get(), y32.get(), arg_ref.get());
      DeviceBuffer<std::uint16_t> y_ref(GetParam(), std::vector<std::uint16_t>(ny, 0xABCDu));
      be->convert(Format::FP32, y32.get(), f, y_ref.get(), static_cast<i64>(ny), {});

      DeviceBuffer<std::uint16_t> y(GetParam(), std::vector<std::uint16_t>(ny, 0x1234u));
      DeviceBuffer<std::int32_t> arg(GetParam(), std::vector<std::int32_t>(ny, -9));
      auto s1 = out(nx);
      auto s2 = out(ny);
      engine::fused::maxpool2d_forward16(*be, f, pc.n, pc.c, pc.h, pc.w, pc.k, xd.get(), y.get(), arg.get(), s1.get(), s2.get());
      const std::string what = std::string("maxpool16 ") + engine::format_name(f) + " " + std::to_string(pc.h) +
                               "x" + std::to_string(pc.w) + " k" + std::to_string(pc.k);
      EXPECT_EQ(y.host(), y_ref.host()) << what;
      EXPECT_EQ(arg.host(), arg_ref.host()) << what;
      if (HasFailure()) return;
    }
}

// ============================================================================
// Elementwise ops and reductions
// ============================================================================
TEST_P(Conformance, ReluForwardBackwardExactAndNanPropagates) {
  for (std::size_t n : {std::size_t{13}, std::size_t{100000}}) {
    std::vector<float> x = normal_values(n, 3);
    x[1] = std::numeric_limits<float>::quiet_NaN();
    x[2] = 0.0f;
    const std::vector<float> dy = normal_values(n, 4);
    std::vector<float> y_ref(n), dx_ref(n);
    for (std::size_t i = 0; i < n; ++i) {
      y_ref[i] = x[i] < 0.0f ? 0.0f : x[i];
      dx_ref[i] = x[i] > 0.0f ? dy[i] : 0.0f;
    }
    auto xd = dev(x), dyd = dev(dy);
    auto y = out(n), dx = out(n);
    be->relu_forward(xd.get(), y.get(), static_cast<i64>(n));
    expect_bit_equal(y.host(), y_ref, "relu forward");
    EXPECT_TRUE(std::isnan(y.host()[1])) << "relu must not hide a NaN";
    be->relu_backward(xd.get(), dyd.get(), dx.get(), static_cast<i64>(n));
    expect_bit_equal(dx.host(), dx_ref, "relu backward");
    // In place: y aliases x, dx aliases dy.
    be->relu_forward(xd.get(), xd.get(), static_cast<i64>(n));
    expect_bit_equal(xd.host(), y_ref, "relu forward in place");
  }
}

TEST_P(Conformance, GeluExactErfFormAndDerivative) {
  // f32 erf/exp: a few ulps. Tolerance 2e-6 relative + 1e-7 absolute.
  for (std::size_t n : {std::size_t{9}, std::size_t{70000}}) {
    std::vector<float> x = normal_values(n, 11, 3.0f);
    const std::vector<float> dy = normal_values(n, 12);
    std::vector<double> y_ref(n), dx_ref(n);
    for (std::size_t i = 0; i < n; ++i) {
      const double v = x[i];
      const double cdf = 0.5 * (1.0 + std::erf(v / std::sqrt(2.0)));
      y_ref[i] = v * cdf;
      dx_ref[i] = dy[i] * (cdf + v * std::exp(-0.5 * v * v) / std::sqrt(2.0 * std::numbers::pi));
    }
    auto xd = dev(x), dyd = dev(dy);
    auto y = out(n), dx = out(n);
    be->gelu_forward(xd.get(), y.get(), static_cast<i64>(n));
    expect_close(y.host(), y_ref, 2e-6, 1e-7, "gelu forward");
    be->gelu_backward(xd.get(), dyd.get(), dx.get(), static_cast<i64>(n));
    expect_close(dx.host(), dx_ref, 2e-6, 1e-7, "gelu backward");
  }
}

TEST_P(Conformance, AddAndScaleAreExactF32) {
  for (std::size_t n : {std::size_t{5}, std::size_t{123457}}) {
    const std::vector<float> a = normal_values(n, 21), b = normal_values(n, 22);
    std::vector<float> sum(n), scaled(n);
    for (std::size_t i = 0; i < n; ++i) {
      sum[i] = a[i] + b[i];
      scaled[i] = sum[i] * 0.375f;
    }
    auto ad = dev(a), bd = dev(b);
    auto y = out(n);
    be->add(ad.get(), bd.get(), y.get(), static_cast<i64>(n));
    expect_bit_equal(y.host(), sum, "add");
    be->add(ad.get(), bd.get(), ad.get(), static_cast<i64>(n));  // y aliases a
    expect_bit_equal(ad.host(), sum, "add in place");
    be->scale(ad.get(), 0.375f, static_cast<i64>(n));
    expect_bit_equal(ad.host(), scaled, "scale");
  }
}

TEST_P(Conformance, QuantizeEqualsScalarReferenceForEveryFormat) {
  const std::size_t n = 100003;
  std::vector<float> x = normal_values(n, 31, 100.0f);
  // Edge values: overflow, subnormals of every format, ties, inf, NaN.
  const float edges[] = {65504.0f, 65520.0f, 70000.0f, 448.0f, 464.0f, 500.0f, 57344.0f, 61440.0f,
                         1e-8f, 3e-8f, 6e-5f, 2e-3f, 1e-40f, -0.0f, INFINITY, -INFINITY, NAN, 3.4e38f};
  for (std::size_t i = 0; i < std::size(edges); ++i) x[i * 7] = edges[i];
  for (Format f : engine::kAllFormats)
    for (bool saturate : {false, true}) {
      std::vector<float> want(n);
      for (std::size_t i = 0; i < n; ++i) want[i] = engine::quantize(f, x[i], saturate);
      auto xd = dev(x);
      be->quantize(f, xd.get(), static_cast<i64>(n), saturate);
      expect_bit_equal(xd.host(), want,
                       std::string("quantize ") + engine::format_name(f) + (saturate ? " saturate" : ""));
    }
}

// FP8 delayed scaling's cast (Backend::scale_amax_encode, the CPU's one
// pass) and the same from FP16/BF16 codes (scale_amax_encode16, the CPU
// decoding as it casts): amax of the values before scaling, and value *
// scale encoded with or without saturation, against the scalar encoders,
// with infinities, values the scale pushes past FP8's range and FP32
// subnormals; NaN anywhere makes amax NaN.
TEST_P(Conformance, ScaleAmaxEncodeEqualsScalarReference) {
  for (Format from : {Format::FP32, Format::BF16, Format::FP16})
    for (std::size_t n : {std::size_t{10}, std::size_t{4099}, std::size_t{300007}})
      for (bool nan : {false, true}) {
        std::vector<float> x = normal_values(n, 51 + n, 3.0f);
        const float edges[] = {1e-9f, -0.0f, 500.0f, -70000.0f, INFINITY, -INFINITY, 1e-30f, 1e-5f, -1e-40f};
        for (std::size_t i = 0; i < std::size(edges) && i * 3 < n; ++i) x[i * 3] = edges[i];
        if (nan) x[n / 2] = std::numeric_limits<float>::quiet_NaN();
        // 16-bit sources: the codes of those values, and x their values.
        std::vector<std::uint16_t> codes(from == Format::FP32 ? 0 : n);
        for (std::size_t i = 0; i < codes.size(); ++i) {
          codes[i] = static_cast<std::uint16_t>(engine::encode(from, x[i]));
          x[i] = engine::decode(from, codes[i]);
        }
        for (Format f : {Format::E4M3, Format::E5M2})
          for (bool saturate : {true, false}) {
            const float scale = 8.0f;
            std::vector<std::uint8_t> want(n);
            std::uint32_t m = 0;
            for (std::size_t i = 0; i < n; ++i) {
              want[i] = static_cast<std::uint8_t>(engine::encode(f, x[i] * scale, saturate));
              m = std::max(m, std::bit_cast<std::uint32_t>(x[i]) & 0x7FFFFFFFu);
            }
            DeviceBuffer<std::uint8_t> q(GetParam(), std::vector<std::uint8_t>(n, 0xAB));
            auto amax = out(1);
            auto scratch = out(n);
            engine::CastOptions opt;
            opt.saturate = saturate;
            if (from == Format::FP32) {
              auto xd = dev(x);
              engine::fused::scale_amax_encode(*be, xd.get(), scale, f, q.get(), static_cast<i64>(n), opt, amax.get(), scratch.get());
            } else {
              DeviceBuffer<std::uint16_t> cd(GetParam(), codes);
              engine::fused::scale_amax_encode16(*be, from, cd.get(), scale, f, q.get(), static_cast<i64>(n), opt, amax.get(),
                                      scratch.get());
            }
            const std::string what = std::string("scale_amax_encode from ") + engine::format_name(from) + " to " +
                                     engine::format_name(f) + (saturate ? " saturate" : "") + " n=" +
                                     std::to_string(n) + (nan ? " NaN" : "");
            EXPECT_EQ(q.host(), want) << what;
            const float got = amax.host()[0];
            if (m > 0x7F800000u) {
              EXPECT_TRUE(std::isnan(got)) << what;
            } else {
              EXPECT_EQ(std::bit_cast<std::uint32_t>(got), m) << what;
            }
          }
      }
}

// The FP8 layers' fused dy cast and bias sums give the bits of
// scale_amax_encode and column_sums (scale_amax_encode16 and column_sums16
// for FP16/BF16 codes) of the same backend: codes, amax and sums, for
// shapes around the CPU's blocks, rows wider than them, and rows too few
// to split (the CPU splits the columns: the mlp's 128 x 256, and a width
// that is no multiple of its 64-column blocks).
TEST_P(Conformance, ScaleAmaxEncodeSumsEqualsItsTwoCalls) {
  const std::pair<i64, i64> shapes[] = {{1, 10},    {128, 10}, {2048, 64}, {2048, 192},
                                        {700, 129}, {3, 5000}, {128, 256}, {100, 200}};
  for (Format from : {Format::FP32, Format::BF16, Format::FP16})
    for (const auto& [rows, cols] : shapes)
      for (bool special : {false, true})
        for (Format f : {Format::E4M3, Format::E5M2}) {
        const auto n = static_cast<std::size_t>(rows * cols);
        std::vector<float> x = normal_values(n, 71 + n, 40.0f);
        if (special) {
          x[n / 3] = INFINITY;
          x[n - 1] = -1e-40f;
          if (n > 2) x[1] = std::numeric_limits<float>::quiet_NaN();
        }
        std::vector<std::uint16_t> codes(from == Format::FP32 ? 0 : n);
        if (!codes.empty()) engine::cast_from_f32(from, x.data(), codes.data(), n);
        const float scale = 2.5f;
        engine::CastOptions opt;
        opt.saturate = true;
        auto xd = dev(x);
        DeviceBuffer<std::uint16_t> cd(GetParam(), codes);
        DeviceBuffer<std::uint8_t> q1(GetParam(), std::vector<std::uint8_t>(n, 0xAB));
        DeviceBuffer<std::uint8_t> q2(GetParam(), std::vector<std::uint8_t>(n, 0xCD));
        auto a1 = out(1), a2 = out(1), db1 = out(static_cast<std::size_t>(cols)), db2 = out(static_cast<std::size_t>(cols));
        auto scratch = out(n);
        if (from == Format::FP32) {
          engine::fused::scale_amax_encode(*be, xd.get(), scale, f, q1.get(), rows * cols, opt, a1.get(), scratch.get());
          be->column_sums(xd.get(), rows, cols, db1.get());
          engine::fused::scale_amax_encode_sums(*be, from, xd.get(), rows, cols, scale, f, q2.get(), opt, a2.get(), db2.get(),
                                     scratch.get());
        } else {
          engine::fused::scale_amax_encode16(*be, from, cd.get(), scale, f, q1.get(), rows * cols, opt, a1.get(), scratch.get());
          engine::fused::column_sums16(*be, from, cd.get(), rows, cols, db1.get(), scratch.get());
          engine::fused::scale_amax_encode_sums(*be, from, cd.get(), rows, cols, scale, f, q2.get(), opt, a2.get(), db2.get(),
                                     scratch.get());
        }
        const std::string what = std::string(engine::format_name(from)) + "->" + engine::format_name(f) + " " +
                                 std::to_string(rows) + "x" + std::to_string(cols) + (special ? " specials" : "");
        EXPECT_EQ(q2.host(), q1.host()) << what;
        EXPECT_EQ(std::bit_cast<std::uint32_t>(a2.host()[0]), std::bit_cast<std::uint32_t>(a1.host()[0])) << what;
        const std::vector<float> s1 = db1.host(), s2 = db2.host();
        for (i64 j = 0; j < cols; ++j)
          ASSERT_EQ(std::bit_cast<std::uint32_t>(s2[j]), std::bit_cast<std::uint32_t>(s1[j])) << what << " column " << j;
      }
}

// An FP8 convolution's casts (scale_amax_encode_planes): the codes, amax,
// decoded values and channel sums of scale_amax_encode, convert and
// channel_sums of the same backend, with and without each output, for the
// cnn's conv shapes, planes shorter than a block, a channel count the
// threads do not divide, specials, and stochastic rounding.
TEST_P(Conformance, ScaleAmaxEncodePlanesEqualsItsCalls) {
  struct Case {
    i64 n, c, hw;
  };
  for (const Case& k : {Case{128, 1, 784}, Case{16, 32, 784}, Case{8, 64, 196}, Case{5, 7, 9}, Case{3, 3, 2000}})
    for (bool special : {false, true})
      for (bool stochastic : {false, true})
        for (Format f : {Format::E4M3, Format::E5M2})
          for (int outputs = 1; outputs < 4; ++outputs) {
            const bool want_decoded = outputs & 1, want_sums = outputs & 2;
            const auto n = static_cast<std::size_t>(k.n * k.c * k.hw);
            std::vector<float> x = normal_values(n, 81 + n, 40.0f);
            if (special) {
              x[n / 3] = INFINITY;
              x[n - 1] = -1e-40f;
              x[1] = std::numeric_limits<float>::quiet_NaN();
              x[n / 2] = 1e6f;  // saturates
            }
            const float scale = 2.5f;
            engine::CastOptions opt;
            opt.saturate = true;
            opt.stochastic = stochastic;
            opt.seed = 99;
            auto xd = dev(x);
            DeviceBuffer<std::uint8_t> q1(GetParam(), std::vector<std::uint8_t>(n, 0xAB));
            DeviceBuffer<std::uint8_t> q2(GetParam(), std::vector<std::uint8_t>(n, 0xCD));
            auto a1 = out(1), a2 = out(1), d1 = out(n), d2 = out(n), db1 = out(static_cast<std::size_t>(k.c)),
                 db2 = out(static_cast<std::size_t>(k.c)), scratch = out(n);
            engine::fused::scale_amax_encode(*be, xd.get(), scale, f, q1.get(), static_cast<i64>(n), opt, a1.get(), scratch.get());
            be->convert(f, q1.get(), Format::FP32, d1.get(), static_cast<i64>(n), {});
            be->channel_sums(xd.get(), db1.get(), k.n, k.c, k.hw);
            engine::fused::scale_amax_encode_planes(*be, xd.get(), k.n, k.c, k.hw, scale, f, q2.get(), opt, a2.get(),
                                         want_decoded ? d2.get() : nullptr, want_sums ? db2.get() : nullptr,
                                         want_decoded ? d2.get() : scratch.get());
            const std::string what = std::string(engine::format_name(f)) + " " + std::to_string(k.n) + "x" +
                                     std::to_string(k.c) + "x" + std::to_string(k.hw) + (special ? " specials" : "") +
                                     (stochastic ? " stochastic" : "") + " outputs " + std::to_string(outputs);
            EXPECT_EQ(q2.host(), q1.host()) << what;
            EXPECT_EQ(std::bit_cast<std::uint32_t>(a2.host()[0]), std::bit_cast<std::uint32_t>(a1.host()[0])) << what;
            if (want_decoded) expect_bit_equal(d2.host(), d1.host(), what + " decoded");
            if (want_sums) expect_bit_equal(db2.host(), db1.host(), what + " channel sums");
          }
}

// An FP8 convolution's output (scale_bias_add_channels): the bits of scale
// then bias_add_channels, with and without a bias, specials included.
TEST_P(Conformance, ScaleBiasAddChannelsEqualsItsTwoCalls) {
  const i64 n = 6, c = 5, hw = 3001;
  const auto total = static_cast<std::size_t>(n * c * hw);
  std::vector<float> y = normal_values(total, 91, 50.0f);
  y[7] = INFINITY;
  y[total / 2] = std::numeric_limits<float>::quiet_NaN();
  y[total - 1] = 3e38f;  // overflows when scaled
  const std::vector<float> bias = normal_values(static_cast<std::size_t>(c), 92);
  auto bd = dev(bias);
  for (bool with_bias : {true, false})
    for (float alpha : {0x1p-7f, 3.3f, 1.0f}) {
      auto y1 = dev(y), y2 = dev(y);
      if (alpha != 1.0f) be->scale(y1.get(), alpha, n * c * hw);
      if (with_bias) be->bias_add_channels(y1.get(), bd.get(), n, c, hw);
      engine::fused::scale_bias_add_channels(*be, y2.get(), alpha, with_bias ? bd.get() : nullptr, n, c, hw);
      expect_bit_equal(y2.host(), y1.host(), "alpha " + std::to_string(alpha) + (with_bias ? " with bias" : ""));
    }
}

// The residual add on FP16/BF16 codes gives the bits of decode, add,
// encode through the same backend, with the specials of both formats,
// values that overflow FP16 when added (saturating and not) and sizes
// around the CPU's chunk.
TEST_P(Conformance, AddEncodeEqualsDecodeAddEncode) {
  const std::pair<Format, Format> ins[] = {
      {Format::BF16, Format::BF16}, {Format::FP16, Format::FP16}, {Format::BF16, Format::FP16}};
  for (std::size_t n : {std::size_t{10}, std::size_t{2049}, std::size_t{300007}})
    for (const auto& [fa, fb] : ins)
      for (Format fy : {Format::BF16, Format::FP16})
        for (bool saturate : {false, true}) {
          std::vector<float> av = normal_values(n, 61 + n, 300.0f), bv = normal_values(n, 62 + n, 300.0f);
          const float edges[] = {NAN, -NAN, INFINITY, -INFINITY, -0.0f, 0.0f, 60000.0f, 1e-7f, -1e-40f};
          for (std::size_t i = 0; i < std::size(edges) && 2 * i + 1 < n; ++i) {
            av[2 * i] = edges[i];
            bv[2 * i + 1] = edges[std::size(edges) - 1 - i];
          }
          if (n > 20) av[20] = bv[20] = 40000.0f;  // overflows FP16 in the sum only
          std::vector<std::uint16_t> a16(n), b16(n);
          engine::cast_from_f32(fa, av.data(), a16.data(), n);
          engine::cast_from_f32(fb, bv.data(), b16.data(), n);
          DeviceBuffer<std::uint16_t> ad(GetParam(), a16), bd(GetParam(), b16);
          engine::CastOptions opt;
          opt.saturate = saturate;
          const i64 ni = static_cast<i64>(n);
          auto sa = out(n), sb = out(n), sy = out(n);
          be->convert(fa, ad.get(), Format::FP32, sa.get(), ni, {});
          be->convert(fb, bd.get(), Format::FP32, sb.get(), ni, {});
          be->add(sa.get(), sb.get(), sy.get(), ni);
          DeviceBuffer<std::uint16_t> want(GetParam(), std::vector<std::uint16_t>(n, 0xABCDu));
          be->convert(Format::FP32, sy.get(), fy, want.get(), ni, opt);
          DeviceBuffer<std::uint16_t> got(GetParam(), std::vector<std::uint16_t>(n, 0x1234u));
          auto s1 = out(n), s2 = out(n), s3 = out(n);
          engine::fused::add_encode(*be, fa, ad.get(), fb, bd.get(), fy, got.get(), ni, opt, s1.get(), s2.get(), s3.get());
          EXPECT_EQ(got.host(), want.host())
              << "add_encode " << engine::format_name(fa) << "+" << engine::format_name(fb) << "->"
              << engine::format_name(fy) << (saturate ? " saturate" : "") << " n=" << n;
          if (HasFailure()) return;
        }
}

// GELU on FP16/BF16 codes gives the bits of decode, GELU, encode through
// the same backend, forward and backward, with specials and sizes around
// the CPU's chunk (and not a multiple of the 8-wide vector path). At
// n = 65536 x runs through every code of its format (the CPU looks GELU up
// per code).
TEST_P(Conformance, Gelu16EqualsDecodeGeluEncode) {
  for (std::size_t n : {std::size_t{10}, std::size_t{2049}, std::size_t{65536}, std::size_t{300007}})
    for (Format f : {Format::BF16, Format::FP16})
      for (Format g : {Format::BF16, Format::FP16}) {
        std::vector<float> xv = normal_values(n, 71 + n, 3.0f), dv = normal_values(n, 72 + n, 100.0f);
        const float edges[] = {NAN, -NAN, INFINITY, -INFINITY, -0.0f, 0.0f, 60000.0f, -9.0f, 1e-7f, -1e-40f};
        for (std::size_t i = 0; i < std::size(edges) && 2 * i + 1 < n; ++i) {
          xv[2 * i] = edges[i];
          dv[2 * i + 1] = edges[std::size(edges) - 1 - i];
        }
        std::vector<std::uint16_t> x16(n), d16(n);
        engine::cast_from_f32(f, xv.data(), x16.data(), n);
        engine::cast_from_f32(g, dv.data(), d16.data(), n);
        if (n == 65536)
          for (std::size_t i = 0; i < n; ++i) x16[i] = static_cast<std::uint16_t>(i);
        DeviceBuffer<std::uint16_t> xd(GetParam(), x16), dd(GetParam(), d16);
        const i64 ni = static_cast<i64>(n);
        const std::string what = std::string("gelu16 ") + engine::format_name(f) + "/" + engine::format_name(g) +
                                 " n=" + std::to_string(n);
        // Forward (f in, f out).
        auto sx = out(n), sy = out(n);
        be->convert(f, xd.get(), Format::FP32, sx.get(), ni, {});
        be->gelu_forward(sx.get(), sy.get(), ni);
        DeviceBuffer<std::uint16_t> want(GetParam(), std::vector<std::uint16_t>(n, 0xABCDu));
        be->convert(Format::FP32, sy.get(), f, want.get(), ni, {});
        DeviceBuffer<std::uint16_t> got(GetParam(), std::vector<std::uint16_t>(n, 0x1234u));
        auto s1 = out(n), s2 = out(n), s3 = out(n);
        engine::fused::gelu16_forward(*be, f, xd.get(), got.get(), ni, s1.get(), s2.get());
        EXPECT_EQ(got.host(), want.host()) << what << " forward";
        // Backward (x in f, dy and dx in g).
        auto sd = out(n), sdx = out(n);
        be->convert(g, dd.get(), Format::FP32, sd.get(), ni, {});
        be->gelu_backward(sx.get(), sd.get(), sdx.get(), ni);
        DeviceBuffer<std::uint16_t> want_dx(GetParam(), std::vector<std::uint16_t>(n, 0xABCDu));
        be->convert(Format::FP32, sdx.get(), g, want_dx.get(), ni, {});
        DeviceBuffer<std::uint16_t> got_dx(GetParam(), std::vector<std::uint16_t>(n, 0x1234u));
        engine::fused::gelu16_backward(*be, f, xd.get(), g, dd.get(), got_dx.get(), ni, s1.get(), s2.get(), s3.get());
        EXPECT_EQ(got_dx.host(), want_dx.host()) << what << " backward";
        if (HasFailure()) return;
      }
}

// GELU and ReLU backward from gradient codes (FP16, BF16, unscaled FP8:
// the fp8 recipe's E5M2) into f32 give the bits of decoding dy and
// gelu_backward / relu_backward, for sizes around the CPU's chunk.
TEST_P(Conformance, PointwiseBackwardCodedEqualsDecodeThenBackward) {
  for (std::size_t n : {std::size_t{10}, std::size_t{2049}, std::size_t{300007}})
    for (Format g : {Format::BF16, Format::FP16, Format::E5M2, Format::E4M3}) {
      std::vector<float> xv = normal_values(n, 171 + n, 3.0f), dv = normal_values(n, 172 + n, 50.0f);
      const float edges[] = {NAN, INFINITY, -INFINITY, -0.0f, 60000.0f, -9.0f, 1e-7f};
      for (std::size_t i = 0; i < std::size(edges) && 2 * i + 1 < n; ++i) {
        xv[2 * i] = edges[i];
        dv[2 * i + 1] = edges[std::size(edges) - 1 - i];
      }
      std::vector<std::byte> d8(n * engine::storage_bytes(g));
      engine::cast_from_f32(g, dv.data(), d8.data(), n);
      DeviceBuffer<std::byte> dd(GetParam(), d8);
      auto xd = dev(xv);
      const i64 ni = static_cast<i64>(n);
      auto sd = out(n), want = out(n), got = out(n), scratch = out(n);
      be->convert(g, dd.get(), Format::FP32, sd.get(), ni, {});
      be->gelu_backward(xd.get(), sd.get(), want.get(), ni);
      engine::fused::gelu_backward_coded(*be, xd.get(), g, dd.get(), got.get(), ni, scratch.get());
      expect_bit_equal(got.host(), want.host(),
                       std::string("gelu_backward_coded ") + engine::format_name(g) + " n=" + std::to_string(n));
      auto relu_want = out(n), relu_got = out(n);
      be->relu_backward(xd.get(), sd.get(), relu_want.get(), ni);
      engine::fused::relu_backward_coded(*be, xd.get(), g, dd.get(), relu_got.get(), ni, scratch.get());
      expect_bit_equal(relu_got.host(), relu_want.host(),
                       std::string("relu_backward_coded ") + engine::format_name(g) + " n=" + std::to_string(n));
      if (HasFailure()) return;
    }
}

// GELU and ReLU straight into the FP8 cast (gelu_forward_encode,
// relu_forward_encode) give the codes and amax of gelu_forward or
// relu_forward then scale_amax_encode through the same backend (NaN, -0 and
// negatives through the ReLU's select too): activations of several
// widths, specials, inputs around the approximation's seams (x = -4, 4,
// 8, its pieces every 1/4), a sweep of consecutive f32 patterns (values
// on every side of the FP8 rounding boundaries), ties for the maximum,
// and scales from tiny to huge, saturating or not.
TEST_P(Conformance, ForwardEncodeEqualsForwardThenCast) {
  struct Input {
    std::string name;
    std::vector<float> x;
  };
  std::vector<Input> inputs;
  // Plain: the maximum where the approximation is off by the most (x near
  // 4.4 for the narrowest, whose GELU the exact lane gives 2e-5 below x).
  for (float width : {1.0f, 3.0f, 40.0f})
    inputs.push_back({"normal*" + std::to_string(width),
                      normal_values(300007, 181 + static_cast<std::uint64_t>(width), width)});
  {
    std::vector<float> x = normal_values(300007, 184, 3.0f);
    const float edges[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, -4.0f, std::nextafter(-4.0f, 0.0f),
                           std::nextafter(-4.0f, -5.0f), 4.0f, std::nextafter(4.0f, 0.0f), 8.0f, 5.9f,
                           1e-30f, -1e-30f, -1e-40f, 1e30f, -1e30f, 3e38f, -3e38f, 0.125f, 3.875f, -3.875f};
    for (std::size_t i = 0; i < std::size(edges); ++i) x[i * 7 + 3] = edges[i];
    inputs.push_back({"specials", x});
    x[3] = 0.0f;  // no NaN: the infinite maximum
    inputs.push_back({"infinities", std::move(x)});
  }
  {
    // Consecutive patterns from -4.5 up and from 0.5 up (every 13th), and
    // every piece's ends.
    std::vector<float> x;
    for (float start : {-4.5f, -1.0f, 0.5f, 2.0f})
      for (std::uint32_t b = std::bit_cast<std::uint32_t>(start), k = 0; k < 100000; ++k)
        x.push_back(std::bit_cast<float>(start < 0 ? b - 13 * k : b + 13 * k));
    for (int i = -17; i <= 33; ++i)
      for (float d : {-1e-6f, 0.0f, 1e-6f}) x.push_back(static_cast<float>(i) * 0.25f + d);
    inputs.push_back({"sweep", std::move(x)});
  }
  {
    // The maximum shared and nearly shared: equal values, neighbours one
    // ulp apart, a lone larger value at either end.
    std::vector<float> x(4099, 2.0f);
    for (std::size_t i = 1; i < x.size(); i += 2) x[i] = std::nextafter(2.0f, 3.0f);
    x[4098] = std::nextafter(x[1], 3.0f);
    inputs.push_back({"ties", x});
    x.assign(10, -0.5f);
    x[0] = 2.5f;
    inputs.push_back({"short", x});
  }
  const float scales[] = {1.0f, 64.0f, 121.0811f, 0x1p-20f, 0x1p40f, 3.5e-19f};
  for (const bool relu : {false, true})
  for (const Input& in : inputs)
    for (Format f : {Format::E4M3, Format::E5M2})
      for (float scale : scales)
        for (bool saturate : {true, false}) {
          const std::size_t n = in.x.size();
          const i64 ni = static_cast<i64>(n);
          auto xd = dev(in.x);
          auto y = out(n), scratch = out(n), scratch2 = out(n);
          auto a1 = out(1), a2 = out(1);
          DeviceBuffer<std::uint8_t> q1(GetParam(), std::vector<std::uint8_t>(n, 0xAB));
          DeviceBuffer<std::uint8_t> q2(GetParam(), std::vector<std::uint8_t>(n, 0xCD));
          engine::CastOptions opt;
          opt.saturate = saturate;
          if (relu) be->relu_forward(xd.get(), y.get(), ni);
          else be->gelu_forward(xd.get(), y.get(), ni);
          engine::fused::scale_amax_encode(*be, y.get(), scale, f, q1.get(), ni, opt, a1.get(), scratch.get());
          if (relu) engine::fused::relu_forward_encode(*be, xd.get(), ni, scale, f, q2.get(), opt, a2.get(), scratch2.get());
          else engine::fused::gelu_forward_encode(*be, xd.get(), ni, scale, f, q2.get(), opt, a2.get(), scratch2.get());
          const std::string what = std::string(relu ? "relu" : "gelu") + "_forward_encode " + in.name + " " +
                                   engine::format_name(f) + " scale " +
                                   std::to_string(scale) + (saturate ? " saturate" : "");
          const std::vector<std::uint8_t> want = q1.host(), got = q2.host();
          std::size_t bad = 0, first = 0;
          for (std::size_t i = 0; i < n; ++i)
            if (got[i] != want[i] && bad++ == 0) first = i;
          ASSERT_EQ(bad, 0u) << what << ": " << bad << " codes differ; first x[" << first << "] = " << in.x[first]
                             << " gives " << int(got[first]) << ", want " << int(want[first]);
          expect_bit_equal(a2.host(), a1.host(), what + " amax");
          if (HasFailure()) return;
        }
}

// The CPU's GELU-into-FP8 kernel leaves a lane approximate only where the
// cast cannot tell it from the exact one, which rests on the approximation
// staying within 2^-14.9 (relative) of the exact lanes: checked here on
// every 101st f32 in [-4, 64] (the exact lane below -4; |y| >= 2^-74, as
// smaller ones are exact lanes too). Every f32 was checked when the fit
// was made.
TEST(GeluCastKernel, ApproximationStaysWithinItsBound) {
  // Each ISA's kernel where this CPU has it: AVX-512, and AVX2's lanes
  // (two permutes and a blend per table).
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (!avx2) GTEST_SKIP() << "no AVX2";
  auto check = [](const char* isa, void (*approx_fn)(const float*, float*, std::int64_t),
                  std::int64_t (*exact_fn)(const float*, float*, std::int64_t)) {
    double worst = 0.0;
    float at = 0.0f;
    std::vector<float> x, approx(4096), exact(4096);
    for (float top : {-4.0f, 64.0f}) {
      const std::uint32_t end = std::bit_cast<std::uint32_t>(top), sign = top < 0 ? 0x80000000u : 0u;
      for (std::uint32_t b = 0; b <= (end & 0x7FFFFFFFu); b += 101) {
        x.push_back(std::bit_cast<float>(b | sign));
        if (x.size() < 4096 && b + 101 <= (end & 0x7FFFFFFFu)) continue;
        const auto n = static_cast<std::int64_t>(x.size());
        approx_fn(x.data(), approx.data(), n);
        exact_fn(x.data(), exact.data(), n);
        for (std::size_t i = 0; i < x.size(); ++i) {
          if (!(std::fabs(exact[i]) >= 0x1p-74f)) continue;
          const double r = std::fabs(double(approx[i]) - exact[i]) / std::fabs(double(exact[i]));
          if (!(r <= worst)) {
            worst = r;
            at = x[i];
          }
        }
        x.clear();
      }
    }
    EXPECT_LE(worst, std::exp2(-14.9)) << isa << " at x = " << at;
    EXPECT_GT(worst, 0x1p-16) << isa << " at x = " << at;  // the Phi(-4) the kernel takes past 4
  };
  if (avx512) check("AVX-512", engine::cpu::gelu_approx_avx512, engine::cpu::gelu_forward_avx512);
  check("AVX2", engine::cpu::gelu_approx_avx2, engine::cpu::gelu_forward_avx2);
}

// Column sums of FP16/BF16 codes give the bits of decode then column_sums
// through the same backend, for the linear layers' bias shapes (the mlp's
// 128 x 256 and 128 x 128, and 128 x 200 with a partial block of columns),
// and a row wider than the CPU's stack block (its fallback).
TEST_P(Conformance, ColumnSums16EqualsDecodeThenSum) {
  struct Shape2 {
    i64 rows, cols;
  };
  for (Format f : {Format::BF16, Format::FP16})
    for (const Shape2& sh : {Shape2{1, 1}, Shape2{7, 13}, Shape2{2048, 64}, Shape2{2048, 192}, Shape2{128, 10},
                             Shape2{128, 256}, Shape2{128, 128}, Shape2{128, 200}, Shape2{3, 5000}}) {
      const auto n = static_cast<std::size_t>(sh.rows * sh.cols);
      std::vector<float> v = normal_values(n, 81 + n, 50.0f);
      const float edges[] = {1e-7f, -0.0f, 60000.0f, -1e-40f, INFINITY};
      for (std::size_t i = 0; i < std::size(edges) && i * 5 < n; ++i) v[i * 5] = edges[i];
      if (n > 40) v[40] = NAN;
      std::vector<std::uint16_t> codes(n);
      engine::cast_from_f32(f, v.data(), codes.data(), n);
      DeviceBuffer<std::uint16_t> cd(GetParam(), codes);
      auto dec = out(n);
      be->convert(f, cd.get(), Format::FP32, dec.get(), static_cast<i64>(n), {});
      auto want = out(static_cast<std::size_t>(sh.cols));
      be->column_sums(dec.get(), sh.rows, sh.cols, want.get());
      auto got = out(static_cast<std::size_t>(sh.cols));
      auto scratch = out(n);
      engine::fused::column_sums16(*be, f, cd.get(), sh.rows, sh.cols, got.get(), scratch.get());
      expect_bit_equal(got.host(), want.host(),
                       std::string("column_sums16 ") + engine::format_name(f) + " " + std::to_string(sh.rows) + "x" +
                           std::to_string(sh.cols));
      if (HasFailure()) return;
    }
}

// LayerNorm on FP16/BF16 codes (in, out or both; FP32 on the other side)
// gives the bits of decode, layernorm (FP32 accumulation), encode through
// the same backend, forward (y, mean, rstd) and backward (dx, dgamma,
// dbeta): the transformer's rows, a tiny one, a
// row not a multiple of the vector width, one wider than the CPU's stack
// row (its fallback), specials, and outputs that overflow FP16 (saturating
// and not).
// The optimizer's update that also writes the stored copy: the same bits as
// sgd_update and then encode_updated (the master refreshed into BF16, FP16
// or scaled FP8 with its amax, a plain copy, FP16 weights stochastically
// re-encoded), for each update rule, sizes around the block and the
// parallel split.
TEST_P(Conformance, SgdUpdateEncodeEqualsUpdateThenEncode) {
  struct Rule {
    float momentum;
    bool nesterov, first;
    Format state;
  };
  const Rule rules[] = {{0.0f, false, false, Format::FP32}, {0.9f, false, true, Format::FP32},
                        {0.9f, false, false, Format::FP32}, {0.9f, true, false, Format::FP32},
                        {0.9f, true, true, Format::FP32},   {0.9f, false, false, Format::BF16}};
  struct Target {
    Format format;
    bool scaled, stochastic;
  };
  const Target encodes[] = {{Format::BF16, false, false}, {Format::FP16, false, false}, {Format::FP16, false, true},
                            {Format::E4M3, true, false},  {Format::E5M2, true, false},  {Format::FP32, false, false}};
  std::uint64_t seed = 900;
  for (i64 n : {i64{1}, i64{2049}, i64{70001}})
    for (const Rule& r : rules)
      for (const Target& t : encodes) {
        const auto un = static_cast<std::size_t>(n);
        // Weights near 1e4 where FP16 saturates and E4M3 needs its scale;
        // gradients with an inf so the amax and the encode see one.
        std::vector<float> w = normal_values(un, ++seed, 300.0f), g = normal_values(un, ++seed, 2.0f),
                           m = normal_values(un, ++seed, 1.0f);
        w[un / 2] = 7.0e4f;
        if (n > 2) g[un - 1] = std::numeric_limits<float>::infinity();
        const std::string what = std::string("sgd_update_encode n=") + std::to_string(n) + " momentum " +
                                 std::to_string(r.momentum) + (r.nesterov ? " nesterov" : "") +
                                 (r.first ? " first" : "") + " state " + engine::format_name(r.state) + " -> " +
                                 engine::format_name(t.format) + (t.scaled ? " scaled" : "") +
                                 (t.stochastic ? " stochastic" : "");
        auto w1 = dev(w), w2 = dev(w), gd = dev(g), m1 = dev(m), m2 = dev(m), scratch = out(un);
        engine::SgdUpdate u;
        u.grad = gd.get();
        u.n = n;
        u.lr = 0.013f;
        u.momentum = r.momentum;
        u.keep = 0.75f;
        u.weight_decay = 0.01f;
        u.nesterov = r.nesterov;
        u.first = r.first;
        u.state_format = r.state;
        const std::size_t es = engine::storage_bytes(t.format);
        engine::UpdateEncode e;
        e.format = t.format;
        e.opt.saturate = t.scaled;
        e.opt.stochastic = t.stochastic;
        e.opt.seed = 41;
        e.opt.index_offset = 5;
        e.scale = t.scaled ? 0.0371f : 1.0f;
        e.scratch = scratch.get();
        DeviceBuffer<std::uint8_t> got(GetParam(), std::vector<std::uint8_t>(un * es, 0x5Au)),
            want(GetParam(), std::vector<std::uint8_t>(un * es, 0xA5u));
        DeviceBuffer<float> amax_got(GetParam(), {-1.0f}), amax_want(GetParam(), {-2.0f});
        u.value = w1.get();
        u.momentum_buf = r.momentum != 0.0f ? m1.get() : nullptr;
        e.codes = got.get();
        e.amax = t.scaled ? amax_got.get() : nullptr;
        engine::fused::sgd_update_encode(*be, u, e);
        u.value = w2.get();
        u.momentum_buf = r.momentum != 0.0f ? m2.get() : nullptr;
        be->sgd_update(u);
        e.codes = want.get();
        e.amax = t.scaled ? amax_want.get() : nullptr;
        engine::fused::encode_updated(*be, w2.get(), n, e);
        expect_bit_equal(w1.host(), w2.host(), what + ": weights");
        expect_bit_equal(m1.host(), m2.host(), what + ": momentum");
        EXPECT_EQ(got.host(), want.host()) << what << ": codes";
        if (t.scaled) expect_bit_equal(amax_got.host(), amax_want.host(), what + ": amax");
      }
}

// Weights kept only as codes: the update that decodes them as it goes
// gives the bits of decoding them and sgd_update_encode, with momentum (its
// first step too), FP16 saturation (a weight near 7e4) and stochastic
// rounding.
TEST_P(Conformance, SgdUpdateCodedEqualsDecodeThenUpdate) {
  std::uint64_t seed = 950;
  for (i64 n : {i64{1}, i64{2049}, i64{70001}})
    for (Format f : {Format::FP16, Format::BF16, Format::E5M2})
      for (bool stochastic : {false, true})
        for (float momentum : {0.0f, 0.9f, -0.9f}) {
          // -0.9: momentum 0.9 on its first step (FP16, the CPU's fused
          // pass: the coarser formats' weights need not move on it).
          const bool first = momentum < 0.0f;
          if (first && f != Format::FP16) continue;
          momentum = std::fabs(momentum);
          const auto un = static_cast<std::size_t>(n);
          // (The first-step cases draw apart, leaving the others' draws as they were.)
          const std::uint64_t s0 = first ? seed + 5000 : seed;
          if (!first) seed += 3;
          std::vector<float> w = normal_values(un, s0 + 1, 300.0f), g = normal_values(un, s0 + 2, 2.0f),
                             m = normal_values(un, s0 + 3, 1.0f);
          w[un / 2] = 6.0e4f;
          std::vector<std::uint8_t> codes(un * engine::storage_bytes(f));
          engine::cast_from_f32(f, w.data(), codes.data(), un);
          const std::string what = std::string("sgd_update_coded n=") + std::to_string(n) + " " +
                                   engine::format_name(f) + (stochastic ? " stochastic" : "") + " momentum " +
                                   std::to_string(momentum) + (first ? " first step" : "");
          DeviceBuffer<std::uint8_t> c1(GetParam(), codes), c2(GetParam(), codes);
          auto v1 = dev(std::vector<float>(un, 123.0f)), v2 = out(un), gd = dev(g), m1 = dev(m), m2 = dev(m);
          engine::SgdUpdate u;
          u.grad = gd.get();
          u.n = n;
          u.lr = 0.013f;
          u.momentum = momentum;
          u.keep = 0.75f;
          u.weight_decay = 0.01f;
          u.state_format = Format::FP16;
          u.first = first;
          engine::UpdateEncode e;
          e.format = f;
          e.opt.stochastic = stochastic;
          e.opt.seed = 43;
          // The one call, value scratch holding junk.
          u.value = v1.get();
          u.momentum_buf = momentum != 0.0f ? m1.get() : nullptr;
          e.codes = c1.get();
          engine::fused::sgd_update_coded(*be, u, e);
          // Decode, then the update.
          be->convert(f, c2.get(), Format::FP32, v2.get(), n, {});
          u.value = v2.get();
          u.momentum_buf = momentum != 0.0f ? m2.get() : nullptr;
          e.codes = c2.get();
          engine::fused::sgd_update_encode(*be, u, e);
          EXPECT_EQ(c1.host(), c2.host()) << what << ": codes";
          if (n > 1) {
            EXPECT_NE(c1.host(), codes) << what << ": the update changed nothing";
          }
          expect_bit_equal(v1.host(), v2.host(), what + ": values");
          expect_bit_equal(m1.host(), m2.host(), what + ": momentum");
          if (HasFailure()) return;
        }
}

// The shadow pass's error sums add sum (a-b)^2, sum b^2 and sum (a-b) b
// (double) to what out holds, for lengths around the CPU's 16 lanes and
// its tail, within double rounding of an exact (long double) sum.
TEST_P(Conformance, ErrorSumsAddTheThreeSums) {
  for (i64 n : {i64{1}, i64{15}, i64{16}, i64{17}, i64{1000}, i64{70001}}) {
    const auto un = static_cast<std::size_t>(n);
    const std::vector<float> a = normal_values(un, 990 + un, 3.0f), b = normal_values(un, 991 + un, 2.0f);
    long double want[3] = {1.5L, 2.5L, -3.5L}, scale[3] = {0, 0, 0};
    for (std::size_t i = 0; i < un; ++i) {
      const long double bi = b[i], d = static_cast<long double>(a[i]) - bi;
      want[0] += d * d;
      want[1] += bi * bi;
      want[2] += d * bi;
      scale[0] += d * d;
      scale[1] += bi * bi;
      scale[2] += std::fabs(d * bi);
    }
    auto ad = dev(a), bd = dev(b);
    DeviceBuffer<double> out(GetParam(), {1.5, 2.5, -3.5});
    be->error_sums(ad.get(), bd.get(), n, out.get());
    const std::vector<double> got = out.host();
    for (int k = 0; k < 3; ++k)
      EXPECT_NEAR(got[static_cast<std::size_t>(k)], static_cast<double>(want[k]),
                  1e-13 * static_cast<double>(scale[k] + 4.0L))
          << "n=" << n << " sum " << k;
  }
}

// Gradients kept as codes: the unscale that decodes them as it goes gives
// the values, counts and sum of squares of decoding them and unscale_grads,
// beside an FP32 gradient, with and without a loss scale, inf and NaN.
TEST_P(Conformance, UnscaleGradsCodedEqualsDecodeThenUnscale) {
  for (float inv : {1.0f, 1.0f / 1024.0f})
    for (Format f : {Format::FP16, Format::BF16, Format::E5M2}) {
      const std::size_t sizes[] = {1, 70001, 16384, 3};
      std::vector<std::vector<float>> vals;
      std::uint64_t seed = 970;
      for (std::size_t n : sizes) vals.push_back(normal_values(n, ++seed, 40.0f));
      vals[1][100] = INFINITY;
      vals[2][7] = NAN;
      const std::string what = std::string("unscale_grads_coded ") + engine::format_name(f) + " inv " +
                               std::to_string(inv);
      // Buffers 0-2 coded, buffer 3 FP32.
      // (deque: the buffers are built in place, never moved.)
      std::deque<DeviceBuffer<std::uint8_t>> codes;
      std::deque<DeviceBuffer<float>> d1, d2;
      for (std::size_t k = 0; k < std::size(sizes); ++k) {
        std::vector<std::uint8_t> c(sizes[k] * engine::storage_bytes(f));
        engine::cast_from_f32(f, vals[k].data(), c.data(), sizes[k]);
        codes.emplace_back(GetParam(), c);
        d1.emplace_back(GetParam(), k == 3 ? vals[k] : std::vector<float>(sizes[k], 5.0f));
        d2.emplace_back(GetParam(), k == 3 ? vals[k] : std::vector<float>(sizes[k], NAN));
      }
      auto counts1 = DeviceBuffer<std::int64_t>(GetParam(), std::vector<std::int64_t>(4, -1));
      auto counts2 = DeviceBuffer<std::int64_t>(GetParam(), std::vector<std::int64_t>(4, -2));
      auto sum1 = DeviceBuffer<double>(GetParam(), {0.0}), sum2 = DeviceBuffer<double>(GetParam(), {1.0});
      std::vector<engine::GradBuffer> g1, g2;
      std::vector<engine::GradCodes> gc;
      for (std::size_t k = 0; k < std::size(sizes); ++k) {
        const auto n = static_cast<i64>(sizes[k]);
        g1.push_back({d1[k].get(), n, counts1.get() + k});
        g2.push_back({d2[k].get(), n, counts2.get() + k});
        gc.push_back(k == 3 ? engine::GradCodes{} : engine::GradCodes{f, codes[k].get()});
        if (k != 3) be->convert(f, codes[k].get(), Format::FP32, d2[k].get(), n, {});
      }
      engine::fused::unscale_grads_coded(*be, g1.data(), gc.data(), g1.size(), inv, sum1.get());
      be->unscale_grads(g2.data(), g2.size(), inv, sum2.get());
      for (std::size_t k = 0; k < std::size(sizes); ++k)
        expect_bit_equal(d1[k].host(), d2[k].host(), what + " buffer " + std::to_string(k));
      EXPECT_EQ(counts1.host(), counts2.host()) << what;
      EXPECT_EQ(counts1.host()[1], 1) << what;
      EXPECT_EQ(std::bit_cast<std::uint64_t>(sum1.host()[0]), std::bit_cast<std::uint64_t>(sum2.host()[0])) << what;
      if (HasFailure()) return;
    }
}

// The unscale pass's sum of squares counts every value once, whichever
// thread takes which of its 16384-value blocks: against a double sum, for
// lengths around the block and the optimizer's 2048-value splits, scaled
// and unscaled, with the counts of inf/NaN.
TEST_P(Conformance, UnscaleSumOfSquaresCountsEveryValueOnce) {
  std::uint64_t seed = 990;
  for (std::size_t n : {std::size_t{16383}, std::size_t{16385}, std::size_t{32768}, std::size_t{98305},
                        std::size_t{200704}, std::size_t{1000003}})
    for (float inv : {1.0f, 0.25f}) {
      std::vector<float> v = normal_values(n, ++seed, 3.0f);
      v[n / 3] = NAN;
      v[n - 1] = -INFINITY;
      double want = 0.0;
      for (std::size_t i = 0; i < n; ++i)
        if (std::isfinite(v[i])) want += static_cast<double>(v[i] * inv) * static_cast<double>(v[i] * inv);
      auto d = dev(v);
      auto count = DeviceBuffer<std::int64_t>(GetParam(), {-1});
      auto sum = DeviceBuffer<double>(GetParam(), {0.0});
      const engine::GradBuffer g{d.get(), static_cast<i64>(n), count.get()};
      be->unscale_grads(&g, 1, inv, sum.get());
      const std::string what = "n=" + std::to_string(n) + " inv " + std::to_string(inv);
      EXPECT_EQ(count.host()[0], 2) << what;
      // inf and NaN make the sum non-finite: it is the finite values' sum
      // only once they are gone, so the check runs on a second, finite copy.
      v[n / 3] = 1.0f;
      v[n - 1] = -2.0f;
      want += static_cast<double>(1.0f * inv) * (1.0f * inv) + static_cast<double>(-2.0f * inv) * (-2.0f * inv);
      auto d2 = dev(v);
      const engine::GradBuffer g2{d2.get(), static_cast<i64>(n), count.get()};
      be->unscale_grads(&g2, 1, inv, sum.get());
      EXPECT_EQ(count.host()[0], 0) << what;
      EXPECT_NEAR(sum.host()[0] / want, 1.0, 1e-12) << what;
      if (HasFailure()) return;
    }
}

TEST_P(Conformance, LayerNormCodedEqualsDecodeNormEncode) {
  struct Shape2 {
    i64 rows, cols;
  };
  struct Formats {
    Format x, y;  // forward x and y; backward: dy and dx in y's format
  };
  const Formats combos[] = {{Format::BF16, Format::BF16}, {Format::FP16, Format::FP16}, {Format::BF16, Format::FP16},
                            {Format::FP16, Format::BF16}, {Format::BF16, Format::FP32}, {Format::FP32, Format::FP16}};
  for (const Shape2& sh : {Shape2{1, 1}, Shape2{2048, 64}, Shape2{37, 300}, Shape2{3, 2100}})
    for (const Formats& fm : combos)
      for (bool saturate : {false, true}) {
        const Format fx = fm.x, fy = fm.y;
        const auto n = static_cast<std::size_t>(sh.rows * sh.cols), nc = static_cast<std::size_t>(sh.cols),
                   nr = static_cast<std::size_t>(sh.rows);
        std::vector<float> xv = normal_values(n, 91 + n, 4.0f, 2.0f), dv = normal_values(n, 92 + n, 30.0f);
        const float edges[] = {NAN, INFINITY, -INFINITY, -0.0f, 60000.0f, 1e-7f, -1e-40f};
        // Specials each in a row of their own (a NaN or inf poisons its row).
        for (std::size_t i = 0; i < std::size(edges) && (i + 1) * nc < n; ++i) {
          xv[(i + 1) * nc - 1] = edges[i];
          dv[i * nc] = edges[std::size(edges) - 1 - i];
        }
        // gamma up to ~1e4: some normalized values overflow FP16.
        const std::vector<float> gamma = normal_values(nc, 93, 5000.0f), beta = normal_values(nc, 94, 2.0f);
        // Inputs as their format's storage: f32 values, or codes.
        auto stored = [&](Format f, const std::vector<float>& v) {
          std::vector<std::byte> b(n * engine::storage_bytes(f));
          engine::cast_from_f32(f, v.data(), b.data(), n);
          return DeviceBuffer<std::byte>(GetParam(), b);
        };
        auto xd = stored(fx, xv), dd = stored(fy, dv);
        auto gd = dev(gamma), bd = dev(beta);
        engine::CastOptions opt;
        opt.saturate = saturate;
        const i64 ni = static_cast<i64>(n);
        const std::string what = std::string("layernorm_coded ") + engine::format_name(fx) + "->" +
                                 engine::format_name(fy) + (saturate ? " saturate " : " ") +
                                 std::to_string(sh.rows) + "x" + std::to_string(sh.cols);
        const std::size_t ybytes = n * engine::storage_bytes(fy);
        // Forward: decode, layernorm_forward, encode.
        auto sx = out(n), sy = out(n), mean_w = out(nr), rstd_w = out(nr);
        be->convert(fx, xd.get(), Format::FP32, sx.get(), ni, {});
        be->layernorm_forward(sx.get(), gd.get(), bd.get(), sy.get(), mean_w.get(), rstd_w.get(), sh.rows, sh.cols,
                              1e-5f, Format::FP32);
        DeviceBuffer<std::byte> want(GetParam(), std::vector<std::byte>(ybytes, std::byte{0xAB}));
        be->convert(Format::FP32, sy.get(), fy, want.get(), ni, opt);
        DeviceBuffer<std::byte> got(GetParam(), std::vector<std::byte>(ybytes, std::byte{0x12}));
        auto mean_g = out(nr), rstd_g = out(nr);
        auto s1 = out(n), s2 = out(n), s3 = out(n);
        engine::fused::layernorm_coded_forward(*be, fx, xd.get(), gd.get(), bd.get(), fy, got.get(), mean_g.get(), rstd_g.get(),
                                    sh.rows, sh.cols, 1e-5f, opt, s1.get(), s2.get());
        EXPECT_EQ(got.host(), want.host()) << what << " forward y";
        expect_bit_equal(mean_g.host(), mean_w.host(), what + " mean");
        expect_bit_equal(rstd_g.host(), rstd_w.host(), what + " rstd");
        // Backward: dy and dx in fy, x in fx.
        auto sd = out(n), sdx = out(n), dg_w = out(nc), db_w = out(nc);
        be->convert(fy, dd.get(), Format::FP32, sd.get(), ni, {});
        be->layernorm_backward(sd.get(), sx.get(), mean_w.get(), rstd_w.get(), gd.get(), sdx.get(), dg_w.get(),
                               db_w.get(), sh.rows, sh.cols);
        DeviceBuffer<std::byte> want_dx(GetParam(), std::vector<std::byte>(ybytes, std::byte{0xAB}));
        be->convert(Format::FP32, sdx.get(), fy, want_dx.get(), ni, {});
        DeviceBuffer<std::byte> got_dx(GetParam(), std::vector<std::byte>(ybytes, std::byte{0x12}));
        auto dg_g = out(nc), db_g = out(nc);
        engine::fused::layernorm_coded_backward(*be, fy, dd.get(), fx, xd.get(), mean_w.get(), rstd_w.get(), gd.get(), fy,
                                     got_dx.get(), dg_g.get(), db_g.get(), sh.rows, sh.cols, s1.get(), s2.get(),
                                     s3.get());
        EXPECT_EQ(got_dx.host(), want_dx.host()) << what << " backward dx";
        expect_bit_equal(dg_g.host(), dg_w.host(), what + " dgamma");
        expect_bit_equal(db_g.host(), db_w.host(), what + " dbeta");
        // Backward from unscaled FP8 dy (the FP8 recipe's E5M2 gradients)
        // into an FP32 dx.
        if (!saturate)
          for (Format fd : {Format::E5M2, Format::E4M3}) {
            auto d8 = stored(fd, dv);
            auto sd8 = out(n), want8 = out(n), dgw8 = out(nc), dbw8 = out(nc);
            be->convert(fd, d8.get(), Format::FP32, sd8.get(), ni, {});
            be->layernorm_backward(sd8.get(), sx.get(), mean_w.get(), rstd_w.get(), gd.get(), want8.get(), dgw8.get(),
                                   dbw8.get(), sh.rows, sh.cols);
            auto got8 = out(n), dg8 = out(nc), db8 = out(nc);
            engine::fused::layernorm_coded_backward(*be, fd, d8.get(), fx, xd.get(), mean_w.get(), rstd_w.get(), gd.get(), Format::FP32,
                                         got8.get(), dg8.get(), db8.get(), sh.rows, sh.cols, s1.get(), s2.get(),
                                         s3.get());
            const std::string w8 = what + " backward from " + engine::format_name(fd);
            expect_bit_equal(got8.host(), want8.host(), w8 + " dx");
            expect_bit_equal(dg8.host(), dgw8.host(), w8 + " dgamma");
            expect_bit_equal(db8.host(), dbw8.host(), w8 + " dbeta");
          }
        if (HasFailure()) return;
      }
}

// A block's LayerNorm backward meeting its residual gives the bits of its
// three calls (coded backward into an FP32 dx, add, convert) through the
// same backend: dy as f32 values, codes or unscaled FP8, x as f32 or codes,
// the sum also encoded to BF16 and FP16 (values that overflow FP16 in the
// sum only), with specials in dy, x and the residual.
TEST_P(Conformance, LayerNormBackwardAddEqualsItsThreeCalls) {
  struct Case {
    Format dy, x, codes;  // codes FP32: no codes
  };
  const Case cases[] = {{Format::FP32, Format::FP32, Format::FP32}, {Format::FP32, Format::BF16, Format::BF16},
                        {Format::BF16, Format::BF16, Format::BF16}, {Format::FP16, Format::FP32, Format::FP16},
                        {Format::E5M2, Format::FP32, Format::FP32}, {Format::FP32, Format::FP32, Format::FP16}};
  const std::pair<i64, i64> shapes[] = {{1, 1}, {2048, 64}, {37, 300}, {3, 2100}};
  for (const auto& [rows, cols] : shapes)
    for (const Case& c : cases) {
      const auto n = static_cast<std::size_t>(rows * cols), nc = static_cast<std::size_t>(cols),
                 nr = static_cast<std::size_t>(rows);
      std::vector<float> xv = normal_values(n, 95 + n, 4.0f, 2.0f), dv = normal_values(n, 96 + n, 30.0f),
                         rv = normal_values(n, 97 + n, 3000.0f);
      const float edges[] = {NAN, INFINITY, -INFINITY, -0.0f, 60000.0f, 1e-7f, -1e-40f};
      for (std::size_t i = 0; i < std::size(edges) && (i + 1) * nc < n; ++i) {
        xv[(i + 1) * nc - 1] = edges[i];
        dv[i * nc] = edges[std::size(edges) - 1 - i];
        rv[i * nc + nc / 2] = edges[i];
      }
      // In the last row (free of specials): with dx, past FP16's rounding
      // to infinity (65520), which a saturating cast would clamp instead.
      if (rows > 1) rv[n - nc / 2 - 1] = 70000.0f;
      const std::vector<float> gamma = normal_values(nc, 98, 50.0f);
      auto stored = [&](Format f, const std::vector<float>& v) {
        std::vector<std::byte> b(n * engine::storage_bytes(f));
        engine::cast_from_f32(f, v.data(), b.data(), n);
        return DeviceBuffer<std::byte>(GetParam(), b);
      };
      auto xd = stored(c.x, xv), dd = stored(c.dy, dv);
      auto gd = dev(gamma), rd = dev(rv);
      const i64 ni = static_cast<i64>(n);
      const std::string what = std::string("layernorm_backward_add dy ") + engine::format_name(c.dy) + " x " +
                               engine::format_name(c.x) + " codes " + engine::format_name(c.codes) + " " +
                               std::to_string(rows) + "x" + std::to_string(cols);
      // mean and rstd of the forward.
      auto sx = out(n), sy = out(n), mean = out(nr), rstd = out(nr);
      be->convert(c.x, xd.get(), Format::FP32, sx.get(), ni, {});
      be->layernorm_forward(sx.get(), gd.get(), gd.get(), sy.get(), mean.get(), rstd.get(), rows, cols, 1e-5f,
                            Format::FP32);
      const bool codes = c.codes != Format::FP32;
      const std::size_t cbytes = codes ? n * engine::storage_bytes(c.codes) : 1;
      // The three calls.
      auto s1 = out(n), s2 = out(n), s3 = out(n), want = out(n), dg_w = out(nc), db_w = out(nc);
      engine::fused::layernorm_coded_backward(*be, c.dy, dd.get(), c.x, xd.get(), mean.get(), rstd.get(), gd.get(), Format::FP32,
                                   want.get(), dg_w.get(), db_w.get(), rows, cols, s1.get(), s2.get(), s3.get());
      be->add(rd.get(), want.get(), want.get(), ni);
      DeviceBuffer<std::byte> want_c(GetParam(), std::vector<std::byte>(cbytes, std::byte{0xAB}));
      if (codes) be->convert(Format::FP32, want.get(), c.codes, want_c.get(), ni, {});
      // The one.
      auto got = out(n), dg_g = out(nc), db_g = out(nc);
      DeviceBuffer<std::byte> got_c(GetParam(), std::vector<std::byte>(cbytes, std::byte{0xAB}));
      engine::fused::layernorm_backward_add(*be, c.dy, dd.get(), c.x, xd.get(), mean.get(), rstd.get(), gd.get(), rd.get(), got.get(),
                                 c.codes, codes ? got_c.get() : nullptr, dg_g.get(), db_g.get(), rows, cols, s1.get(),
                                 s2.get());
      expect_bit_equal(got.host(), want.host(), what + " dx");
      if (codes) {
        EXPECT_EQ(got_c.host(), want_c.host()) << what << " codes";
      }
      expect_bit_equal(dg_g.host(), dg_w.host(), what + " dgamma");
      expect_bit_equal(db_g.host(), db_w.host(), what + " dbeta");
      if (HasFailure()) return;
    }
}

TEST_P(Conformance, CountNonfiniteFindsPlantedInfAndNan) {
  for (std::size_t n : {std::size_t{10}, std::size_t{1000003}}) {
    std::vector<float> x = normal_values(n, 41, 1e30f);  // large but finite (no inf from squaring)
    auto xd0 = dev(x);
    EXPECT_EQ(count_nonfinite(*be, xd0.get(), static_cast<i64>(n)), 0);
    std::mt19937_64 rng(5);
    const std::size_t planted = std::min<std::size_t>(n, 37);
    std::vector<bool> hit(n, false);
    std::size_t count = 0;
    while (count < planted) {
      const std::size_t i = rng() % n;
      if (hit[i]) continue;
      hit[i] = true;
      const float kinds[] = {INFINITY, -INFINITY, NAN, -NAN, std::bit_cast<float>(0x7F800001u)};
      x[i] = kinds[count % 5];
      ++count;
    }
    x[0] = std::numeric_limits<float>::max();  // finite
    if (hit[0]) --count;
    x[n - 1] = std::numeric_limits<float>::denorm_min();
    if (hit[n - 1]) --count;
    auto xd = dev(x);
    EXPECT_EQ(count_nonfinite(*be, xd.get(), static_cast<i64>(n)), static_cast<i64>(count)) << "n=" << n;
  }
}

TEST_P(Conformance, SumSquaresIsDoubleAccurate) {
  for (std::size_t n : {std::size_t{3}, std::size_t{2000001}}) {
    std::vector<float> x = normal_values(n, 51);
    x[0] = 1e20f;  // its square overflows f32, not double
    double ref = 0.0;
    for (float v : x) ref += static_cast<double>(v) * v;
    auto xd = dev(x);
    EXPECT_NEAR(sum_squares(*be, xd.get(), static_cast<i64>(n)), ref, 1e-12 * ref) << "n=" << n;
  }
}

TEST_P(Conformance, ColumnSumsMatchDoubleReference) {
  struct Case {
    i64 rows, cols;
  };
  // Bias gradients of the MLP (128 x 256) and of the CNN's first conv seen
  // as rows (128 * 28 * 28 x 32).
  for (const Case& c : {Case{1, 7}, Case{128, 256}, Case{100352, 32}, Case{5, 0}}) {
    const std::vector<float> dy = normal_values(static_cast<std::size_t>(c.rows * c.cols), 61);
    std::vector<double> ref(static_cast<std::size_t>(c.cols), 0.0), mag(ref.size(), 0.0);
    for (i64 i = 0; i < c.rows; ++i)
      for (i64 j = 0; j < c.cols; ++j) {
        ref[static_cast<std::size_t>(j)] += dy[static_cast<std::size_t>(i * c.cols + j)];
        mag[static_cast<std::size_t>(j)] += std::fabs(dy[static_cast<std::size_t>(i * c.cols + j)]);
      }
    auto dyd = dev(dy);
    auto db = out(static_cast<std::size_t>(c.cols));
    be->column_sums(dyd.get(), c.rows, c.cols, db.get());
    // The result is a double sum rounded once to f32.
    expect_close(db.host(), ref, mag, 1e-7, 1e-30, "column_sums " + std::to_string(c.rows) + "x" + std::to_string(c.cols));
  }
}

// Bias gradients of convolutions: per channel of an NCHW gradient, a double
// sum rounded once to f32. The cnn's two conv outputs (28 x 28 and 14 x 14
// planes: whole blocks of 32, blocks of 8 and a tail), planes shorter than
// a block, and empty shapes.
TEST_P(Conformance, ChannelSumsMatchDoubleReference) {
  struct Case {
    i64 n, c, hw;
  };
  for (const Case& k : {Case{128, 32, 784}, Case{128, 64, 196}, Case{3, 5, 7}, Case{2, 3, 41}, Case{1, 1, 1},
                        Case{0, 4, 9}, Case{4, 3, 0}}) {
    const std::size_t total = static_cast<std::size_t>(k.n * k.c * k.hw);
    const std::vector<float> dy = normal_values(total, 71, 3.0f);
    std::vector<double> ref(static_cast<std::size_t>(k.c), 0.0), mag(ref.size(), 0.0);
    for (i64 i = 0; i < k.n; ++i)
      for (i64 j = 0; j < k.c; ++j)
        for (i64 q = 0; q < k.hw; ++q) {
          const float v = dy[static_cast<std::size_t>((i * k.c + j) * k.hw + q)];
          ref[static_cast<std::size_t>(j)] += v;
          mag[static_cast<std::size_t>(j)] += std::fabs(v);
        }
    auto dyd = dev(dy.empty() ? std::vector<float>{0.0f} : dy);
    std::vector<float> init(static_cast<std::size_t>(k.c), 7.0f);  // every channel written
    auto db = dev(init.empty() ? std::vector<float>{0.0f} : init);
    be->channel_sums(dyd.get(), db.get(), k.n, k.c, k.hw);
    std::vector<float> got = db.host();
    got.resize(static_cast<std::size_t>(k.c));
    expect_close(got, ref, mag, 1e-7, 1e-30,
                 "channel_sums " + std::to_string(k.n) + "x" + std::to_string(k.c) + "x" + std::to_string(k.hw));
  }
}

// ============================================================================
// LayerNorm and softmax
// ============================================================================
struct LnRef {
  std::vector<double> y, mean, rstd;
};

LnRef layernorm_reference(const std::vector<float>& x, const std::vector<float>& gamma,
                          const std::vector<float>& beta, i64 rows, i64 cols, double eps) {
  LnRef r;
  for (i64 i = 0; i < rows; ++i) {
    double s = 0.0;
    for (i64 j = 0; j < cols; ++j) s += x[static_cast<std::size_t>(i * cols + j)];
    const double mu = s / static_cast<double>(cols);
    double v = 0.0;
    for (i64 j = 0; j < cols; ++j) {
      const double d = x[static_cast<std::size_t>(i * cols + j)] - mu;
      v += d * d;
    }
    const double rs = 1.0 / std::sqrt(v / static_cast<double>(cols) + eps);
    r.mean.push_back(mu);
    r.rstd.push_back(rs);
    for (i64 j = 0; j < cols; ++j)
      r.y.push_back((x[static_cast<std::size_t>(i * cols + j)] - mu) * rs * gamma[static_cast<std::size_t>(j)] +
                    beta[static_cast<std::size_t>(j)]);
  }
  return r;
}

TEST_P(Conformance, LayerNormFp32ForwardBackward) {
  const i64 rows = 33, cols = 64;
  const float eps = 1e-5f;
  // An offset mean: the two-pass variance must not cancel.
  const std::vector<float> x = normal_values(static_cast<std::size_t>(rows * cols), 71, 2.0f, 50.0f);
  const std::vector<float> gamma = normal_values(static_cast<std::size_t>(cols), 72, 0.5f, 1.0f);
  const std::vector<float> beta = normal_values(static_cast<std::size_t>(cols), 73);
  const std::vector<float> dy = normal_values(static_cast<std::size_t>(rows * cols), 74);
  const LnRef r = layernorm_reference(x, gamma, beta, rows, cols, eps);

  auto xd = dev(x), gd = dev(gamma), bd = dev(beta), dyd = dev(dy);
  auto y = out(static_cast<std::size_t>(rows * cols)), mean = out(static_cast<std::size_t>(rows)),
       rstd = out(static_cast<std::size_t>(rows));
  be->layernorm_forward(xd.get(), gd.get(), bd.get(), y.get(), mean.get(), rstd.get(), rows, cols, eps, Format::FP32);
  // f32 sums of 64 terms around 50 with spread 2: relative 2e-5 on the
  // normalized values (the mean's rounding is amplified by rstd ~ 0.5).
  expect_close(y.host(), r.y, 2e-5, 2e-5, "layernorm forward y");
  expect_close(mean.host(), r.mean, 1e-6, 0, "layernorm forward mean");
  expect_close(rstd.host(), r.rstd, 1e-5, 0, "layernorm forward rstd");

  // Backward against finite differences of the double reference: the loss
  // L = sum(dy * y) has dL/dx = dx, dL/dgamma = dgamma, dL/dbeta = dbeta.
  auto loss = [&](const std::vector<float>& xs, const std::vector<float>& gs, const std::vector<float>& bs) {
    const LnRef rr = layernorm_reference(xs, gs, bs, rows, cols, eps);
    double l = 0.0;
    for (std::size_t i = 0; i < rr.y.size(); ++i) l += dy[i] * rr.y[i];
    return l;
  };
  auto dx = out(static_cast<std::size_t>(rows * cols)), dgamma = out(static_cast<std::size_t>(cols)),
       dbeta = out(static_cast<std::size_t>(cols));
  be->layernorm_backward(dyd.get(), xd.get(), mean.get(), rstd.get(), gd.get(), dx.get(), dgamma.get(),
                         dbeta.get(), rows, cols);
  const std::vector<float> dx_h = dx.host(), dg_h = dgamma.host(), db_h = dbeta.host();
  const float h = 1e-2f;
  for (i64 probe : {i64{0}, i64{5}, i64{100}, i64{1000}, rows * cols - 1}) {
    std::vector<float> xp = x, xm = x;
    xp[static_cast<std::size_t>(probe)] += h;
    xm[static_cast<std::size_t>(probe)] -= h;
    const double h_eff = (static_cast<double>(xp[static_cast<std::size_t>(probe)]) - xm[static_cast<std::size_t>(probe)]);
    const double fd = (loss(xp, gamma, beta) - loss(xm, gamma, beta)) / h_eff;
    EXPECT_NEAR(dx_h[static_cast<std::size_t>(probe)], fd, 2e-3 * (1.0 + std::fabs(fd))) << "dx[" << probe << "]";
  }
  for (i64 j : {i64{0}, i64{17}, cols - 1}) {
    std::vector<float> gp = gamma, gm = gamma, bp = beta, bm = beta;
    gp[static_cast<std::size_t>(j)] += h;
    gm[static_cast<std::size_t>(j)] -= h;
    bp[static_cast<std::size_t>(j)] += h;
    bm[static_cast<std::size_t>(j)] -= h;
    const double fdg = (loss(x, gp, beta) - loss(x, gm, beta)) /
                       (static_cast<double>(gp[static_cast<std::size_t>(j)]) - gm[static_cast<std::size_t>(j)]);
    const double fdb = (loss(x, gamma, bp) - loss(x, gamma, bm)) /
                       (static_cast<double>(bp[static_cast<std::size_t>(j)]) - bm[static_cast<std::size_t>(j)]);
    EXPECT_NEAR(dg_h[static_cast<std::size_t>(j)], fdg, 2e-3 * (1.0 + std::fabs(fdg))) << "dgamma[" << j << "]";
    EXPECT_NEAR(db_h[static_cast<std::size_t>(j)], fdb, 2e-3 * (1.0 + std::fabs(fdb))) << "dbeta[" << j << "]";
  }
}

TEST_P(Conformance, LayerNormBackwardMatchesAnalyticReferenceOnLargeInput) {
  // Large enough for the parallel paths (rows * cols >= 32k).
  const i64 rows = 600, cols = 96;
  const std::vector<float> x = normal_values(static_cast<std::size_t>(rows * cols), 81, 1.5f, -3.0f);
  const std::vector<float> gamma = normal_values(static_cast<std::size_t>(cols), 82, 0.3f, 1.0f);
  const std::vector<float> beta(static_cast<std::size_t>(cols), 0.0f);
  const std::vector<float> dy = normal_values(static_cast<std::size_t>(rows * cols), 83);
  const LnRef r = layernorm_reference(x, gamma, beta, rows, cols, 1e-5);
  std::vector<double> dx_ref, dg_ref(static_cast<std::size_t>(cols), 0.0), db_ref(static_cast<std::size_t>(cols), 0.0),
      dg_mag(static_cast<std::size_t>(cols), 0.0), db_mag(static_cast<std::size_t>(cols), 0.0), dx_mag;
  for (i64 i = 0; i < rows; ++i) {
    double sg = 0.0, sgx = 0.0, mg = 0.0;
    std::vector<double> xhat(static_cast<std::size_t>(cols)), g(static_cast<std::size_t>(cols));
    for (i64 j = 0; j < cols; ++j) {
      const auto k = static_cast<std::size_t>(i * cols + j);
      xhat[static_cast<std::size_t>(j)] = (x[k] - r.mean[static_cast<std::size_t>(i)]) * r.rstd[static_cast<std::size_t>(i)];
      g[static_cast<std::size_t>(j)] = static_cast<double>(dy[k]) * gamma[static_cast<std::size_t>(j)];
      sg += g[static_cast<std::size_t>(j)];
      sgx += g[static_cast<std::size_t>(j)] * xhat[static_cast<std::size_t>(j)];
      mg += std::fabs(g[static_cast<std::size_t>(j)]) * (1.0 + std::fabs(xhat[static_cast<std::size_t>(j)]));
      dg_ref[static_cast<std::size_t>(j)] += dy[k] * xhat[static_cast<std::size_t>(j)];
      dg_mag[static_cast<std::size_t>(j)] += std::fabs(dy[k] * xhat[static_cast<std::size_t>(j)]);
      db_ref[static_cast<std::size_t>(j)] += dy[k];
      db_mag[static_cast<std::size_t>(j)] += std::fabs(dy[k]);
    }
    for (i64 j = 0; j < cols; ++j) {
      const auto jj = static_cast<std::size_t>(j);
      dx_ref.push_back(r.rstd[static_cast<std::size_t>(i)] *
                       (g[jj] - sg / static_cast<double>(cols) - xhat[jj] * sgx / static_cast<double>(cols)));
      dx_mag.push_back(r.rstd[static_cast<std::size_t>(i)] * (std::fabs(g[jj]) + mg / static_cast<double>(cols) * (1.0 + std::fabs(xhat[jj]))));
    }
  }
  auto xd = dev(x), gd = dev(gamma), bd = dev(beta), dyd = dev(dy);
  auto y = out(static_cast<std::size_t>(rows * cols)), mean = out(static_cast<std::size_t>(rows)),
       rstd = out(static_cast<std::size_t>(rows));
  be->layernorm_forward(xd.get(), gd.get(), bd.get(), y.get(), mean.get(), rstd.get(), rows, cols, 1e-5f, Format::FP32);
  auto dx = out(static_cast<std::size_t>(rows * cols)), dgamma = out(static_cast<std::size_t>(cols)),
       dbeta = out(static_cast<std::size_t>(cols));
  be->layernorm_backward(dyd.get(), xd.get(), mean.get(), rstd.get(), gd.get(), dx.get(), dgamma.get(),
                         dbeta.get(), rows, cols);
  expect_close(dx.host(), dx_ref, dx_mag, 1e-5, 1e-30, "layernorm backward dx");
  expect_close(dgamma.host(), dg_ref, dg_mag, 1e-5, 1e-30, "layernorm backward dgamma");
  expect_close(dbeta.host(), db_ref, db_mag, 1e-6, 1e-30, "layernorm backward dbeta");
}

// The emulated FP16/BF16 LayerNorm (backend.h: every partial sum and
// intermediate rounded), written out in the order the contract states:
// sum, mean, difference, square, variance sum, variance, var + eps, sqrt,
// reciprocal, normalized value; output xhat * gamma + beta in f32.
void layernorm_lowp_reference(Format f, const std::vector<float>& x, const std::vector<float>& gamma,
                              const std::vector<float>& beta, i64 rows, i64 cols, float eps,
                              std::vector<float>& y, std::vector<float>& mean, std::vector<float>& rstd) {
  auto q = [f](float v) { return engine::quantize(f, v); };
  for (i64 i = 0; i < rows; ++i) {
    const float* xr = x.data() + i * cols;
    float s = 0.0f;
    for (i64 j = 0; j < cols; ++j) s = q(s + xr[j]);
    const float mu = q(s / static_cast<float>(cols));
    float v = 0.0f;
    for (i64 j = 0; j < cols; ++j) {
      const float d = q(xr[j] - mu);
      v = q(v + q(d * d));
    }
    const float var = q(v / static_cast<float>(cols));
    const float rs = q(1.0f / q(std::sqrt(q(var + eps))));
    for (i64 j = 0; j < cols; ++j) {
      const float xhat = q(q(xr[j] - mu) * rs);
      y[static_cast<std::size_t>(i * cols + j)] = xhat * gamma[static_cast<std::size_t>(j)] + beta[static_cast<std::size_t>(j)];
    }
    mean[static_cast<std::size_t>(i)] = mu;
    rstd[static_cast<std::size_t>(i)] = rs;
  }
}

TEST_P(Conformance, LayerNormLowPrecisionAccumulateEqualsReferenceExactly) {
  const i64 rows = 40, cols = 48;
  const std::vector<float> x = normal_values(static_cast<std::size_t>(rows * cols), 91, 3.0f, 1.0f);
  const std::vector<float> gamma = normal_values(static_cast<std::size_t>(cols), 92, 0.2f, 1.0f);
  const std::vector<float> beta = normal_values(static_cast<std::size_t>(cols), 93, 0.1f);
  for (Format f : {Format::FP16, Format::BF16}) {
    std::vector<float> y_ref(x.size()), mean_ref(static_cast<std::size_t>(rows)), rstd_ref(static_cast<std::size_t>(rows));
    layernorm_lowp_reference(f, x, gamma, beta, rows, cols, 1e-5f, y_ref, mean_ref, rstd_ref);
    auto xd = dev(x), gd = dev(gamma), bd = dev(beta);
    auto y = out(x.size()), mean = out(static_cast<std::size_t>(rows)), rstd = out(static_cast<std::size_t>(rows));
    be->layernorm_forward(xd.get(), gd.get(), bd.get(), y.get(), mean.get(), rstd.get(), rows, cols, 1e-5f, f);
    const std::string name = std::string("layernorm accumulate ") + engine::format_name(f);
    expect_bit_equal(mean.host(), mean_ref, name + " mean");
    expect_bit_equal(rstd.host(), rstd_ref, name + " rstd");
    expect_bit_equal(y.host(), y_ref, name + " y");
    // And it is not the FP32 result: the emulation really rounds.
    const LnRef r = layernorm_reference(x, gamma, beta, rows, cols, 1e-5);
    double max_err = 0.0;
    const auto yh = y.host();
    for (std::size_t i = 0; i < yh.size(); ++i) max_err = std::max(max_err, std::fabs(yh[i] - r.y[i]));
    EXPECT_GT(max_err, 1e-4) << name;
  }
}

TEST_P(Conformance, LayerNormFp16AccumulateOverflowsOnLargeActivations) {
  const float eps = 1e-5f;
  // (1) 256 values around 300: the FP16 running sum passes 65504 after 219
  // terms -> inf; the mean is inf, every difference -inf, the output NaN.
  {
    const i64 rows = 4, cols = 256;
    const std::vector<float> x = normal_values(static_cast<std::size_t>(rows * cols), 101, 5.0f, 300.0f);
    const std::vector<float> gamma(static_cast<std::size_t>(cols), 1.0f), beta(static_cast<std::size_t>(cols), 0.0f);
    std::vector<float> y_ref(x.size()), mean_ref(static_cast<std::size_t>(rows)), rstd_ref(static_cast<std::size_t>(rows));
    layernorm_lowp_reference(Format::FP16, x, gamma, beta, rows, cols, eps, y_ref, mean_ref, rstd_ref);
    ASSERT_TRUE(std::isinf(mean_ref[0])) << "the reference predicts the overflow";
    auto xd = dev(x), gd = dev(gamma), bd = dev(beta);
    auto y = out(x.size()), mean = out(static_cast<std::size_t>(rows)), rstd = out(static_cast<std::size_t>(rows));
    be->layernorm_forward(xd.get(), gd.get(), bd.get(), y.get(), mean.get(), rstd.get(), rows, cols, eps, Format::FP16);
    expect_bit_equal(mean.host(), mean_ref, "fp16 layernorm mean");
    EXPECT_EQ(count_nonfinite(*be, y.get(), rows * cols), rows * cols) << "every output non-finite";
    // The same input with FP32 accumulation is fine.
    be->layernorm_forward(xd.get(), gd.get(), bd.get(), y.get(), mean.get(), rstd.get(), rows, cols, eps, Format::FP32);
    EXPECT_EQ(count_nonfinite(*be, y.get(), rows * cols), 0);
    // BF16 has FP32's range: no overflow, only coarse values.
    be->layernorm_forward(xd.get(), gd.get(), bd.get(), y.get(), mean.get(), rstd.get(), rows, cols, eps, Format::BF16);
    EXPECT_EQ(count_nonfinite(*be, y.get(), rows * cols), 0);
  }
  // (2) +-300 around a zero mean: the sum is fine but each square (90000)
  // overflows FP16, the variance is inf, rstd = 1/sqrt(inf) = 0 and the
  // layer outputs beta: a silent collapse the reference predicts too.
  {
    const i64 rows = 2, cols = 64;
    std::vector<float> x(static_cast<std::size_t>(rows * cols));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = (i % 2 ? 300.0f : -300.0f);
    const std::vector<float> gamma(static_cast<std::size_t>(cols), 1.0f);
    const std::vector<float> beta = normal_values(static_cast<std::size_t>(cols), 102);
    std::vector<float> y_ref(x.size()), mean_ref(static_cast<std::size_t>(rows)), rstd_ref(static_cast<std::size_t>(rows));
    layernorm_lowp_reference(Format::FP16, x, gamma, beta, rows, cols, eps, y_ref, mean_ref, rstd_ref);
    ASSERT_EQ(rstd_ref[0], 0.0f);
    auto xd = dev(x), gd = dev(gamma), bd = dev(beta);
    auto y = out(x.size()), mean = out(static_cast<std::size_t>(rows)), rstd = out(static_cast<std::size_t>(rows));
    be->layernorm_forward(xd.get(), gd.get(), bd.get(), y.get(), mean.get(), rstd.get(), rows, cols, eps, Format::FP16);
    EXPECT_EQ(rstd.host()[0], 0.0f);
    expect_bit_equal(y.host(), y_ref, "fp16 layernorm, squares overflow");
  }
}

TEST_P(Conformance, SoftmaxForwardBackward) {
  const i64 rows = 300, cols = 130;  // parallel path: 39000 elements
  std::vector<float> x = normal_values(static_cast<std::size_t>(rows * cols), 111, 4.0f);
  for (i64 j = 0; j < cols; ++j) x[static_cast<std::size_t>(cols + j)] += 1000.0f;  // large logits: max subtracted
  const std::vector<float> dy = normal_values(x.size(), 112);
  std::vector<double> y_ref(x.size()), dx_ref(x.size()), dx_mag(x.size());
  for (i64 i = 0; i < rows; ++i) {
    double m = -INFINITY, s = 0.0, dot = 0.0, dot_mag = 0.0;
    for (i64 j = 0; j < cols; ++j) m = std::max(m, static_cast<double>(x[static_cast<std::size_t>(i * cols + j)]));
    for (i64 j = 0; j < cols; ++j) s += std::exp(x[static_cast<std::size_t>(i * cols + j)] - m);
    for (i64 j = 0; j < cols; ++j) {
      const auto k = static_cast<std::size_t>(i * cols + j);
      y_ref[k] = std::exp(x[k] - m) / s;
      dot += dy[k] * y_ref[k];
      dot_mag += std::fabs(dy[k] * y_ref[k]);
    }
    for (i64 j = 0; j < cols; ++j) {
      const auto k = static_cast<std::size_t>(i * cols + j);
      dx_ref[k] = y_ref[k] * (dy[k] - dot);
      dx_mag[k] = y_ref[k] * (std::fabs(dy[k]) + dot_mag);
    }
  }
  auto xd = dev(x), dyd = dev(dy);
  auto y = out(x.size()), dx = out(x.size());
  be->softmax_forward(xd.get(), y.get(), rows, cols, Format::FP32);
  const std::vector<float> yh = y.host();
  // f32 exp and a 130-term f32 sum: 1e-5 relative, 1e-9 absolute (tiny tails).
  expect_close(yh, y_ref, 1e-5, 1e-9, "softmax forward");
  auto yd = dev(yh);
  be->softmax_backward(yd.get(), dyd.get(), dx.get(), rows, cols);
  expect_close(dx.host(), dx_ref, dx_mag, 2e-5, 1e-12, "softmax backward");
}

// Softmax over FP16/BF16 codes (the attention's scores and their
// gradients) gives the bits of decoding and then softmax_forward /
// softmax_backward through the same backend: the attention's rows, odd
// shapes, and rows too wide for the CPU's row block (its fallback).
TEST_P(Conformance, SoftmaxCodedEqualsDecodeThenSoftmax) {
  struct Shape2 {
    i64 rows, cols;
  };
  for (const Shape2& sh : {Shape2{8192, 16}, Shape2{13, 7}, Shape2{37, 130}, Shape2{3, 300}, Shape2{1, 1}})
    for (Format f : {Format::BF16, Format::FP16, Format::FP32}) {
      const auto n = static_cast<std::size_t>(sh.rows * sh.cols);
      std::vector<float> xv = normal_values(n, 131 + n, 6.0f), dv = normal_values(n, 132 + n, 3.0f);
      if (n > 40) {
        xv[5] = NAN;  // poisons row 0
        xv[sh.cols + 1] = INFINITY;
        dv[2 * sh.cols + 3] = -INFINITY;
      }
      auto stored = [&](const std::vector<float>& v) {
        std::vector<std::byte> b(n * engine::storage_bytes(f));
        engine::cast_from_f32(f, v.data(), b.data(), n);
        return DeviceBuffer<std::byte>(GetParam(), b);
      };
      auto xd = stored(xv), dd = stored(dv);
      const i64 ni = static_cast<i64>(n);
      const std::string what = std::string("softmax_coded ") + engine::format_name(f) + " " +
                               std::to_string(sh.rows) + "x" + std::to_string(sh.cols);
      auto sx = out(n), want = out(n), got = out(n), scratch = out(n);
      be->convert(f, xd.get(), Format::FP32, sx.get(), ni, {});
      be->softmax_forward(sx.get(), want.get(), sh.rows, sh.cols, Format::FP32);
      engine::fused::softmax_coded_forward(*be, f, xd.get(), got.get(), sh.rows, sh.cols, scratch.get());
      expect_bit_equal(got.host(), want.host(), what + " forward");
      auto sd = out(n), want_dx = out(n), got_dx = out(n);
      be->convert(f, dd.get(), Format::FP32, sd.get(), ni, {});
      be->softmax_backward(want.get(), sd.get(), want_dx.get(), sh.rows, sh.cols);
      engine::fused::softmax_coded_backward(*be, want.get(), f, dd.get(), got_dx.get(), sh.rows, sh.cols, scratch.get());
      expect_bit_equal(got_dx.host(), want_dx.host(), what + " backward");
      if (HasFailure()) return;
    }
}

TEST_P(Conformance, SoftmaxLowPrecisionAccumulateEqualsReferenceAndStalls) {
  const i64 rows = 6, cols = 50;
  const std::vector<float> x = normal_values(static_cast<std::size_t>(rows * cols), 121, 2.0f);
  for (Format f : {Format::FP16, Format::BF16}) {
    auto q = [f](float v) { return engine::quantize(f, v); };
    std::vector<float> want(x.size());
    for (i64 i = 0; i < rows; ++i) {
      const float* xr = x.data() + i * cols;
      float m = -INFINITY;
      for (i64 j = 0; j < cols; ++j) m = std::max(m, xr[j]);
      float s = 0.0f;
      for (i64 j = 0; j < cols; ++j) {
        const float e = q(std::exp(q(xr[j] - m)));
        want[static_cast<std::size_t>(i * cols + j)] = e;
        s = q(s + e);
      }
      for (i64 j = 0; j < cols; ++j) want[static_cast<std::size_t>(i * cols + j)] /= s;
    }
    auto xd = dev(x);
    auto y = out(x.size());
    be->softmax_forward(xd.get(), y.get(), rows, cols, f);
    expect_bit_equal(y.host(), want, std::string("softmax accumulate ") + engine::format_name(f));
  }
  // 4096 equal logits: an FP16 sum of the exponentials (all 1) stalls at
  // 2048, so every probability comes out 1/2048 instead of 1/4096.
  const std::vector<float> flat(4096, 0.5f);
  auto fd = dev(flat);
  auto y = out(flat.size());
  be->softmax_forward(fd.get(), y.get(), 1, 4096, Format::FP16);
  EXPECT_EQ(y.host()[17], 1.0f / 2048.0f);
  be->softmax_forward(fd.get(), y.get(), 1, 4096, Format::FP32);
  EXPECT_EQ(y.host()[17], 1.0f / 4096.0f);
}

// ============================================================================
// Losses
// ============================================================================
TEST_P(Conformance, CrossEntropyForwardBackward) {
  const i64 rows = 4000, classes = 10;  // parallel path
  std::vector<float> logits = normal_values(static_cast<std::size_t>(rows * classes), 131, 3.0f);
  std::vector<std::int32_t> labels(static_cast<std::size_t>(rows));
  std::mt19937_64 rng(132);
  for (auto& l : labels) l = static_cast<std::int32_t>(rng() % classes);
  // A confidently wrong row: logit gap 500 (naive exp overflows in f32).
  logits[0] = 500.0f;
  labels[0] = 3;
  double loss_ref = 0.0;
  i64 correct_ref = 0;
  std::vector<double> p_ref(logits.size());
  for (i64 i = 0; i < rows; ++i) {
    const float* z = logits.data() + i * classes;
    double m = z[0];
    i64 arg = 0;
    for (i64 j = 1; j < classes; ++j)
      if (z[j] > m) {
        m = z[j];
        arg = j;
      }
    double s = 0.0;
    for (i64 j = 0; j < classes; ++j) s += std::exp(z[j] - m);
    for (i64 j = 0; j < classes; ++j) p_ref[static_cast<std::size_t>(i * classes + j)] = std::exp(z[j] - m) / s;
    loss_ref += -(z[labels[static_cast<std::size_t>(i)]] - m - std::log(s));
    correct_ref += arg == labels[static_cast<std::size_t>(i)] ? 1 : 0;
  }
  loss_ref /= static_cast<double>(rows);
  auto ld = dev(logits);
  DeviceBuffer<std::int32_t> lab(GetParam(), labels);
  auto probs = out(logits.size());
  i64 correct = -1;
  const double loss = cross_entropy_forward(*be, ld.get(), lab.get(), rows, classes, probs.get(), &correct);
  EXPECT_NEAR(loss, loss_ref, 1e-10 * loss_ref);
  EXPECT_EQ(correct, correct_ref);
  const std::vector<float> ph = probs.host();
  expect_close(ph, p_ref, 1e-6, 1e-12, "cross-entropy probs");
  // correct is optional.
  EXPECT_NEAR(cross_entropy_forward(*be, ld.get(), lab.get(), rows, classes, probs.get(), nullptr), loss_ref, 1e-10 * loss_ref);

  const float scale = 1024.0f;  // a loss scale
  std::vector<double> d_ref(logits.size());
  const float f = scale / static_cast<float>(rows);
  for (i64 i = 0; i < rows; ++i)
    for (i64 j = 0; j < classes; ++j) {
      const auto k = static_cast<std::size_t>(i * classes + j);
      d_ref[k] = (static_cast<double>(ph[k]) - (j == labels[static_cast<std::size_t>(i)] ? 1.0 : 0.0)) * f;
    }
  auto pd = dev(ph);
  auto dlogits = out(logits.size());
  be->cross_entropy_backward(pd.get(), lab.get(), rows, classes, scale, dlogits.get());
  expect_close(dlogits.host(), d_ref, 1e-6, 1e-9, "cross-entropy backward");
}

TEST_P(Conformance, MseForwardBackward) {
  for (std::size_t n : {std::size_t{7}, std::size_t{300001}}) {
    const std::vector<float> pred = normal_values(n, 141), target = normal_values(n, 142);
    double ref = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      const double d = static_cast<double>(pred[i]) - target[i];
      ref += d * d;
    }
    ref /= static_cast<double>(n);
    auto pd = dev(pred), td = dev(target);
    EXPECT_NEAR(mse_forward(*be, pd.get(), td.get(), static_cast<i64>(n)), ref, 1e-12 * ref);
    const float scale = 8.0f;
    std::vector<double> d_ref(n);
    for (std::size_t i = 0; i < n; ++i)
      d_ref[i] = 2.0 * (static_cast<double>(pred[i]) - target[i]) * scale / static_cast<double>(n);
    auto dpred = out(n);
    be->mse_backward(pd.get(), td.get(), static_cast<i64>(n), scale, dpred.get());
    expect_close(dpred.host(), d_ref, 1e-6, 1e-30, "mse backward");
  }
}

// ============================================================================
// CPU backend specifics: info, native bf16, primitive caching, threads.
// ============================================================================
// A short training run on the backend against the same run on the CPU
// backend, recipe by recipe: the loss curves agree within a stated
// tolerance. The CPU-memory targets must match to the bit (same kernels)
// unless they say otherwise (Target::training_rtol: another thread count);
// a GPU sums in its own order (Tensor Cores, cuDNN, cuBLASLt), so there
// each step's loss may differ by 1% (FP32, TF32-free paths) to 5% (FP16,
// FP8 and the block formats, whose roundings amplify a last-bit change) of
// the CPU's after 20 steps.
TEST_P(Conformance, ShortTrainingRunFollowsTheCpuBackendInEveryRecipe) {
  const auto data = std::make_shared<const engine::DatasetPair>(engine::load_dataset("spirals", 5));
  const bool host_memory = GetParam().name != "cuda";
  for (const char* recipe : {"fp32", "mixed-fp16", "mixed-bf16", "fp8", "mxfp8", "nvfp4"}) {
    engine::RunConfig c = test::small_run(recipe, "mlp", "spirals", 20, 64, 5);
    c.optimizer = "adam";
    c.lr = 0.01;
    c.stats_every = 10;
    std::vector<double> loss[2];
    auto cpu = engine::make_cpu_backend();
    engine::Backend* backends[2] = {cpu.get(), be.get()};
    for (int k = 0; k < 2; ++k) {
      engine::Run run(0, c, data, *backends[k]);
      std::vector<engine::Record> out;
      for (int s = 0; s < 20; ++s) run.step(out);
      for (const auto& m : run.steps()) loss[k].push_back(m.loss);
    }
    ASSERT_EQ(loss[0].size(), 20u) << recipe;
    ASSERT_EQ(loss[1].size(), 20u) << recipe;
    const bool narrow = std::string(recipe) != "fp32" && std::string(recipe) != "mixed-bf16";
    const double tol = host_memory ? GetParam().training_rtol : (narrow ? 0.05 : 0.01);
    for (std::size_t i = 0; i < 20; ++i) {
      ASSERT_TRUE(std::isfinite(loss[1][i])) << recipe << " step " << i + 1;
      EXPECT_LE(std::fabs(loss[1][i] - loss[0][i]), tol * std::fabs(loss[0][i]))
          << recipe << " step " << i + 1 << ": " << loss[1][i] << " vs the CPU's " << loss[0][i];
    }
  }
}

TEST(CpuBackend, InfoNamesTheCpuAndThreads) {
  auto be = engine::make_cpu_backend(1);
  const engine::BackendInfo info = be->info();
  EXPECT_EQ(info.name, "cpu");
  EXPECT_FALSE(info.device.empty());
  EXPECT_EQ(info.threads, 1);
  EXPECT_GE(engine::make_cpu_backend(0)->info().threads, 1);
  engine::CpuBackendOptions o;
  o.allow_native_bf16 = false;
  EXPECT_FALSE(engine::CpuBackend(o).info().native_bf16);
}

engine::GemmArgs mlp_forward_args(const void* x, Format fx, const void* w, Format fw, float* y, const float* bias) {
  engine::GemmArgs g;
  g.m = 128;
  g.n = 256;
  g.k = 784;
  g.a = {x, fx, false, 784};
  g.b = {w, fw, true, 784};
  g.c = y;
  g.ldc = 256;
  g.bias = bias;
  return g;
}

// PL_MAX_CPU_ISA (the ctest runs of this suite set it, with oneDNN's
// DNNL_MAX_CPU_ISA) picks the casts another machine would run: avx2 the
// F16C ones, avx512 the AVX-512 ones without VCVTNEPS2BF16; unset, the
// best the CPU has.
TEST(CpuBackend, CastPathFollowsTheIsaCap) {
  using engine::CastPath;
  const char* env = std::getenv("PL_MAX_CPU_ISA");
  std::string cap = env ? env : "";
  for (char& ch : cap) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const CastPath got = engine::best_cast_path();
  if (cap == "avx2" && engine::cast_path_supported(CastPath::F16C)) {
    EXPECT_EQ(got, CastPath::F16C);
  } else if ((cap == "avx512" || cap == "avx512_core") && engine::cast_path_supported(CastPath::AVX512)) {
    EXPECT_EQ(got, CastPath::AVX512);
    EXPECT_TRUE(engine::cpu_runs_avx512());
  } else if (cap.empty() && engine::cast_path_supported(CastPath::AVX512BF16)) {
    EXPECT_EQ(got, CastPath::AVX512BF16);
  } else {
    GTEST_SKIP() << "this CPU lacks the ISA of PL_MAX_CPU_ISA='" << cap << "'";
  }
}

TEST(CpuBackend, Bf16AndFp8GemmsRunTheNativeBf16KernelWhenTheCpuHasIt) {
  engine::CpuBackend be;
  std::vector<std::uint16_t> x(128 * 784, engine::fp32_to_bf16(0.5f)), w(256 * 784, engine::fp32_to_bf16(0.25f));
  std::vector<std::uint8_t> x8(128 * 784, engine::fp32_to_e4m3(0.5f)), w8(256 * 784, engine::fp32_to_e4m3(0.25f));
  std::vector<std::uint16_t> xh(128 * 784, engine::fp32_to_fp16(0.5f));
  std::vector<float> y(128 * 256);
  be.gemm(mlp_forward_args(x.data(), Format::BF16, w.data(), Format::BF16, y.data(), nullptr));
  EXPECT_EQ(y[0], 784 * 0.125f);
  const std::string bf16_impl = be.last_gemm_impl();
  be.gemm(mlp_forward_args(x8.data(), Format::E4M3, w8.data(), Format::E4M3, y.data(), nullptr));
  EXPECT_EQ(y[5], 784 * 0.125f);
  const std::string fp8_impl = be.last_gemm_impl();
  be.gemm(mlp_forward_args(xh.data(), Format::FP16, w.data(), Format::BF16, y.data(), nullptr));
  const std::string mixed_impl = be.last_gemm_impl();
  if (be.info().native_bf16) {
    EXPECT_NE(bf16_impl.find("bf16"), std::string::npos) << bf16_impl;
    EXPECT_NE(fp8_impl.find("bf16"), std::string::npos) << fp8_impl;
  } else {
    EXPECT_EQ(bf16_impl.find("bf16"), std::string::npos) << bf16_impl;
  }
  // FP16 meets BF16 on the f32 path.
  EXPECT_EQ(mixed_impl.find("bf16"), std::string::npos) << mixed_impl;
  EXPECT_FALSE(mixed_impl.empty());

  // Convolution with compute BF16 (values already bf16-exact) likewise.
  const engine::ConvShape cs{4, 32, 14, 14, 64, 5, 5, 1, 2};
  std::vector<float> cx(4 * 32 * 14 * 14, 0.5f), cw(64 * 32 * 25, 0.25f), cy(4 * 64 * 14 * 14);
  be.conv2d_forward(cs, Format::BF16, cx.data(), cw.data(), nullptr, cy.data());
  EXPECT_EQ(cy[4 * 14 + 4], 32 * 25 * 0.125f);  // an interior pixel: the full 5x5 window
  const std::string conv_impl = be.last_conv_impl();
  be.conv2d_forward(cs, Format::FP16, cx.data(), cw.data(), nullptr, cy.data());
  const std::string conv_f32_impl = be.last_conv_impl();
  EXPECT_EQ(conv_impl.find("bf16") != std::string::npos, be.info().native_bf16) << conv_impl;
  EXPECT_EQ(conv_f32_impl.find("bf16"), std::string::npos) << conv_f32_impl;
}

TEST(CpuBackend, SteadyStateCreatesNoPrimitives) {
  engine::CpuBackend be;
  std::vector<float> x(128 * 784, 0.5f), w(256 * 784, 0.25f), y(128 * 256), b(256, 1.0f), dw(256 * 784);
  std::vector<float> cx(8 * 32 * 14 * 14, 1.0f), cw(64 * 32 * 25, 0.5f), cy(8 * 64 * 14 * 14), cb(64), cdx(cx.size()),
      cdw(cw.size());
  const engine::ConvShape cs{8, 32, 14, 14, 64, 5, 5, 1, 2};
  // FP8 layers pass alpha = 1/scale, which changes whenever the delayed
  // scaling moves: a new alpha must not mean a new primitive.
  auto step = [&](int i) {
    engine::GemmArgs fwd = mlp_forward_args(x.data(), Format::FP32, w.data(), Format::FP32, y.data(), b.data());
    fwd.alpha = std::ldexp(1.0f, -i);
    be.gemm(fwd);
    fwd.a.format = Format::E4M3;
    fwd.b.format = Format::E4M3;
    be.gemm(fwd);
    engine::GemmArgs g;  // dW = dy^T x, accumulated (beta = 1)
    g.m = 256;
    g.n = 784;
    g.k = 128;
    g.a = {y.data(), Format::FP32, true, 256};
    g.b = {x.data(), Format::FP32, false, 784};
    g.c = dw.data();
    g.ldc = 784;
    g.beta = 1.0f;
    be.gemm(g);
    g.alpha = 0.5f;
    g.beta = 0.5f;
    be.gemm(g);
    be.conv2d_forward(cs, Format::FP32, cx.data(), cw.data(), cb.data(), cy.data());
    be.conv2d_forward(cs, Format::BF16, cx.data(), cw.data(), cb.data(), cy.data());
    be.conv2d_backward_data(cs, Format::FP32, cy.data(), cw.data(), cdx.data());
    be.conv2d_backward_weights(cs, Format::FP32, cx.data(), cy.data(), cdw.data(), cb.data());
  };
  step(0);  // alpha = 1: the matmul's own bias
  step(1);  // alpha != 1: A*B alone, then the alpha-and-bias pass
  const std::int64_t after_first = be.primitives_created();
  EXPECT_GT(after_first, 0);
  for (int i = 2; i < 6; ++i) step(i);
  EXPECT_EQ(be.primitives_created(), after_first);
}

TEST(CpuBackend, SlicedGemmsKeepTheirPlansWhenTheCacheFills) {
  // A GEMM sliced over 16 threads looks up one plan per thread, and the
  // plan cache is bounded: when it filled halfway through those lookups it
  // was cleared, freeing the plans already taken (a crash inside oneDNN on
  // a 16-thread Xeon after bench_train had trained many models on one
  // backend). Here 16 threads on any CPU, a new shape per call, and a small
  // unsliced call between them so the cache fills mid-lookup; every product
  // checked (AddressSanitizer sees a freed plan even where it does not
  // crash).
  auto be = engine::make_cpu_backend(16);
  const i64 m = 16 * 32, k = 8, max_n = 72;
  std::vector<std::uint16_t> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(max_n * k));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = engine::fp32_to_fp16(static_cast<float>(static_cast<int>(i % 5) - 2));
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = engine::fp32_to_fp16(static_cast<float>(static_cast<int>(i % 3) - 1));
  std::vector<float> c(static_cast<std::size_t>(m * max_n));
  auto product = [&](i64 rows, i64 n) {
    engine::GemmArgs g;
    g.m = rows;
    g.n = n;
    g.k = k;
    g.a = {a.data(), Format::FP16, false, k};
    g.b = {b.data(), Format::FP16, true, k};  // B stored n x k
    g.c = c.data();
    be->gemm(g);
    for (i64 i = 0; i < rows; ++i)
      for (i64 j = 0; j < n; ++j) {
        float want = 0.0f;
        for (i64 p = 0; p < k; ++p)
          want += engine::fp16_to_fp32(a[static_cast<std::size_t>(i * k + p)]) *
                  engine::fp16_to_fp32(b[static_cast<std::size_t>(j * k + p)]);
        ASSERT_EQ(c[static_cast<std::size_t>(i * n + j)], want) << rows << "x" << n << " at " << i << "," << j;
      }
  };
  // (16 + 1) plans a round: the 512-plan bound falls inside a sliced call.
  for (i64 n = 1; n <= max_n; ++n) {
    product(m, n);
    product(4, n);
  }
}

TEST(CpuBackend, ReductionsDoNotDependOnTheThreadCount) {
  // Reproducible runs: the same bits with 1 thread and with all of them.
  auto one = engine::make_cpu_backend(1);
  auto many = engine::make_cpu_backend(0);
  const i64 rows = 20000, cols = 24;
  const std::vector<float> x = normal_values(static_cast<std::size_t>(rows * cols), 151);
  const std::vector<float> dy = normal_values(x.size(), 152);
  const std::vector<float> gamma(static_cast<std::size_t>(cols), 1.0f), beta(static_cast<std::size_t>(cols), 0.0f);
  auto run = [&](Backend& be) {
    std::vector<float> out;
    std::vector<float> y(x.size()), mean(static_cast<std::size_t>(rows)), rstd(static_cast<std::size_t>(rows)),
        dx(x.size()), dg(static_cast<std::size_t>(cols)), db(static_cast<std::size_t>(cols)), cs(static_cast<std::size_t>(cols));
    be.layernorm_forward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), rows, cols, 1e-5f, Format::FP32);
    be.layernorm_backward(dy.data(), x.data(), mean.data(), rstd.data(), gamma.data(), dx.data(), dg.data(), db.data(), rows, cols);
    be.column_sums(dy.data(), rows, cols, cs.data());
    out.insert(out.end(), dg.begin(), dg.end());
    out.insert(out.end(), db.begin(), db.end());
    out.insert(out.end(), cs.begin(), cs.end());
    return out;
  };
  expect_bit_equal(run(*many), run(*one), "1 thread vs all threads");
  // Column sums of rows too few to split, whose columns the threads share
  // instead (FP32, BF16 codes, and the fused FP8 casts with their sums).
  for (const auto& [r, c] : {std::pair<i64, i64>{128, 256}, {100, 200}, {64, 128}}) {
    const auto n = static_cast<std::size_t>(r * c);
    const std::vector<float> g = normal_values(n, 153 + n, 30.0f);
    std::vector<std::uint16_t> g16(n);
    engine::cast_from_f32(Format::BF16, g.data(), g16.data(), n);
    auto sums = [&](Backend& be) {
      std::vector<float> out(static_cast<std::size_t>(c) * 4), scratch(n);
      std::vector<std::uint8_t> q(n * 2);
      float amax[2] = {};
      be.column_sums(g.data(), r, c, out.data());
      engine::fused::column_sums16(be, Format::BF16, g16.data(), r, c, out.data() + c, scratch.data());
      engine::fused::scale_amax_encode_sums(be, Format::FP32, g.data(), r, c, 4.0f, Format::E5M2, q.data(), {}, &amax[0],
                                out.data() + 2 * c, scratch.data());
      engine::fused::scale_amax_encode_sums(be, Format::BF16, g16.data(), r, c, 0.5f, Format::E4M3, q.data() + n, {}, &amax[1],
                                out.data() + 3 * c, scratch.data());
      for (std::uint8_t b : q) out.push_back(b);
      out.insert(out.end(), amax, amax + 2);
      return out;
    };
    expect_bit_equal(sums(*many), sums(*one), "column sums " + std::to_string(r) + "x" + std::to_string(c));
  }
  // Convolution bias gradients (the cnn's conv1 output: 128 x 32 x 28 x 28).
  {
    const i64 n = 128, c = 32, hw = 784;
    const std::vector<float> g = normal_values(static_cast<std::size_t>(n * c * hw), 154);
    std::vector<float> s1(static_cast<std::size_t>(c)), s2(s1.size());
    many->channel_sums(g.data(), s1.data(), n, c, hw);
    one->channel_sums(g.data(), s2.data(), n, c, hw);
    expect_bit_equal(s1, s2, "channel sums");
  }
  EXPECT_EQ(sum_squares(*many, x.data(), rows * cols), sum_squares(*one, x.data(), rows * cols));
  EXPECT_EQ(mse_forward(*many, x.data(), dy.data(), rows * cols), mse_forward(*one, x.data(), dy.data(), rows * cols));
  i64 c1 = 0, c2 = 0;
  std::vector<float> p1(x.size()), p2(x.size());
  std::vector<std::int32_t> labels(static_cast<std::size_t>(rows * cols / 8), 3);
  const double l1 = cross_entropy_forward(*one, x.data(), labels.data(), rows * cols / 8, 8, p1.data(), &c1);
  const double l2 = cross_entropy_forward(*many, x.data(), labels.data(), rows * cols / 8, 8, p2.data(), &c2);
  EXPECT_EQ(l1, l2);
  EXPECT_EQ(c1, c2);
}

// The CPU's GELU loops per ISA: the AVX2 lanes, the AVX-512 lanes and the
// element-by-element gelu_value give the same bits (the backend picks one
// by CPU, so a machine of the other kind must get the same run). Normal
// values, both tails, subnormals and infinities; each ISA where this CPU
// has it.
TEST(CpuGeluLanes, EveryIsaGivesTheSameBits) {
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (!avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  std::vector<float> x = normal_values(100003, 881, 4.0f), dy = normal_values(100003, 882, 2.0f);
  const float edges[] = {0.0f, -0.0f, 1e-40f, -1e-40f, 9.0f, -9.0f, 14.3f, -14.3f, 1e30f, -1e30f, INFINITY, -INFINITY};
  for (std::size_t i = 0; i < std::size(edges); ++i) x[i * 7] = edges[i];
  const auto n = static_cast<i64>(x.size());
  std::vector<float> y2(x.size()), g2(x.size()), y5(x.size()), g5(x.size());
  engine::cpu::gelu_forward_avx2(x.data(), y2.data(), n);
  engine::cpu::gelu_backward_avx2(x.data(), dy.data(), g2.data(), n);
  std::vector<float> ys(x.size()), gs(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    ys[i] = engine::cpu::gelu_value(x[i]);
    gs[i] = engine::cpu::gelu_grad(x[i], dy[i]);
  }
  expect_bit_equal(y2, ys, "gelu forward, AVX2 lanes vs one element at a time");
  expect_bit_equal(g2, gs, "gelu backward, AVX2 lanes vs one element at a time");
  if (!avx512) return;
  engine::cpu::gelu_forward_avx512(x.data(), y5.data(), n);
  engine::cpu::gelu_backward_avx512(x.data(), dy.data(), g5.data(), n);
  expect_bit_equal(y5, y2, "gelu forward, AVX-512 vs AVX2 lanes");
  expect_bit_equal(g5, g2, "gelu backward, AVX-512 vs AVX2 lanes");
}

// ============================================================================
// The gpt's ops: the token embedding (a core op) and the causal mask's
// fused ops (fused::CausalZeroOp, CausalSoftmaxOp)
// ============================================================================

// Forward picks rows (zeros for ids that name no token); backward is the
// scatter-add in token order, so its f32 sums are the scalar reference's
// bit for bit, on every backend.
TEST_P(Conformance, EmbeddingPicksRowsAndScatterAddsInTokenOrder) {
  struct Case {
    i64 n, vocab, dim;
  };
  for (const Case& c : {Case{32 * 64, 65, 128}, Case{7, 3, 5}, Case{1, 1, 1}, Case{0, 4, 3}}) {
    const std::string what = "embedding " + std::to_string(c.n) + " tokens " + std::to_string(c.vocab) + "x" +
                             std::to_string(c.dim);
    std::vector<float> ids(static_cast<std::size_t>(c.n));
    for (i64 i = 0; i < c.n; ++i) ids[static_cast<std::size_t>(i)] = static_cast<float>((i * 7 + i / 3) % c.vocab);
    if (c.n > 3) {
      ids[1] = static_cast<float>(c.vocab);  // past the vocabulary
      ids[2] = -1.0f;
      ids[3] = 0.5f;                          // not an integer
    }
    const std::vector<float> table = normal_values(static_cast<std::size_t>(c.vocab * c.dim), 211);
    const std::vector<float> dy = normal_values(static_cast<std::size_t>(c.n * c.dim), 212);
    std::vector<float> want_y(static_cast<std::size_t>(c.n * c.dim), 0.0f),
        want_g(static_cast<std::size_t>(c.vocab * c.dim), 0.0f);
    for (i64 i = 0; i < c.n; ++i) {
      const float id = ids[static_cast<std::size_t>(i)];
      const i64 v = static_cast<i64>(id);
      if (id < 0.0f || v >= c.vocab || static_cast<float>(v) != id) continue;
      for (i64 j = 0; j < c.dim; ++j) {
        want_y[static_cast<std::size_t>(i * c.dim + j)] = table[static_cast<std::size_t>(v * c.dim + j)];
        want_g[static_cast<std::size_t>(v * c.dim + j)] += dy[static_cast<std::size_t>(i * c.dim + j)];
      }
    }
    auto idd = dev(ids), td = dev(table), dyd = dev(dy);
    auto y = out(want_y.size()), g = out(want_g.size());
    be->embedding(engine::Pass::Forward, idd.get(), td.get(), y.get(), c.n, c.vocab, c.dim);
    be->embedding(engine::Pass::Backward, idd.get(), dyd.get(), g.get(), c.n, c.vocab, c.dim);
    expect_bit_equal(y.host(), want_y, what + " forward");
    expect_bit_equal(g.host(), want_g, what + " backward");
  }
}

// Each backend's causal ops against their compositions (one core softmax
// per row of t + 1 values), FP32 and FP16 sums, with inf and NaN among
// the future scores, which must not reach a probability or a gradient.
TEST_P(Conformance, CausalSoftmaxAndZeroEqualTheirCompositions) {
  for (i64 T : {i64{64}, i64{16}, i64{5}, i64{1}}) {
    const i64 rows = 2 * 3 * T;  // B 2, H 3
    const auto n = static_cast<std::size_t>(rows * T);
    std::vector<float> x = normal_values(n, 221 + n, 3.0f), dy = normal_values(n, 222 + n);
    if (T > 2) {
      x[1] = INFINITY;                              // row 0, a future key
      x[static_cast<std::size_t>(T + T - 1)] = NAN;  // row 1, a future key
    }
    const std::string what = "causal T " + std::to_string(T);
    auto xd = dev(x), dd = dev(dy);
    for (Format acc : {Format::FP32, Format::FP16}) {
      auto got = out(n), want = out(n);
      engine::fused::causal_softmax(*be, engine::Pass::Forward, xd.get(), nullptr, got.get(), rows, T, acc);
      engine::fused::compose(*be, engine::fused::CausalSoftmaxOp{engine::Pass::Forward, xd.get(), nullptr, want.get(),
                                                                 rows, T, acc});
      const std::vector<float> p = got.host();
      expect_bit_equal(p, want.host(), what + " forward " + engine::format_name(acc));
      for (i64 r = 0; r < rows; ++r)
        for (i64 j = r % T + 1; j < T; ++j) ASSERT_EQ(p[static_cast<std::size_t>(r * T + j)], 0.0f) << what;
      for (float v : p) ASSERT_TRUE(std::isfinite(v)) << what;
      if (acc != Format::FP32) continue;
      auto gg = out(n), gw = out(n);
      engine::fused::causal_softmax(*be, engine::Pass::Backward, got.get(), dd.get(), gg.get(), rows, T, Format::FP32);
      engine::fused::compose(*be, engine::fused::CausalSoftmaxOp{engine::Pass::Backward, got.get(), dd.get(), gw.get(),
                                                                 rows, T, Format::FP32});
      expect_bit_equal(gg.host(), gw.host(), what + " backward");
    }
    auto za = dev(x), zb = dev(x);
    engine::fused::causal_zero(*be, za.get(), rows, T);
    engine::fused::compose(*be, engine::fused::CausalZeroOp{zb.get(), rows, T});
    const std::vector<float> z = za.host();
    expect_bit_equal(z, zb.host(), what + " zero");
    for (i64 r = 0; r < rows; ++r)
      for (i64 j = 0; j < T; ++j)
        ASSERT_TRUE(j > r % T ? z[static_cast<std::size_t>(r * T + j)] == 0.0f
                              : same_value(z[static_cast<std::size_t>(r * T + j)], x[static_cast<std::size_t>(r * T + j)]))
            << what;
  }
}

// qk_norm's column copies: the queries (or keys) of qkv rows out to rows of
// their own and back, exact on every backend.
TEST_P(Conformance, CopyColumnsMovesExactlyTheBlock) {
  const i64 rows = 37, src_ld = 3 * 24, cols = 24, dst_ld = 24;
  const std::vector<float> src = normal_values(static_cast<std::size_t>(rows * src_ld), 231);
  auto sd = dev(src);
  auto dd = out(static_cast<std::size_t>(rows * dst_ld));
  engine::fused::copy_columns(*be, sd.get() + cols, src_ld, dd.get(), dst_ld, rows, cols);
  std::vector<float> want(static_cast<std::size_t>(rows * dst_ld));
  for (i64 r = 0; r < rows; ++r)
    for (i64 j = 0; j < cols; ++j)
      want[static_cast<std::size_t>(r * dst_ld + j)] = src[static_cast<std::size_t>(r * src_ld + cols + j)];
  expect_bit_equal(dd.host(), want, "copy_columns out");
  auto back = dev(std::vector<float>(src.size(), 0.0f));
  engine::fused::copy_columns(*be, dd.get(), dst_ld, back.get() + cols, src_ld, rows, cols);
  const std::vector<float> b = back.host();
  for (i64 r = 0; r < rows; ++r)
    for (i64 j = 0; j < src_ld; ++j) {
      const bool inside = j >= cols && j < 2 * cols;
      ASSERT_TRUE(same_value(b[static_cast<std::size_t>(r * src_ld + j)],
                             inside ? src[static_cast<std::size_t>(r * src_ld + j)] : 0.0f))
          << "copy_columns back, row " << r << " column " << j;
    }
}

// The z-loss: forward's log Z per row and mean log^2 Z against a double
// reference (the exponentials are libm's or the device's: within 1e-6),
// backward exactly (grad + (f * lse) * probs in f32, as specified).
TEST_P(Conformance, ZLossMatchesItsDefinition) {
  for (i64 rows : {i64{1}, i64{64 * 8}, i64{5}})
    for (i64 cols : {i64{65}, i64{3}}) {
      const auto n = static_cast<std::size_t>(rows * cols);
      const std::string what = "z_loss " + std::to_string(rows) + "x" + std::to_string(cols);
      const std::vector<float> x = normal_values(n, 241 + n, 4.0f), p = normal_values(n, 242 + n),
                               g0 = normal_values(n, 243 + n);
      std::vector<double> lse_ref(static_cast<std::size_t>(rows)), mag(lse_ref.size(), 1.0);
      double zref = 0.0;
      for (i64 i = 0; i < rows; ++i) {
        double m = -INFINITY, sum = 0.0;
        for (i64 j = 0; j < cols; ++j) m = std::max(m, static_cast<double>(x[static_cast<std::size_t>(i * cols + j)]));
        for (i64 j = 0; j < cols; ++j) sum += std::exp(x[static_cast<std::size_t>(i * cols + j)] - m);
        lse_ref[static_cast<std::size_t>(i)] = m + std::log(sum);
        zref += lse_ref[static_cast<std::size_t>(i)] * lse_ref[static_cast<std::size_t>(i)];
      }
      zref /= static_cast<double>(rows);
      auto xd = dev(x), pd = dev(p), gd = dev(g0);
      auto lse = out(static_cast<std::size_t>(rows));
      auto z = dev(std::vector<double>(1, NAN));
      be->z_loss(engine::Pass::Forward, xd.get(), nullptr, lse.get(), z.get(), nullptr, rows, cols, 0.25f, 1.0f);
      const std::vector<float> l = lse.host();
      expect_close(l, lse_ref, mag, 1e-6, 1e-6, what + " log Z");
      EXPECT_NEAR(z.host()[0], zref, 1e-5 * zref) << what;
      be->z_loss(engine::Pass::Backward, nullptr, pd.get(), lse.get(), nullptr, gd.get(), rows, cols, 0.25f, 512.0f);
      const float f = 2.0f * 0.25f * 512.0f / static_cast<float>(rows);
      std::vector<float> want = g0;
      for (i64 i = 0; i < rows; ++i) {
        const float a = f * l[static_cast<std::size_t>(i)];
        for (i64 j = 0; j < cols; ++j) {
          const auto k = static_cast<std::size_t>(i * cols + j);
          const float prod = a * p[k];
          want[k] = want[k] + prod;
        }
      }
      expect_bit_equal(gd.host(), want, what + " backward");
    }
}

}  // namespace
