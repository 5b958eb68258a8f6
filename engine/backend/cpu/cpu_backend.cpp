// CpuBackend: construction (threads, oneDNN engine, bf16 detection), info,
// and the forwarding of each Backend op to its kernel file.
#include "backend/cpu/cpu_backend.h"

#include <omp.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "backend/cpu/conv.h"
#include "backend/cpu/dnnl_context.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/kernels.h"
#include "numeric/cast.h"

namespace engine {

namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) break;
      const auto start = line.find_first_not_of(" \t", colon + 1);
      return start == std::string::npos ? std::string() : line.substr(start);
    }
  }
  return "unknown CPU";
}

// oneDNN's ISA values are bit sets: avx512_core_bf16 (0xe7) is contained in
// every ISA that has the bf16 dot product (and AMX). A small bf16 matmul
// must then also get a jit kernel, not the reference one.
bool detect_native_bf16(const dnnl::engine& eng) {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto need = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  if ((isa & need) != need) return false;
  try {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const dnnl::memory::desc a({64, 64}, dt::bf16, tag::ab), c({64, 64}, dt::f32, tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, a, c), eng);
    return std::string(pd.impl_info_str()).rfind("ref", 0) != 0;
  } catch (const dnnl::error&) {
    return false;
  }
}

}  // namespace

CpuBackend::CpuBackend(const CpuBackendOptions& options) {
  m_threads = options.threads > 0 ? options.threads : omp_get_num_procs();
#if defined(__SANITIZE_THREAD__)
  // libgomp (and oneDNN) are not built with ThreadSanitizer: the barriers
  // that order an OpenMP region's writes before the caller's reads are
  // invisible to it, so every parallel kernel would report false races.
  // Under TSAN the backend runs on the calling thread only; the engine's
  // own threads (trainer, UI) are still checked.
  m_threads = 1;
#endif
  use_threads();
  try {
    m_dnnl = std::make_unique<cpu::DnnlContext>();
  } catch (const dnnl::error& e) {
    throw std::runtime_error(std::string("oneDNN: cannot create the CPU engine: ") + e.what());
  }
  m_native_bf16 = options.allow_native_bf16 && detect_native_bf16(m_dnnl->engine());
  m_fuse_attention = options.fuse_attention;
  m_fast_fused = options.fast_fused;
  m_device = cpu_model_name();
  m_gemm = std::make_unique<cpu::GemmEngine>(*m_dnnl, m_native_bf16);
  m_conv = std::make_unique<cpu::ConvEngine>(*m_dnnl, m_native_bf16);
}

CpuBackend::~CpuBackend() = default;

void CpuBackend::use_threads() const {
  if (omp_get_max_threads() != m_threads) omp_set_num_threads(m_threads);
}

BackendInfo CpuBackend::info() const {
  BackendInfo i;
  i.name = "cpu";
  i.device = m_device;
  i.native_bf16 = m_native_bf16;
  i.threads = m_threads;
  return i;
}

std::int64_t CpuBackend::primitives_created() const { return m_dnnl->primitives_created(); }
std::string CpuBackend::last_gemm_impl() const { return m_gemm->last_impl(); }
std::size_t CpuBackend::kept_gemm_copies() const { return m_gemm->kept_copies(); }
std::string CpuBackend::last_conv_impl() const { return m_conv->last_impl(); }

void CpuBackend::gemm(const GemmArgs& args) {
  use_threads();
  if ((args.a.block || args.b.block) && args.batched())
    throw std::invalid_argument("gemm: block-quantized operands cannot be batched");
  if (args.a.block || args.b.block) gemm_block(args);
  else m_gemm->run(args);
}

void CpuBackend::gemm_encode(const GemmArgs& args, const GemmEncode& e) {
  const std::int64_t ldc = args.ldc > 0 ? args.ldc : args.n;
  if (args.a.block || args.b.block || args.batched() || ldc != args.n || !is_half_format(e.format)) {
    fused::compose(*this, fused::GemmEncodeOp{args, e});
    return;
  }
  use_threads();
  m_gemm->run(args, &e);
}

