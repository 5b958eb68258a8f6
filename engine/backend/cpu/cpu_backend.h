// CpuBackend: the CPU implementation of Backend (oneDNN matmul/convolution,
// own OpenMP kernels for everything else). Internal to engine_cpu and its
// tests; layers only see Backend and make_cpu_backend().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/fused.h"
#include "backend/cpu/workspace.h"

namespace engine {

namespace cpu {
class DnnlContext;
class GemmEngine;
class ConvEngine;
}  // namespace cpu

struct CpuBackendOptions {
  int threads = 0;  // <= 0: omp_get_num_procs()
  // Use oneDNN's native bf16 x bf16 -> f32 kernels when the CPU has them.
  // false forces the decode-to-f32 path (what a CPU without AVX512-BF16
  // runs); the conformance suite runs both.
  bool allow_native_bf16 = true;
  // Run attention's core as one fused pass where it fits (attention.cpp).
  // false leaves it to the layers' ops one by one: the tests compare the two.
  bool fuse_attention = true;
  // false declines every fused op (run_fused), leaving each to its portable
  // composition of core ops: the conformance suite holds both to the same
  // bits.
  bool fast_fused = true;
};

class CpuBackend final : public Backend {
 public:
  // Throws std::runtime_error if oneDNN cannot create its CPU engine.
  // Any thread; the backend is then used by one thread at a time.
  explicit CpuBackend(const CpuBackendOptions& options = {});
  ~CpuBackend() override;
  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

  // --- Backend ---
  BackendInfo info() const override;
  bool run_fused(const FusedOp& op) override;
  void transfer(Transfer dir, void* dst, const void* src, std::size_t bytes) override;
  void conv2d(const ConvArgs& a) override;
  void maxpool2d(Pass pass, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                 const float* in, float* out, std::int32_t* argmax) override;
  void activation_forward(Activation act, Format f, const void* x, void* y, std::int64_t n) override;
  void activation_backward(Activation act, Format f, const void* x, Format g, const void* dy, void* dx,
                           std::int64_t n) override;
  void patch_layout(Pass pass, const float* src, float* dst, std::int64_t B, std::int64_t C, std::int64_t H,
                    std::int64_t W, std::int64_t p) override;
  void layernorm(const LayerNormArgs& a) override;
  void softmax(Pass pass, const float* in, const float* dy, float* out, std::int64_t rows, std::int64_t cols,
               Format accumulate) override;
  void loss_forward(const LossArgs& a) override;
  void loss_backward(const LossArgs& a) override;

  // The ops one by one: the core ops above dispatch to them, and run_fused
  // (fused_ops.cpp) to the fused ones, which fall back to the op's
  // composition (fused::compose) where no fast path fits.

  void* allocate(std::size_t bytes) override;
  void release(void* p) noexcept override;
  void upload(void* dst, const void* host_src, std::size_t bytes);
  void download(void* host_dst, const void* src, std::size_t bytes);
  void copy(void* dst, const void* src, std::size_t bytes);
  void upload_rows(void* dst, const void* host_base, std::size_t row_bytes, const std::uint32_t* rows,
                   std::size_t count) override;
  void fill_zero(void* dst, std::size_t bytes) override;
  void convert(Format from, const void* src, Format to, void* dst, std::int64_t n,
               const CastOptions& opt) override;
  void block_quantize(Format f, const float* src, float* dst, std::int64_t rows, std::int64_t cols,
                      BlockLayout layout, const BlockRounding& rounding, BlockQuantized* info) override;
  void scale_amax(const float* x, float scale, float* y, std::int64_t n, float* amax) override;
  void scale_amax_encode(const float* x, float scale, Format f, void* q, std::int64_t n, const CastOptions& opt,
                         float* amax, float* scratch);
  void scale_amax_encode16(Format from, const void* x, float scale, Format f, void* q, std::int64_t n,
                           const CastOptions& opt, float* amax, float* scratch);
  void scale_amax_encode_sums(Format from, const void* x, std::int64_t rows, std::int64_t cols, float scale, Format f,
                              void* q, const CastOptions& opt, float* amax, float* db, float* scratch);
  void scale_amax_encode_planes(const float* x, std::int64_t n, std::int64_t c, std::int64_t hw, float scale,
                                Format f, void* q, const CastOptions& opt, float* amax, float* decoded, float* db,
                                float* scratch);
  void fill(float* x, float value, std::int64_t n) override;
  void unscale_grads(const GradBuffer* grads, std::size_t count, float inv_scale,
                     double* sum_squares) override;
  void sgd_update(const SgdUpdate& u) override;
  void sgd_update_encode(const SgdUpdate& u, const UpdateEncode& e);
  void unscale_grads_coded(const GradBuffer* grads, const GradCodes* codes, std::size_t count, float inv_scale,
                           double* sum_squares);
  void sgd_update_coded(const SgdUpdate& u, const UpdateEncode& e);
  void adam_update(const AdamUpdate& u) override;
  void gradient_census(const GradCensus& c) override;
  void error_sums(const float* a, const float* b, std::int64_t n, double* out) override;

