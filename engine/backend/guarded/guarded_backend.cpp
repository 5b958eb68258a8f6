// GuardedBackend: an mprotect'ed arena around another backend's ops.
#include "backend/guarded/guarded_backend.h"

#include "backend/fused.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <variant>

namespace engine {

namespace {

constexpr std::size_t kArenaBytes = std::size_t{64} << 30;  // reserved, not committed

class GuardedBackend final : public Backend {
 public:
  explicit GuardedBackend(std::unique_ptr<Backend> inner) : m_inner(std::move(inner)) {
    m_page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    void* p = mmap(nullptr, kArenaBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("guarded backend: cannot reserve its arena (mmap failed)");
    m_base = static_cast<std::byte*>(p);
  }
  ~GuardedBackend() override { munmap(m_base, kArenaBytes); }

  const GuardedCounters& counters() const { return m_counters; }

  BackendInfo info() const override {
    BackendInfo i = m_inner->info();
    i.name = "guarded-" + i.name;
    return i;
  }

  // --- memory ---
  void* allocate(std::size_t bytes) override {
    const std::size_t size = (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64;
    ++m_counters.allocations;
    auto it = m_free.lower_bound(size);
    std::size_t offset;
    std::size_t got;
    if (it != m_free.end() && it->first <= 2 * size) {
      got = it->first;
      offset = it->second;
      m_free.erase(it);
    } else {
      if (m_top + size > kArenaBytes) throw std::logic_error("guarded backend: arena exhausted");
      offset = m_top;
      got = size;
      m_top += size;
    }
    m_live[offset] = got;
    return m_base + offset;
  }
  void release(void* p) noexcept override {
    if (!p) return;
    const std::size_t offset = static_cast<std::size_t>(static_cast<std::byte*>(p) - m_base);
    auto it = m_live.find(offset);
    if (it == m_live.end()) return;
    m_free.emplace(it->second, offset);
    m_live.erase(it);
  }
  void transfer(Transfer dir, void* dst, const void* src, std::size_t bytes) override {
    switch (dir) {
      case Transfer::Upload: {
        Open o(*this, "upload", dst);
        ++m_counters.uploads;
        std::memcpy(dst, src, bytes);
        break;
      }
      case Transfer::Download: {
        Open o(*this, "download", src);
        ++m_counters.downloads;
        m_counters.download_bytes += static_cast<std::int64_t>(bytes);
        std::memcpy(dst, src, bytes);
        break;
      }
      case Transfer::Copy: {
        Open o(*this, "copy", dst, src);
        m_inner->transfer(dir, dst, src, bytes);
        break;
      }
    }
  }
  void upload_rows(void* dst, const void* host_base, std::size_t row_bytes, const std::uint32_t* rows,
                   std::size_t count) override {
    Open o(*this, "upload_rows", dst);
    ++m_counters.uploads;
    m_inner->upload_rows(dst, host_base, row_bytes, rows, count);
  }
  void repeat_rows(const float* src, float* dst, std::int64_t B, std::int64_t T, std::int64_t C) override {
    Open o(*this, "repeat_rows", src, dst);
    m_inner->repeat_rows(src, dst, B, T, C);
  }
  void embedding(Pass pass, const float* ids, const float* src, float* dst, std::int64_t n, std::int64_t vocab,
                 std::int64_t dim) override {
    Open o(*this, "embedding", ids, src, dst);
    m_inner->embedding(pass, ids, src, dst, n, vocab, dim);
  }
  void conv2d_block(const ConvBlockArgs& g) override {
    Open o(*this, "conv2d_block", g.a, g.a_block, g.b, g.b_block, g.bias, g.out);
    m_inner->conv2d_block(g);
  }
  void bias_add_channels(float* y, const float* bias, std::int64_t n, std::int64_t c, std::int64_t hw) override {
    Open o(*this, "bias_add_channels", y, bias);
    m_inner->bias_add_channels(y, bias, n, c, hw);
  }
  void channel_sums(const float* dy, float* db, std::int64_t n, std::int64_t c, std::int64_t hw) override {
    Open o(*this, "channel_sums", dy, db);
    m_inner->channel_sums(dy, db, n, c, hw);
  }
  void fill_zero(void* dst, std::size_t bytes) override {
    Open o(*this, "fill_zero", dst);
    m_inner->fill_zero(dst, bytes);
  }
  void convert(Format from, const void* src, Format to, void* dst, std::int64_t n, const CastOptions& opt) override {
    Open o(*this, "convert", src, dst);
    m_inner->convert(from, src, to, dst, n, opt);
  }
  void block_quantize(Format f, const float* src, float* dst, std::int64_t rows, std::int64_t cols,
                      BlockLayout layout, const BlockRounding& rounding, BlockQuantized* info) override {
    Open o(*this, "block_quantize", src, dst, info);
    m_inner->block_quantize(f, src, dst, rows, cols, layout, rounding, info);
  }
  void scale_amax(const float* x, float scale, float* y, std::int64_t n, float* amax) override {
    Open o(*this, "scale_amax", x, y, amax);
    m_inner->scale_amax(x, scale, y, n, amax);
  }
  void fill(float* x, float value, std::int64_t n) override {
    Open o(*this, "fill", x);
    m_inner->fill(x, value, n);
  }
  void unscale_grads(const GradBuffer* grads, std::size_t count, float inv_scale, double* sum_squares) override {
    Open o(*this, "unscale_grads", sum_squares);
    for (std::size_t k = 0; k < count; ++k) {
      check("unscale_grads", grads[k].data);
      check("unscale_grads", grads[k].nonfinite);
    }
    m_inner->unscale_grads(grads, count, inv_scale, sum_squares);
  }
  void sgd_update(const SgdUpdate& u) override {
    Open o(*this, "sgd_update", u.value, u.grad, u.momentum_buf);
    m_inner->sgd_update(u);
  }
  void adam_update(const AdamUpdate& u) override {
    Open o(*this, "adam_update", u.value, u.grad, u.exp_avg, u.exp_avg_sq);
    m_inner->adam_update(u);
  }
  void gradient_census(const GradCensus& c) override {
    Open o(*this, "gradient_census", c.values, c.own, c.block, c.out);
    m_inner->gradient_census(c);
  }
  void error_sums(const float* a, const float* b, std::int64_t n, double* out) override {
    Open o(*this, "error_sums", a, b, out);
    m_inner->error_sums(a, b, n, out);
  }

  // --- compute ---
  // Every fused op the same way: its buffers checked, the arena open while
  // the inner backend's fast path runs. Where the inner backend declines,
  // fused::run composes the op from this backend's core ops, each checked
  // on its own.
  bool run_fused(const FusedOp& op) override {
    return std::visit(
        [&](const auto& f) {
          Open o(*this, f.name);
          f.for_each_buffer([&](const void* p) { check(f.name, p); });
          return m_inner->run_fused(op);
        },
        op.op);
  }
  void conv2d(const ConvArgs& a) override {
    Open o(*this, "conv2d", a.a, a.b, a.bias, a.out, a.db);
    m_inner->conv2d(a);
  }
  void maxpool2d(Pass pass, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                 const float* in, float* out, std::int32_t* argmax) override {
    Open o(*this, "maxpool2d", in, out, argmax);
    m_inner->maxpool2d(pass, n, c, h, w, k, in, out, argmax);
  }
  void activation_forward(Activation act, Format f, const void* x, void* y, std::int64_t n) override {
    Open o(*this, "activation_forward", x, y);
    m_inner->activation_forward(act, f, x, y, n);
  }
  void activation_backward(Activation act, Format f, const void* x, Format g, const void* dy, void* dx,
                           std::int64_t n) override {
    Open o(*this, "activation_backward", x, dy, dx);
    m_inner->activation_backward(act, f, x, g, dy, dx, n);
  }
  void patch_layout(Pass pass, const float* src, float* dst, std::int64_t B, std::int64_t C, std::int64_t H,
                    std::int64_t W, std::int64_t p) override {
    Open o(*this, "patch_layout", src, dst);
    m_inner->patch_layout(pass, src, dst, B, C, H, W, p);
  }
  void layernorm(const LayerNormArgs& a) override {
    Open o(*this, "layernorm", a.x, a.gamma, a.beta, a.mean, a.rstd, a.y, a.dy, a.dx, a.dgamma, a.dbeta);
    m_inner->layernorm(a);
  }
  void softmax(Pass pass, const float* in, const float* dy, float* out, std::int64_t rows, std::int64_t cols,
               Format accumulate) override {
    Open o(*this, "softmax", in, dy, out);
    m_inner->softmax(pass, in, dy, out, rows, cols, accumulate);
  }
  void loss_forward(const LossArgs& a) override {
    Open o(*this, "loss_forward", a.pred, a.labels, a.target, a.probs, a.loss, a.correct, a.grad);
    m_inner->loss_forward(a);
  }
  void loss_backward(const LossArgs& a) override {
    Open o(*this, "loss_backward", a.pred, a.labels, a.target, a.probs, a.loss, a.correct, a.grad);
    m_inner->loss_backward(a);
  }
  void gemm(const GemmArgs& g) override {
    Open o(*this, "gemm", g.a.data, g.b.data, g.c, g.bias, g.a.block, g.b.block);
    m_inner->gemm(g);
  }
  void add(const float* a, const float* b, float* y, std::int64_t n) override {
    Open o(*this, "add", a, b, y);
    m_inner->add(a, b, y, n);
  }
  void scale(float* x, float s, std::int64_t n) override {
    Open o(*this, "scale", x);
    m_inner->scale(x, s, n);
  }
  void quantize(Format f, float* x, std::int64_t n, bool saturate) override {
    Open o(*this, "quantize", x);
    m_inner->quantize(f, x, n, saturate);
  }
  void count_nonfinite(const float* x, std::int64_t n, std::int64_t* counter) override {
    Open o(*this, "count_nonfinite", x, counter);
    m_inner->count_nonfinite(x, n, counter);
  }
  void amax(const float* x, std::int64_t n, float* out) override {
    Open o(*this, "amax", x, out);
    m_inner->amax(x, n, out);
  }
  void column_sums(const float* dy, std::int64_t rows, std::int64_t cols, float* db) override {
    Open o(*this, "column_sums", dy, db);
    m_inner->column_sums(dy, rows, cols, db);
  }

 private:
  // A pointer an op is given must be the arena's (null: an absent optional).
  void check(const char* op, const void* p) const {
    if (!p) return;
    const auto* b = static_cast<const std::byte*>(p);
    if (b < m_base || b >= m_base + m_top)
      throw std::logic_error(std::string("guarded backend: ") + op +
                             " was given memory the backend did not allocate (a host pointer)");
  }
  // Opens the arena for the duration of one op (after checking its
  // pointers) and closes it again.
  class Open {
   public:
    template <class... P>
    Open(GuardedBackend& g, const char* op, const P*... ptrs) : m_g(g) {
      (g.check(op, static_cast<const void*>(ptrs)), ...);
      ++g.m_counters.calls;
      g.protect(PROT_READ | PROT_WRITE);
    }
    ~Open() { m_g.protect(PROT_NONE); }  // protect aborts rather than throw
    Open(const Open&) = delete;
    Open& operator=(const Open&) = delete;

   private:
    GuardedBackend& m_g;
  };
  void protect(int prot) noexcept {
    const std::size_t len = (m_top + m_page - 1) / m_page * m_page;
    if (len && mprotect(m_base, len, prot) != 0) {
      std::fputs("guarded backend: mprotect failed\n", stderr);
      std::abort();
    }
  }

  std::unique_ptr<Backend> m_inner;
  std::byte* m_base = nullptr;
  std::size_t m_page = 4096;
  std::size_t m_top = 0;
  std::multimap<std::size_t, std::size_t> m_free;  // size -> offset
  std::unordered_map<std::size_t, std::size_t> m_live;  // offset -> size
  GuardedCounters m_counters;
};

}  // namespace

std::unique_ptr<Backend> make_guarded_backend(std::unique_ptr<Backend> inner) {
  return std::make_unique<GuardedBackend>(std::move(inner));
}

const GuardedCounters* guarded_counters(const Backend& be) {
  const auto* g = dynamic_cast<const GuardedBackend*>(&be);
  return g ? &g->counters() : nullptr;
}

}  // namespace engine