bool CpuBackend::attention_forward(const AttentionForward& f) {
  if (!m_fuse_attention) return false;
  use_threads();
  return cpu::attention_forward(f, m_native_bf16);
}

bool CpuBackend::attention_backward(const AttentionBackward& f) {
  if (!m_fuse_attention) return false;
  use_threads();
  return cpu::attention_backward(f, m_native_bf16);
}

void CpuBackend::gemm_block(const GemmArgs& args) {
  // Block-quantized operands: the tensor decode scales join alpha, and an
  // operand whose values are all normal BF16 values runs on the native bf16
  // path (exact: VDPBF16PS would flush subnormals, which bf16_exact rules out).
  GemmArgs g = args;
  GemmOperand* ops[2] = {&g.a, &g.b};
  for (int k = 0; k < 2; ++k) {
    GemmOperand& op = *ops[k];
    if (!op.block) continue;
    g.alpha *= op.block->tensor_decode;
    if (m_native_bf16 && op.block->bf16_exact && op.format == Format::FP32) {
      const std::int64_t rows = k == 0 ? (op.trans ? g.k : g.m) : (op.trans ? g.n : g.k);
      const auto n = static_cast<std::size_t>(rows * op.ld);
      std::vector<std::uint16_t>& ws = m_block_bf16[k];
      if (ws.size() < n) ws.resize(n);
      cast_from_f32(Format::BF16, static_cast<const float*>(op.data), ws.data(), n);
      op.data = ws.data();
      op.format = Format::BF16;
    }
    op.block = nullptr;
  }
  m_gemm->run(g);
}

void CpuBackend::conv2d_forward(const ConvShape& s, Format compute, const float* x, const float* w,
                                const float* bias, float* y) {
  use_threads();
  m_conv->forward(s, compute, {Format::FP32, x}, w, bias, y);
}

void CpuBackend::conv2d_backward_data(const ConvShape& s, Format compute, const float* dy,
                                      const float* w, float* dx) {
  use_threads();
  m_conv->backward_data(s, compute, {Format::FP32, dy}, w, dx);
}

void CpuBackend::conv2d_backward_weights(const ConvShape& s, Format compute, const float* x,
                                         const float* dy, float* dw, float* db) {
  use_threads();
  m_conv->backward_weights(s, compute, {Format::FP32, x}, {Format::FP32, dy}, dw, db);
}

namespace {
bool f32_or_bf16(ConvInput in) { return in.format == Format::FP32 || in.format == Format::BF16; }
}  // namespace

bool CpuBackend::conv2d_forward_coded(const ConvShape& s, Format compute, ConvInput x, const float* w,
                                      const float* bias, float* y) {
  if (!f32_or_bf16(x)) return false;
  use_threads();
  return m_conv->forward(s, compute, x, w, bias, y);
}

bool CpuBackend::conv2d_backward_data_coded(const ConvShape& s, Format compute, ConvInput dy, const float* w,
                                            float* dx) {
  if (!f32_or_bf16(dy)) return false;
  use_threads();
  return m_conv->backward_data(s, compute, dy, w, dx);
}

bool CpuBackend::conv2d_backward_weights_coded(const ConvShape& s, Format compute, ConvInput x, ConvInput dy,
                                               float* dw, float* db) {
  if (!f32_or_bf16(x) || !f32_or_bf16(dy)) return false;
  use_threads();
  return m_conv->backward_weights(s, compute, x, dy, dw, db);
}

void CpuBackend::maxpool2d_forward(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                                   std::int64_t k, const float* x, float* y, std::int32_t* argmax) {
  use_threads();
  cpu::maxpool2d_forward(n, c, h, w, k, x, y, argmax);
}

