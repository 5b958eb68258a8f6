// bench_ops: where one training step's time goes, op by op. A decorator over
// the CPU backend times every Backend call (wall clock, the calling thread)
// during N steps of one model and recipe, and prints each op's share of the
// step, GEMMs split by shape and operand formats. What a perf profile cannot
// say (oneDNN's JIT code has no symbols, libgomp's spinning hides which op
// waits) this says directly. Not a benchmark of record: bench_train is.
//
//   build/release/tests/bench/bench_ops mlp mixed-bf16 [steps] [cpu|cpu-unfused|cpu-no-bf16|cuda|cuda-sync] [--trace]
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
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/registry.h"
#include "data/dataset.h"
#include "numeric/format.h"
#include "train/run.h"
#include "train/run_config.h"

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
  void upload(void* d, const void* s, std::size_t b) override { PL_TIMED("upload", m_in->upload(d, s, b)); }
  void download(void* d, const void* s, std::size_t b) override { PL_TIMED("download", m_in->download(d, s, b)); }
  void copy(void* d, const void* s, std::size_t b) override { PL_TIMED("copy " + std::to_string(b) + " bytes", m_in->copy(d, s, b)); }
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
  void scale_amax_encode(const float* x, float s, engine::Format f, void* q, std::int64_t n,
                         const engine::CastOptions& o, float* a, float* scratch) override {
    PL_TIMED("scale_amax_encode " + std::string(engine::format_name(f)) + " " + std::to_string(n),
             m_in->scale_amax_encode(x, s, f, q, n, o, a, scratch));
  }
  void scale_amax_encode16(engine::Format from, const void* x, float s, engine::Format f, void* q, std::int64_t n,
                           const engine::CastOptions& o, float* a, float* scratch) override {
    PL_TIMED("scale_amax_encode16 " + std::string(engine::format_name(from)) + "->" + engine::format_name(f) + " " +
                 std::to_string(n),
             m_in->scale_amax_encode16(from, x, s, f, q, n, o, a, scratch));
  }
  void scale_amax_encode_sums(engine::Format from, const void* x, std::int64_t rows, std::int64_t cols, float s,
                              engine::Format f, void* q, const engine::CastOptions& o, float* a, float* db,
                              float* scratch) override {
    PL_TIMED("scale_amax_encode_sums " + std::string(engine::format_name(from)) + "->" + engine::format_name(f) + " " +
                 std::to_string(rows * cols),
             m_in->scale_amax_encode_sums(from, x, rows, cols, s, f, q, o, a, db, scratch));
  }
  void scale_amax_encode_planes(const float* x, std::int64_t n, std::int64_t c, std::int64_t hw, float s,
                                engine::Format f, void* q, const engine::CastOptions& o, float* a, float* decoded,
                                float* db, float* scratch) override {
    PL_TIMED("scale_amax_encode_planes " + std::string(engine::format_name(f)) + " " + std::to_string(n * c * hw) +
                 (decoded ? " +decode" : "") + (db ? " +sums" : ""),
             m_in->scale_amax_encode_planes(x, n, c, hw, s, f, q, o, a, decoded, db, scratch));
  }
  void fill(float* x, float v, std::int64_t n) override { PL_TIMED("fill", m_in->fill(x, v, n)); }
  void unscale_grads(const engine::GradBuffer* g, std::size_t c, float s, double* q) override {
    PL_TIMED("unscale_grads", m_in->unscale_grads(g, c, s, q));
  }
  void sgd_update(const engine::SgdUpdate& u) override { PL_TIMED("sgd_update", m_in->sgd_update(u)); }
  void unscale_grads_coded(const engine::GradBuffer* g, const engine::GradCodes* c, std::size_t n, float s,
                           double* q) override {
    PL_TIMED("unscale_grads_coded", m_in->unscale_grads_coded(g, c, n, s, q));
  }
  void sgd_update_coded(const engine::SgdUpdate& u, const engine::UpdateEncode& e) override {
    PL_TIMED(std::string("sgd_update_coded ") + engine::format_name(e.format), m_in->sgd_update_coded(u, e));
  }
  void sgd_update_encode(const engine::SgdUpdate& u, const engine::UpdateEncode& e) override {
    PL_TIMED(std::string("sgd_update ->") + engine::format_name(e.format), m_in->sgd_update_encode(u, e));
  }
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
  void gemm_encode(const engine::GemmArgs& a, const engine::GemmEncode& e) override {
    const std::string tail = std::string(e.codes ? " ->" : " round ") + engine::format_name(e.format);
    PL_TIMED(gemm_key(a, tail.c_str()), m_in->gemm_encode(a, e));
  }
  bool attention_forward(const engine::AttentionForward& f) override {
    bool done = false;
    time_call("attention_forward " + std::string(engine::format_name(f.format)), [&] { done = m_in->attention_forward(f); });
    return done;
  }
  bool attention_backward(const engine::AttentionBackward& f) override {
    bool done = false;
    time_call("attention_backward " + std::string(engine::format_name(f.format)), [&] { done = m_in->attention_backward(f); });
    return done;
  }
  // PL_TIMED for a call whose result the caller needs.
  template <class F>
  void time_call(const std::string& name, F&& call) {
    PL_TIMED(name, call());
  }
  void conv2d_forward(const engine::ConvShape& s, engine::Format c, const float* x, const float* w,
                      const float* b, float* y) override {
    PL_TIMED("conv2d_forward c_in " + std::to_string(s.c_in) + " " + engine::format_name(c), m_in->conv2d_forward(s, c, x, w, b, y));
  }
  void conv2d_backward_data(const engine::ConvShape& s, engine::Format c, const float* dy, const float* w,
                            float* dx) override {
    PL_TIMED("conv2d_backward_data c_in " + std::to_string(s.c_in) + " " + engine::format_name(c), m_in->conv2d_backward_data(s, c, dy, w, dx));
  }
  void conv2d_backward_weights(const engine::ConvShape& s, engine::Format c, const float* x, const float* dy,
                               float* dw, float* db) override {
    PL_TIMED("conv2d_backward_weights c_in " + std::to_string(s.c_in) + " " + engine::format_name(c), m_in->conv2d_backward_weights(s, c, x, dy, dw, db));
  }
  bool conv2d_forward_coded(const engine::ConvShape& s, engine::Format c, engine::ConvInput x, const float* w,
                            const float* b, float* y) override {
    bool done = false;
    time_call("conv2d_forward c_in " + std::to_string(s.c_in) + " " + engine::format_name(c) + " from " +
                  engine::format_name(x.format),
              [&] { done = m_in->conv2d_forward_coded(s, c, x, w, b, y); });
    return done;
  }
  bool conv2d_backward_data_coded(const engine::ConvShape& s, engine::Format c, engine::ConvInput dy, const float* w,
                                  float* dx) override {
    bool done = false;
    time_call("conv2d_backward_data c_in " + std::to_string(s.c_in) + " " + engine::format_name(c) + " from " +
                  engine::format_name(dy.format),
              [&] { done = m_in->conv2d_backward_data_coded(s, c, dy, w, dx); });
    return done;
  }
  bool conv2d_backward_weights_coded(const engine::ConvShape& s, engine::Format c, engine::ConvInput x,
                                     engine::ConvInput dy, float* dw, float* db) override {
    bool done = false;
    time_call("conv2d_backward_weights c_in " + std::to_string(s.c_in) + " " + engine::format_name(c) + " from " +
                  engine::format_name(x.format) + "/" + engine::format_name(dy.format),
              [&] { done = m_in->conv2d_backward_weights_coded(s, c, x, dy, dw, db); });
    return done;
  }
  void conv2d_block(const engine::ConvBlockArgs& a) override { PL_TIMED("conv2d_block", m_in->conv2d_block(a)); }
  void bias_add_channels(float* y, const float* b, std::int64_t n, std::int64_t c, std::int64_t hw) override {
    PL_TIMED("bias_add_channels", m_in->bias_add_channels(y, b, n, c, hw));
  }
  void scale_bias_add_channels(float* y, float a, const float* b, std::int64_t n, std::int64_t c,
                               std::int64_t hw) override {
    PL_TIMED("scale_bias_add_channels", m_in->scale_bias_add_channels(y, a, b, n, c, hw));
  }
  void channel_sums(const float* dy, float* db, std::int64_t n, std::int64_t c, std::int64_t hw) override {
    PL_TIMED("channel_sums", m_in->channel_sums(dy, db, n, c, hw));
  }
  void maxpool2d_forward(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                         const float* x, float* y, std::int32_t* am) override {
    PL_TIMED("maxpool2d_forward", m_in->maxpool2d_forward(n, c, h, w, k, x, y, am));
  }
  void maxpool2d_forward16(engine::Format f, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                           std::int64_t k, const void* x, void* y, std::int32_t* am, float* x32,
                           float* y32) override {
    PL_TIMED("maxpool2d_forward16 " + std::string(engine::format_name(f)),
             m_in->maxpool2d_forward16(f, n, c, h, w, k, x, y, am, x32, y32));
  }
  void maxpool2d_backward(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                          const float* dy, const std::int32_t* am, float* dx) override {
    PL_TIMED("maxpool2d_backward", m_in->maxpool2d_backward(n, c, h, w, k, dy, am, dx));
  }
  void relu_forward(const float* x, float* y, std::int64_t n) override {
    PL_TIMED("relu_forward", m_in->relu_forward(x, y, n));
  }
  void relu_backward(const float* x, const float* dy, float* dx, std::int64_t n) override {
    PL_TIMED("relu_backward " + std::to_string(n), m_in->relu_backward(x, dy, dx, n));
  }
  void relu16_forward(engine::Format f, const void* x, void* y, std::int64_t n) override {
    PL_TIMED("relu16_forward", m_in->relu16_forward(f, x, y, n));
  }
  void relu16_backward(engine::Format f, const void* x, engine::Format g, const void* dy, void* dx,
                       std::int64_t n) override {
    PL_TIMED("relu16_backward", m_in->relu16_backward(f, x, g, dy, dx, n));
  }
  void gelu_forward(const float* x, float* y, std::int64_t n) override {
    PL_TIMED("gelu_forward", m_in->gelu_forward(x, y, n));
  }
  void gelu16_forward(engine::Format f, const void* x, void* y, std::int64_t n, float* sx, float* sy) override {
    PL_TIMED("gelu16_forward " + std::string(engine::format_name(f)), m_in->gelu16_forward(f, x, y, n, sx, sy));
  }
  void gelu16_backward(engine::Format f, const void* x, engine::Format g, const void* dy, void* dx, std::int64_t n,
                       float* sx, float* sdy, float* sdx) override {
    PL_TIMED("gelu16_backward " + std::string(engine::format_name(g)),
             m_in->gelu16_backward(f, x, g, dy, dx, n, sx, sdy, sdx));
  }
  void gelu_backward(const float* x, const float* dy, float* dx, std::int64_t n) override {
    PL_TIMED("gelu_backward", m_in->gelu_backward(x, dy, dx, n));
  }
  void repeat_rows(const float* s, float* d, std::int64_t B, std::int64_t T, std::int64_t C) override {
    PL_TIMED("repeat_rows", m_in->repeat_rows(s, d, B, T, C));
  }
  void add(const float* a, const float* b, float* y, std::int64_t n) override { PL_TIMED("add", m_in->add(a, b, y, n)); }
  void add_encode(engine::Format fa, const void* a, engine::Format fb, const void* b, engine::Format fy, void* y,
                  std::int64_t n, const engine::CastOptions& o, float* sa, float* sb, float* sy) override {
    PL_TIMED("add_encode " + std::string(engine::format_name(fy)) + " " + std::to_string(n),
             m_in->add_encode(fa, a, fb, b, fy, y, n, o, sa, sb, sy));
  }
  void scale(float* x, float s, std::int64_t n) override { PL_TIMED("scale", m_in->scale(x, s, n)); }
  void quantize(engine::Format f, float* x, std::int64_t n, bool sat) override {
    PL_TIMED("quantize " + std::string(engine::format_name(f)) + " " + std::to_string(n), m_in->quantize(f, x, n, sat));
  }
  void count_nonfinite(const float* x, std::int64_t n, std::int64_t* c) override {
    PL_TIMED("count_nonfinite", m_in->count_nonfinite(x, n, c));
  }
  void amax(const float* x, std::int64_t n, float* o) override { PL_TIMED("amax", m_in->amax(x, n, o)); }
  void column_sums16(engine::Format f, const void* dy, std::int64_t r, std::int64_t c, float* db,
                     float* scratch) override {
    PL_TIMED("column_sums16 " + std::string(engine::format_name(f)), m_in->column_sums16(f, dy, r, c, db, scratch));
  }
  void layernorm_coded_forward(engine::Format fx, const void* x, const float* g, const float* b, engine::Format fy,
                           void* y, float* mean, float* rstd, std::int64_t r, std::int64_t c, float eps,
                           const engine::CastOptions& opt, float* sx, float* sy) override {
    PL_TIMED("layernorm_coded_forward " + std::string(engine::format_name(fy)),
             m_in->layernorm_coded_forward(fx, x, g, b, fy, y, mean, rstd, r, c, eps, opt, sx, sy));
  }
  void layernorm_backward_add(engine::Format fdy, const void* dy, engine::Format fx, const void* x, const float* mean,
                              const float* rstd, const float* g, const float* r, float* dx, engine::Format fc,
                              void* codes, float* dg, float* db, std::int64_t rows, std::int64_t cols, float* sdy,
                              float* sx) override {
    PL_TIMED("layernorm_backward_add" + std::string(codes ? " ->" : "") + (codes ? engine::format_name(fc) : ""),
             m_in->layernorm_backward_add(fdy, dy, fx, x, mean, rstd, g, r, dx, fc, codes, dg, db, rows, cols, sdy, sx));
  }
  void layernorm_coded_backward(engine::Format fdy, const void* dy, engine::Format fx, const void* x, const float* mean,
                            const float* rstd, const float* g, engine::Format fdx, void* dx, float* dg, float* db,
                            std::int64_t r, std::int64_t c, float* sdy, float* sx, float* sdx) override {
    PL_TIMED("layernorm_coded_backward " + std::string(engine::format_name(fdx)),
             m_in->layernorm_coded_backward(fdy, dy, fx, x, mean, rstd, g, fdx, dx, dg, db, r, c, sdy, sx, sdx));
  }
  void column_sums(const float* dy, std::int64_t r, std::int64_t c, float* db) override {
    PL_TIMED("column_sums", m_in->column_sums(dy, r, c, db));
  }
  void patchify(const float* x, float* p, std::int64_t B, std::int64_t C, std::int64_t H, std::int64_t W,
                std::int64_t ps) override {
    PL_TIMED("patchify", m_in->patchify(x, p, B, C, H, W, ps));
  }
  void unpatchify(const float* p, float* x, std::int64_t B, std::int64_t C, std::int64_t H, std::int64_t W,
                  std::int64_t ps) override {
    PL_TIMED("unpatchify", m_in->unpatchify(p, x, B, C, H, W, ps));
  }
  void layernorm_forward(const float* x, const float* g, const float* b, float* y, float* m, float* r,
                         std::int64_t rows, std::int64_t cols, float eps, engine::Format acc) override {
    PL_TIMED("layernorm_forward", m_in->layernorm_forward(x, g, b, y, m, r, rows, cols, eps, acc));
  }
  void layernorm_backward(const float* dy, const float* x, const float* m, const float* r, const float* g,
                          float* dx, float* dg, float* db, std::int64_t rows, std::int64_t cols) override {
    PL_TIMED("layernorm_backward", m_in->layernorm_backward(dy, x, m, r, g, dx, dg, db, rows, cols));
  }
  void softmax_forward(const float* x, float* y, std::int64_t r, std::int64_t c, engine::Format acc) override {
    PL_TIMED("softmax_forward", m_in->softmax_forward(x, y, r, c, acc));
  }
  void gelu_backward_coded(const float* x, engine::Format g, const void* dy, float* dx, std::int64_t n,
                           float* sdy) override {
    PL_TIMED("gelu_backward_coded " + std::string(engine::format_name(g)), m_in->gelu_backward_coded(x, g, dy, dx, n, sdy));
  }
  void relu_backward_coded(const float* x, engine::Format g, const void* dy, float* dx, std::int64_t n,
                           float* sdy) override {
    PL_TIMED("relu_backward_coded " + std::string(engine::format_name(g)), m_in->relu_backward_coded(x, g, dy, dx, n, sdy));
  }
  void gelu_forward_encode(const float* x, std::int64_t n, float s, engine::Format f, void* q,
                           const engine::CastOptions& o, float* a, float* scratch) override {
    PL_TIMED("gelu_forward_encode " + std::string(engine::format_name(f)),
             m_in->gelu_forward_encode(x, n, s, f, q, o, a, scratch));
  }
  void relu_forward_encode(const float* x, std::int64_t n, float s, engine::Format f, void* q,
                           const engine::CastOptions& o, float* a, float* scratch) override {
    PL_TIMED("relu_forward_encode " + std::string(engine::format_name(f)),
             m_in->relu_forward_encode(x, n, s, f, q, o, a, scratch));
  }
  void softmax_coded_forward(engine::Format fx, const void* x, float* y, std::int64_t r, std::int64_t c,
                             float* sx) override {
    PL_TIMED("softmax_coded_forward " + std::string(engine::format_name(fx)),
             m_in->softmax_coded_forward(fx, x, y, r, c, sx));
  }
  void softmax_coded_backward(const float* y, engine::Format fdy, const void* dy, float* dx, std::int64_t r,
                              std::int64_t c, float* sdy) override {
    PL_TIMED("softmax_coded_backward " + std::string(engine::format_name(fdy)),
             m_in->softmax_coded_backward(y, fdy, dy, dx, r, c, sdy));
  }
  void softmax_backward(const float* y, const float* dy, float* dx, std::int64_t r, std::int64_t c) override {
    PL_TIMED("softmax_backward", m_in->softmax_backward(y, dy, dx, r, c));
  }
  void cross_entropy_forward(const float* l, const std::int32_t* lab, std::int64_t r, std::int64_t c, float* p,
                             double* loss, std::int64_t* correct) override {
    PL_TIMED("cross_entropy_forward", m_in->cross_entropy_forward(l, lab, r, c, p, loss, correct));
  }
  void cross_entropy_backward(const float* p, const std::int32_t* lab, std::int64_t r, std::int64_t c, float s,
                              float* d) override {
    PL_TIMED("cross_entropy_backward", m_in->cross_entropy_backward(p, lab, r, c, s, d));
  }
  void mse_forward(const float* p, const float* t, std::int64_t n, double* loss) override {
    PL_TIMED("mse_forward", m_in->mse_forward(p, t, n, loss));
  }
  void mse_backward(const float* p, const float* t, std::int64_t n, float s, float* d) override {
    PL_TIMED("mse_backward", m_in->mse_backward(p, t, n, s, d));
  }