  void gemm(const GemmArgs& args) override;
  void gemm_encode(const GemmArgs& args, const GemmEncode& e);
  bool attention_forward(const AttentionForward& f);
  bool attention_backward(const AttentionBackward& f);
  void conv2d_forward(const ConvShape& s, Format compute, const float* x, const float* w,
                      const float* bias, float* y);
  void conv2d_backward_data(const ConvShape& s, Format compute, const float* dy, const float* w,
                            float* dx);
  void conv2d_backward_weights(const ConvShape& s, Format compute, const float* x,
                               const float* dy, float* dw, float* db);

  bool conv2d_forward_coded(const ConvShape& s, Format compute, ConvInput x, const float* w, const float* bias,
                            float* y);
  bool conv2d_backward_data_coded(const ConvShape& s, Format compute, ConvInput dy, const float* w,
                                  float* dx);
  bool conv2d_backward_weights_coded(const ConvShape& s, Format compute, ConvInput x, ConvInput dy, float* dw,
                                     float* db);
  void conv2d_block(const ConvBlockArgs& args) override;
  void bias_add_channels(float* y, const float* bias, std::int64_t n, std::int64_t c, std::int64_t hw) override;
  void scale_bias_add_channels(float* y, float alpha, const float* bias, std::int64_t n, std::int64_t c,
                               std::int64_t hw);
  void channel_sums(const float* dy, float* db, std::int64_t n, std::int64_t c, std::int64_t hw) override;

  void maxpool2d_forward(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                         std::int64_t k, const float* x, float* y, std::int32_t* argmax);
  void maxpool2d_backward(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                          std::int64_t k, const float* dy, const std::int32_t* argmax,
                          float* dx);
  void maxpool2d_forward16(Format f, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                           std::int64_t k, const void* x, void* y, std::int32_t* argmax, float* x32,
                           float* y32);

  void relu_forward(const float* x, float* y, std::int64_t n);
  void relu_backward(const float* x, const float* dy, float* dx, std::int64_t n);
  void relu_backward_coded(const float* x, Format g, const void* dy, float* dx, std::int64_t n,
                           float* sdy);
  void relu16_forward(Format f, const void* x, void* y, std::int64_t n);
  void relu16_backward(Format f, const void* x, Format g, const void* dy, void* dx, std::int64_t n);
  void patchify(const float* x, float* patches, std::int64_t B, std::int64_t C, std::int64_t H, std::int64_t W,
                std::int64_t p);
  void unpatchify(const float* patches, float* x, std::int64_t B, std::int64_t C, std::int64_t H, std::int64_t W,
                  std::int64_t p);
  void repeat_rows(const float* src, float* dst, std::int64_t B, std::int64_t T, std::int64_t C) override;
  void embedding(Pass pass, const float* ids, const float* src, float* dst, std::int64_t n, std::int64_t vocab,
                 std::int64_t dim) override;
  void gelu_forward(const float* x, float* y, std::int64_t n);
  void gelu_backward(const float* x, const float* dy, float* dx, std::int64_t n);
  void gelu16_forward(Format f, const void* x, void* y, std::int64_t n, float* sx, float* sy);
  void gelu_backward_coded(const float* x, Format g, const void* dy, float* dx, std::int64_t n, float* sdy);
  void gelu_forward_encode(const float* x, std::int64_t n, float scale, Format f, void* q, const CastOptions& opt,
                           float* amax, float* scratch);
  void relu_forward_encode(const float* x, std::int64_t n, float scale, Format f, void* q, const CastOptions& opt,
                           float* amax, float* scratch);
  void gelu16_backward(Format f, const void* x, Format g, const void* dy, void* dx, std::int64_t n, float* sx,
                       float* sdy, float* sdx);
  void add(const float* a, const float* b, float* y, std::int64_t n) override;
  void add_encode(Format fa, const void* a, Format fb, const void* b, Format fy, void* y, std::int64_t n,
                  const CastOptions& opt, float* sa, float* sb, float* sy);
  void scale(float* x, float s, std::int64_t n) override;
  void quantize(Format f, float* x, std::int64_t n, bool saturate) override;
  void count_nonfinite(const float* x, std::int64_t n, std::int64_t* counter) override;
  void amax(const float* x, std::int64_t n, float* out) override;
  void column_sums(const float* dy, std::int64_t rows, std::int64_t cols, float* db) override;
  void layernorm_coded_forward(Format fx, const void* x, const float* gamma, const float* beta, Format fy, void* y,
                           float* mean, float* rstd, std::int64_t rows, std::int64_t cols, float eps,
                           const CastOptions& opt, float* sx, float* sy);
  void layernorm_backward_add(Format fdy, const void* dy, Format fx, const void* x, const float* mean,
                              const float* rstd, const float* gamma, const float* r, float* dx, Format fc, void* codes,
                              float* dgamma, float* dbeta, std::int64_t rows, std::int64_t cols, float* sdy,
                              float* sx);
  void layernorm_coded_backward(Format fdy, const void* dy, Format fx, const void* x, const float* mean, const float* rstd,
                            const float* gamma, Format fdx, void* dx, float* dgamma, float* dbeta, std::int64_t rows,
                            std::int64_t cols, float* sdy, float* sx, float* sdx);
  void column_sums16(Format f, const void* dy, std::int64_t rows, std::int64_t cols, float* db,
                     float* scratch);

