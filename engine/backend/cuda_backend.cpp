// The CUDA Backend: each engine::Backend op is one call of the module's
// table on this backend's context. Formats and structs are mapped to the
// ABI's here; the module validates arguments and reports CUDA errors as
// one line, which this file throws as std::runtime_error.
#include "backend/cuda_backend.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/lt_epilogue.h"
#include "backend/cuda_module.h"
#include "backend/fused.h"
#include "backend/cuda_step.h"

namespace engine {

namespace {

static_assert(sizeof(BlockQuantized) == sizeof(PlCudaBlockQuantized) &&
                  offsetof(BlockQuantized, tensor_decode) == offsetof(PlCudaBlockQuantized, tensor_decode) &&
                  offsetof(BlockQuantized, bf16_exact) == offsetof(PlCudaBlockQuantized, bf16_exact) &&
                  sizeof(bool) == sizeof(std::uint8_t),
              "engine::BlockQuantized must have PlCudaBlockQuantized's layout");
static_assert(sizeof(GradBuffer) == sizeof(PlCudaGradBuffer) &&
                  offsetof(GradBuffer, data) == offsetof(PlCudaGradBuffer, data) &&
                  offsetof(GradBuffer, n) == offsetof(PlCudaGradBuffer, n) &&
                  offsetof(GradBuffer, nonfinite) == offsetof(PlCudaGradBuffer, nonfinite),
              "engine::GradBuffer must have PlCudaGradBuffer's layout");

const PlCudaBlockQuantized* abi(const BlockQuantized* q) { return reinterpret_cast<const PlCudaBlockQuantized*>(q); }

// The table entries the backend calls, by name, for the "not built" check.
std::vector<std::pair<const char*, const void*>> entries(const PlCudaBackendTable& t) {
  return {
      {"gemm", reinterpret_cast<const void*>(t.gemm)},
      {"conv2d_forward", reinterpret_cast<const void*>(t.conv2d_forward)},
      {"conv2d_backward_data", reinterpret_cast<const void*>(t.conv2d_backward_data)},
      {"conv2d_backward_weights", reinterpret_cast<const void*>(t.conv2d_backward_weights)},
      {"maxpool2d_forward", reinterpret_cast<const void*>(t.maxpool2d_forward)},
      {"maxpool2d_backward", reinterpret_cast<const void*>(t.maxpool2d_backward)},
      {"relu_forward", reinterpret_cast<const void*>(t.relu_forward)},
      {"relu_backward", reinterpret_cast<const void*>(t.relu_backward)},
      {"gelu_forward", reinterpret_cast<const void*>(t.gelu_forward)},
      {"gelu_backward", reinterpret_cast<const void*>(t.gelu_backward)},
      {"add", reinterpret_cast<const void*>(t.add)},
      {"scale", reinterpret_cast<const void*>(t.scale)},
      {"fill", reinterpret_cast<const void*>(t.fill)},
      {"quantize", reinterpret_cast<const void*>(t.quantize)},
      {"count_nonfinite", reinterpret_cast<const void*>(t.count_nonfinite)},
      {"amax", reinterpret_cast<const void*>(t.amax)},
      {"column_sums", reinterpret_cast<const void*>(t.column_sums)},
      {"error_sums", reinterpret_cast<const void*>(t.error_sums)},
      {"layernorm_forward", reinterpret_cast<const void*>(t.layernorm_forward)},
      {"layernorm_backward", reinterpret_cast<const void*>(t.layernorm_backward)},
      {"softmax_forward", reinterpret_cast<const void*>(t.softmax_forward)},
      {"softmax_backward", reinterpret_cast<const void*>(t.softmax_backward)},
      {"cross_entropy_forward", reinterpret_cast<const void*>(t.cross_entropy_forward)},
      {"cross_entropy_backward", reinterpret_cast<const void*>(t.cross_entropy_backward)},
      {"mse_forward", reinterpret_cast<const void*>(t.mse_forward)},
      {"mse_backward", reinterpret_cast<const void*>(t.mse_backward)},
      {"unscale_grads", reinterpret_cast<const void*>(t.unscale_grads)},
      {"sgd_update", reinterpret_cast<const void*>(t.sgd_update)},
      {"adam_update", reinterpret_cast<const void*>(t.adam_update)},
      {"scale_amax", reinterpret_cast<const void*>(t.scale_amax)},
      {"block_quantize", reinterpret_cast<const void*>(t.block_quantize)},
      {"gradient_census", reinterpret_cast<const void*>(t.gradient_census)},
      {"relu16_forward", reinterpret_cast<const void*>(t.relu16_forward)},
      {"relu16_backward", reinterpret_cast<const void*>(t.relu16_backward)},
      {"repeat_rows", reinterpret_cast<const void*>(t.repeat_rows)},
      {"patchify", reinterpret_cast<const void*>(t.patchify)},
      {"unpatchify", reinterpret_cast<const void*>(t.unpatchify)},
      {"bias_add_channels", reinterpret_cast<const void*>(t.bias_add_channels)},
      {"channel_sums", reinterpret_cast<const void*>(t.channel_sums)},
      {"conv2d_block", reinterpret_cast<const void*>(t.conv2d_block)},
      {"embedding", reinterpret_cast<const void*>(t.embedding)},
      {"z_loss", reinterpret_cast<const void*>(t.z_loss)},
  };
}

PlCudaFormat fmt(Format f) {
  PlCudaFormat out{};
  if (!cuda_format(f, out))
    throw std::invalid_argument(std::string("cuda backend: ") + format_name(f) + " is not a tensor format");
  return out;
}

PlCudaBlockFormat block_fmt(Format f) {
  switch (f) {
    case Format::MXFP8: return PL_CUDA_MXFP8;
    case Format::MXFP8_E5M2: return PL_CUDA_MXFP8_E5M2;
    case Format::MXFP6: return PL_CUDA_MXFP6;
    case Format::MXFP6_E3M2: return PL_CUDA_MXFP6_E3M2;
    case Format::MXFP4: return PL_CUDA_MXFP4;
    case Format::NVFP4: return PL_CUDA_NVFP4;
    default: break;
  }
  throw std::invalid_argument(std::string("cuda backend: ") + format_name(f) + " is not a block format");
}

PlCudaBlockLayout block_layout(BlockLayout l) {
  switch (l) {
    case BlockLayout::Rows: return PL_CUDA_BLOCK_ROWS;
    case BlockLayout::Columns: return PL_CUDA_BLOCK_COLUMNS;
    case BlockLayout::Tiles: return PL_CUDA_BLOCK_TILES;
  }
  return PL_CUDA_BLOCK_ROWS;
}

PlCudaConvShape shape_of(const ConvShape& s) {
  return {s.n, s.c_in, s.h, s.w, s.c_out, s.kh, s.kw, s.stride, s.pad};
}

class CudaBackend final : public Backend, public CudaStepControl {
 public:
  CudaBackend(const PlCudaBackendTable& table, PlCudaContext* ctx, const CudaDeviceInfo& device)
      : t(table), m_ctx(ctx), m_device(device) {}
  ~CudaBackend() override {
    char message[256] = {};
    for (const Staging& st : m_pinned) t.host_release(m_ctx, st.host, message, sizeof message);
    t.destroy_context(m_ctx, message, sizeof message);
  }
  // ABI 6's entries are all there (cuda_step_control).
  bool has_step_entries() const {
    return t.update_scale && t.set_step_state && t.capture_begin && t.capture_end && t.graph_launch &&
           t.graph_destroy && t.host_allocate && t.host_release && t.download_async && t.record_mark && t.wait_mark;
  }

