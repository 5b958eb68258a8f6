// Backend: the compute interface every layer runs on (CPU: oneDNN + own
// kernels; CUDA: cuBLAS/cuDNN + own kernels). One conformance suite holds
// every backend to the scalar reference.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "numeric/block.h"
#include "numeric/cast.h"
#include "numeric/format.h"
#include "numeric/inspect.h"

namespace engine {

// One GEMM operand. `data` holds values in `format`'s storage width
// (FP32/TF32: float, FP16/BF16: uint16, FP8: uint8), row-major with leading
// dimension `ld` (elements) before the optional transpose.
struct GemmOperand {
  const void* data = nullptr;
  Format format = Format::FP32;
  bool trans = false;
  std::int64_t ld = 0;
  // Block-quantized values (format FP32): what block_quantize wrote about
  // them, in backend memory. alpha is multiplied by its tensor_decode (as
  // cuBLASLt reads scales from device pointers, the host never needs the
  // value), and the backend may run the GEMM on its bf16 path when both
  // operands are bf16_exact.
  const BlockQuantized* block = nullptr;
  // Batched GEMMs (GemmArgs::batch): where product (i, j) finds this
  // operand, in elements from `data`: i * batch_stride[0] + j * batch_stride[1].
  std::int64_t batch_stride[2] = {0, 0};
  // Nonzero: a tag (new_keep_tag) under which these values stay as they
  // are until its last use (keep_last): a layer's saved input, read by its
  // forward GEMM and again by its weight gradient. A backend that decodes
  // the operand may keep the decoded copy for the next use of the tag and
  // drop it after the last; the results are the same bits either way.
  // keep_next: the tag's next use is the very next product (dy, read by dx
  // = dy W and then by dW = dy^T x), so a copy kept for it is still in cache.
  std::uint64_t keep = 0;
  bool keep_last = false;
  bool keep_next = false;
};

// A fresh GemmOperand::keep tag (never 0; any thread).
inline std::uint64_t new_keep_tag() {
  static std::atomic<std::uint64_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed) + 1;
}

// C[m x n] = alpha * op(A)[m x k] * op(B)[k x n] + beta * C (+ bias[n] per row).
// A and B are read in their own formats and multiplied exactly as the
// format dictates (docs/ARCHITECTURE.md "The backend contract"):
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
  // Batched: batch[0] x batch[1] independent products of this shape in one
  // call (attention: batch x heads), product (i, j) reading its operands at
  // their batch strides and writing C at c + i * c_batch_stride[0] +
  // j * c_batch_stride[1] (elements). The same alpha, beta and bias for all.
  // Block-quantized operands are not batched (std::invalid_argument).
  std::int64_t batch[2] = {1, 1};
  std::int64_t c_batch_stride[2] = {0, 0};
  bool batched() const { return batch[0] != 1 || batch[1] != 1; }
};

// One gradient of the fused unscale (unscale_grads): `nonfinite` (backend
// memory) receives the count of its inf/NaN values after the multiply.
struct GradBuffer {
  float* data = nullptr;
  std::int64_t n = 0;
  std::int64_t* nonfinite = nullptr;
};

// torch.optim.SGD's update of one parameter (scalars already in float, as
// PyTorch applies them to a float32 tensor). momentum_buf is null without
// momentum; with it, `first` initialises the buffer (t == 1). The buffer is
// rounded to state_format (RNE, kept in f32) after every update and before
// it is used.
struct SgdUpdate {
  float* value = nullptr;
  const float* grad = nullptr;
  float* momentum_buf = nullptr;
  std::int64_t n = 0;
  float lr = 0.0f, momentum = 0.0f, keep = 1.0f, weight_decay = 0.0f;
  bool nesterov = false, first = false;
  Format state_format = Format::FP32;
};

// torch.optim.Adam / AdamW's update of one parameter: l2 is Adam's weight
// decay added to the gradient, shrink AdamW's factor 1 - lr * wd.
struct AdamUpdate {
  float* value = nullptr;
  const float* grad = nullptr;
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
  std::int64_t n = 0;
  float step_size = 0.0f, bc2_sqrt = 1.0f, one_minus_beta1 = 0.1f, beta2 = 0.999f, one_minus_beta2 = 0.001f,
        eps = 1e-8f, l2 = 0.0f, shrink = 1.0f;
  Format state_format = Format::FP32;
};