void CpuBackend::maxpool2d_forward16(Format f, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                                     std::int64_t k, const void* x, void* y, std::int32_t* argmax, float* x32,
                                     float* y32) {
  use_threads();
  if (!cpu::maxpool2d_forward16(f, n, c, h, w, k, static_cast<const std::uint16_t*>(x),
                                static_cast<std::uint16_t*>(y), argmax))
    fused::compose(*this, fused::MaxPoolForward16Op{f, n, c, h, w, k, x, y, argmax, x32, y32});
}

void CpuBackend::maxpool2d_backward(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                                    std::int64_t k, const float* dy, const std::int32_t* argmax,
                                    float* dx) {
  use_threads();
  cpu::maxpool2d_backward(n, c, h, w, k, dy, argmax, dx);
}

void CpuBackend::relu_forward(const float* x, float* y, std::int64_t n) {
  use_threads();
  cpu::relu_forward(x, y, n);
}

void CpuBackend::relu_backward(const float* x, const float* dy, float* dx, std::int64_t n) {
  use_threads();
  cpu::relu_backward(x, dy, dx, n);
}

void CpuBackend::gelu_forward(const float* x, float* y, std::int64_t n) {
  use_threads();
  cpu::gelu_forward(x, y, n);
}

void CpuBackend::gelu_backward(const float* x, const float* dy, float* dx, std::int64_t n) {
  use_threads();
  cpu::gelu_backward(x, dy, dx, n);
}

void CpuBackend::add(const float* a, const float* b, float* y, std::int64_t n) {
  use_threads();
  cpu::add(a, b, y, n);
}

void CpuBackend::scale(float* x, float s, std::int64_t n) {
  use_threads();
  cpu::scale(x, s, n);
}

void CpuBackend::quantize(Format f, float* x, std::int64_t n, bool saturate) {
  use_threads();
  cpu::quantize(f, x, n, saturate);
}

void CpuBackend::count_nonfinite(const float* x, std::int64_t n, std::int64_t* counter) {
  use_threads();
  *counter += cpu::count_nonfinite(x, n);
}

void CpuBackend::column_sums16(Format f, const void* dy, std::int64_t rows, std::int64_t cols, float* db,
                               float* scratch) {
  use_threads();
  if (!cpu::column_sums16(f, dy, rows, cols, db, m_reduce_ws)) fused::compose(*this, fused::ColumnSums16Op{f, dy, rows, cols, db, scratch});
}

void CpuBackend::column_sums(const float* dy, std::int64_t rows, std::int64_t cols, float* db) {
  use_threads();
  cpu::column_sums(dy, rows, cols, db, m_reduce_ws);
}

void CpuBackend::layernorm_forward(const float* x, const float* gamma, const float* beta, float* y,
                                   float* mean, float* rstd, std::int64_t rows, std::int64_t cols,
                                   float eps, Format accumulate) {
  use_threads();
  cpu::layernorm_forward(x, gamma, beta, y, mean, rstd, rows, cols, eps, accumulate);
}

void CpuBackend::layernorm_backward(const float* dy, const float* x, const float* mean,
                                    const float* rstd, const float* gamma, float* dx, float* dgamma,
                                    float* dbeta, std::int64_t rows, std::int64_t cols) {
  use_threads();
  cpu::layernorm_backward(dy, x, mean, rstd, gamma, dx, dgamma, dbeta, rows, cols, m_reduce_ws);
}

void CpuBackend::layernorm_coded_forward(Format fx, const void* x, const float* gamma, const float* beta, Format fy,
                                     void* y, float* mean, float* rstd, std::int64_t rows, std::int64_t cols,
                                     float eps, const CastOptions& opt, float* sx, float* sy) {
  use_threads();
  // One pass: code rows decoded and encoded on the stack (rows.cpp).
  if (!cpu::layernorm_coded_forward(fx, x, gamma, beta, fy, y, mean, rstd, rows, cols, eps, opt))
    fused::compose(*this, fused::LayerNormCodedForwardOp{fx, x, gamma, beta, fy, y, mean, rstd, rows, cols, eps, opt, sx, sy});
}

