// bench_ops: where one training step's time goes, op by op. A decorator over
// the CPU backend times every Backend call (wall clock, the calling thread)
// during N steps of one model and recipe, and prints each op's share of the
// step, GEMMs split by shape and operand formats. What a perf profile cannot
// say (oneDNN's JIT code has no symbols, libgomp's spinning hides which op
// waits) this says directly. Not a benchmark of record: bench_train is.
//
//   build/release/tests/bench/bench_ops mlp mixed-bf16 [steps] [cpu|cpu-unfused|cpu-no-bf16|cuda|cuda-sync] [--trace]
//   [--threads=N] (the CPU backend's threads; default every core)
//   (gpt: the baby shape at batch 32 on the Jargon File, as bench_train's gpt rows)
//
// --trace then lists one more step's calls in order, each with its time:
// which op feeds which, for finding passes to fuse.
//
// "cpu-unfused" is the CPU backend with its fused attention kernels off
// (CpuBackendOptions::fuse_attention): the layers run attention's ops one
// by one, for comparing the two. "cpu-no-bf16" is the CPU backend without
// its native bf16 kernels (CpuBackendOptions::allow_native_bf16): BF16 and
// FP8 GEMMs decode to f32, as on a CPU without AVX512-BF16.
//
// On the GPU, "cuda" times what each call costs the calling thread (the
// launches are asynchronous: a call that waits for the device or allocates
// shows here), "cuda-sync" waits for the device after every call, so each
// op's time is its own (plus one synchronization, about 10 us).
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/fused.h"
#include "backend/registry.h"
#include "data/dataset.h"
#include "numeric/format.h"
#include "train/run.h"
#include "train/run_config.h"
#include "gpt_baby.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Tally {
  double seconds = 0;
  long calls = 0;
};

class TimingBackend final : public engine::Backend {
 public:
  explicit TimingBackend(std::unique_ptr<engine::Backend> inner) : m_in(std::move(inner)) {}
  std::map<std::string, Tally> tallies;
  bool on = false;
  // --trace: every call of one step, in order.
  std::vector<std::pair<std::string, double>>* trace = nullptr;
  // cuda-sync: a word of backend memory read back after every timed call.
  void* sync_flag = nullptr;

  engine::BackendInfo info() const override { return m_in->info(); }

#define PL_TIMED(name, call)                                                         \
  do {                                                                               \
    if (!on) {                                                                       \
      call;                                                                          \
      return;                                                                        \
    }                                                                                \
    const auto t0 = Clock::now();                                                    \
    call;                                                                            \
    if (sync_flag) m_in->download(&m_sink, sync_flag, sizeof m_sink);                \
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();      \
    if (trace) {                                                                     \
      trace->emplace_back(name, dt);                                                 \
      return;                                                                        \
    }                                                                                \
    Tally& tl = tallies[name];                                                       \
    tl.seconds += dt;                                                                \
    ++tl.calls;                                                                      \
  } while (0)

