// Backend: the compute interface every layer runs on (CPU: oneDNN + own
// kernels; CUDA: cuBLAS/cuDNN + own kernels). One conformance suite holds
// every backend to the scalar reference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "numeric/format.h"

namespace engine {

// One GEMM operand. `data` holds values in `format`'s storage width
// (FP32/TF32: float, FP16/BF16: uint16, FP8: uint8), row-major with leading
// dimension `ld` (elements) before the optional transpose.
struct GemmOperand {
  const void* data = nullptr;
  Format format = Format::FP32;
  bool trans = false;
  std::int64_t ld = 0;
};

// C[m x n] = alpha * op(A)[m x k] * op(B)[k x n] + beta * C (+ bias[n] per row).
// A and B are read in their own formats and multiplied exactly as the
// format dictates (DESIGN.md "Backends"):
//  - FP32: f32 matmul. TF32: inputs rounded (RNE) to 10 mantissa bits, f32 matmul.
//  - FP16: values decode exactly to f32; f32 matmul (Tensor Core semantics:
//    the product of two FP16 numbers is exact in f32).
//  - BF16, E4M3, E5M2: every value is exactly a BF16 value; native bf16 x bf16
//    -> f32 matmul where the CPU has it, else decoded to f32 (exact, slower).
// accumulate == FP32: ordinary f32 accumulation. accumulate == FP16 or BF16:
// the engine's own kernel rounds the running sum to that format after every
// addition (a demonstration of why FP32 accumulation matters; slow).
// Mixed operand formats are allowed (each is decoded on its own).
struct GemmArgs {
  std::int64_t m = 0, n = 0, k = 0;
  GemmOperand a, b;
  float* c = nullptr;
  std::int64_t ldc = 0;
  float alpha = 1.0f;
  float beta = 0.0f;
  const float* bias = nullptr;  // optional, length n
  Format accumulate = Format::FP32;
};

// 2-D convolution, NCHW activations, OIHW weights, f32 values (the caller
// has already rounded them to the compute format; `compute` tells the
// backend which path is exact: BF16/FP8 may run on the bf16 path).
struct ConvShape {
  std::int64_t n = 0, c_in = 0, h = 0, w = 0;  // input
  std::int64_t c_out = 0, kh = 0, kw = 0;
  std::int64_t stride = 1, pad = 0;
  std::int64_t out_h() const { return (h + 2 * pad - kh) / stride + 1; }
  std::int64_t out_w() const { return (w + 2 * pad - kw) / stride + 1; }
};

struct BackendInfo {
  std::string name;         // "cpu", "cuda"
  std::string device;       // CPU model or GPU name
  bool native_bf16 = false; // bf16 GEMMs run natively (not decoded to f32)
  int threads = 1;
};

// All pointers are host pointers for the CPU backend. A backend instance is
// used by one thread at a time (the trainer's); it may use its own worker
// threads inside a call. Shapes are validated by the layers at setup, not
// here (hot path).
class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendInfo info() const = 0;

  // --- matmul and convolution ---
  virtual void gemm(const GemmArgs& args) = 0;
  virtual void conv2d_forward(const ConvShape& s, Format compute, const float* x, const float* w,
                              const float* bias, float* y) = 0;
  virtual void conv2d_backward_data(const ConvShape& s, Format compute, const float* dy,
                                    const float* w, float* dx) = 0;
  // dw (and db when non-null) are overwritten, not accumulated.
  virtual void conv2d_backward_weights(const ConvShape& s, Format compute, const float* x,
                                       const float* dy, float* dw, float* db) = 0;

  // --- pooling (kernel k x k, stride k, no padding) ---
  // argmax receives, per output, the flat input index (within the image
  // plane) of the maximum; backward scatters dy there (dx overwritten).
  virtual void maxpool2d_forward(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                                 std::int64_t k, const float* x, float* y, std::int32_t* argmax) = 0;
  virtual void maxpool2d_backward(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                                  std::int64_t k, const float* dy, const std::int32_t* argmax,
                                  float* dx) = 0;