  void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y,
                         float* mean, float* rstd, std::int64_t rows, std::int64_t cols, float eps,
                         Format accumulate);
  void layernorm_backward(const float* dy, const float* x, const float* mean, const float* rstd,
                          const float* gamma, float* dx, float* dgamma, float* dbeta,
                          std::int64_t rows, std::int64_t cols);
  void softmax_forward(const float* x, float* y, std::int64_t rows, std::int64_t cols,
                       Format accumulate);
  void softmax_backward(const float* y, const float* dy, float* dx, std::int64_t rows,
                        std::int64_t cols);
  void softmax_coded_forward(Format fx, const void* x, float* y, std::int64_t rows, std::int64_t cols,
                             float* sx);
  void softmax_coded_backward(const float* y, Format fdy, const void* dy, float* dx, std::int64_t rows,
                              std::int64_t cols, float* sdy);

  void cross_entropy_forward(const float* logits, const std::int32_t* labels, std::int64_t rows,
                             std::int64_t classes, float* probs, double* loss, std::int64_t* correct);
  void cross_entropy_backward(const float* probs, const std::int32_t* labels, std::int64_t rows,
                              std::int64_t classes, float scale, float* dlogits);
  void mse_forward(const float* pred, const float* target, std::int64_t n, double* loss);
  void mse_backward(const float* pred, const float* target, std::int64_t n, float scale,
                    float* dpred);

  // Diagnostics (tests, benchmarks; the owning thread): oneDNN primitives
  // (matmul, convolution, reorder) created so far. Constant in steady state.
  std::int64_t primitives_created() const;
  // The oneDNN implementation chosen for the last gemm / convolution call
  // ("brg:avx512_core_bf16", ...), or "" when the own kernel ran.
  std::string last_gemm_impl() const;
  // Decoded GEMM operands kept for a later product under a tag (GemmOperand::keep), all threads.
  std::size_t kept_gemm_copies() const;
  std::string last_conv_impl() const;

 private:
  void gemm_block(const GemmArgs& args);
  // OpenMP's thread count is a per-thread setting: the thread that calls the
  // backend (the trainer's) is not the one that constructed it, so every
  // entry point applies it to the caller (a thread-local read, cheap).
  void use_threads() const;

  int m_threads = 1;
  bool m_native_bf16 = false;
  bool m_fuse_attention = true;
  bool m_fast_fused = true;
  std::string m_device;
  std::unique_ptr<cpu::DnnlContext> m_dnnl;
  std::unique_ptr<cpu::GemmEngine> m_gemm;
  std::unique_ptr<cpu::ConvEngine> m_conv;
  cpu::Workspace m_reduce_ws;
  std::vector<std::uint16_t> m_block_bf16[2];  // gemm_block's BF16 operands
  // sgd_update_encode's blocks, each decoded from e's codes first where
  // decode_first (sgd_update_coded).
  void sgd_encode_blocks(const SgdUpdate& u, const UpdateEncode& e, bool decode_first);
  std::vector<double> m_partial_sums;          // unscale_grads' fixed blocks
  std::vector<std::int64_t> m_partial_counts;  // column_sums / layernorm partial sums
};

}  // namespace engine
