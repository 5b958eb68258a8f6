// The host table: every entry unpacks the ABI's arguments back to the
// engine's and calls the CPU backend. An exception becomes the status and
// one-line message a module would return.
#include "host_cuda_table.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>
#include <unordered_map>

#include "backend/backend.h"
#include "backend/cuda_backend.h"
#include "backend/cuda/step_math.cuh"
#include "backend/cuda_module.h"

// One queued entry: its work on the CPU backend, its arguments copied.
using HostCall = std::function<void(engine::Backend&)>;

// The host "context": the CPU backend that does the work, and what the
// module's context keeps for the step on the device (ABI 6): the step
// state the unscale and the optimizer read, and, while a capture runs,
// the calls recorded instead of run (the fake stream a graph replays).
struct PlCudaContext {
  std::unique_ptr<engine::Backend> cpu;
  // The pool's count, as a module keeps it: the live allocations and
  // their sum (memory_allocated reports it).
  std::unordered_map<void*, std::size_t> live;
  std::uint64_t live_bytes = 0;
  const PlCudaScaleState* step_state = nullptr;
  bool capturing = false;
  std::vector<HostCall> recording;
};

// A capture: the recorded calls, run in order at each launch.
struct PlCudaGraph {
  std::vector<HostCall> calls;
};