  void* allocate(std::size_t b) override { return m_in->allocate(b); }
  void release(void* p) noexcept override { m_in->release(p); }
  void upload_rows(void* d, const void* h, std::size_t rb, const std::uint32_t* r, std::size_t c) override {
    PL_TIMED("upload_rows", m_in->upload_rows(d, h, rb, r, c));
  }
  void fill_zero(void* d, std::size_t b) override { PL_TIMED("fill_zero", m_in->fill_zero(d, b)); }
  void convert(engine::Format f, const void* s, engine::Format to, void* d, std::int64_t n,
               const engine::CastOptions& o) override {
    PL_TIMED("convert " + std::string(engine::format_name(f)) + "->" + engine::format_name(to) + " " + std::to_string(n),
             m_in->convert(f, s, to, d, n, o));
  }
  void block_quantize(engine::Format f, const float* s, float* d, std::int64_t r, std::int64_t c,
                      engine::BlockLayout l, const engine::BlockRounding& ro, engine::BlockQuantized* i) override {
    PL_TIMED("block_quantize", m_in->block_quantize(f, s, d, r, c, l, ro, i));
  }
  void scale_amax(const float* x, float s, float* y, std::int64_t n, float* a) override {
    PL_TIMED("scale_amax " + std::to_string(n) + (x == y ? " in place" : ""), m_in->scale_amax(x, s, y, n, a));
  }
  void fill(float* x, float v, std::int64_t n) override { PL_TIMED("fill", m_in->fill(x, v, n)); }
  void unscale_grads(const engine::GradBuffer* g, std::size_t c, float s, double* q) override {
    PL_TIMED("unscale_grads", m_in->unscale_grads(g, c, s, q));
  }
  void sgd_update(const engine::SgdUpdate& u) override { PL_TIMED("sgd_update", m_in->sgd_update(u)); }
  void adam_update(const engine::AdamUpdate& u) override { PL_TIMED("adam_update", m_in->adam_update(u)); }
  void gradient_census(const engine::GradCensus& c) override {
    PL_TIMED("gradient_census", m_in->gradient_census(c));
  }
  void error_sums(const float* a, const float* b, std::int64_t n, double* o) override {
    PL_TIMED("error_sums", m_in->error_sums(a, b, n, o));
  }
  static std::string gemm_key(const engine::GemmArgs& a, const char* tail) {
    char key[180];
    std::snprintf(key, sizeof key, "gemm %lldx%lldx%lld%s %s%s*%s%s%s%s%s", static_cast<long long>(a.m),
                  static_cast<long long>(a.n), static_cast<long long>(a.k),
                  a.batched() ? (" b" + std::to_string(a.batch[0] * a.batch[1])).c_str() : "",
                  engine::format_name(a.a.format), a.a.trans ? "'" : "", engine::format_name(a.b.format),
                  a.b.trans ? "'" : "", a.beta != 0 ? " +C" : "", a.bias ? " +bias" : "", tail);
    return key;
  }
  void gemm(const engine::GemmArgs& a) override { PL_TIMED(gemm_key(a, ""), m_in->gemm(a)); }
  // PL_TIMED for a call whose result the caller needs.
  template <class F>
  void time_call(const std::string& name, F&& call) {
    PL_TIMED(name, call());
  }
  void conv2d_block(const engine::ConvBlockArgs& a) override { PL_TIMED("conv2d_block", m_in->conv2d_block(a)); }
  void bias_add_channels(float* y, const float* b, std::int64_t n, std::int64_t c, std::int64_t hw) override {
    PL_TIMED("bias_add_channels", m_in->bias_add_channels(y, b, n, c, hw));
  }
  void channel_sums(const float* dy, float* db, std::int64_t n, std::int64_t c, std::int64_t hw) override {
    PL_TIMED("channel_sums", m_in->channel_sums(dy, db, n, c, hw));
  }
  void z_loss(engine::Pass pass, const float* x, const float* p, float* lse, double* z, float* g, std::int64_t r,
              std::int64_t c, float coef, float scale) override {
    PL_TIMED("z_loss", m_in->z_loss(pass, x, p, lse, z, g, r, c, coef, scale));
  }
  void embedding(engine::Pass pass, const float* ids, const float* s, float* d, std::int64_t n, std::int64_t v,
                 std::int64_t c) override {
    PL_TIMED("embedding", m_in->embedding(pass, ids, s, d, n, v, c));
  }
  void repeat_rows(const float* s, float* d, std::int64_t B, std::int64_t T, std::int64_t C) override {
    PL_TIMED("repeat_rows", m_in->repeat_rows(s, d, B, T, C));
  }
  void add(const float* a, const float* b, float* y, std::int64_t n) override { PL_TIMED("add", m_in->add(a, b, y, n)); }
  void scale(float* x, float s, std::int64_t n) override { PL_TIMED("scale", m_in->scale(x, s, n)); }
  void quantize(engine::Format f, float* x, std::int64_t n, bool sat) override {
    PL_TIMED("quantize " + std::string(engine::format_name(f)) + " " + std::to_string(n), m_in->quantize(f, x, n, sat));
  }
  void count_nonfinite(const float* x, std::int64_t n, std::int64_t* c) override {
    PL_TIMED("count_nonfinite", m_in->count_nonfinite(x, n, c));
  }
  void amax(const float* x, std::int64_t n, float* o) override { PL_TIMED("amax", m_in->amax(x, n, o)); }
  void column_sums(const float* dy, std::int64_t r, std::int64_t c, float* db) override {
    PL_TIMED("column_sums", m_in->column_sums(dy, r, c, db));
  }
  // --- the merged core ops, under the names of their passes ---
  void transfer(engine::Transfer dir, void* d, const void* s, std::size_t b) override {
    if (dir == engine::Transfer::Upload) PL_TIMED("upload", m_in->upload(d, s, b));
    else if (dir == engine::Transfer::Download) PL_TIMED("download", m_in->download(d, s, b));
    else PL_TIMED("copy " + std::to_string(b) + " bytes", m_in->copy(d, s, b));
  }
  void conv2d(const engine::ConvArgs& a) override {
    static const char* const kNames[] = {"conv2d_forward", "conv2d_backward_data", "conv2d_backward_weights"};
    PL_TIMED(std::string(kNames[static_cast<int>(a.kind)]) + " c_in " + std::to_string(a.shape.c_in) + " " +
                 engine::format_name(a.compute),
             m_in->conv2d(a));
  }
  void maxpool2d(engine::Pass pass, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                 const float* in, float* out, std::int32_t* am) override {
    PL_TIMED(pass == engine::Pass::Forward ? "maxpool2d_forward" : "maxpool2d_backward",
             m_in->maxpool2d(pass, n, c, h, w, k, in, out, am));
  }
  static std::string activation_key(engine::Activation act, engine::Format f, const char* pass) {
    return std::string(act == engine::Activation::Relu ? "relu" : "gelu") + (f == engine::Format::FP32 ? "" : "16") +
           pass;
  }
  void activation_forward(engine::Activation act, engine::Format f, const void* x, void* y, std::int64_t n) override {
    PL_TIMED(activation_key(act, f, "_forward"), m_in->activation_forward(act, f, x, y, n));
  }
  void activation_backward(engine::Activation act, engine::Format f, const void* x, engine::Format g, const void* dy,
                           void* dx, std::int64_t n) override {
    PL_TIMED(activation_key(act, f, "_backward") + (act == engine::Activation::Relu && f == engine::Format::FP32
                                                         ? " " + std::to_string(n)
                                                         : ""),
             m_in->activation_backward(act, f, x, g, dy, dx, n));
  }
  void patch_layout(engine::Pass pass, const float* src, float* dst, std::int64_t B, std::int64_t C, std::int64_t H,
                    std::int64_t W, std::int64_t ps) override {
    PL_TIMED(pass == engine::Pass::Forward ? "patchify" : "unpatchify",
             m_in->patch_layout(pass, src, dst, B, C, H, W, ps));
  }
  void layernorm(const engine::LayerNormArgs& a) override {
    PL_TIMED(a.pass == engine::Pass::Forward ? "layernorm_forward" : "layernorm_backward", m_in->layernorm(a));
  }
  void softmax(engine::Pass pass, const float* in, const float* dy, float* out, std::int64_t r, std::int64_t c,
               engine::Format acc) override {
    PL_TIMED(pass == engine::Pass::Forward ? "softmax_forward" : "softmax_backward",
             m_in->softmax(pass, in, dy, out, r, c, acc));
  }
  void loss_forward(const engine::LossArgs& a) override {
    PL_TIMED(a.kind == engine::LossKind::Mse ? "mse_forward" : "cross_entropy_forward", m_in->loss_forward(a));
  }
  void loss_backward(const engine::LossArgs& a) override {
    PL_TIMED(a.kind == engine::LossKind::Mse ? "mse_backward" : "cross_entropy_backward", m_in->loss_backward(a));
  }