#undef PL_TIMED

 private:
  std::unique_ptr<engine::Backend> m_in;
  float m_sink = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const bool trace = argc > 3 && std::string(argv[argc - 1]) == "--trace";
  if (trace) --argc;
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_ops MODEL RECIPE [STEPS] [cpu|cpu-unfused|cpu-no-bf16|cuda|cuda-sync] [--trace]\n");
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
  std::shared_ptr<const engine::DatasetPair> data;
  try {
    data = std::make_shared<const engine::DatasetPair>(engine::load_dataset(c.dataset, 0));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_ops: %s\n", e.what());
    return 1;
  }
  const std::string backend = argc > 4 ? argv[4] : "cpu";
  std::unique_ptr<engine::Backend> inner;
  try {
    if (backend == "cpu-unfused" || backend == "cpu-no-bf16") {
      engine::CpuBackendOptions o;
      o.fuse_attention = backend != "cpu-unfused";
      o.allow_native_bf16 = backend != "cpu-no-bf16";
      inner = std::make_unique<engine::CpuBackend>(o);
    } else {
      inner = engine::make_backend(backend == "cuda-sync" ? "cuda" : backend).backend;
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
  const auto t0 = Clock::now();
  for (int i = 0; i < steps; ++i) {
    out.clear();
    run.step(out);
  }
  const double total = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<std::pair<std::string, Tally>> rows(be.tallies.begin(), be.tallies.end());
  std::sort(rows.begin(), rows.end(), [](auto& x, auto& y) { return x.second.seconds > y.second.seconds; });
  double in_ops = 0;
  for (auto& [k, t] : rows) in_ops += t.seconds;
  std::printf("%s %s: %.1f us per step (%.0f samples/s); %.1f%% inside backend ops\n", argv[1], argv[2],
              total / steps * 1e6, steps * 128.0 / total, 100.0 * in_ops / total);
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