  // --- CudaStepControl (cuda_step.h) ---
  void update_scale(const std::int64_t* counts, std::int64_t count, PlCudaScaleMode mode, double growth_factor,
                    double backoff_factor, std::int64_t growth_interval, PlCudaScaleState* state) override {
    call("update_scale", t.update_scale, m_ctx, counts, count, static_cast<std::int32_t>(mode), growth_factor,
         backoff_factor, growth_interval, state);
  }
  void set_step_state(const PlCudaScaleState* state) override {
    call("set_step_state", t.set_step_state, m_ctx, state);
  }
  void capture_begin() override {
    call("capture_begin", t.capture_begin, m_ctx);
    m_capturing = true;
  }
  PlCudaGraph* capture_end() override {
    m_capturing = false;
    PlCudaGraph* g = nullptr;
    call("capture_end", t.capture_end, m_ctx, &g);
    return g;
  }
  void graph_launch(PlCudaGraph* graph) override { call("graph_launch", t.graph_launch, m_ctx, graph); }
  void graph_destroy(PlCudaGraph* graph) noexcept override {
    char message[256] = {};
    t.graph_destroy(m_ctx, graph, message, sizeof message);
  }
  void* host_allocate(std::size_t bytes) override {
    void* p = nullptr;
    call("host_allocate", t.host_allocate, m_ctx, bytes, &p);
    return p;
  }
  void host_release(void* p) noexcept override {
    char message[256] = {};
    t.host_release(m_ctx, p, message, sizeof message);
  }
  void download_async(void* host_dst, const void* src, std::size_t bytes) override {
    call("download_async", t.download_async, m_ctx, host_dst, src, bytes);
  }
  std::uint64_t record_mark() override {
    std::uint64_t m = 0;
    call("record_mark", t.record_mark, m_ctx, &m);
    return m;
  }
  void wait_mark(std::uint64_t mark) override { call("wait_mark", t.wait_mark, m_ctx, mark); }
  void set_gather_only(bool on) override { m_gather_only = on; }

  BackendInfo info() const override {
    BackendInfo i;
    i.name = "cuda";
    i.device = m_device.label();
    i.native_bf16 = m_device.compute_major >= 8;
    i.threads = 1;
    return i;
  }
  bool device_memory(std::uint64_t& free_bytes, std::uint64_t& total_bytes) override {
    call("memory_info", t.memory_info, m_ctx, &free_bytes, &total_bytes);
    return true;
  }
  // gpupeer: the pool's live bytes; -1 from a module without the entry or
  // a context without a pool.
  std::int64_t allocated_bytes() override {
    if (!t.memory_allocated) return -1;
    std::uint64_t live = 0;
    call("memory_allocated", t.memory_allocated, m_ctx, &live);
    return live == UINT64_MAX ? -1 : static_cast<std::int64_t>(live);
  }