namespace {

using engine::Format;

Format fmt(PlCudaFormat f) {
  switch (f) {
    case PL_CUDA_FP16: return Format::FP16;
    case PL_CUDA_BF16: return Format::BF16;
    case PL_CUDA_E4M3: return Format::E4M3;
    case PL_CUDA_E5M2: return Format::E5M2;
    case PL_CUDA_FP32: return Format::FP32;
    case PL_CUDA_TF32: return Format::TF32;
  }
  throw std::invalid_argument("unknown PlCudaFormat " + std::to_string(static_cast<int>(f)));
}

Format block_fmt(PlCudaBlockFormat f) {
  switch (f) {
    case PL_CUDA_MXFP8: return Format::MXFP8;
    case PL_CUDA_MXFP8_E5M2: return Format::MXFP8_E5M2;
    case PL_CUDA_MXFP6: return Format::MXFP6;
    case PL_CUDA_MXFP6_E3M2: return Format::MXFP6_E3M2;
    case PL_CUDA_MXFP4: return Format::MXFP4;
    case PL_CUDA_NVFP4: return Format::NVFP4;
  }
  throw std::invalid_argument("unknown PlCudaBlockFormat");
}

engine::BlockLayout layout(PlCudaBlockLayout l) {
  switch (l) {
    case PL_CUDA_BLOCK_ROWS: return engine::BlockLayout::Rows;
    case PL_CUDA_BLOCK_COLUMNS: return engine::BlockLayout::Columns;
    case PL_CUDA_BLOCK_TILES: return engine::BlockLayout::Tiles;
  }
  throw std::invalid_argument("unknown PlCudaBlockLayout");
}

engine::ConvShape shape(const PlCudaConvShape* s) {
  engine::ConvShape c;
  c.n = s->n;
  c.c_in = s->c_in;
  c.h = s->h;
  c.w = s->w;
  c.c_out = s->c_out;
  c.kh = s->kh;
  c.kw = s->kw;
  c.stride = s->stride;
  c.pad = s->pad;
  return c;
}

const engine::BlockQuantized* eng(const PlCudaBlockQuantized* q) {
  return reinterpret_cast<const engine::BlockQuantized*>(q);
}

std::atomic<long long> g_calls{0};

// Runs `body` on the context's CPU backend; exceptions become a status.
// During a capture the body (which holds copies of its arguments) is
// recorded instead, as a captured stream records a kernel and its
// arguments: host memory it points to is read when the graph runs.
template <class Body>
PlCudaStatus run(PlCudaContext* ctx, char* message, std::size_t size, Body body) {
  g_calls.fetch_add(1, std::memory_order_relaxed);
  if (message && size) message[0] = '\0';
  if (!ctx) {
    if (message && size) std::snprintf(message, size, "context is null");
    return PL_CUDA_INVALID_ARGUMENT;
  }
  try {
    if (ctx->capturing) {
      ctx->recording.emplace_back(body);
      return PL_CUDA_OK;
    }
    body(*ctx->cpu);
    return PL_CUDA_OK;
  } catch (const std::invalid_argument& e) {
    if (message && size) std::snprintf(message, size, "%s", e.what());
    return PL_CUDA_INVALID_ARGUMENT;
  } catch (const std::bad_alloc&) {
    return PL_CUDA_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    if (message && size) std::snprintf(message, size, "%s", e.what());
    return PL_CUDA_ERROR;
  }
}

#define MSG char *message, std::size_t size
// The body copies its arguments ([=]): a recorded call outlives the entry.
#define RUN(ctx, ...) return run(ctx, message, size, [=](engine::Backend & be) { __VA_ARGS__; })
// What a module refuses during a capture (context.cuh's refuse_in_capture).
#define REFUSE_IN_CAPTURE(ctx, fn)                                                              \
  do {                                                                                          \
    if ((ctx) && (ctx)->capturing) {                                                            \
      if (message && size) std::snprintf(message, size, "%s: not during a capture", fn);        \
      return PL_CUDA_INVALID_ARGUMENT;                                                          \
    }                                                                                           \
  } while (0)

PlCudaStatus device_count(int* count, MSG) {
  (void)message, (void)size;
  *count = 1;
  return PL_CUDA_OK;
}
PlCudaStatus device_properties(int, PlCudaDeviceProperties* p, MSG) {
  (void)message, (void)size;
  std::memset(p, 0, sizeof *p);
  std::snprintf(p->name, sizeof p->name, "host table");
  p->compute_major = 9;
  return PL_CUDA_OK;
}
PlCudaStatus create_context(int, PlCudaContext** out, MSG) {
  (void)message, (void)size;
  *out = new PlCudaContext;
  (*out)->cpu = engine::make_cpu_backend(0);
  return PL_CUDA_OK;
}
PlCudaStatus destroy_context(PlCudaContext* ctx, MSG) {
  (void)message, (void)size;
  delete ctx;
  return PL_CUDA_OK;
}
PlCudaStatus synchronize(PlCudaContext* ctx, MSG) {
  REFUSE_IN_CAPTURE(ctx, "synchronize");
  RUN(ctx, (void)be);
}
PlCudaStatus memory_info(PlCudaContext* ctx, std::uint64_t* f, std::uint64_t* t, MSG) {
  RUN(ctx, (void)be; *f = 1u << 30; *t = 2u << 30);
}
PlCudaStatus allocate(PlCudaContext* ctx, std::size_t bytes, void** out, MSG) {
  REFUSE_IN_CAPTURE(ctx, "allocate");
  RUN(ctx, *out = be.allocate(bytes); ctx->live[*out] = bytes; ctx->live_bytes += bytes);
}
PlCudaStatus release(PlCudaContext* ctx, void* p, MSG) {
  REFUSE_IN_CAPTURE(ctx, "release");
  RUN(ctx, if (auto it = ctx->live.find(p); it != ctx->live.end()) {
    ctx->live_bytes -= it->second;
    ctx->live.erase(it);
  } be.release(p));
}
// A host query, as the module's: answered at once, also during a capture.
PlCudaStatus memory_allocated(PlCudaContext* ctx, std::uint64_t* live, MSG) {
  if (message && size) message[0] = '\0';
  if (!ctx || !live) return PL_CUDA_INVALID_ARGUMENT;
  *live = ctx->live_bytes;
  return PL_CUDA_OK;
}
PlCudaStatus upload(PlCudaContext* ctx, void* d, const void* s, std::size_t n, MSG) { RUN(ctx, be.upload(d, s, n)); }
PlCudaStatus download(PlCudaContext* ctx, void* d, const void* s, std::size_t n, MSG) {
  REFUSE_IN_CAPTURE(ctx, "download");
  RUN(ctx, be.download(d, s, n));
}
PlCudaStatus copy(PlCudaContext* ctx, void* d, const void* s, std::size_t n, MSG) { RUN(ctx, be.copy(d, s, n)); }
PlCudaStatus fill_zero(PlCudaContext* ctx, void* d, std::size_t n, MSG) { RUN(ctx, be.fill_zero(d, n)); }
PlCudaStatus convert(PlCudaContext* ctx, PlCudaFormat from, const void* src, PlCudaFormat to, void* dst,
                     std::int64_t n, std::int32_t sat, std::int32_t sr, std::uint64_t seed, std::uint64_t off, MSG) {
  RUN(ctx, engine::CastOptions o; o.saturate = sat != 0; o.stochastic = sr != 0; o.seed = seed; o.index_offset = off;
      be.convert(fmt(from), src, fmt(to), dst, n, o));
}
PlCudaStatus gemm(PlCudaContext* ctx, std::int64_t m, std::int64_t n, std::int64_t k, const void* a,
                  PlCudaFormat af, std::int32_t at, std::int64_t lda, const PlCudaBlockQuantized* ab, const void* b,
                  PlCudaFormat bf, std::int32_t bt, std::int64_t ldb, const PlCudaBlockQuantized* bb, float* c,
                  std::int64_t ldc, float alpha, float beta, const float* bias, PlCudaFormat acc,
                  const PlCudaGemmBatch* batch_arg, MSG) {
  // A host argument: copied, as the module copies it into its launch.
  const bool batched = batch_arg != nullptr;
  const PlCudaGemmBatch batch_copy = batched ? *batch_arg : PlCudaGemmBatch{};
  RUN(ctx, const PlCudaGemmBatch* batch = batched ? &batch_copy : nullptr; engine::GemmArgs g; g.m = m; g.n = n; g.k = k; g.a = {a, fmt(af), at != 0, lda, eng(ab)};
      g.b = {b, fmt(bf), bt != 0, ldb, eng(bb)}; g.c = c; g.ldc = ldc; g.alpha = alpha; g.beta = beta;
      g.bias = bias; g.accumulate = fmt(acc);
      if (batch) for (int i = 0; i < 2; ++i) {
        g.batch[i] = batch->count[i];
        g.a.batch_stride[i] = batch->a_stride[i];
        g.b.batch_stride[i] = batch->b_stride[i];
        g.c_batch_stride[i] = batch->c_stride[i];
      } be.gemm(g));
}
PlCudaStatus conv2d_forward(PlCudaContext* ctx, const PlCudaConvShape* s, PlCudaFormat f, const float* x,
                            const float* w, const float* bias, float* y, MSG) {
  const engine::ConvShape cs = shape(s);
  RUN(ctx, be.conv2d_forward(cs, fmt(f), x, w, bias, y));
}
PlCudaStatus conv2d_backward_data(PlCudaContext* ctx, const PlCudaConvShape* s, PlCudaFormat f, const float* dy,
                                  const float* w, float* dx, MSG) {
  const engine::ConvShape cs = shape(s);
  RUN(ctx, be.conv2d_backward_data(cs, fmt(f), dy, w, dx));
}
PlCudaStatus conv2d_backward_weights(PlCudaContext* ctx, const PlCudaConvShape* s, PlCudaFormat f, const float* x,
                                     const float* dy, float* dw, float* db, MSG) {
  const engine::ConvShape cs = shape(s);
  RUN(ctx, be.conv2d_backward_weights(cs, fmt(f), x, dy, dw, db));
}
PlCudaStatus maxpool2d_forward(PlCudaContext* ctx, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                               std::int64_t k, const float* x, float* y, std::int32_t* am, MSG) {
  RUN(ctx, be.maxpool2d_forward(n, c, h, w, k, x, y, am));
}
PlCudaStatus maxpool2d_backward(PlCudaContext* ctx, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                                std::int64_t k, const float* dy, const std::int32_t* am, float* dx, MSG) {
  RUN(ctx, be.maxpool2d_backward(n, c, h, w, k, dy, am, dx));
}
PlCudaStatus relu_forward(PlCudaContext* ctx, const float* x, float* y, std::int64_t n, MSG) {
  RUN(ctx, be.relu_forward(x, y, n));
}
PlCudaStatus relu_backward(PlCudaContext* ctx, const float* x, const float* dy, float* dx, std::int64_t n, MSG) {
  RUN(ctx, be.relu_backward(x, dy, dx, n));
}
PlCudaStatus gelu_forward(PlCudaContext* ctx, const float* x, float* y, std::int64_t n, MSG) {
  RUN(ctx, be.gelu_forward(x, y, n));
}
PlCudaStatus gelu_backward(PlCudaContext* ctx, const float* x, const float* dy, float* dx, std::int64_t n, MSG) {
  RUN(ctx, be.gelu_backward(x, dy, dx, n));
}
PlCudaStatus add(PlCudaContext* ctx, const float* a, const float* b, float* y, std::int64_t n, MSG) {
  RUN(ctx, be.add(a, b, y, n));
}
PlCudaStatus scale(PlCudaContext* ctx, float* x, float s, std::int64_t n, MSG) { RUN(ctx, be.scale(x, s, n)); }
PlCudaStatus fill(PlCudaContext* ctx, float* x, float v, std::int64_t n, MSG) { RUN(ctx, be.fill(x, v, n)); }
PlCudaStatus quantize(PlCudaContext* ctx, PlCudaFormat f, float* x, std::int64_t n, std::int32_t sat, MSG) {
  RUN(ctx, be.quantize(fmt(f), x, n, sat != 0));
}
PlCudaStatus count_nonfinite(PlCudaContext* ctx, const float* x, std::int64_t n, std::int64_t* c, MSG) {
  RUN(ctx, be.count_nonfinite(x, n, c));
}
PlCudaStatus amax(PlCudaContext* ctx, const float* x, std::int64_t n, float* out, MSG) { RUN(ctx, be.amax(x, n, out)); }
PlCudaStatus column_sums(PlCudaContext* ctx, const float* dy, std::int64_t r, std::int64_t c, float* db, MSG) {
  RUN(ctx, be.column_sums(dy, r, c, db));
}
PlCudaStatus error_sums(PlCudaContext* ctx, const float* a, const float* b, std::int64_t n, double* out, MSG) {
  RUN(ctx, be.error_sums(a, b, n, out));
}
PlCudaStatus layernorm_forward(PlCudaContext* ctx, const float* x, const float* g, const float* b, float* y,
                               float* mean, float* rstd, std::int64_t rows, std::int64_t cols, float eps,
                               PlCudaFormat acc, MSG) {
  RUN(ctx, be.layernorm_forward(x, g, b, y, mean, rstd, rows, cols, eps, fmt(acc)));
}
PlCudaStatus layernorm_backward(PlCudaContext* ctx, const float* dy, const float* x, const float* mean,
                                const float* rstd, const float* g, float* dx, float* dg, float* db, std::int64_t rows,
                                std::int64_t cols, MSG) {
  RUN(ctx, be.layernorm_backward(dy, x, mean, rstd, g, dx, dg, db, rows, cols));
}
PlCudaStatus softmax_forward(PlCudaContext* ctx, const float* x, float* y, std::int64_t r, std::int64_t c,
                             PlCudaFormat acc, MSG) {
  RUN(ctx, be.softmax_forward(x, y, r, c, fmt(acc)));
}
PlCudaStatus softmax_backward(PlCudaContext* ctx, const float* y, const float* dy, float* dx, std::int64_t r,
                              std::int64_t c, MSG) {
  RUN(ctx, be.softmax_backward(y, dy, dx, r, c));
}
PlCudaStatus cross_entropy_forward(PlCudaContext* ctx, const float* logits, const std::int32_t* labels,
                                   std::int64_t rows, std::int64_t classes, float* probs, double* loss,
                                   std::int64_t* correct, MSG) {
  RUN(ctx, be.cross_entropy_forward(logits, labels, rows, classes, probs, loss, correct));
}
PlCudaStatus cross_entropy_backward(PlCudaContext* ctx, const float* probs, const std::int32_t* labels,
                                    std::int64_t rows, std::int64_t classes, float s, float* dl, MSG) {
  // The step state's loss scale, read when the call runs (ABI 6).
  const PlCudaScaleState* state = ctx ? ctx->step_state : nullptr;
  RUN(ctx, be.cross_entropy_backward(probs, labels, rows, classes, state ? state->loss_scale : s, dl));
}
PlCudaStatus mse_forward(PlCudaContext* ctx, const float* p, const float* t, std::int64_t n, double* loss, MSG) {
  RUN(ctx, be.mse_forward(p, t, n, loss));
}
PlCudaStatus mse_backward(PlCudaContext* ctx, const float* p, const float* t, std::int64_t n, float s, float* dp,
                          MSG) {
  const PlCudaScaleState* state = ctx ? ctx->step_state : nullptr;
  RUN(ctx, be.mse_backward(p, t, n, state ? state->loss_scale : s, dp));
}
PlCudaStatus unscale_grads(PlCudaContext* ctx, const PlCudaGradBuffer* g, std::size_t count, float inv,
                           double* ss, MSG) {
  const std::vector<PlCudaGradBuffer> grads(g, g + count);
  const PlCudaScaleState* state = ctx ? ctx->step_state : nullptr;
  // The step state's 1/scale, read when the call runs (a replay reads the state as it is then).
  RUN(ctx, be.unscale_grads(reinterpret_cast<const engine::GradBuffer*>(grads.data()), count,
                            state ? state->inv_scale : inv, ss));
}
PlCudaStatus sgd_update(PlCudaContext* ctx, float* value, const float* grad, float* mom, std::int64_t n, float lr,
                        float momentum, float keep, float wd, std::int32_t nesterov, std::int32_t first,
                        PlCudaFormat sf, MSG) {
  const PlCudaScaleState* guard = ctx ? ctx->step_state : nullptr;
  RUN(ctx, if (!pl_cuda::step_math::step_taken(guard)) return; engine::SgdUpdate u; u.value = value; u.grad = grad; u.momentum_buf = mom; u.n = n;
      u.lr = pl_cuda::step_math::step_lr(guard, lr);
      u.momentum = momentum; u.keep = keep; u.weight_decay = wd; u.nesterov = nesterov != 0; u.first = first != 0;
      u.state_format = fmt(sf); be.sgd_update(u));
}
PlCudaStatus adam_update(PlCudaContext* ctx, float* value, const float* grad, float* m1, float* m2, std::int64_t n,
                         float step, float bc2, float omb1, float b2, float omb2, float eps, float l2, float shrink,
                         PlCudaFormat sf, MSG) {
  const PlCudaScaleState* guard = ctx ? ctx->step_state : nullptr;
  RUN(ctx, if (!pl_cuda::step_math::step_taken(guard)) return; engine::AdamUpdate u; u.value = value; u.grad = grad; u.exp_avg = m1; u.exp_avg_sq = m2; u.n = n;
      u.step_size = step; u.bc2_sqrt = bc2; u.one_minus_beta1 = omb1; u.beta2 = b2; u.one_minus_beta2 = omb2;
      u.eps = eps; u.l2 = l2; u.shrink = shrink; u.state_format = fmt(sf); be.adam_update(u));
}
PlCudaStatus scale_amax(PlCudaContext* ctx, const float* x, float s, float* y, std::int64_t n, float* amax, MSG) {
  RUN(ctx, be.scale_amax(x, s, y, n, amax));
}
PlCudaStatus block_quantize(PlCudaContext* ctx, PlCudaBlockFormat f, const float* src, float* dst, std::int64_t rows,
                            std::int64_t cols, PlCudaBlockLayout l, std::int32_t sr, std::uint64_t seed,
                            PlCudaBlockQuantized* info, MSG) {
  RUN(ctx, engine::BlockRounding r; r.stochastic = sr != 0; r.seed = seed;
      be.block_quantize(block_fmt(f), src, dst, rows, cols, layout(l), r,
                        reinterpret_cast<engine::BlockQuantized*>(info)));
}
PlCudaStatus gradient_census(PlCudaContext* ctx, const float* values, const float* own, const float* block,
                             std::int64_t n, double uf, double sub, double of, std::int32_t tie, double scale,
                             std::int32_t lo, std::int64_t* out, MSG) {
  RUN(ctx, engine::GradCensus c; c.values = values; c.own = own; c.block = block; c.n = n;
      c.thresholds.underflow = uf; c.thresholds.subnormal_hi = sub; c.thresholds.overflow = of;
      c.thresholds.tie_overflows = tie != 0; c.scale = scale; c.log2_lo = lo; c.out = out; be.gradient_census(c));
}
PlCudaStatus relu16_forward(PlCudaContext* ctx, PlCudaFormat f, const void* x, void* y, std::int64_t n, MSG) {
  RUN(ctx, be.relu16_forward(fmt(f), x, y, n));
}
PlCudaStatus relu16_backward(PlCudaContext* ctx, PlCudaFormat f, const void* x, PlCudaFormat g, const void* dy,
                             void* dx, std::int64_t n, MSG) {
  RUN(ctx, be.relu16_backward(fmt(f), x, fmt(g), dy, dx, n));
}
PlCudaStatus repeat_rows(PlCudaContext* ctx, const float* s, float* d, std::int64_t B, std::int64_t T,
                         std::int64_t C, MSG) {
  RUN(ctx, be.repeat_rows(s, d, B, T, C));
}
PlCudaStatus embedding(PlCudaContext* ctx, std::int32_t pass, const float* ids, const float* s, float* d,
                       std::int64_t n, std::int64_t v, std::int64_t c, MSG) {
  RUN(ctx, be.embedding(pass == 0 ? engine::Pass::Forward : engine::Pass::Backward, ids, s, d, n, v, c));
}
PlCudaStatus z_loss(PlCudaContext* ctx, std::int32_t pass, const float* x, const float* p, float* lse, double* z,
                    float* g, std::int64_t r, std::int64_t c, float coef, float scale, MSG) {
  RUN(ctx, be.z_loss(pass == 0 ? engine::Pass::Forward : engine::Pass::Backward, x, p, lse, z, g, r, c, coef, scale));
}
PlCudaStatus patchify(PlCudaContext* ctx, const float* x, float* p, std::int64_t B, std::int64_t C, std::int64_t H,
                      std::int64_t W, std::int64_t ps, MSG) {
  RUN(ctx, be.patchify(x, p, B, C, H, W, ps));
}
PlCudaStatus unpatchify(PlCudaContext* ctx, const float* p, float* x, std::int64_t B, std::int64_t C, std::int64_t H,
                        std::int64_t W, std::int64_t ps, MSG) {
  RUN(ctx, be.unpatchify(p, x, B, C, H, W, ps));
}
PlCudaStatus bias_add_channels(PlCudaContext* ctx, float* y, const float* b, std::int64_t n, std::int64_t c,
                               std::int64_t hw, MSG) {
  RUN(ctx, be.bias_add_channels(y, b, n, c, hw));
}
PlCudaStatus channel_sums(PlCudaContext* ctx, const float* dy, float* db, std::int64_t n, std::int64_t c,
                          std::int64_t hw, MSG) {
  RUN(ctx, be.channel_sums(dy, db, n, c, hw));
}
PlCudaStatus conv2d_block(PlCudaContext* ctx, std::int32_t kind, const PlCudaConvShape* s, const float* a,
                          const PlCudaBlockQuantized* ab, const float* b, const PlCudaBlockQuantized* bb,
                          const float* bias, float* out, MSG) {
  const engine::ConvShape cs = shape(s);
  RUN(ctx, engine::ConvBlockArgs x; x.kind = static_cast<engine::ConvBlockArgs::Kind>(kind); x.shape = cs;
      x.a = a; x.a_block = eng(ab); x.b = b; x.b_block = eng(bb); x.bias = bias; x.out = out;
      // The exactness flags live in the block info; a plain operand is not claimed exact.
      x.a_exact = false; x.b_exact = false; be.conv2d_block(x));
}

// ABI 6 (gpufuse): the module's composition (gemm into c, then convert),
// so the CUDA Backend's routing of GemmEncodeOp and its arguments are held
// to the other targets bit for bit; the counter says it was reached.
int g_gemm_encode_calls = 0;
int g_fused_calls = 0;  // scale_amax_encode, column_sums16 and pointwise_coded
PlCudaStatus gemm_encode(PlCudaContext* ctx, std::int64_t m, std::int64_t n, std::int64_t k, const void* a,
                         PlCudaFormat af, std::int32_t at, std::int64_t lda, const void* b, PlCudaFormat bf,
                         std::int32_t bt, std::int64_t ldb, float* c, float alpha, const float* bias,
                         PlCudaFormat df, void* d, std::int32_t sat, MSG) {
  ++g_gemm_encode_calls;
  RUN(ctx, engine::GemmArgs g; g.m = m; g.n = n; g.k = k; g.a = {a, fmt(af), at != 0, lda};
      g.b = {b, fmt(bf), bt != 0, ldb}; g.c = c; g.ldc = n; g.alpha = alpha; g.beta = 0.0f; g.bias = bias;
      g.accumulate = Format::FP32; be.gemm(g); engine::CastOptions o; o.saturate = sat != 0;
      be.convert(Format::FP32, c, fmt(df), d, m * n, o));
}

// FP8 delayed scaling's cast: the composition on the CPU backend (decode,
// scale_amax, convert, and the codes decoded where asked).
PlCudaStatus scale_amax_encode(PlCudaContext* ctx, PlCudaFormat xf, const void* x, std::int64_t n,
                               std::int32_t act, float scale,
                               PlCudaFormat qf, void* q, std::int32_t sat, std::int32_t sr, std::uint64_t seed,
                               std::uint64_t off, float* amax, float* decoded, MSG) {
  ++g_fused_calls;
  RUN(ctx, std::vector<float> xs(static_cast<std::size_t>(n)), ys(static_cast<std::size_t>(n));
      const float* x32 = static_cast<const float*>(x);
      if (xf != PL_CUDA_FP32) {
        be.convert(fmt(xf), x, Format::FP32, xs.data(), n, {});
        x32 = xs.data();
      } if (act != 0) {
        be.activation_forward(act == 1 ? engine::Activation::Relu : engine::Activation::Gelu, Format::FP32, x32,
                              ys.data(), n);
        x32 = ys.data();
      } be.scale_amax(x32, scale, ys.data(), n, amax);
      engine::CastOptions o; o.saturate = sat != 0; o.stochastic = sr != 0; o.seed = seed; o.index_offset = off;
      be.convert(Format::FP32, ys.data(), fmt(qf), q, n, o);
      if (decoded) be.convert(fmt(qf), q, Format::FP32, decoded, n, {}));
}
PlCudaStatus column_sums16(PlCudaContext* ctx, PlCudaFormat f, const void* dy, std::int64_t rows, std::int64_t cols,
                           float* db, MSG) {
  ++g_fused_calls;
  RUN(ctx, std::vector<float> s(static_cast<std::size_t>(rows * cols));
      be.convert(fmt(f), dy, Format::FP32, s.data(), rows * cols, {}); be.column_sums(s.data(), rows, cols, db));
}

// Pointwise ops on codes: decode, the core op, encode (the compositions).
PlCudaStatus pointwise_coded(PlCudaContext* ctx, std::int32_t op, PlCudaFormat fa, const void* a, PlCudaFormat fb,
                             const void* b, PlCudaFormat fy, void* y, std::int64_t n, std::int32_t sat,
                             std::int32_t sr, std::uint64_t seed, std::uint64_t off, MSG) {
  ++g_fused_calls;
  RUN(ctx, const auto un = static_cast<std::size_t>(n); std::vector<float> sa(un), sb(un), sy(un);
      be.convert(fmt(fa), a, Format::FP32, sa.data(), n, {});
      if (op != 0) be.convert(fmt(fb), b, Format::FP32, sb.data(), n, {});
      if (op == 0) be.activation_forward(engine::Activation::Gelu, Format::FP32, sa.data(), sy.data(), n);
      else if (op == 2) be.add(sa.data(), sb.data(), sy.data(), n);
      else be.activation_backward(op == 1 ? engine::Activation::Gelu : engine::Activation::Relu, Format::FP32,
                                  sa.data(), Format::FP32, sb.data(), sy.data(), n);
      engine::CastOptions o; o.saturate = sat != 0; o.stochastic = sr != 0; o.seed = seed; o.index_offset = off;
      be.convert(Format::FP32, sy.data(), fmt(fy), y, n, o));
}

// ---- ABI 6: the step on the device, over the host ----
PlCudaStatus update_scale(PlCudaContext* ctx, const std::int64_t* counts, std::int64_t count, std::int32_t mode,
                          double growth, double backoff, std::int64_t interval, PlCudaScaleState* state, MSG) {
  if (!state || (count > 0 && !counts) || interval < 1 || mode < 0 || mode > 2) {
    if (message && size) std::snprintf(message, size, "update_scale: bad argument");
    return PL_CUDA_INVALID_ARGUMENT;
  }
  // step.cu's kernel, one thread: the counts in order, then the update.
  const pl_cuda::step_math::ScaleRule rule{static_cast<PlCudaScaleMode>(mode), growth, backoff, interval};
  RUN(ctx, std::int64_t total = 0; std::vector<std::int64_t> host(static_cast<std::size_t>(count));
      if (count > 0) be.download(host.data(), counts, host.size() * sizeof(std::int64_t));
      for (std::int64_t c : host) total += c;
      PlCudaScaleState st; be.download(&st, state, sizeof st); pl_cuda::step_math::update_scale(rule, total, st);
      be.upload(state, &st, sizeof st));
}
PlCudaStatus set_step_state(PlCudaContext* ctx, const PlCudaScaleState* state, MSG) {
  (void)message, (void)size;
  if (!ctx) return PL_CUDA_INVALID_ARGUMENT;
  ctx->step_state = state;
  return PL_CUDA_OK;
}
PlCudaStatus capture_begin(PlCudaContext* ctx, MSG) {
  REFUSE_IN_CAPTURE(ctx, "capture_begin");
  if (!ctx) return PL_CUDA_INVALID_ARGUMENT;
  ctx->capturing = true;
  ctx->recording.clear();
  return PL_CUDA_OK;
}
PlCudaStatus capture_end(PlCudaContext* ctx, PlCudaGraph** graph, MSG) {
  if (!ctx || !graph || !ctx->capturing) {
    if (message && size) std::snprintf(message, size, "capture_end: no capture is running");
    return PL_CUDA_INVALID_ARGUMENT;
  }
  ctx->capturing = false;
  *graph = new PlCudaGraph{std::move(ctx->recording)};
  ctx->recording.clear();
  return PL_CUDA_OK;
}
PlCudaStatus graph_launch(PlCudaContext* ctx, PlCudaGraph* graph, MSG) {
  REFUSE_IN_CAPTURE(ctx, "graph_launch");
  if (!graph) return PL_CUDA_INVALID_ARGUMENT;
  const std::vector<HostCall>* calls = &graph->calls;
  RUN(ctx, for (const HostCall& c : *calls) c(be));
}
PlCudaStatus graph_destroy(PlCudaContext* ctx, PlCudaGraph* graph, MSG) {
  REFUSE_IN_CAPTURE(ctx, "graph_destroy");
  (void)message, (void)size;
  delete graph;
  return PL_CUDA_OK;
}
PlCudaStatus host_allocate(PlCudaContext* ctx, std::size_t bytes, void** out, MSG) {
  REFUSE_IN_CAPTURE(ctx, "host_allocate");
  (void)message, (void)size;
  *out = bytes ? std::aligned_alloc(64, (bytes + 63) / 64 * 64) : nullptr;
  return bytes && !*out ? PL_CUDA_OUT_OF_MEMORY : PL_CUDA_OK;
}
PlCudaStatus host_release(PlCudaContext* ctx, void* p, MSG) {
  REFUSE_IN_CAPTURE(ctx, "host_release");
  (void)message, (void)size;
  std::free(p);
  return PL_CUDA_OK;
}
PlCudaStatus download_async(PlCudaContext* ctx, void* d, const void* s, std::size_t n, MSG) {
  RUN(ctx, be.download(d, s, n));
}
// The host runs every call when it is made: a mark is passed at once.
PlCudaStatus record_mark(PlCudaContext* ctx, std::uint64_t* mark, MSG) {
  REFUSE_IN_CAPTURE(ctx, "record_mark");
  (void)message, (void)size;
  static std::atomic<std::uint64_t> next{0};
  *mark = next.fetch_add(1);
  return PL_CUDA_OK;
}
PlCudaStatus wait_mark(PlCudaContext* ctx, std::uint64_t, MSG) {
  REFUSE_IN_CAPTURE(ctx, "wait_mark");
  (void)message, (void)size;
  return PL_CUDA_OK;
}

#undef RUN
#undef MSG

const PlCudaBackendTable kTable = {
    .abi_version = PL_CUDA_ABI_VERSION,
    .table_size = sizeof(PlCudaBackendTable),
    .device_count = device_count,
    .device_properties = device_properties,
    .create_context = create_context,
    .destroy_context = destroy_context,
    .synchronize = synchronize,
    .memory_info = memory_info,
    .allocate = allocate,
    .release = release,
    .upload = upload,
    .download = download,
    .copy = copy,
    .fill_zero = fill_zero,
    .convert = convert,
    .gemm = gemm,
    .conv2d_forward = conv2d_forward,
    .conv2d_backward_data = conv2d_backward_data,
    .conv2d_backward_weights = conv2d_backward_weights,
    .maxpool2d_forward = maxpool2d_forward,
    .maxpool2d_backward = maxpool2d_backward,
    .relu_forward = relu_forward,
    .relu_backward = relu_backward,
    .gelu_forward = gelu_forward,
    .gelu_backward = gelu_backward,
    .add = add,
    .scale = scale,
    .fill = fill,
    .quantize = quantize,
    .count_nonfinite = count_nonfinite,
    .amax = amax,
    .column_sums = column_sums,
    .error_sums = error_sums,
    .layernorm_forward = layernorm_forward,
    .layernorm_backward = layernorm_backward,
    .softmax_forward = softmax_forward,
    .softmax_backward = softmax_backward,
    .cross_entropy_forward = cross_entropy_forward,
    .cross_entropy_backward = cross_entropy_backward,
    .mse_forward = mse_forward,
    .mse_backward = mse_backward,
    .unscale_grads = unscale_grads,
    .sgd_update = sgd_update,
    .adam_update = adam_update,
    .scale_amax = scale_amax,
    .block_quantize = block_quantize,
    .gradient_census = gradient_census,
    .relu16_forward = relu16_forward,
    .relu16_backward = relu16_backward,
    .repeat_rows = repeat_rows,
    .patchify = patchify,
    .unpatchify = unpatchify,
    .bias_add_channels = bias_add_channels,
    .channel_sums = channel_sums,
    .conv2d_block = conv2d_block,
    .embedding = embedding,
    .z_loss = z_loss,
    .gemm_encode = gemm_encode,
    .scale_amax_encode = scale_amax_encode,
    .column_sums16 = column_sums16,
    .pointwise_coded = pointwise_coded,
    .memory_allocated = memory_allocated,
    .update_scale = update_scale,
    .set_step_state = set_step_state,
    .capture_begin = capture_begin,
    .capture_end = capture_end,
    .graph_launch = graph_launch,
    .graph_destroy = graph_destroy,
    .host_allocate = host_allocate,
    .host_release = host_release,
    .download_async = download_async,
    .record_mark = record_mark,
    .wait_mark = wait_mark,
};

}  // namespace

int host_table_gemm_encode_calls() { return g_gemm_encode_calls; }
int host_table_fused_cast_calls() { return g_fused_calls; }

long long host_table_calls() { return g_calls.load(std::memory_order_relaxed); }

std::unique_ptr<engine::Backend> make_host_table_cuda_backend() {
  PlCudaContext* ctx = nullptr;
  create_context(0, &ctx, nullptr, 0);
  return engine::make_cuda_backend_over(kTable, ctx, "host table");
}