  // --- fused ops: the inner backend's fast path, else the op's composition
  // on the inner backend, timed as one call (attention and the coded
  // convolutions, which have no composition, time the offer) ---
  bool run_fused(const engine::FusedOp& op) override {
    bool done = false;
    time_call(fused_key(op), [&] { done = m_in->run_fused(op) || engine::fused::compose(*m_in, op); });
    return done;
  }
  static std::string fused_key(const engine::FusedOp& op) {
    using namespace engine::fused;
    using engine::format_name;
    return std::visit(
        [](const auto& o) -> std::string {
          using Op = std::decay_t<decltype(o)>;
          const std::string name = o.name;
          if constexpr (std::is_same_v<Op, GemmEncodeOp>) {
            const std::string tail = std::string(o.e.codes ? " ->" : " round ") + format_name(o.e.format);
            return gemm_key(o.args, tail.c_str());
          } else if constexpr (std::is_same_v<Op, AttentionForwardOp> || std::is_same_v<Op, AttentionBackwardOp>) {
            return name + " " + format_name(o.a.format);
          } else if constexpr (std::is_same_v<Op, Conv2dForwardCodedOp>) {
            return "conv2d_forward c_in " + std::to_string(o.s.c_in) + " " + format_name(o.compute) + " from " +
                   format_name(o.x.format);
          } else if constexpr (std::is_same_v<Op, Conv2dBackwardDataCodedOp>) {
            return "conv2d_backward_data c_in " + std::to_string(o.s.c_in) + " " + format_name(o.compute) + " from " +
                   format_name(o.dy.format);
          } else if constexpr (std::is_same_v<Op, Conv2dBackwardWeightsCodedOp>) {
            return "conv2d_backward_weights c_in " + std::to_string(o.s.c_in) + " " + format_name(o.compute) +
                   " from " + format_name(o.x.format) + "/" + format_name(o.dy.format);
          } else if constexpr (std::is_same_v<Op, SgdUpdateEncodeOp>) {
            return std::string("sgd_update ->") + format_name(o.e.format);
          } else if constexpr (std::is_same_v<Op, SgdUpdateCodedOp>) {
            return name + " " + format_name(o.e.format);
          } else if constexpr (std::is_same_v<Op, ScaleAmaxEncodeOp>) {
            return name + " " + format_name(o.f) + " " + std::to_string(o.n);
          } else if constexpr (std::is_same_v<Op, ScaleAmaxEncode16Op>) {
            return name + " " + format_name(o.from) + "->" + format_name(o.f) + " " + std::to_string(o.n);
          } else if constexpr (std::is_same_v<Op, ScaleAmaxEncodeSumsOp>) {
            return name + " " + format_name(o.from) + "->" + format_name(o.f) + " " + std::to_string(o.rows * o.cols);
          } else if constexpr (std::is_same_v<Op, ScaleAmaxEncodePlanesOp>) {
            return name + " " + format_name(o.f) + " " + std::to_string(o.n * o.c * o.hw) +
                   (o.decoded ? " +decode" : "") + (o.db ? " +sums" : "");
          } else if constexpr (std::is_same_v<Op, ActivationBackwardCodedOp>) {
            return std::string(o.act == engine::Activation::Relu ? "relu" : "gelu") + "_backward_coded " +
                   format_name(o.g);
          } else if constexpr (std::is_same_v<Op, ActivationForwardEncodeOp>) {
            return std::string(o.act == engine::Activation::Relu ? "relu" : "gelu") + "_forward_encode " +
                   format_name(o.f);
          } else if constexpr (std::is_same_v<Op, AddEncodeOp>) {
            return name + " " + format_name(o.fy) + " " + std::to_string(o.n);
          } else if constexpr (std::is_same_v<Op, MaxPoolForward16Op> || std::is_same_v<Op, Gelu16ForwardOp> ||
                               std::is_same_v<Op, ColumnSums16Op>) {
            return name + " " + format_name(o.f);
          } else if constexpr (std::is_same_v<Op, Gelu16BackwardOp>) {
            return name + " " + format_name(o.g);
          } else if constexpr (std::is_same_v<Op, LayerNormCodedForwardOp>) {
            return name + " " + format_name(o.fy);
          } else if constexpr (std::is_same_v<Op, LayerNormCodedBackwardOp>) {
            return name + " " + format_name(o.fdx);
          } else if constexpr (std::is_same_v<Op, LayerNormBackwardAddOp>) {
            return name + (o.codes ? std::string(" ->") + format_name(o.fc) : std::string());
          } else if constexpr (std::is_same_v<Op, SoftmaxCodedForwardOp>) {
            return name + " " + format_name(o.fx);
          } else if constexpr (std::is_same_v<Op, SoftmaxCodedBackwardOp>) {
            return name + " " + format_name(o.fdy);
          } else {
            return name;
          }
        },
        op.op);
  }
#undef PL_TIMED