  // --- memory ---
  void* allocate(std::size_t bytes) override {
    void* p = nullptr;
    char message[512] = {};
    const PlCudaStatus s = t.allocate(m_ctx, bytes == 0 ? 1 : bytes, &p, message, sizeof message);
    if (s == PL_CUDA_OUT_OF_MEMORY) throw std::bad_alloc();
    if (s != PL_CUDA_OK) throw std::runtime_error(std::string("cuda allocate: ") + message);
    return p;
  }
  void release(void* p) noexcept override {
    char message[256] = {};
    t.release(m_ctx, p, message, sizeof message);
  }
  // --- the merged core ops, each to its table entry ---
  void transfer(Transfer dir, void* dst, const void* src, std::size_t bytes) override {
    switch (dir) {
      case Transfer::Upload: upload(dst, src, bytes); break;
      case Transfer::Download: download(dst, src, bytes); break;
      case Transfer::Copy: copy(dst, src, bytes); break;
    }
  }
  void conv2d(const ConvArgs& a) override {
    switch (a.kind) {
      case ConvKind::Forward: conv2d_forward(a.shape, a.compute, a.a, a.b, a.bias, a.out); break;
      case ConvKind::BackwardData: conv2d_backward_data(a.shape, a.compute, a.a, a.b, a.out); break;
      case ConvKind::BackwardWeights: conv2d_backward_weights(a.shape, a.compute, a.a, a.b, a.out, a.db); break;
    }
  }
  void maxpool2d(Pass pass, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                 const float* in, float* out, std::int32_t* argmax) override {
    if (pass == Pass::Forward) maxpool2d_forward(n, c, h, w, k, in, out, argmax);
    else maxpool2d_backward(n, c, h, w, k, in, argmax, out);
  }
  void activation_forward(Activation act, Format f, const void* x, void* y, std::int64_t n) override {
    if (f != Format::FP32) {
      if (act != Activation::Relu) throw std::invalid_argument("activation_forward: GELU on codes is a fused op");
      relu16_forward(f, x, y, n);
    } else if (act == Activation::Relu) {
      relu_forward(static_cast<const float*>(x), static_cast<float*>(y), n);
    } else {
      gelu_forward(static_cast<const float*>(x), static_cast<float*>(y), n);
    }
  }
  void activation_backward(Activation act, Format f, const void* x, Format g, const void* dy, void* dx,
                           std::int64_t n) override {
    if (f != Format::FP32) {
      if (act != Activation::Relu) throw std::invalid_argument("activation_backward: GELU on codes is a fused op");
      relu16_backward(f, x, g, dy, dx, n);
    } else if (act == Activation::Relu) {
      relu_backward(static_cast<const float*>(x), static_cast<const float*>(dy), static_cast<float*>(dx), n);
    } else {
      gelu_backward(static_cast<const float*>(x), static_cast<const float*>(dy), static_cast<float*>(dx), n);
    }
  }
  void patch_layout(Pass pass, const float* src, float* dst, std::int64_t B, std::int64_t C, std::int64_t H,
                    std::int64_t W, std::int64_t p) override {
    if (pass == Pass::Forward) patchify(src, dst, B, C, H, W, p);
    else unpatchify(src, dst, B, C, H, W, p);
  }
  void layernorm(const LayerNormArgs& a) override {
    if (a.pass == Pass::Forward)
      layernorm_forward(a.x, a.gamma, a.beta, a.y, a.mean, a.rstd, a.rows, a.cols, a.eps, a.accumulate);
    else
      layernorm_backward(a.dy, a.x, a.mean, a.rstd, a.gamma, a.dx, a.dgamma, a.dbeta, a.rows, a.cols);
  }
  void softmax(Pass pass, const float* in, const float* dy, float* out, std::int64_t rows, std::int64_t cols,
               Format accumulate) override {
    if (pass == Pass::Forward) softmax_forward(in, out, rows, cols, accumulate);
    else softmax_backward(in, dy, out, rows, cols);
  }
  void loss_forward(const LossArgs& a) override {
    if (a.kind == LossKind::CrossEntropy)
      cross_entropy_forward(a.pred, a.labels, a.rows, a.cols, a.probs, a.loss, a.correct);
    else
      mse_forward(a.pred, a.target, a.rows * a.cols, a.loss);
  }
  void loss_backward(const LossArgs& a) override {
    if (a.kind == LossKind::CrossEntropy)
      cross_entropy_backward(a.probs, a.labels, a.rows, a.cols, a.scale, a.grad);
    else
      mse_backward(a.pred, a.target, a.rows * a.cols, a.scale, a.grad);
  }