// The gradient statistics of one tensor (statistics steps): `values` is the
// gradient whose fate is measured (the FP32 shadow's where there is one),
// `own` (optional) the run's own gradient (a value it holds as zero counts
// as flushed), `block` (optional) the values quantized in a block format
// (zero there: flushed; no overflow). Counts are added to `out` (backend
// memory, kCensusSlots int64): [0] zeros, [1 .. 64] the log2 histogram from
// 2^log2_lo, then 5 Magnitude counts as the run saw them (the magnitude
// times `scale`) and 5 without loss scaling.
struct GradCensus {
  const float* values = nullptr;
  const float* own = nullptr;
  const float* block = nullptr;
  std::int64_t n = 0;
  RoundingThresholds thresholds;
  double scale = 1.0;
  int log2_lo = -40;
  std::int64_t* out = nullptr;
};
inline constexpr int kCensusBins = 64;
inline constexpr int kCensusSlots = 1 + kCensusBins + 10;

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

// The three passes of a convolution (ConvArgs, ConvBlockArgs).
enum class ConvKind : std::uint8_t { Forward, BackwardData, BackwardWeights };

// A convolution (Backend::conv2d), f32 values (the caller has rounded them
// to `compute`):
//   Forward:         a = x,  b = w,  bias (optional), out = y
//   BackwardData:    a = dy, b = w,  out = dx
//   BackwardWeights: a = x,  b = dy, out = dw, db (optional)
// dw and db are overwritten, not accumulated.
struct ConvArgs {
  ConvKind kind = ConvKind::Forward;
  ConvShape shape;
  Format compute = Format::FP32;
  const float* a = nullptr;
  const float* b = nullptr;
  const float* bias = nullptr;
  float* out = nullptr;
  float* db = nullptr;
};

// A convolution on block-quantized operands (values in f32 containers; a
// null block pointer: a plain operand whose exactness in BF16 is a_exact /
// b_exact). The result is multiplied by the operands' tensor decode scales
// (read by the backend from backend memory), then the bias (forward) is
// added per channel. The backend runs the bf16 path when both operands are
// exact in BF16.
//   Forward:         a = x,  b = w,  out = y
//   BackwardData:    a = dy, b = w,  out = dx
//   BackwardWeights: a = x,  b = dy, out = dw
struct ConvBlockArgs {
  using Kind = ConvKind;
  Kind kind = Kind::Forward;
  ConvShape shape;
  const float* a = nullptr;
  const BlockQuantized* a_block = nullptr;
  bool a_exact = false;
  const float* b = nullptr;
  const BlockQuantized* b_block = nullptr;
  bool b_exact = false;
  const float* bias = nullptr;
  float* out = nullptr;
};

// The pointwise activations (Backend::activation_forward / _backward).
// GELU is the exact erf form (PyTorch's default approximate='none').
enum class Activation : std::uint8_t { Relu, Gelu };

// Which way a layout op, a row op or pooling runs.
enum class Pass : std::uint8_t { Forward, Backward };

// Which way a transfer goes: host -> backend, backend -> host (the read),
// backend -> backend.
enum class Transfer : std::uint8_t { Upload, Download, Copy };

// LayerNorm over the last dimension of a rows x cols matrix. Forward: y from
// x, gamma, beta; mean and rstd (length rows) are saved for backward.
// `accumulate` FP32: sums in f32; FP16/BF16: every partial sum and
// intermediate is rounded to that format (what FP16 LayerNorm does to a
// model). Backward: dx, dgamma and dbeta (overwritten) from dy, x, mean,
// rstd and gamma.
struct LayerNormArgs {
  Pass pass = Pass::Forward;
  std::int64_t rows = 0, cols = 0;
  const float* x = nullptr;
  const float* gamma = nullptr;
  const float* beta = nullptr;
  float* mean = nullptr;  // written forward, read backward
  float* rstd = nullptr;
  float* y = nullptr;
  float eps = 1e-5f;
  Format accumulate = Format::FP32;
  const float* dy = nullptr;
  float* dx = nullptr;
  float* dgamma = nullptr;
  float* dbeta = nullptr;
};