 private:
  std::unique_ptr<engine::Backend> m_in;
  float m_sink = 0;
};

}  // namespace

int main(int argc, char** argv) {
  // --threads=N (anywhere): the CPU backend on N threads (default: every core).
  int threads = 0;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]).rfind("--threads=", 0) == 0) threads = std::atoi(argv[i] + 10);
    else argv[kept++] = argv[i];
  }
  argc = kept;
  const bool trace = argc > 3 && std::string(argv[argc - 1]) == "--trace";
  if (trace) --argc;
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_ops MODEL RECIPE [STEPS] [cpu|cpu-unfused|cpu-no-bf16|cuda|cuda-sync] [--trace] [--threads=N]\n");
    return 2;
  }
  const int steps = argc > 3 ? std::atoi(argv[3]) : 300;
  engine::RunConfig c;
  c.model = argv[1];
  c.recipe = argv[2];
  c.dataset = "fashion-mnist";
  c.batch = 128;
  c.epochs = 1000;
  c.seed = 0;
  if (c.model == "gpt") bench::set_gpt_baby(c);  // the baby shape, batch 32, on the Jargon File
  std::shared_ptr<const engine::DatasetPair> data;
  try {
    data = c.model == "gpt" ? bench::gpt_text()
                            : std::make_shared<const engine::DatasetPair>(engine::load_dataset(c.dataset, 0));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_ops: %s\n", e.what());
    return 1;
  }
  const std::string backend = argc > 4 ? argv[4] : "cpu";
  std::unique_ptr<engine::Backend> inner;
  try {
    if (backend == "cpu-unfused" || backend == "cpu-no-bf16") {
      engine::CpuBackendOptions o;
      o.threads = threads;
      o.fuse_attention = backend != "cpu-unfused";
      o.allow_native_bf16 = backend != "cpu-no-bf16";
      inner = std::make_unique<engine::CpuBackend>(o);
    } else {
      inner = engine::make_backend(backend == "cuda-sync" ? "cuda" : backend, threads).backend;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_ops: backend %s: %s\n", backend.c_str(), e.what());
    return 1;
  }
  TimingBackend be(std::move(inner));
  if (backend == "cuda-sync") be.sync_flag = be.allocate(sizeof(float));
  engine::Run run(0, c, data, be);
  std::vector<engine::Record> out;
  for (int i = 0; i < 5; ++i) run.step(out);
  be.on = true;
  // The process's CPU time too: on a machine shared with other work, one
  // thread's CPU time per step is what the code costs, the wall time also
  // what the neighbours took.
  const std::clock_t cpu0 = std::clock();
  const auto t0 = Clock::now();
  for (int i = 0; i < steps; ++i) {
    out.clear();
    run.step(out);
  }
  const double total = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu = static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
  std::vector<std::pair<std::string, Tally>> rows(be.tallies.begin(), be.tallies.end());
  std::sort(rows.begin(), rows.end(), [](auto& x, auto& y) { return x.second.seconds > y.second.seconds; });
  double in_ops = 0;
  for (auto& [k, t] : rows) in_ops += t.seconds;
  std::printf("%s %s: %.1f us per step (%.0f samples/s); %.1f%% inside backend ops; CPU time %.1f us per step\n",
              argv[1], argv[2], total / steps * 1e6, steps * static_cast<double>(c.batch) / total, 100.0 * in_ops / total,
              cpu / steps * 1e6);
  for (auto& [k, t] : rows)
    std::printf("  %7.1f us %5.1f%%  x%-4.1f %s\n", t.seconds / steps * 1e6, 100.0 * t.seconds / total,
                static_cast<double>(t.calls) / steps, k.c_str());
  if (trace) {
    std::vector<std::pair<std::string, double>> calls;
    be.trace = &calls;
    out.clear();
    run.step(out);
    be.trace = nullptr;
    std::printf("one step's calls in order:\n");
    for (const auto& [k, t] : calls) std::printf("  %7.1f us  %s\n", t * 1e6, k.c_str());
  }
  return 0;
}