  // --- fused ops the module runs natively (ABI 6, gpufuse); every other op,
  // or a module without the entry, takes the op's composition ---
  bool run_fused(const FusedOp& op) override {
    if (const auto* o = std::get_if<fused::GemmEncodeOp>(&op.op)) return gemm_encode(*o);
    if (const auto* o = std::get_if<fused::ScaleAmaxEncodeOp>(&op.op))
      return scale_amax_encode(Format::FP32, o->x, o->n, o->scale, o->f, o->q, o->opt, o->amax, nullptr);
    if (const auto* o = std::get_if<fused::ScaleAmaxEncode16Op>(&op.op))
      return is_half_format(o->from) &&
             scale_amax_encode(o->from, o->x, o->n, o->scale, o->f, o->q, o->opt, o->amax, nullptr);
    if (const auto* o = std::get_if<fused::ScaleAmaxEncodeSumsOp>(&op.op)) {
      // The cast in one pass, then the column sums of the unscaled values
      // (FP16/BF16 codes read as they are: column_sums16 below).
      if (o->from != Format::FP32 && !is_half_format(o->from)) return false;
      if (!scale_amax_encode(o->from, o->x, o->rows * o->cols, o->scale, o->f, o->q, o->opt, o->amax, nullptr))
        return false;
      if (o->from == Format::FP32) column_sums(static_cast<const float*>(o->x), o->rows, o->cols, o->db);
      else fused::column_sums16(*this, o->from, o->x, o->rows, o->cols, o->db, o->scratch);
      return true;
    }
    if (const auto* o = std::get_if<fused::ScaleAmaxEncodePlanesOp>(&op.op)) {
      const std::int64_t size = o->n * o->c * o->hw;
      if (o->decoded && overlaps(o->decoded, size * 4, o->x, size * 4)) return false;
      if (!scale_amax_encode(Format::FP32, o->x, size, o->scale, o->f, o->q, o->opt, o->amax, o->decoded))
        return false;
      if (o->db) channel_sums(o->x, o->db, o->n, o->c, o->hw);
      return true;
    }
    if (const auto* o = std::get_if<fused::ActivationForwardEncodeOp>(&op.op))
      return scale_amax_encode(Format::FP32, o->x, o->n, o->scale, o->f, o->q, o->opt, o->amax, nullptr,
                               o->act == Activation::Relu ? 1 : 2);
    if (const auto* o = std::get_if<fused::Gelu16ForwardOp>(&op.op))
      return pointwise_coded(0, o->f, o->x, Format::FP32, nullptr, o->f, o->y, o->n, {});
    if (const auto* o = std::get_if<fused::Gelu16BackwardOp>(&op.op))
      return pointwise_coded(1, o->f, o->x, o->g, o->dy, o->g, o->dx, o->n, {});
    if (const auto* o = std::get_if<fused::ActivationBackwardCodedOp>(&op.op))
      return pointwise_coded(o->act == Activation::Relu ? 3 : 1, Format::FP32, o->x, o->g, o->dy, Format::FP32, o->dx,
                             o->n, {});
    if (const auto* o = std::get_if<fused::AddEncodeOp>(&op.op))
      return pointwise_coded(2, o->fa, o->a, o->fb, o->b, o->fy, o->y, o->n, o->opt);
    if (const auto* o = std::get_if<fused::ColumnSums16Op>(&op.op)) {
      if (!t.column_sums16 || !is_half_format(o->f)) return false;
      call("column_sums16", t.column_sums16, m_ctx, fmt(o->f), o->dy, o->rows, o->cols, o->db);
      return true;
    }
    return false;
  }
  // One pass of the module over codes (pointwise_coded's op), false where
  // the composition must run instead: no entry, a format outside the ABI,
  // or y a shifted view of an input.
  bool pointwise_coded(std::int32_t op, Format fa, const void* a, Format fb, const void* b, Format fy, void* y,
                       std::int64_t n, const CastOptions& opt) {
    PlCudaFormat pa{}, pb{}, py{};
    if (!t.pointwise_coded || n < 0 || !cuda_format(fa, pa) || !cuda_format(fb, pb) || !cuda_format(fy, py))
      return false;
    const auto yb = n * static_cast<std::int64_t>(storage_bytes(fy));
    auto clash = [&](const void* in, Format f) {
      if (!in || n == 0) return false;
      const auto ib = n * static_cast<std::int64_t>(storage_bytes(f));
      return in == y ? ib != yb : overlaps(in, ib, y, yb);
    };
    if (clash(a, fa) || (op != 0 && clash(b, fb))) return false;
    call("pointwise_coded", t.pointwise_coded, m_ctx, op, pa, a, pb, b, py, y, n, std::int32_t{opt.saturate},
         std::int32_t{opt.stochastic}, std::uint64_t{opt.seed}, std::uint64_t{opt.index_offset});
    return true;
  }
  static bool overlaps(const void* a, std::int64_t a_bytes, const void* b, std::int64_t b_bytes) {
    const auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
    return pa < pb + static_cast<std::uintptr_t>(b_bytes) && pb < pa + static_cast<std::uintptr_t>(a_bytes);
  }
  // FP8 delayed scaling's cast (scale_amax then convert, and the codes'
  // values decoded where asked) in one pass of the module; false (the
  // composition runs) without the entry, for a format outside the ABI, or
  // where q overlaps x or decoded.
  bool scale_amax_encode(Format from, const void* x, std::int64_t n, float scale, Format f, void* q,
                         const CastOptions& opt, float* amax, float* decoded, std::int32_t activation = 0) {
    PlCudaFormat xf{}, qf{};
    if (!t.scale_amax_encode || !cuda_format(from, xf) || !cuda_format(f, qf) || n < 0) return false;
    const auto qb = static_cast<std::int64_t>(storage_bytes(f)), xb = static_cast<std::int64_t>(storage_bytes(from));
    if (n > 0 && (overlaps(q, n * qb, x, n * xb) || (decoded && overlaps(q, n * qb, decoded, n * 4)))) return false;
    call("scale_amax_encode", t.scale_amax_encode, m_ctx, xf, x, n, activation, scale, qf, q,
         std::int32_t{opt.saturate},
         std::int32_t{opt.stochastic}, std::uint64_t{opt.seed}, std::uint64_t{opt.index_offset}, amax, decoded);
    return true;
  }
  // The GEMM whose output leaves it encoded (the forward's FP16/BF16 y, a
  // dx or dW in the grad format): offered to the module where
  // lt_epilogue.h's plan fuses it, with C as the caller's scratch.
  bool gemm_encode(const fused::GemmEncodeOp& o) {
    const GemmArgs& g = o.args;
    const GemmEncode& e = o.e;
    if (!t.gemm_encode || !e.codes || g.a.block || g.b.block) return false;
    PlCudaFormat af{}, bf{}, df{}, acc{};
    if (!cuda_format(g.a.format, af) || !cuda_format(g.b.format, bf) || !cuda_format(e.format, df) ||
        !cuda_format(g.accumulate, acc))
      return false;
    pl_cuda::LtRequest r;
    r.m = g.m;
    r.n = g.n;
    r.k = g.k;
    r.a = af;
    r.b = bf;
    r.a_trans = g.a.trans;
    r.b_trans = g.b.trans;
    r.lda = g.a.ld;
    r.ldb = g.b.ld;
    r.ldc = g.ldc;
    r.batched = g.batched();
    r.accumulate = acc;
    r.beta = g.beta;
    r.bias = g.bias != nullptr;
    r.d = df;
    r.saturate = e.opt.saturate;
    r.stochastic = e.opt.stochastic;
    r.c_scratch = e.c_scratch;
    r.fp8_tensor_cores = m_device.compute_major > 8 || (m_device.compute_major == 8 && m_device.compute_minor >= 9);
    if (!pl_cuda::plan_gemm_epilogue(r).fused || df == PL_CUDA_FP32) return false;
    call("gemm_encode", t.gemm_encode, m_ctx, g.m, g.n, g.k, g.a.data, af, std::int32_t{g.a.trans}, g.a.ld, g.b.data,
         bf, std::int32_t{g.b.trans}, g.b.ld, g.c, g.alpha, g.bias, df, e.codes, std::int32_t{e.opt.saturate});
    return true;
  }