void CpuBackend::layernorm_backward_add(Format fdy, const void* dy, Format fx, const void* x, const float* mean,
                                        const float* rstd, const float* gamma, const float* r, float* dx, Format fc,
                                        void* codes, float* dgamma, float* dbeta, std::int64_t rows,
                                        std::int64_t cols, float* sdy, float* sx) {
  use_threads();
  if (!cpu::layernorm_backward_add(fdy, dy, fx, x, mean, rstd, gamma, r, dx, fc, codes, dgamma, dbeta, rows, cols,
                                   m_reduce_ws))
    fused::compose(*this, fused::LayerNormBackwardAddOp{fdy, dy, fx, x, mean, rstd, gamma, r, dx, fc, codes, dgamma, dbeta, rows, cols,
                                    sdy, sx});
}

void CpuBackend::layernorm_coded_backward(Format fdy, const void* dy, Format fx, const void* x, const float* mean,
                                      const float* rstd, const float* gamma, Format fdx, void* dx, float* dgamma,
                                      float* dbeta, std::int64_t rows, std::int64_t cols, float* sdy, float* sx,
                                      float* sdx) {
  use_threads();
  if (!cpu::layernorm_coded_backward(fdy, dy, fx, x, mean, rstd, gamma, fdx, dx, dgamma, dbeta, rows, cols,
                                 m_reduce_ws))
    fused::compose(*this, fused::LayerNormCodedBackwardOp{fdy, dy, fx, x, mean, rstd, gamma, fdx, dx, dgamma, dbeta, rows, cols, sdy, sx,
                                  sdx});
}

void CpuBackend::softmax_forward(const float* x, float* y, std::int64_t rows, std::int64_t cols,
                                 Format accumulate) {
  use_threads();
  cpu::softmax_forward(x, y, rows, cols, accumulate);
}

void CpuBackend::softmax_backward(const float* y, const float* dy, float* dx, std::int64_t rows,
                                  std::int64_t cols) {
  use_threads();
  cpu::softmax_backward(y, dy, dx, rows, cols);
}

void CpuBackend::softmax_coded_forward(Format fx, const void* x, float* y, std::int64_t rows, std::int64_t cols,
                                       float* sx) {
  use_threads();
  // One pass: code rows decoded on the stack (rows.cpp).
  if (!cpu::softmax_coded_forward(fx, x, y, rows, cols)) fused::compose(*this, fused::SoftmaxCodedForwardOp{fx, x, y, rows, cols, sx});
}

void CpuBackend::softmax_coded_backward(const float* y, Format fdy, const void* dy, float* dx, std::int64_t rows,
                                        std::int64_t cols, float* sdy) {
  use_threads();
  if (!cpu::softmax_coded_backward(y, fdy, dy, dx, rows, cols))
    fused::compose(*this, fused::SoftmaxCodedBackwardOp{y, fdy, dy, dx, rows, cols, sdy});
}

void CpuBackend::cross_entropy_forward(const float* logits, const std::int32_t* labels, std::int64_t rows,
                                       std::int64_t classes, float* probs, double* loss, std::int64_t* correct) {
  use_threads();
  *loss = cpu::cross_entropy_forward(logits, labels, rows, classes, probs, correct);
}

void CpuBackend::cross_entropy_backward(const float* probs, const std::int32_t* labels,
                                        std::int64_t rows, std::int64_t classes, float scale,
                                        float* dlogits) {
  use_threads();
  cpu::cross_entropy_backward(probs, labels, rows, classes, scale, dlogits);
}

void CpuBackend::mse_forward(const float* pred, const float* target, std::int64_t n, double* loss) {
  use_threads();
  *loss = cpu::mse_forward(pred, target, n);
}

void CpuBackend::mse_backward(const float* pred, const float* target, std::int64_t n, float scale,
                              float* dpred) {
  use_threads();
  cpu::mse_backward(pred, target, n, scale, dpred);
}

std::unique_ptr<Backend> make_cpu_backend(int threads) {
  CpuBackendOptions options;
  options.threads = threads;
  return std::make_unique<CpuBackend>(options);
}

}  // namespace engine