// The losses (Backend::loss_forward / _backward), written to *loss (double,
// backend memory).
//  CrossEntropy: softmax cross-entropy of pred (rows x cols logits) over
//    integer labels, the mean over rows. Forward writes probs for backward
//    and, where `correct` is set, the count of rows whose argmax equals the
//    label; backward writes grad = (probs - onehot) * scale / rows.
//  Mse: the mean over all rows * cols elements of (pred - target)^2;
//    backward writes grad = 2 * (pred - target) * scale / (rows * cols).
// scale carries the loss scale.
enum class LossKind : std::uint8_t { CrossEntropy, Mse };
struct LossArgs {
  LossKind kind = LossKind::CrossEntropy;
  std::int64_t rows = 0, cols = 0;
  const float* pred = nullptr;
  const std::int32_t* labels = nullptr;
  const float* target = nullptr;
  float* probs = nullptr;  // written forward, read backward
  double* loss = nullptr;
  std::int64_t* correct = nullptr;
  float scale = 1.0f;
  float* grad = nullptr;
};

struct BackendInfo {
  std::string name;         // "cpu", "cuda"
  std::string device;       // CPU model or GPU name
  bool native_bf16 = false; // bf16 GEMMs run natively (not decoded to f32)
  int threads = 1;
};

// Every pointer an op takes is backend memory (allocate()): host memory on
// the CPU backend, device memory on a GPU. The host reaches that memory only
// through upload() and download() (a download is a read: a training step
// makes one, see docs/ARCHITECTURE.md "The backend contract"). Ops return nothing computed from
// data; results (losses, counts, norms, amaxes) are written to backend
// memory and read with the step's one download.
//
// A backend instance is used by one thread at a time (the trainer's); it
// may use its own worker threads inside a call. Shapes are validated by the
// layers at setup, not here (hot path).
// A fused op (backend/fused.h): a struct of the calls it does in one pass.
struct FusedOp;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendInfo info() const = 0;
  // The device's own memory (free and total bytes, cudaMemGetInfo on a
  // GPU) for the memory chart; false where the backend uses host memory.
  virtual bool device_memory(std::uint64_t& free_bytes, std::uint64_t& total_bytes) {
    (void)free_bytes;
    (void)total_bytes;
    return false;
  }
  // Bytes the backend's own allocator holds live: what allocate() handed
  // out and release() has not taken back (on CUDA the context's memory
  // pool's used bytes: the tensors of every run on this backend, its
  // scratch and library workspaces; not the CUDA context itself). -1 where
  // the backend does not report it: the CPU backend does not (its host
  // memory is the process RSS).
  virtual std::int64_t allocated_bytes() { return -1; }

  // --- fused ops (backend/fused.h) ---
  // A backend's fast path for a fused op: true when it ran it (with the bits
  // of the op's composition of core ops), false (the default) to leave it to
  // that composition. Callers use the fused:: functions, not this.
  virtual bool run_fused(const FusedOp& op) {
    (void)op;
    return false;
  }

  // --- memory ---
  // 64-byte aligned, contents unspecified; throws std::bad_alloc.
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void release(void* p) noexcept = 0;
  // bytes from src to dst, the way `dir` says (for Upload src is host
  // memory, for Download dst is).
  virtual void transfer(Transfer dir, void* dst, const void* src, std::size_t bytes) = 0;
  void upload(void* dst, const void* host_src, std::size_t bytes) { transfer(Transfer::Upload, dst, host_src, bytes); }
  void download(void* host_dst, const void* src, std::size_t bytes) {
    transfer(Transfer::Download, host_dst, src, bytes);
  }
  void copy(void* dst, const void* src, std::size_t bytes) { transfer(Transfer::Copy, dst, src, bytes); }
  // Gathers rows of host data into backend memory (a batch in): row k of
  // dst is row rows[k] of host_base, each row_bytes long.
  virtual void upload_rows(void* dst, const void* host_base, std::size_t row_bytes, const std::uint32_t* rows,
                           std::size_t count) = 0;
  virtual void fill_zero(void* dst, std::size_t bytes) = 0;
  // x[i] = value for i in [0, n) (fault injection writes one element).
  virtual void fill(float* x, float value, std::int64_t n) = 0;

  // --- casts between storage formats (every tensor format) ---
  // dst[i] = src[i] decoded exactly and rounded to `to` as numeric/cast.h
  // does (RNE or stochastic, saturating per opt), stored in `to`'s width.
  // TF32 is stored as float. dst may alias src when both are 32-bit.
  virtual void convert(Format from, const void* src, Format to, void* dst, std::int64_t n,
                       const CastOptions& opt) = 0;
  // Rounds in place to format f's values (see numeric/cast.h); FP32: no-op.
  virtual void quantize(Format f, float* x, std::int64_t n, bool saturate) = 0;
  // block_quantize (numeric/block.h) into dst (floats); *info (backend
  // memory) receives the tensor decode scale and whether the values are
  // exact normal BF16 values.
  virtual void block_quantize(Format f, const float* src, float* dst, std::int64_t rows, std::int64_t cols,
                              BlockLayout layout, const BlockRounding& rounding, BlockQuantized* info) = 0;
  // FP8 delayed scaling: y = x * scale (y may alias x) and *amax = max|x|
  // (NaN/inf propagate), amax in backend memory.
  virtual void scale_amax(const float* x, float scale, float* y, std::int64_t n, float* amax) = 0;

  // --- the step's reductions and updates (results land in backend memory) ---
  // The loss scaler's fused pass: every gradient times inv_scale, its
  // non-finite count into its own counter, and the sum of the squares of
  // all unscaled gradients (double) into *sum_squares.
  virtual void unscale_grads(const GradBuffer* grads, std::size_t count, float inv_scale,
                             double* sum_squares) = 0;
  virtual void sgd_update(const SgdUpdate& u) = 0;
  virtual void adam_update(const AdamUpdate& u) = 0;
  virtual void gradient_census(const GradCensus& c) = 0;
  // out[0] += sum (a-b)^2, out[1] += sum b^2, out[2] += sum (a-b)*b, in
  // double (relative errors against the FP32 shadow pass).
  virtual void error_sums(const float* a, const float* b, std::int64_t n, double* out) = 0;
  // Adds the count of inf/NaN values to *counter (backend memory): the
  // per-layer overflow attribution.
  virtual void count_nonfinite(const float* x, std::int64_t n, std::int64_t* counter) = 0;
  // *out (backend memory) = max |x_i| (0 for n == 0; NaN/inf propagate).
  virtual void amax(const float* x, std::int64_t n, float* out) = 0;
  // db[j] = sum_i dy[i, j] over `rows` rows (bias gradients; overwritten).
  virtual void column_sums(const float* dy, std::int64_t rows, std::int64_t cols, float* db) = 0;

  // --- matmul and convolution ---
  virtual void gemm(const GemmArgs& args) = 0;
  virtual void conv2d(const ConvArgs& args) = 0;
  void conv2d_forward(const ConvShape& s, Format compute, const float* x, const float* w, const float* bias,
                      float* y) {
    conv2d({ConvKind::Forward, s, compute, x, w, bias, y, nullptr});
  }
  void conv2d_backward_data(const ConvShape& s, Format compute, const float* dy, const float* w, float* dx) {
    conv2d({ConvKind::BackwardData, s, compute, dy, w, nullptr, dx, nullptr});
  }
  void conv2d_backward_weights(const ConvShape& s, Format compute, const float* x, const float* dy, float* dw,
                               float* db) {
    conv2d({ConvKind::BackwardWeights, s, compute, x, dy, nullptr, dw, db});
  }
  virtual void conv2d_block(const ConvBlockArgs& args) = 0;
  // y[n, c, :] += bias[c] over planes of hw values.
  virtual void bias_add_channels(float* y, const float* bias, std::int64_t n, std::int64_t c, std::int64_t hw) = 0;
  // db[c] = sum over n and the plane of dy[n, c, :] (double accumulation,
  // overwritten).
  virtual void channel_sums(const float* dy, float* db, std::int64_t n, std::int64_t c, std::int64_t hw) = 0;

  // --- pooling (kernel k x k, stride k, no padding) ---
  // Forward: y from x; argmax receives, per output, the flat input index
  // (within the image plane) of the maximum. Backward: dy (in) scattered to
  // those indexes of dx (out, overwritten).
  virtual void maxpool2d(Pass pass, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                         const float* in, float* out, std::int32_t* argmax) = 0;
  void maxpool2d_forward(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                         const float* x, float* y, std::int32_t* argmax) {
    maxpool2d(Pass::Forward, n, c, h, w, k, x, y, argmax);
  }
  void maxpool2d_backward(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                          const float* dy, const std::int32_t* argmax, float* dx) {
    maxpool2d(Pass::Backward, n, c, h, w, k, dy, dx, const_cast<std::int32_t*>(argmax));
  }

  // --- elementwise (n elements; y may alias x, dx may alias dy) ---
  // y = act(x) with x and y stored in format f: FP32 values for both
  // activations; FP16 or BF16 patterns for ReLU, without decoding (y = x < 0
  // ? +0 : x; -0 and NaN pass through). GELU on codes is a fused op.
  virtual void activation_forward(Activation act, Format f, const void* x, void* y, std::int64_t n) = 0;
  // dx = act'(x) dy, x in format f and dy, dx in format g (both FP32, or,
  // for ReLU, FP16/BF16 patterns: dx = x > 0 ? dy : +0).
  virtual void activation_backward(Activation act, Format f, const void* x, Format g, const void* dy, void* dx,
                                   std::int64_t n) = 0;
  void relu_forward(const float* x, float* y, std::int64_t n) {
    activation_forward(Activation::Relu, Format::FP32, x, y, n);
  }
  void relu_backward(const float* x, const float* dy, float* dx, std::int64_t n) {
    activation_backward(Activation::Relu, Format::FP32, x, Format::FP32, dy, dx, n);
  }
  void relu16_forward(Format f, const void* x, void* y, std::int64_t n) {
    activation_forward(Activation::Relu, f, x, y, n);
  }
  void relu16_backward(Format f, const void* x, Format g, const void* dy, void* dx, std::int64_t n) {
    activation_backward(Activation::Relu, f, x, g, dy, dx, n);
  }
  void gelu_forward(const float* x, float* y, std::int64_t n) {
    activation_forward(Activation::Gelu, Format::FP32, x, y, n);
  }
  void gelu_backward(const float* x, const float* dy, float* dx, std::int64_t n) {
    activation_backward(Activation::Gelu, Format::FP32, x, Format::FP32, dy, dx, n);
  }
  // y = a + b (residual connections); y may alias a or b.
  virtual void add(const float* a, const float* b, float* y, std::int64_t n) = 0;
  // x *= s
  virtual void scale(float* x, float s, std::int64_t n) = 0;

  // --- layout ---
  // dst[b, t, :] = src[b, :] for t < T (a [B, C] row repeated T times).
  virtual void repeat_rows(const float* src, float* dst, std::int64_t B, std::int64_t T, std::int64_t C) = 0;
  // Token embedding (nn/embedding.h) over n tokens whose ids are floats
  // (exact integers) in ids; an id outside [0, vocab) or not an integer
  // stands for no token. Forward: src the table [vocab, dim], dst [n, dim]
  // with dst[i, :] = src[ids[i], :] (zeros for no token). Backward: src dy
  // [n, dim], dst the table's gradient [vocab, dim], overwritten: row v is
  // the f32 sum of the dy rows i with ids[i] == v taken in increasing i (a
  // scatter-add in a fixed order: the same bits at any thread count).
  virtual void embedding(Pass pass, const float* ids, const float* src, float* dst, std::int64_t n,
                         std::int64_t vocab, std::int64_t dim) = 0;
  // Vision transformer patches: Forward, x [B, C, H, W] -> patches [B * gh *
  // gw, C * p * p] (gh = H / p, gw = W / p; pixels outside the grid are
  // dropped); Backward, patches -> x (overwritten; pixels outside the grid
  // get 0). src is the input of the direction, dst its output.
  virtual void patch_layout(Pass pass, const float* src, float* dst, std::int64_t B, std::int64_t C, std::int64_t H,
                            std::int64_t W, std::int64_t p) = 0;
  void patchify(const float* x, float* patches, std::int64_t B, std::int64_t C, std::int64_t H, std::int64_t W,
                std::int64_t p) {
    patch_layout(Pass::Forward, x, patches, B, C, H, W, p);
  }
  void unpatchify(const float* patches, float* x, std::int64_t B, std::int64_t C, std::int64_t H, std::int64_t W,
                  std::int64_t p) {
    patch_layout(Pass::Backward, patches, x, B, C, H, W, p);
  }

  // --- rows of a [rows x cols] matrix ---
  virtual void layernorm(const LayerNormArgs& a) = 0;
  void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                         std::int64_t rows, std::int64_t cols, float eps, Format accumulate) {
    LayerNormArgs a;
    a.rows = rows, a.cols = cols, a.x = x, a.gamma = gamma, a.beta = beta, a.mean = mean, a.rstd = rstd, a.y = y;
    a.eps = eps, a.accumulate = accumulate;
    layernorm(a);
  }
  void layernorm_backward(const float* dy, const float* x, const float* mean, const float* rstd, const float* gamma,
                          float* dx, float* dgamma, float* dbeta, std::int64_t rows, std::int64_t cols) {
    LayerNormArgs a;
    a.pass = Pass::Backward, a.rows = rows, a.cols = cols, a.x = x, a.gamma = gamma;
    a.mean = const_cast<float*>(mean), a.rstd = const_cast<float*>(rstd);
    a.dy = dy, a.dx = dx, a.dgamma = dgamma, a.dbeta = dbeta;
    layernorm(a);
  }
  // Numerically stable softmax (max subtracted) over each row. Forward: out
  // = softmax(in); FP16/BF16 accumulate rounds the exponentials' running sum
  // after every addition. Backward: out (dx) = y * (dy - sum(dy * y)) per
  // row, with in = y (the forward's output) and dy (accumulate unused).
  virtual void softmax(Pass pass, const float* in, const float* dy, float* out, std::int64_t rows, std::int64_t cols,
                       Format accumulate) = 0;
  void softmax_forward(const float* x, float* y, std::int64_t rows, std::int64_t cols, Format accumulate) {
    softmax(Pass::Forward, x, nullptr, y, rows, cols, accumulate);
  }
  void softmax_backward(const float* y, const float* dy, float* dx, std::int64_t rows, std::int64_t cols) {
    softmax(Pass::Backward, y, dy, dx, rows, cols, Format::FP32);
  }

  // --- losses (LossArgs) ---
  virtual void loss_forward(const LossArgs& a) = 0;
  // The z-loss (PaLM; Wortsman et al. 2023) beside a cross-entropy over the
  // same logits [rows, cols]. Forward: lse[i] = m + log(sum_j exp(x[i, j] -
  // m)) with m the row's maximum, the sum in double over j in order, the
  // result rounded to f32; *z = (sum over i in order of (double)lse[i]^2) /
  // rows. Backward: grad[i, j] += (f * lse[i]) * probs[i, j] in f32 with
  // f = 2 * coef * scale / rows (probs: the cross-entropy's softmax; scale
  // carries the loss scale), the gradient of coef * mean(lse^2).
  virtual void z_loss(Pass pass, const float* logits, const float* probs, float* lse, double* z, float* grad,
                      std::int64_t rows, std::int64_t cols, float coef, float scale) = 0;
  virtual void loss_backward(const LossArgs& a) = 0;
  void cross_entropy_forward(const float* logits, const std::int32_t* labels, std::int64_t rows, std::int64_t classes,
                             float* probs, double* loss, std::int64_t* correct) {
    loss_forward({LossKind::CrossEntropy, rows, classes, logits, labels, nullptr, probs, loss, correct, 1.0f, nullptr});
  }
  void cross_entropy_backward(const float* probs, const std::int32_t* labels, std::int64_t rows, std::int64_t classes,
                              float scale, float* dlogits) {
    loss_backward({LossKind::CrossEntropy, rows, classes, nullptr, labels, nullptr, const_cast<float*>(probs),
                   nullptr, nullptr, scale, dlogits});
  }
  void mse_forward(const float* pred, const float* target, std::int64_t n, double* loss) {
    loss_forward({LossKind::Mse, 1, n, pred, nullptr, target, nullptr, loss, nullptr, 1.0f, nullptr});
  }
  void mse_backward(const float* pred, const float* target, std::int64_t n, float scale, float* dpred) {
    loss_backward({LossKind::Mse, 1, n, pred, nullptr, target, nullptr, nullptr, nullptr, scale, dpred});
  }
};

// The CPU backend (oneDNN). `threads` <= 0: use the engine's default
// (all cores). Throws std::runtime_error if oneDNN cannot be initialised.
std::unique_ptr<Backend> make_cpu_backend(int threads = 0);

}  // namespace engine