  // Below, among the overrides: the module's entry per op, one pass or kind
  // each, which the merged core ops above pick from.
  void upload(void* dst, const void* host_src, std::size_t bytes) {
    call("upload", t.upload, m_ctx, dst, host_src, bytes);
  }
  void download(void* host_dst, const void* src, std::size_t bytes) {
    call("download", t.download, m_ctx, host_dst, src, bytes);
  }
  void copy(void* dst, const void* src, std::size_t bytes) {
    if (dst == src || bytes == 0) return;
    call("copy", t.copy, m_ctx, dst, src, bytes);
  }
  void upload_rows(void* dst, const void* host_base, std::size_t row_bytes, const std::uint32_t* rows,
                   std::size_t count) override {
    // Gathered on the host, then one transfer. With ABI 6 the staging is
    // page-locked, one per destination and kept, so a captured step's
    // uploads (inputs, labels) read the rows the host gathered before each
    // replay.
    const std::size_t bytes = row_bytes * count;
    unsigned char* staging = nullptr;
    if (t.host_allocate && t.host_release) {
      Staging* st = nullptr;
      for (Staging& s : m_pinned)
        if (s.dst == dst) st = &s;
      if (!st) {
        // Destinations come and go (an evaluation's batch tensors): past a
        // few, the least recently used staging no graph reads is reused.
        Staging* oldest = nullptr;
        if (m_pinned.size() >= kStagings)
          for (Staging& s : m_pinned)
            if (!s.graph && (!oldest || s.used < oldest->used)) oldest = &s;
        st = oldest ? oldest : &m_pinned.emplace_back();
        st->dst = dst;
      }
      st->used = ++m_uses;
      // A captured upload reads it at every replay: never reused.
      if (m_capturing || m_gather_only) st->graph = true;
      if (bytes > st->bytes) {
        void* p = host_allocate(bytes);
        if (st->host) host_release(st->host);
        st->dst = dst;
        st->host = p;
        st->bytes = bytes;
      }
      staging = static_cast<unsigned char*>(st->host);
    } else {
      m_staging.resize(bytes);
      staging = m_staging.data();
    }
    const auto* base = static_cast<const unsigned char*>(host_base);
    for (std::size_t k = 0; k < count; ++k)
      std::memcpy(staging + k * row_bytes, base + static_cast<std::size_t>(rows[k]) * row_bytes, row_bytes);
    if (!m_gather_only) upload(dst, staging, bytes);
  }
  void fill_zero(void* dst, std::size_t bytes) override { call("fill_zero", t.fill_zero, m_ctx, dst, bytes); }