  // --- elementwise (n elements, f32 values; y may alias x) ---
  virtual void relu_forward(const float* x, float* y, std::int64_t n) = 0;
  // dx = dy where x > 0 else 0 (dx may alias dy)
  virtual void relu_backward(const float* x, const float* dy, float* dx, std::int64_t n) = 0;
  // GELU, exact erf form (PyTorch's default approximate='none').
  virtual void gelu_forward(const float* x, float* y, std::int64_t n) = 0;
  virtual void gelu_backward(const float* x, const float* dy, float* dx, std::int64_t n) = 0;
  // y = a + b (residual connections); y may alias a or b.
  virtual void add(const float* a, const float* b, float* y, std::int64_t n) = 0;
  // x *= s
  virtual void scale(float* x, float s, std::int64_t n) = 0;
  // Rounds in place to format f's values (see numeric/cast.h); FP32: no-op.
  virtual void quantize(Format f, float* x, std::int64_t n, bool saturate) = 0;
  // Count of inf/NaN values (the overflow check; fused with nothing else here).
  virtual std::int64_t count_nonfinite(const float* x, std::int64_t n) = 0;
  // Sum of squares in double (gradient norms).
  virtual double sum_squares(const float* x, std::int64_t n) = 0;
  // db[j] = sum_i dy[i, j] over `rows` rows (bias gradients; overwritten).
  virtual void column_sums(const float* dy, std::int64_t rows, std::int64_t cols, float* db) = 0;

  // --- rows of a [rows x cols] matrix ---
  // LayerNorm over the last dimension. mean and rstd (length rows) are saved
  // for backward. `accumulate` FP32: sums in f32; FP16/BF16: every partial
  // sum and intermediate is rounded to that format (what FP16 LayerNorm does
  // to a model). dgamma/dbeta are overwritten.
  virtual void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y,
                                 float* mean, float* rstd, std::int64_t rows, std::int64_t cols,
                                 float eps, Format accumulate) = 0;
  virtual void layernorm_backward(const float* dy, const float* x, const float* mean,
                                  const float* rstd, const float* gamma, float* dx, float* dgamma,
                                  float* dbeta, std::int64_t rows, std::int64_t cols) = 0;
  // Numerically stable softmax (max subtracted) over each row; FP16/BF16
  // accumulate rounds the exponentials' running sum after every addition.
  virtual void softmax_forward(const float* x, float* y, std::int64_t rows, std::int64_t cols,
                               Format accumulate) = 0;
  // dx = y * (dy - sum(dy * y)) per row
  virtual void softmax_backward(const float* y, const float* dy, float* dx, std::int64_t rows,
                                std::int64_t cols) = 0;

  // --- losses (mean over rows). Return the loss in double. ---
  // Softmax cross-entropy over integer labels. probs (rows x classes) is
  // written for backward; `correct` (optional) receives the count of rows
  // whose argmax equals the label.
  virtual double cross_entropy_forward(const float* logits, const std::int32_t* labels,
                                       std::int64_t rows, std::int64_t classes, float* probs,
                                       std::int64_t* correct) = 0;
  // dlogits = (probs - onehot) * scale / rows   (scale carries the loss scale)
  virtual void cross_entropy_backward(const float* probs, const std::int32_t* labels,
                                      std::int64_t rows, std::int64_t classes, float scale,
                                      float* dlogits) = 0;
  // Mean over all rows*cols elements of (pred - target)^2.
  virtual double mse_forward(const float* pred, const float* target, std::int64_t n) = 0;
  // dpred = 2 * (pred - target) * scale / n
  virtual void mse_backward(const float* pred, const float* target, std::int64_t n, float scale,
                            float* dpred) = 0;
};

// The CPU backend (oneDNN). `threads` <= 0: use the engine's default
// (all cores). Throws std::runtime_error if oneDNN cannot be initialised.
std::unique_ptr<Backend> make_cpu_backend(int threads = 0);

}  // namespace engine
