// CpuBackend: the CPU implementation of Backend (oneDNN matmul/convolution,
// own OpenMP kernels for everything else). Internal to engine_cpu and its
// tests; layers only see Backend and make_cpu_backend().
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend.h"
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
};

class CpuBackend final : public Backend {
 public:
  // Throws std::runtime_error if oneDNN cannot create its CPU engine.
  // Any thread; the backend is then used by one thread at a time.
  explicit CpuBackend(const CpuBackendOptions& options = {});
  ~CpuBackend() override;
  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

  BackendInfo info() const override;

  void gemm(const GemmArgs& args) override;
  void conv2d_forward(const ConvShape& s, Format compute, const float* x, const float* w,
                      const float* bias, float* y) override;
  void conv2d_backward_data(const ConvShape& s, Format compute, const float* dy, const float* w,
                            float* dx) override;
  void conv2d_backward_weights(const ConvShape& s, Format compute, const float* x,
                               const float* dy, float* dw, float* db) override;

  void maxpool2d_forward(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                         std::int64_t k, const float* x, float* y, std::int32_t* argmax) override;
  void maxpool2d_backward(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                          std::int64_t k, const float* dy, const std::int32_t* argmax,
                          float* dx) override;

  void relu_forward(const float* x, float* y, std::int64_t n) override;
  void relu_backward(const float* x, const float* dy, float* dx, std::int64_t n) override;
  void gelu_forward(const float* x, float* y, std::int64_t n) override;
  void gelu_backward(const float* x, const float* dy, float* dx, std::int64_t n) override;
  void add(const float* a, const float* b, float* y, std::int64_t n) override;
  void scale(float* x, float s, std::int64_t n) override;
  void quantize(Format f, float* x, std::int64_t n, bool saturate) override;
  std::int64_t count_nonfinite(const float* x, std::int64_t n) override;
  double sum_squares(const float* x, std::int64_t n) override;
  void column_sums(const float* dy, std::int64_t rows, std::int64_t cols, float* db) override;

  void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y,
                         float* mean, float* rstd, std::int64_t rows, std::int64_t cols, float eps,
                         Format accumulate) override;
  void layernorm_backward(const float* dy, const float* x, const float* mean, const float* rstd,
                          const float* gamma, float* dx, float* dgamma, float* dbeta,
                          std::int64_t rows, std::int64_t cols) override;
  void softmax_forward(const float* x, float* y, std::int64_t rows, std::int64_t cols,
                       Format accumulate) override;
  void softmax_backward(const float* y, const float* dy, float* dx, std::int64_t rows,
                        std::int64_t cols) override;

  double cross_entropy_forward(const float* logits, const std::int32_t* labels, std::int64_t rows,
                               std::int64_t classes, float* probs, std::int64_t* correct) override;
  void cross_entropy_backward(const float* probs, const std::int32_t* labels, std::int64_t rows,
                              std::int64_t classes, float scale, float* dlogits) override;
  double mse_forward(const float* pred, const float* target, std::int64_t n) override;
  void mse_backward(const float* pred, const float* target, std::int64_t n, float scale,
                    float* dpred) override;

  // Diagnostics (tests, benchmarks; the owning thread): oneDNN primitives
  // (matmul, convolution, reorder) created so far. Constant in steady state.
  std::int64_t primitives_created() const;
  // The oneDNN implementation chosen for the last gemm / convolution call
  // ("brg:avx512_core_bf16", ...), or "" when the own kernel ran.
  std::string last_gemm_impl() const;
  std::string last_conv_impl() const;

 private:
  // OpenMP's thread count is a per-thread setting: the thread that calls the
  // backend (the trainer's) is not the one that constructed it, so every
  // entry point applies it to the caller (a thread-local read, cheap).
  void use_threads() const;

  int m_threads = 1;
  bool m_native_bf16 = false;
  std::string m_device;
  std::unique_ptr<cpu::DnnlContext> m_dnnl;
  std::unique_ptr<cpu::GemmEngine> m_gemm;
  std::unique_ptr<cpu::ConvEngine> m_conv;
  cpu::Workspace m_reduce_ws;  // column_sums / layernorm partial sums
};

}  // namespace engine