  // --- casts ---
  void convert(Format from, const void* src, Format to, void* dst, std::int64_t n, const CastOptions& opt) override {
    call("convert", t.convert, m_ctx, fmt(from), src, fmt(to), dst, n, std::int32_t{opt.saturate},
         std::int32_t{opt.stochastic}, std::uint64_t{opt.seed}, std::uint64_t{opt.index_offset});
  }
  void block_quantize(Format f, const float* src, float* dst, std::int64_t rows, std::int64_t cols,
                      BlockLayout layout, const BlockRounding& rounding, BlockQuantized* info) override {
    call("block_quantize", t.block_quantize, m_ctx, block_fmt(f), src, dst, rows, cols, block_layout(layout),
         std::int32_t{rounding.stochastic}, std::uint64_t{rounding.seed}, reinterpret_cast<PlCudaBlockQuantized*>(info));
  }
  void scale_amax(const float* x, float scale, float* y, std::int64_t n, float* amax) override {
    call("scale_amax", t.scale_amax, m_ctx, x, scale, y, n, amax);
  }
  void fill(float* x, float value, std::int64_t n) override { call("fill", t.fill, m_ctx, x, value, n); }

  // --- the step's reductions ---
  void unscale_grads(const GradBuffer* grads, std::size_t count, float inv_scale, double* sum_squares) override {
    call("unscale_grads", t.unscale_grads, m_ctx, reinterpret_cast<const PlCudaGradBuffer*>(grads), count, inv_scale,
         sum_squares);
  }
  void sgd_update(const SgdUpdate& u) override {
    call("sgd_update", t.sgd_update, m_ctx, u.value, u.grad, u.momentum_buf, u.n, u.lr, u.momentum, u.keep,
         u.weight_decay, std::int32_t{u.nesterov}, std::int32_t{u.first}, fmt(u.state_format));
  }
  void adam_update(const AdamUpdate& u) override {
    call("adam_update", t.adam_update, m_ctx, u.value, u.grad, u.exp_avg, u.exp_avg_sq, u.n, u.step_size, u.bc2_sqrt,
         u.one_minus_beta1, u.beta2, u.one_minus_beta2, u.eps, u.l2, u.shrink, fmt(u.state_format));
  }
  void gradient_census(const GradCensus& c) override {
    call("gradient_census", t.gradient_census, m_ctx, c.values, c.own, c.block, c.n, c.thresholds.underflow,
         c.thresholds.subnormal_hi, c.thresholds.overflow, std::int32_t{c.thresholds.tie_overflows}, c.scale,
         std::int32_t{c.log2_lo}, c.out);
  }
  void error_sums(const float* a, const float* b, std::int64_t n, double* out) override {
    call("error_sums", t.error_sums, m_ctx, a, b, n, out);
  }

  // --- matmul and convolution ---
  void gemm(const GemmArgs& g) override {
    PlCudaGemmBatch batch{};
    const PlCudaGemmBatch* bp = nullptr;
    if (g.batched()) {
      for (int i = 0; i < 2; ++i) {
        batch.count[i] = g.batch[i];
        batch.a_stride[i] = g.a.batch_stride[i];
        batch.b_stride[i] = g.b.batch_stride[i];
        batch.c_stride[i] = g.c_batch_stride[i];
      }
      bp = &batch;
    }
    call("gemm", t.gemm, m_ctx, g.m, g.n, g.k, g.a.data, fmt(g.a.format), std::int32_t{g.a.trans}, g.a.ld,
         abi(g.a.block), g.b.data, fmt(g.b.format), std::int32_t{g.b.trans}, g.b.ld, abi(g.b.block), g.c, g.ldc,
         g.alpha, g.beta, g.bias, fmt(g.accumulate), bp);
  }
  void conv2d_forward(const ConvShape& s, Format compute, const float* x, const float* w, const float* bias,
                      float* y) {
    const PlCudaConvShape cs = shape_of(s);
    call("conv2d_forward", t.conv2d_forward, m_ctx, &cs, fmt(compute), x, w, bias, y);
  }
  void conv2d_backward_data(const ConvShape& s, Format compute, const float* dy, const float* w, float* dx) {
    const PlCudaConvShape cs = shape_of(s);
    call("conv2d_backward_data", t.conv2d_backward_data, m_ctx, &cs, fmt(compute), dy, w, dx);
  }
  void conv2d_backward_weights(const ConvShape& s, Format compute, const float* x, const float* dy, float* dw,
                               float* db) {
    const PlCudaConvShape cs = shape_of(s);
    call("conv2d_backward_weights", t.conv2d_backward_weights, m_ctx, &cs, fmt(compute), x, dy, dw, db);
  }
  void conv2d_block(const ConvBlockArgs& a) override {
    const PlCudaConvShape cs = shape_of(a.shape);
    call("conv2d_block", t.conv2d_block, m_ctx, static_cast<std::int32_t>(a.kind), &cs, a.a, abi(a.a_block), a.b,
         abi(a.b_block), a.bias, a.out);
  }
  void bias_add_channels(float* y, const float* bias, std::int64_t n, std::int64_t c, std::int64_t hw) override {
    call("bias_add_channels", t.bias_add_channels, m_ctx, y, bias, n, c, hw);
  }
  void channel_sums(const float* dy, float* db, std::int64_t n, std::int64_t c, std::int64_t hw) override {
    call("channel_sums", t.channel_sums, m_ctx, dy, db, n, c, hw);
  }

