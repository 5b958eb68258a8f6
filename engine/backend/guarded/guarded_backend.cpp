// GuardedBackend: an mprotect'ed arena around another backend's ops.
#include "backend/guarded/guarded_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>

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
  void upload(void* dst, const void* host_src, std::size_t bytes) override {
    Open o(*this, "upload", dst);
    ++m_counters.uploads;
    std::memcpy(dst, host_src, bytes);
  }
  void download(void* host_dst, const void* src, std::size_t bytes) override {
    Open o(*this, "download", src);
    ++m_counters.downloads;
    m_counters.download_bytes += static_cast<std::int64_t>(bytes);
    std::memcpy(host_dst, src, bytes);
  }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    Open o(*this, "copy", dst, src);
    m_inner->copy(dst, src, bytes);
  }
  void upload_rows(void* dst, const void* host_base, std::size_t row_bytes, const std::uint32_t* rows,
                   std::size_t count) override {
    Open o(*this, "upload_rows", dst);
    ++m_counters.uploads;
    m_inner->upload_rows(dst, host_base, row_bytes, rows, count);
  }
  void relu16_forward(Format f, const void* x, void* y, std::int64_t n) override {
    Open o(*this, "relu16_forward", x, y);
    m_inner->relu16_forward(f, x, y, n);
  }
  void relu16_backward(Format f, const void* x, Format g, const void* dy, void* dx, std::int64_t n) override {
    Open o(*this, "relu16_backward", x, dy, dx);
    m_inner->relu16_backward(f, x, g, dy, dx, n);
  }
  void patchify(const float* x, float* patches, std::int64_t B, std::int64_t C, std::int64_t H, std::int64_t W,
                std::int64_t p) override {
    Open o(*this, "patchify", x, patches);
    m_inner->patchify(x, patches, B, C, H, W, p);
  }
  void unpatchify(const float* patches, float* x, std::int64_t B, std::int64_t C, std::int64_t H, std::int64_t W,
                  std::int64_t p) override {
    Open o(*this, "unpatchify", patches, x);
    m_inner->unpatchify(patches, x, B, C, H, W, p);
  }
  void repeat_rows(const float* src, float* dst, std::int64_t B, std::int64_t T, std::int64_t C) override {
    Open o(*this, "repeat_rows", src, dst);
    m_inner->repeat_rows(src, dst, B, T, C);
  }
  void conv2d_block(const ConvBlockArgs& g) override {
    Open o(*this, "conv2d_block", g.a, g.a_block, g.b, g.b_block, g.bias, g.out);
    m_inner->conv2d_block(g);
  }
  void bias_add_channels(float* y, const float* bias, std::int64_t n, std::int64_t c, std::int64_t hw) override {
    Open o(*this, "bias_add_channels", y, bias);
    m_inner->bias_add_channels(y, bias, n, c, hw);
  }
  void scale_bias_add_channels(float* y, float alpha, const float* bias, std::int64_t n, std::int64_t c,
                               std::int64_t hw) override {
    Open o(*this, "scale_bias_add_channels", y, bias);
    m_inner->scale_bias_add_channels(y, alpha, bias, n, c, hw);
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
  void scale_amax_encode(const float* x, float scale, Format f, void* q, std::int64_t n, const CastOptions& opt,
                         float* amax, float* scratch) override {
    Open o(*this, "scale_amax_encode", x, q, amax, scratch);
    m_inner->scale_amax_encode(x, scale, f, q, n, opt, amax, scratch);
  }
  void scale_amax_encode16(Format from, const void* x, float scale, Format f, void* q, std::int64_t n,
                           const CastOptions& opt, float* amax, float* scratch) override {
    Open o(*this, "scale_amax_encode16", x, q, amax, scratch);
    m_inner->scale_amax_encode16(from, x, scale, f, q, n, opt, amax, scratch);
  }
  void scale_amax_encode_sums(Format from, const void* x, std::int64_t rows, std::int64_t cols, float scale, Format f,
                              void* q, const CastOptions& opt, float* amax, float* db, float* scratch) override {
    Open o(*this, "scale_amax_encode_sums", x, q, amax, db, scratch);
    m_inner->scale_amax_encode_sums(from, x, rows, cols, scale, f, q, opt, amax, db, scratch);
  }
  void scale_amax_encode_planes(const float* x, std::int64_t n, std::int64_t c, std::int64_t hw, float scale,
                                Format f, void* q, const CastOptions& opt, float* amax, float* decoded, float* db,
                                float* scratch) override {
    Open o(*this, "scale_amax_encode_planes", x, q, amax, decoded, db, scratch);
    m_inner->scale_amax_encode_planes(x, n, c, hw, scale, f, q, opt, amax, decoded, db, scratch);
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
  void unscale_grads_coded(const GradBuffer* grads, const GradCodes* codes, std::size_t count, float inv_scale,
                           double* sum_squares) override {
    Open o(*this, "unscale_grads_coded", sum_squares);
    for (std::size_t k = 0; k < count; ++k) {
      check("unscale_grads_coded", grads[k].data);
      check("unscale_grads_coded", grads[k].nonfinite);
      check("unscale_grads_coded", codes[k].data);
    }
    m_inner->unscale_grads_coded(grads, codes, count, inv_scale, sum_squares);
  }
  void sgd_update_coded(const SgdUpdate& u, const UpdateEncode& e) override {
    Open o(*this, "sgd_update_coded", u.value, u.grad, u.momentum_buf, e.codes, e.amax, e.scratch);
    m_inner->sgd_update_coded(u, e);
  }
  void sgd_update_encode(const SgdUpdate& u, const UpdateEncode& e) override {
    Open o(*this, "sgd_update_encode", u.value, u.grad, u.momentum_buf, e.codes, e.amax, e.scratch);
    m_inner->sgd_update_encode(u, e);
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
  void gemm(const GemmArgs& g) override {
    Open o(*this, "gemm", g.a.data, g.b.data, g.c, g.bias, g.a.block, g.b.block);
    m_inner->gemm(g);
  }
  void gemm_encode(const GemmArgs& g, const GemmEncode& e) override {
    Open o(*this, "gemm_encode", g.a.data, g.b.data, g.c, g.bias, g.a.block, g.b.block, e.codes);
    m_inner->gemm_encode(g, e);
  }
  bool attention_forward(const AttentionForward& f) override {
    Open o(*this, "attention_forward", f.qkv, f.probs, f.probs_codes, f.values);
    return m_inner->attention_forward(f);
  }
  bool attention_backward(const AttentionBackward& f) override {
    Open o(*this, "attention_backward", f.qkv, f.probs_operand, f.probs, f.dvalues, f.dqkv, f.dqkv_codes);
    return m_inner->attention_backward(f);
  }
  void conv2d_forward(const ConvShape& s, Format compute, const float* x, const float* w, const float* bias,
                      float* y) override {
    Open o(*this, "conv2d_forward", x, w, bias, y);
    m_inner->conv2d_forward(s, compute, x, w, bias, y);
  }
  void conv2d_backward_data(const ConvShape& s, Format compute, const float* dy, const float* w, float* dx) override {
    Open o(*this, "conv2d_backward_data", dy, w, dx);
    m_inner->conv2d_backward_data(s, compute, dy, w, dx);
  }
  void conv2d_backward_weights(const ConvShape& s, Format compute, const float* x, const float* dy, float* dw,
                               float* db) override {
    Open o(*this, "conv2d_backward_weights", x, dy, dw, db);
    m_inner->conv2d_backward_weights(s, compute, x, dy, dw, db);
  }
  bool conv2d_forward_coded(const ConvShape& s, Format compute, ConvInput x, const float* w, const float* bias,
                            float* y) override {
    Open o(*this, "conv2d_forward_coded", x.data, w, bias, y);
    return m_inner->conv2d_forward_coded(s, compute, x, w, bias, y);
  }
  bool conv2d_backward_data_coded(const ConvShape& s, Format compute, ConvInput dy, const float* w,
                                  float* dx) override {
    Open o(*this, "conv2d_backward_data_coded", dy.data, w, dx);
    return m_inner->conv2d_backward_data_coded(s, compute, dy, w, dx);
  }
  bool conv2d_backward_weights_coded(const ConvShape& s, Format compute, ConvInput x, ConvInput dy, float* dw,
                                     float* db) override {
    Open o(*this, "conv2d_backward_weights_coded", x.data, dy.data, dw, db);
    return m_inner->conv2d_backward_weights_coded(s, compute, x, dy, dw, db);
  }
  void maxpool2d_forward(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                         const float* x, float* y, std::int32_t* argmax) override {
    Open o(*this, "maxpool2d_forward", x, y, argmax);
    m_inner->maxpool2d_forward(n, c, h, w, k, x, y, argmax);
  }
  void maxpool2d_forward16(Format f, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                           const void* x, void* y, std::int32_t* argmax, float* x32, float* y32) override {
    Open o(*this, "maxpool2d_forward16", x, y, argmax, x32, y32);
    m_inner->maxpool2d_forward16(f, n, c, h, w, k, x, y, argmax, x32, y32);
  }
  void maxpool2d_backward(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                          const float* dy, const std::int32_t* argmax, float* dx) override {
    Open o(*this, "maxpool2d_backward", dy, argmax, dx);
    m_inner->maxpool2d_backward(n, c, h, w, k, dy, argmax, dx);
  }
  void relu_forward(const float* x, float* y, std::int64_t n) override {
    Open o(*this, "relu_forward", x, y);
    m_inner->relu_forward(x, y, n);
  }
  void relu_backward(const float* x, const float* dy, float* dx, std::int64_t n) override {
    Open o(*this, "relu_backward", x, dy, dx);
    m_inner->relu_backward(x, dy, dx, n);
  }
  void gelu_forward(const float* x, float* y, std::int64_t n) override {
    Open o(*this, "gelu_forward", x, y);
    m_inner->gelu_forward(x, y, n);
  }
  void gelu16_forward(Format f, const void* x, void* y, std::int64_t n, float* sx, float* sy) override {
    Open o(*this, "gelu16_forward", x, y, sx, sy);
    m_inner->gelu16_forward(f, x, y, n, sx, sy);
  }
  void gelu16_backward(Format f, const void* x, Format g, const void* dy, void* dx, std::int64_t n, float* sx,
                       float* sdy, float* sdx) override {
    Open o(*this, "gelu16_backward", x, dy, dx, sx, sdy, sdx);
    m_inner->gelu16_backward(f, x, g, dy, dx, n, sx, sdy, sdx);
  }
  void gelu_backward(const float* x, const float* dy, float* dx, std::int64_t n) override {
    Open o(*this, "gelu_backward", x, dy, dx);
    m_inner->gelu_backward(x, dy, dx, n);
  }
  void add_encode(Format fa, const void* a, Format fb, const void* b, Format fy, void* y, std::int64_t n,
                  const CastOptions& opt, float* sa, float* sb, float* sy) override {
    Open o(*this, "add_encode", a, b, y, sa, sb, sy);
    m_inner->add_encode(fa, a, fb, b, fy, y, n, opt, sa, sb, sy);
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
  void column_sums16(Format f, const void* dy, std::int64_t rows, std::int64_t cols, float* db,
                     float* scratch) override {
    Open o(*this, "column_sums16", dy, db, scratch);
    m_inner->column_sums16(f, dy, rows, cols, db, scratch);
  }
  void column_sums(const float* dy, std::int64_t rows, std::int64_t cols, float* db) override {
    Open o(*this, "column_sums", dy, db);
    m_inner->column_sums(dy, rows, cols, db);
  }
  void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                         std::int64_t rows, std::int64_t cols, float eps, Format accumulate) override {
    Open o(*this, "layernorm_forward", x, gamma, beta, y, mean, rstd);
    m_inner->layernorm_forward(x, gamma, beta, y, mean, rstd, rows, cols, eps, accumulate);
  }
  void layernorm_backward(const float* dy, const float* x, const float* mean, const float* rstd, const float* gamma,
                          float* dx, float* dgamma, float* dbeta, std::int64_t rows, std::int64_t cols) override {
    Open o(*this, "layernorm_backward", dy, x, mean, rstd, gamma, dx, dgamma, dbeta);
    m_inner->layernorm_backward(dy, x, mean, rstd, gamma, dx, dgamma, dbeta, rows, cols);
  }
  void layernorm_coded_forward(Format fx, const void* x, const float* gamma, const float* beta, Format fy, void* y,
                               float* mean, float* rstd, std::int64_t rows, std::int64_t cols, float eps,
                               const CastOptions& opt, float* sx, float* sy) override {
    Open o(*this, "layernorm_coded_forward", x, gamma, beta, y, mean, rstd, sx, sy);
    m_inner->layernorm_coded_forward(fx, x, gamma, beta, fy, y, mean, rstd, rows, cols, eps, opt, sx, sy);
  }
  void layernorm_backward_add(Format fdy, const void* dy, Format fx, const void* x, const float* mean,
                              const float* rstd, const float* gamma, const float* r, float* dx, Format fc, void* codes,
                              float* dgamma, float* dbeta, std::int64_t rows, std::int64_t cols, float* sdy,
                              float* sx) override {
    Open o(*this, "layernorm_backward_add", dy, x, mean, rstd, gamma, r, dx, codes, dgamma, dbeta, sdy, sx);
    m_inner->layernorm_backward_add(fdy, dy, fx, x, mean, rstd, gamma, r, dx, fc, codes, dgamma, dbeta, rows, cols,
                                    sdy, sx);
  }
  void layernorm_coded_backward(Format fdy, const void* dy, Format fx, const void* x, const float* mean,
                                const float* rstd, const float* gamma, Format fdx, void* dx, float* dgamma,
                                float* dbeta, std::int64_t rows, std::int64_t cols, float* sdy, float* sx,
                                float* sdx) override {
    Open o(*this, "layernorm_coded_backward", dy, x, mean, rstd, gamma, dx, dgamma, dbeta, sdy, sx, sdx);
    m_inner->layernorm_coded_backward(fdy, dy, fx, x, mean, rstd, gamma, fdx, dx, dgamma, dbeta, rows, cols, sdy, sx,
                                      sdx);
  }
  void softmax_forward(const float* x, float* y, std::int64_t rows, std::int64_t cols, Format accumulate) override {
    Open o(*this, "softmax_forward", x, y);
    m_inner->softmax_forward(x, y, rows, cols, accumulate);
  }
  void softmax_backward(const float* y, const float* dy, float* dx, std::int64_t rows, std::int64_t cols) override {
    Open o(*this, "softmax_backward", y, dy, dx);
    m_inner->softmax_backward(y, dy, dx, rows, cols);
  }
  void gelu_backward_coded(const float* x, Format g, const void* dy, float* dx, std::int64_t n, float* sdy) override {
    Open o(*this, "gelu_backward_coded", x, dy, dx, sdy);
    m_inner->gelu_backward_coded(x, g, dy, dx, n, sdy);
  }
  void relu_backward_coded(const float* x, Format g, const void* dy, float* dx, std::int64_t n, float* sdy) override {
    Open o(*this, "relu_backward_coded", x, dy, dx, sdy);
    m_inner->relu_backward_coded(x, g, dy, dx, n, sdy);
  }
  void gelu_forward_encode(const float* x, std::int64_t n, float scale, Format f, void* q, const CastOptions& opt,
                           float* amax, float* scratch) override {
    Open o(*this, "gelu_forward_encode", x, q, amax, scratch);
    m_inner->gelu_forward_encode(x, n, scale, f, q, opt, amax, scratch);
  }
  void relu_forward_encode(const float* x, std::int64_t n, float scale, Format f, void* q, const CastOptions& opt,
                           float* amax, float* scratch) override {
    Open o(*this, "relu_forward_encode", x, q, amax, scratch);
    m_inner->relu_forward_encode(x, n, scale, f, q, opt, amax, scratch);
  }
  void softmax_coded_forward(Format fx, const void* x, float* y, std::int64_t rows, std::int64_t cols,
                             float* sx) override {
    Open o(*this, "softmax_coded_forward", x, y, sx);
    m_inner->softmax_coded_forward(fx, x, y, rows, cols, sx);
  }
  void softmax_coded_backward(const float* y, Format fdy, const void* dy, float* dx, std::int64_t rows,
                              std::int64_t cols, float* sdy) override {
    Open o(*this, "softmax_coded_backward", y, dy, dx, sdy);
    m_inner->softmax_coded_backward(y, fdy, dy, dx, rows, cols, sdy);
  }
  void cross_entropy_forward(const float* logits, const std::int32_t* labels, std::int64_t rows, std::int64_t classes,
                             float* probs, double* loss, std::int64_t* correct) override {
    Open o(*this, "cross_entropy_forward", logits, labels, probs, loss, correct);
    m_inner->cross_entropy_forward(logits, labels, rows, classes, probs, loss, correct);
  }
  void cross_entropy_backward(const float* probs, const std::int32_t* labels, std::int64_t rows, std::int64_t classes,
                              float scale, float* dlogits) override {
    Open o(*this, "cross_entropy_backward", probs, labels, dlogits);
    m_inner->cross_entropy_backward(probs, labels, rows, classes, scale, dlogits);
  }
  void mse_forward(const float* pred, const float* target, std::int64_t n, double* loss) override {
    Open o(*this, "mse_forward", pred, target, loss);
    m_inner->mse_forward(pred, target, n, loss);
  }
  void mse_backward(const float* pred, const float* target, std::int64_t n, float scale, float* dpred) override {
    Open o(*this, "mse_backward", pred, target, dpred);
    m_inner->mse_backward(pred, target, n, scale, dpred);
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