  // --- pooling ---
  void maxpool2d_forward(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                         const float* x, float* y, std::int32_t* argmax) {
    call("maxpool2d_forward", t.maxpool2d_forward, m_ctx, n, c, h, w, k, x, y, argmax);
  }
  void maxpool2d_backward(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                          const float* dy, const std::int32_t* argmax, float* dx) {
    call("maxpool2d_backward", t.maxpool2d_backward, m_ctx, n, c, h, w, k, dy, argmax, dx);
  }

  // --- elementwise ---
  void relu_forward(const float* x, float* y, std::int64_t n) {
    call("relu_forward", t.relu_forward, m_ctx, x, y, n);
  }
  void relu_backward(const float* x, const float* dy, float* dx, std::int64_t n) {
    call("relu_backward", t.relu_backward, m_ctx, x, dy, dx, n);
  }
  void relu16_forward(Format f, const void* x, void* y, std::int64_t n) {
    call("relu16_forward", t.relu16_forward, m_ctx, fmt(f), x, y, n);
  }
  void relu16_backward(Format f, const void* x, Format g, const void* dy, void* dx, std::int64_t n) {
    call("relu16_backward", t.relu16_backward, m_ctx, fmt(f), x, fmt(g), dy, dx, n);
  }
  void gelu_forward(const float* x, float* y, std::int64_t n) {
    call("gelu_forward", t.gelu_forward, m_ctx, x, y, n);
  }
  void gelu_backward(const float* x, const float* dy, float* dx, std::int64_t n) {
    call("gelu_backward", t.gelu_backward, m_ctx, x, dy, dx, n);
  }
  void z_loss(Pass pass, const float* logits, const float* probs, float* lse, double* z, float* grad,
              std::int64_t rows, std::int64_t cols, float coef, float scale) override {
    call("z_loss", t.z_loss, m_ctx, static_cast<std::int32_t>(pass == Pass::Forward ? 0 : 1), logits, probs, lse, z,
         grad, rows, cols, coef, scale);
  }
  void embedding(Pass pass, const float* ids, const float* src, float* dst, std::int64_t n, std::int64_t vocab,
                 std::int64_t dim) override {
    call("embedding", t.embedding, m_ctx, static_cast<std::int32_t>(pass == Pass::Forward ? 0 : 1), ids, src, dst, n,
         vocab, dim);
  }
  void repeat_rows(const float* src, float* dst, std::int64_t B, std::int64_t T, std::int64_t C) override {
    call("repeat_rows", t.repeat_rows, m_ctx, src, dst, B, T, C);
  }
  void add(const float* a, const float* b, float* y, std::int64_t n) override { call("add", t.add, m_ctx, a, b, y, n); }
  void scale(float* x, float s, std::int64_t n) override { call("scale", t.scale, m_ctx, x, s, n); }
  void quantize(Format f, float* x, std::int64_t n, bool saturate) override {
    if (f == Format::FP32) return;
    call("quantize", t.quantize, m_ctx, fmt(f), x, n, std::int32_t{saturate});
  }
  void count_nonfinite(const float* x, std::int64_t n, std::int64_t* counter) override {
    call("count_nonfinite", t.count_nonfinite, m_ctx, x, n, counter);
  }
  void amax(const float* x, std::int64_t n, float* out) override { call("amax", t.amax, m_ctx, x, n, out); }
  void column_sums(const float* dy, std::int64_t rows, std::int64_t cols, float* db) override {
    call("column_sums", t.column_sums, m_ctx, dy, rows, cols, db);
  }

  // --- layout ---
  void patchify(const float* x, float* patches, std::int64_t B, std::int64_t C, std::int64_t H, std::int64_t W,
                std::int64_t p) {
    call("patchify", t.patchify, m_ctx, x, patches, B, C, H, W, p);
  }
  void unpatchify(const float* patches, float* x, std::int64_t B, std::int64_t C, std::int64_t H, std::int64_t W,
                  std::int64_t p) {
    call("unpatchify", t.unpatchify, m_ctx, patches, x, B, C, H, W, p);
  }

  // --- rows ---
  void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                         std::int64_t rows, std::int64_t cols, float eps, Format accumulate) {
    call("layernorm_forward", t.layernorm_forward, m_ctx, x, gamma, beta, y, mean, rstd, rows, cols, eps,
         fmt(accumulate));
  }
  void layernorm_backward(const float* dy, const float* x, const float* mean, const float* rstd, const float* gamma,
                          float* dx, float* dgamma, float* dbeta, std::int64_t rows, std::int64_t cols) {
    call("layernorm_backward", t.layernorm_backward, m_ctx, dy, x, mean, rstd, gamma, dx, dgamma, dbeta, rows, cols);
  }
  void softmax_forward(const float* x, float* y, std::int64_t rows, std::int64_t cols, Format accumulate) {
    call("softmax_forward", t.softmax_forward, m_ctx, x, y, rows, cols, fmt(accumulate));
  }
  void softmax_backward(const float* y, const float* dy, float* dx, std::int64_t rows, std::int64_t cols) {
    call("softmax_backward", t.softmax_backward, m_ctx, y, dy, dx, rows, cols);
  }

  // --- losses ---
  void cross_entropy_forward(const float* logits, const std::int32_t* labels, std::int64_t rows,
                             std::int64_t classes, float* probs, double* loss, std::int64_t* correct) {
    call("cross_entropy_forward", t.cross_entropy_forward, m_ctx, logits, labels, rows, classes, probs, loss, correct);
  }
  void cross_entropy_backward(const float* probs, const std::int32_t* labels, std::int64_t rows,
                              std::int64_t classes, float scale, float* dlogits) {
    call("cross_entropy_backward", t.cross_entropy_backward, m_ctx, probs, labels, rows, classes, scale, dlogits);
  }
  void mse_forward(const float* pred, const float* target, std::int64_t n, double* loss) {
    call("mse_forward", t.mse_forward, m_ctx, pred, target, n, loss);
  }
  void mse_backward(const float* pred, const float* target, std::int64_t n, float scale, float* dpred) {
    call("mse_backward", t.mse_backward, m_ctx, pred, target, n, scale, dpred);
  }

 private:
  // One table call; a failure throws its one-line message.
  template <class Entry, class... Args>
  void call(const char* name, Entry entry, Args... args) {
    char message[512] = {};
    const PlCudaStatus s = entry(args..., message, sizeof message);
    if (s == PL_CUDA_OK) return;
    const std::string what = std::string("cuda ") + name + ": " + (message[0] ? message : "failed");
    if (s == PL_CUDA_OUT_OF_MEMORY) throw std::runtime_error(std::string("cuda ") + name + ": out of device memory: " + message);
    // What the CPU backend refuses with invalid_argument, this one does too.
    if (s == PL_CUDA_INVALID_ARGUMENT) throw std::invalid_argument(what);
    throw std::runtime_error(what);
  }

  const PlCudaBackendTable& t;
  PlCudaContext* m_ctx;
  CudaDeviceInfo m_device;
  std::vector<unsigned char> m_staging;
  struct Staging {  // host_allocate memory (ABI 6) for one upload_rows destination
    void* dst = nullptr;
    void* host = nullptr;
    std::size_t bytes = 0;
    std::uint64_t used = 0;  // m_uses at its last use
    bool graph = false;      // a captured upload reads it
  };
  static constexpr std::size_t kStagings = 16;
  std::vector<Staging> m_pinned;
  std::uint64_t m_uses = 0;
  bool m_gather_only = false;
  bool m_capturing = false;
};

}  // namespace

CudaStepControl* cuda_step_control(Backend& be) {
  auto* cuda = dynamic_cast<CudaBackend*>(&be);
  return cuda && cuda->has_step_entries() ? cuda : nullptr;
}

std::string cuda_backend_unusable_reason() {
  if (!cuda_available()) return cuda_unavailable_reason();
  const PlCudaBackendTable* t = cuda_table();
  if (!t) return "libpl_cuda.so is not loaded";
  for (const auto& [name, fn] : entries(*t))
    if (!fn) return cuda_module_info().path + " lacks the training op '" + name + "'";
  return {};
}

std::unique_ptr<Backend> make_cuda_backend_over(const PlCudaBackendTable& table, PlCudaContext* ctx,
                                                const std::string& device_name) {
  CudaDeviceInfo dev;
  dev.name = device_name;
  dev.compute_major = 9;
  return std::make_unique<CudaBackend>(table, ctx, dev);
}

std::unique_ptr<Backend> make_cuda_backend(int device) {
  if (const std::string why = cuda_backend_unusable_reason(); !why.empty()) throw std::runtime_error(why);
  CudaDeviceInfo dev;
  if (const CudaResult r = cuda_device_info(device, dev); !r.ok()) throw std::runtime_error(r.message);
  const PlCudaBackendTable* t = cuda_table();
  PlCudaContext* ctx = nullptr;
  char message[512] = {};
  if (t->create_context(device, &ctx, message, sizeof message) != PL_CUDA_OK)
    throw std::runtime_error(std::string("cuda: ") + message);
  return std::make_unique<CudaBackend>(*t, ctx, dev);
}

}  // namespace engine
