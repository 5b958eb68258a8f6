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
  // Batched: batch[0] x batch[1] independent products of this shape in one
  // call (attention: batch x heads), product (i, j) reading its operands at
  // their batch strides and writing C at c + i * c_batch_stride[0] +
  // j * c_batch_stride[1] (elements). The same alpha, beta and bias for all.
  // Block-quantized operands are not batched (std::invalid_argument).
  std::int64_t batch[2] = {1, 1};
  std::int64_t c_batch_stride[2] = {0, 0};
  bool batched() const { return batch[0] != 1 || batch[1] != 1; }
};

// gemm_encode's second output: C's f32 values also encoded to `format`
// (FP16, BF16 or an unscaled FP8) in `codes` (rows of n values, the
// format's storage width), with opt's rounding and
// saturation; with codes null, C itself rounded to the format's values in
// place (quantize: round to nearest even, opt.saturate).
// With codes set and c_scratch, C's f32 values are the caller's scratch
// (nothing reads them after the call): a backend may encode them from
// wherever it computed them and leave C unwritten. Ignored where beta != 0.
struct GemmEncode {
  Format format = Format::FP32;
  void* codes = nullptr;
  CastOptions opt;
  bool c_scratch = false;
};

// A convolution input as stored: FP32 values or BF16 codes (format), in
// backend memory.
struct ConvInput {
  Format format = Format::FP32;
  const void* data = nullptr;
};

// Attention's core forward over B x H heads of T tokens, d = C / H columns
// each (nn/attention.h; all pointers backend memory): from qkv [B, T, 3C]
// in `format` (both GEMMs' operand format, FP32 sums),
//   scores [B, H, T, T] = q k^T * alpha, rounded to scores_format (its
//                         storage; not kept: nothing after the softmax reads it)
//                         and then to softmax_format (the softmax's compute
//                         format, FP32 or FP16/BF16)
//   probs  [B, H, T, T] = their softmax with FP32 sums, stored in
//                         probs_format: FP32 (`probs`, and `probs_codes` in
//                         `format` unless that is FP32 too) or `format`
//                         (`probs_codes` only)
//   values [B, T, C]    = probs_codes v, head h in columns h d .. h d + d - 1,
//                         stored in values_format
// every rounding to nearest even, saturating as its flag says. The bits are
// those of the ops one by one: batched gemm, convert, softmax (its input
// rounded as the softmax layer rounds it), convert, batched gemm, convert.
struct AttentionForward {
  std::int64_t B = 0, T = 0, C = 0, H = 0;
  Format format = Format::FP32;
  const void* qkv = nullptr;
  float alpha = 1.0f;
  Format scores_format = Format::FP32;
  bool scores_saturate = false;
  Format softmax_format = Format::FP32;
  bool softmax_saturate = false;
  Format probs_format = Format::FP32;
  float* probs = nullptr;
  void* probs_codes = nullptr;
  bool probs_saturate = false;
  Format values_format = Format::FP32;
  void* values = nullptr;
  bool values_saturate = false;
  // With values_cast E4M3 or E5M2 (values_format FP32): the values are not
  // stored (values unused) but cast as scale_amax_encode casts them, the
  // saturating encode of values * values_scale into values_codes and
  // max |values| into *values_amax (backend memory): the FP8 projection's
  // input cast. A backend without it returns false.
  Format values_cast = Format::FP32;
  void* values_codes = nullptr;
  float values_scale = 1.0f;
  float* values_amax = nullptr;
};

// Attention's core backward, for the same shapes (all pointers backend
// memory): from qkv and probs_operand (the forward's probs in `format`: its
// probs_codes, or probs when `format` is FP32), probs (the softmax's output
// in probs_format: FP32 or `format`) and dvalues [B, T, C] in
// dvalues_format,
//   dprobs  = dvalues v^T                rounded to dprobs_format, then to
//                                        softmax_grad_format (FP32 or FP16/BF16)
//   dscores = softmax backward of those  rounded to softmax_grad_format
//   dS      = dscores in dscores_format  (the scores GEMMs' operand)
//   dq = alpha dS k, dk = alpha dS^T q, dv = probs_operand^T dvalues
// into dqkv [B, T, 3C] (f32, rounded to the values of dqkv_format), or,
// with dqkv_codes set, encoded to dqkv_format there instead. FP32 sums;
// every rounding to nearest even without saturating. The bits of the ops
// one by one: two batched gemms, convert, softmax backward (its input
// rounded as the softmax layer rounds it), convert, two batched gemms (and
// the quantize or convert of dqkv). dprobs, dscores and dS are not kept.
struct AttentionBackward {
  std::int64_t B = 0, T = 0, C = 0, H = 0;
  Format format = Format::FP32;
  const void* qkv = nullptr;
  const void* probs_operand = nullptr;
  Format probs_format = Format::FP32;
  const void* probs = nullptr;
  float alpha = 1.0f;
  Format dvalues_format = Format::FP32;
  const void* dvalues = nullptr;
  Format dprobs_format = Format::FP32;
  Format softmax_grad_format = Format::FP32;
  Format dscores_format = Format::FP32;
  float* dqkv = nullptr;
  Format dqkv_format = Format::FP32;
  void* dqkv_codes = nullptr;
};

// Where unscale_grads_coded reads a gradient stored in a narrower format:
// `data` (n codes of `format`, backend memory), or nothing (FP32: the
// GradBuffer's own values).
struct GradCodes {
  Format format = Format::FP32;
  const void* data = nullptr;
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

// A copy an optimizer update writes of the values it has just updated: the
// low-precision weights refreshed from their FP32 master (a cast, or FP8's
// delayed-scaled encode, which also records the new values' amax), or FP16
// weights stored back after an update of their decoded values.
struct UpdateEncode {
  Format format = Format::FP32;  // FP32: a plain copy
  void* codes = nullptr;         // n values in format's storage width
  CastOptions opt;               // stochastic rounding indexes from opt.index_offset
  // Scaled (amax non-null): codes = encode(value * scale) and *amax =
  // max|value|, as scale_amax_encode; scratch is its n floats.
  float scale = 1.0f;
  float* amax = nullptr;
  float* scratch = nullptr;
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
  enum class Kind : std::uint8_t { Forward, BackwardData, BackwardWeights };
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

struct BackendInfo {
  std::string name;         // "cpu", "cuda"
  std::string device;       // CPU model or GPU name
  bool native_bf16 = false; // bf16 GEMMs run natively (not decoded to f32)
  int threads = 1;
};

// Every pointer an op takes is backend memory (allocate()): host memory on
// the CPU backend, device memory on a GPU. The host reaches that memory only
// through upload() and download() (a download is a read: a training step
// makes one, see DESIGN.md "Backends"). Ops return nothing computed from
// data; results (losses, counts, norms, amaxes) are written to backend
// memory and read with the step's one download.
//
// A backend instance is used by one thread at a time (the trainer's); it
// may use its own worker threads inside a call. Shapes are validated by the
// layers at setup, not here (hot path).
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

  // --- memory ---
  // 64-byte aligned, contents unspecified; throws std::bad_alloc.
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void release(void* p) noexcept = 0;
  // host -> backend, backend -> host (the read), backend -> backend.
  virtual void upload(void* dst, const void* host_src, std::size_t bytes) = 0;
  virtual void download(void* host_dst, const void* src, std::size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
  // Gathers rows of host data into backend memory (a batch in): row k of
  // dst is row rows[k] of host_base, each row_bytes long.
  virtual void upload_rows(void* dst, const void* host_base, std::size_t row_bytes, const std::uint32_t* rows,
                           std::size_t count) = 0;
  virtual void fill_zero(void* dst, std::size_t bytes) = 0;

  // --- casts between storage formats (every tensor format) ---
  // dst[i] = src[i] decoded exactly and rounded to `to` as numeric/cast.h
  // does (RNE or stochastic, saturating per opt), stored in `to`'s width.
  // TF32 is stored as float. dst may alias src when both are 32-bit.
  virtual void convert(Format from, const void* src, Format to, void* dst, std::int64_t n,
                       const CastOptions& opt) = 0;
  // block_quantize (numeric/block.h) into dst (floats); *info (backend
  // memory) receives the tensor decode scale and whether the values are
  // exact normal BF16 values.
  virtual void block_quantize(Format f, const float* src, float* dst, std::int64_t rows, std::int64_t cols,
                              BlockLayout layout, const BlockRounding& rounding, BlockQuantized* info) = 0;
  // FP8 delayed scaling: y = x * scale (y may alias x) and *amax = max|x|
  // (NaN/inf propagate), amax in backend memory.
  virtual void scale_amax(const float* x, float scale, float* y, std::int64_t n, float* amax) = 0;
  // FP8 delayed scaling's whole cast: *amax = max|x| as scale_amax gives it,
  // and q = x * scale encoded to f (opt: saturation) in f's storage width.
  // The same bits as scale_amax into `scratch` (n floats of backend memory,
  // contents undefined after) followed by convert(FP32, scratch, f, q, n,
  // opt), which is this default; a backend may do it in one pass.
  virtual void scale_amax_encode(const float* x, float scale, Format f, void* q, std::int64_t n,
                                 const CastOptions& opt, float* amax, float* scratch) {
    scale_amax(x, scale, scratch, n, amax);
    convert(Format::FP32, scratch, f, q, n, opt);
  }
  // scale_amax_encode of the values of FP16/BF16 codes (format `from`): the
  // same bits as decoding them into `scratch` (n floats of backend memory,
  // contents undefined after) and scale_amax_encode of that, which is this
  // default; a backend may decode as it casts.
  virtual void scale_amax_encode16(Format from, const void* x, float scale, Format f, void* q, std::int64_t n,
                                   const CastOptions& opt, float* amax, float* scratch) {
    convert(from, x, Format::FP32, scratch, n, {});
    scale_amax_encode(scratch, scale, f, q, n, opt, amax, scratch);
  }
  // scale_amax_encode of a rows x cols matrix x (FP32, or FP16/BF16 codes
  // as scale_amax_encode16 takes them: format `from`) that also writes db,
  // the column sums of the unscaled values, as column_sums (column_sums16)
  // gives them: an FP8 layer's dy cast and its bias gradient (Transformer
  // Engine's fused cast and dbias). The two calls are this default (scratch:
  // rows * cols floats); a backend may read x once for both, same bits.
  virtual void scale_amax_encode_sums(Format from, const void* x, std::int64_t rows, std::int64_t cols, float scale,
                                      Format f, void* q, const CastOptions& opt, float* amax, float* db,
                                      float* scratch) {
    if (from == Format::FP32) {
      scale_amax_encode(static_cast<const float*>(x), scale, f, q, rows * cols, opt, amax, scratch);
      column_sums(static_cast<const float*>(x), rows, cols, db);
      return;
    }
    scale_amax_encode16(from, x, scale, f, q, rows * cols, opt, amax, scratch);
    column_sums16(from, x, rows, cols, db, scratch);
  }
  // scale_amax_encode of an n x c x hw (NCHW) tensor x that also writes,
  // where not null, `decoded` (n * c * hw floats: the codes' values, as
  // convert(f, q, FP32) gives them) and db (c floats: the channel sums of
  // the unscaled x, as channel_sums gives them): an FP8 convolution's input
  // cast with the f32 copy its convolution reads, and its gradient cast
  // with the bias gradient (Transformer Engine's fused cast and dbias).
  // This default runs the calls one after another (scratch: n * c * hw
  // floats, which may be `decoded`); a backend may read x once for all,
  // same bits.
  virtual void scale_amax_encode_planes(const float* x, std::int64_t n, std::int64_t c, std::int64_t hw, float scale,
                                        Format f, void* q, const CastOptions& opt, float* amax, float* decoded,
                                        float* db, float* scratch) {
    scale_amax_encode(x, scale, f, q, n * c * hw, opt, amax, scratch);
    if (decoded) convert(f, q, Format::FP32, decoded, n * c * hw, {});
    if (db) channel_sums(x, db, n, c, hw);
  }
  // x[i] = value for i in [0, n) (fault injection writes one element).
  virtual void fill(float* x, float value, std::int64_t n) = 0;

  // --- the step's reductions (results land in backend memory) ---
  // The loss scaler's fused pass: every gradient times inv_scale, its
  // non-finite count into its own counter, and the sum of the squares of
  // all unscaled gradients (double) into *sum_squares.
  virtual void unscale_grads(const GradBuffer* grads, std::size_t count, float inv_scale,
                             double* sum_squares) = 0;
  // unscale_grads of gradients kept as codes (FP16 weights' gradients):
  // where codes[k].data is set, grads[k].data (n floats) first receives
  // its values decoded. The same values, counts and sum as those decodes
  // and unscale_grads, which is this default; a backend may decode each
  // part as it reaches it.
  virtual void unscale_grads_coded(const GradBuffer* grads, const GradCodes* codes, std::size_t count,
                                   float inv_scale, double* sum_squares) {
    for (std::size_t k = 0; k < count; ++k)
      if (codes[k].data && grads[k].n > 0)
        convert(codes[k].format, codes[k].data, Format::FP32, grads[k].data, grads[k].n, {});
    unscale_grads(grads, count, inv_scale, sum_squares);
  }
  virtual void sgd_update(const SgdUpdate& u) = 0;
  // sgd_update, then the updated values encoded as e says: the default is
  // those calls (encode_updated); a backend may encode each part as it
  // finishes it, with the same bits.
  virtual void sgd_update_encode(const SgdUpdate& u, const UpdateEncode& e) {
    sgd_update(u);
    encode_updated(u.value, u.n, e);
  }
  // sgd_update_encode of weights kept only as e's codes (unscaled: e.amax
  // null), which hold the values to update: u.value (n floats) first
  // receives them decoded, then the update and its encode back into the
  // codes. Those calls are this default; a backend may decode each part as
  // it reaches it.
  virtual void sgd_update_coded(const SgdUpdate& u, const UpdateEncode& e) {
    if (e.amax) throw std::logic_error("sgd_update_coded: scaled codes hold value * scale, not the values");
    if (u.n > 0) convert(e.format, e.codes, Format::FP32, u.value, u.n, {});
    sgd_update_encode(u, e);
  }
  // value[0, n) encoded as e says: scale_amax_encode when scaled, else
  // convert (a copy for FP32).
  void encode_updated(const float* value, std::int64_t n, const UpdateEncode& e) {
    if (n <= 0) return;
    if (e.amax) scale_amax_encode(value, e.scale, e.format, e.codes, n, e.opt, e.amax, e.scratch);
    else convert(Format::FP32, value, e.format, e.codes, n, e.opt);
  }
  virtual void adam_update(const AdamUpdate& u) = 0;
  virtual void gradient_census(const GradCensus& c) = 0;
  // out[0] += sum (a-b)^2, out[1] += sum b^2, out[2] += sum (a-b)*b, in
  // double (relative errors against the FP32 shadow pass).
  virtual void error_sums(const float* a, const float* b, std::int64_t n, double* out) = 0;

  // --- matmul and convolution ---
  virtual void gemm(const GemmArgs& args) = 0;
  // gemm (unbatched, C's rows contiguous: ldc 0 or n) and then C encoded as
  // `e` says: the default is those two calls; a backend may encode each
  // part of C as it finishes it, with the same bits.
  virtual void gemm_encode(const GemmArgs& args, const GemmEncode& e) {
    gemm(args);
    if (args.m <= 0 || args.n <= 0) return;
    if (e.codes) convert(Format::FP32, args.c, e.format, e.codes, args.m * args.n, e.opt);
    else quantize(e.format, args.c, args.m * args.n, e.opt.saturate);
  }
  // Attention's core forward (nn/attention.h), fused: false (the default)
  // where a backend has no fused kernel for these shapes and formats, and
  // the caller runs the ops one by one; true when it ran them with the bits
  // of those ops (AttentionForward says which).
  virtual bool attention_forward(const AttentionForward&) { return false; }
  virtual bool attention_backward(const AttentionBackward&) { return false; }
  // The convolutions with an input (x, dy) given as stored BF16 codes
  // instead of f32 values (ConvInput; FP32 allowed too): the bits of
  // decoding it and calling conv2d_forward / _backward_data /
  // _backward_weights. false (the default) where a backend has no such
  // path, and the caller decodes and calls those.
  virtual bool conv2d_forward_coded(const ConvShape&, Format, ConvInput, const float*, const float*, float*) {
    return false;
  }
  virtual bool conv2d_backward_data_coded(const ConvShape&, Format, ConvInput, const float*, float*) { return false; }
  virtual bool conv2d_backward_weights_coded(const ConvShape&, Format, ConvInput, ConvInput, float*, float*) {
    return false;
  }
  virtual void conv2d_forward(const ConvShape& s, Format compute, const float* x, const float* w,
                              const float* bias, float* y) = 0;
  virtual void conv2d_backward_data(const ConvShape& s, Format compute, const float* dy,
                                    const float* w, float* dx) = 0;
  // dw (and db when non-null) are overwritten, not accumulated.
  virtual void conv2d_backward_weights(const ConvShape& s, Format compute, const float* x,
                                       const float* dy, float* dw, float* db) = 0;

  virtual void conv2d_block(const ConvBlockArgs& args) = 0;
  // y[n, c, :] += bias[c] over planes of hw values; db[c] = sum over n and
  // the plane of dy[n, c, :] (double accumulation, overwritten).
  virtual void bias_add_channels(float* y, const float* bias, std::int64_t n, std::int64_t c, std::int64_t hw) = 0;
  // y = y * alpha (rounded), then + bias[channel] where bias is not null:
  // scale, then bias_add_channels, which is this default; a backend may do
  // both in one pass, same bits (an FP8 convolution's unscaled output).
  virtual void scale_bias_add_channels(float* y, float alpha, const float* bias, std::int64_t n, std::int64_t c,
                                       std::int64_t hw) {
    if (alpha != 1.0f) scale(y, alpha, n * c * hw);
    if (bias) bias_add_channels(y, bias, n, c, hw);
  }
  virtual void channel_sums(const float* dy, float* db, std::int64_t n, std::int64_t c, std::int64_t hw) = 0;

  // --- pooling (kernel k x k, stride k, no padding) ---
  // argmax receives, per output, the flat input index (within the image
  // plane) of the maximum; backward scatters dy there (dx overwritten).
  virtual void maxpool2d_forward(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                                 std::int64_t k, const float* x, float* y, std::int32_t* argmax) = 0;
  virtual void maxpool2d_backward(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                                  std::int64_t k, const float* dy, const std::int32_t* argmax,
                                  float* dx) = 0;
  // Max pooling of FP16 or BF16 codes (f) into codes of the same format:
  // the same y bits and argmax as decoding x into `x32`, maxpool2d_forward
  // into `y32` and encoding y32 into y (the maximum is one of the inputs,
  // so only a NaN's code changes: it comes back quiet). This is the
  // default, with x32 and y32 scratch of backend memory (n c h w and n c
  // h/k w/k floats, contents undefined after); a backend may pool the codes
  // directly.
  virtual void maxpool2d_forward16(Format f, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                                   std::int64_t k, const void* x, void* y, std::int32_t* argmax, float* x32,
                                   float* y32) {
    convert(f, x, Format::FP32, x32, n * c * h * w, {});
    maxpool2d_forward(n, c, h, w, k, x32, y32, argmax);
    convert(Format::FP32, y32, f, y, n * c * (h / k) * (w / k), {});
  }

  // --- elementwise (n elements, f32 values; y may alias x) ---
  virtual void relu_forward(const float* x, float* y, std::int64_t n) = 0;
  // dx = dy where x > 0 else 0 (dx may alias dy)
  virtual void relu_backward(const float* x, const float* dy, float* dx, std::int64_t n) = 0;
  // ReLU on FP16 or BF16 patterns (f), without decoding: y = x < 0 ? +0 : x
  // (-0 and NaN pass through); backward dx = x > 0 ? dy : +0 with dy and dx
  // in format g (FP16 or BF16 as well).
  virtual void relu16_forward(Format f, const void* x, void* y, std::int64_t n) = 0;
  virtual void relu16_backward(Format f, const void* x, Format g, const void* dy, void* dx, std::int64_t n) = 0;
  // GELU, exact erf form (PyTorch's default approximate='none').
  virtual void gelu_forward(const float* x, float* y, std::int64_t n) = 0;
  virtual void gelu_backward(const float* x, const float* dy, float* dx, std::int64_t n) = 0;
  // GELU on FP16/BF16 codes. Forward: y (format f) from x (f), the same
  // bits as decoding x into sx, gelu_forward into sy and encoding sy into y.
  // Backward: dx (format g) from x (f) and dy (g), as decoding x into sx
  // and dy into sdy, gelu_backward into sdx and encoding sdx into dx. Those
  // calls are the defaults (scratch: n floats of backend memory each,
  // contents undefined after); a backend may do either in one pass.
  virtual void gelu16_forward(Format f, const void* x, void* y, std::int64_t n, float* sx, float* sy) {
    convert(f, x, Format::FP32, sx, n, {});
    gelu_forward(sx, sy, n);
    convert(Format::FP32, sy, f, y, n, {});
  }
  virtual void gelu16_backward(Format f, const void* x, Format g, const void* dy, void* dx, std::int64_t n, float* sx,
                               float* sdy, float* sdx) {
    convert(f, x, Format::FP32, sx, n, {});
    convert(g, dy, Format::FP32, sdy, n, {});
    gelu_backward(sx, sdy, sdx, n);
    convert(Format::FP32, sdx, g, dx, n, {});
  }
  // GELU backward with x and dx in f32 and dy stored as codes of format g
  // (FP16, BF16, or unscaled E4M3/E5M2: the FP8 recipe's gradients): the
  // bits of decoding dy into sdy (n floats of backend memory, contents
  // undefined after) and gelu_backward, the default; a backend may decode
  // as it goes.
  virtual void gelu_backward_coded(const float* x, Format g, const void* dy, float* dx, std::int64_t n, float* sdy) {
    convert(g, dy, Format::FP32, sdy, n, {});
    gelu_backward(x, sdy, dx, n);
  }
  // The same for ReLU (the mlp's E5M2 gradients between FP8 layers): the
  // bits of decoding dy into sdy and relu_backward.
  virtual void relu_backward_coded(const float* x, Format g, const void* dy, float* dx, std::int64_t n, float* sdy) {
    convert(g, dy, Format::FP32, sdy, n, {});
    relu_backward(x, sdy, dx, n);
  }
  // GELU forward straight into an FP8 layer's delayed-scaled input cast: q
  // and *amax as gelu_forward into `scratch` (n floats of backend memory,
  // contents undefined after) and scale_amax_encode of that give them; this
  // default runs those steps (scale_amax in place, then convert). y itself
  // is not kept, so a backend may compute it only as exactly as the cast
  // can tell.
  virtual void gelu_forward_encode(const float* x, std::int64_t n, float scale, Format f, void* q,
                                   const CastOptions& opt, float* amax, float* scratch) {
    gelu_forward(x, scratch, n);
    scale_amax(scratch, scale, scratch, n, amax);
    convert(Format::FP32, scratch, f, q, n, opt);
  }
  // The same for ReLU (the mlp's activations into fc2 and fc3): q and *amax
  // as relu_forward into `scratch` and scale_amax_encode of that give them.
  virtual void relu_forward_encode(const float* x, std::int64_t n, float scale, Format f, void* q,
                                   const CastOptions& opt, float* amax, float* scratch) {
    relu_forward(x, scratch, n);
    scale_amax(scratch, scale, scratch, n, amax);
    convert(Format::FP32, scratch, f, q, n, opt);
  }
  // dst[b, t, :] = src[b, :] for t < T (a [B, C] row repeated T times).
  virtual void repeat_rows(const float* src, float* dst, std::int64_t B, std::int64_t T, std::int64_t C) = 0;
  // y = a + b (residual connections); y may alias a or b.
  virtual void add(const float* a, const float* b, float* y, std::int64_t n) = 0;
  // The residual add on FP16/BF16 codes: a (format fa) plus b (fb), the
  // sum encoded to fy (opt: saturation) in y. The same bits as decoding a
  // into `sa` and b into `sb`, add() into `sy` and convert(FP32, sy, fy, y,
  // n, opt), which is this default (sa, sb, sy: n floats of backend memory
  // each, contents undefined after); a backend may do it in one pass.
  virtual void add_encode(Format fa, const void* a, Format fb, const void* b, Format fy, void* y, std::int64_t n,
                          const CastOptions& opt, float* sa, float* sb, float* sy) {
    convert(fa, a, Format::FP32, sa, n, {});
    convert(fb, b, Format::FP32, sb, n, {});
    add(sa, sb, sy, n);
    convert(Format::FP32, sy, fy, y, n, opt);
  }
  // x *= s
  virtual void scale(float* x, float s, std::int64_t n) = 0;
  // Rounds in place to format f's values (see numeric/cast.h); FP32: no-op.
  virtual void quantize(Format f, float* x, std::int64_t n, bool saturate) = 0;
  // Adds the count of inf/NaN values to *counter (backend memory): the
  // per-layer overflow attribution.
  virtual void count_nonfinite(const float* x, std::int64_t n, std::int64_t* counter) = 0;
  // *out (backend memory) = max |x_i| (0 for n == 0; NaN/inf propagate).
  virtual void amax(const float* x, std::int64_t n, float* out) = 0;
  // db[j] = sum_i dy[i, j] over `rows` rows (bias gradients; overwritten).
  virtual void column_sums(const float* dy, std::int64_t rows, std::int64_t cols, float* db) = 0;
  // column_sums of a rows x cols matrix of FP16/BF16 codes (format f): the
  // same bits as decoding it into `scratch` (rows * cols floats of backend
  // memory, contents undefined after) and column_sums of that, which is
  // this default; a backend may decode as it sums.
  virtual void column_sums16(Format f, const void* dy, std::int64_t rows, std::int64_t cols, float* db,
                             float* scratch) {
    convert(f, dy, Format::FP32, scratch, rows * cols, {});
    column_sums(scratch, rows, cols, db);
  }

  // --- layout ---
  // Vision transformer patches: x [B, C, H, W] -> patches [B * gh * gw, C * p * p]
  // (gh = H / p, gw = W / p; pixels outside the grid are dropped), and back
  // (unpatchify overwrites x; pixels outside the grid get 0).
  virtual void patchify(const float* x, float* patches, std::int64_t B, std::int64_t C, std::int64_t H,
                        std::int64_t W, std::int64_t p) = 0;
  virtual void unpatchify(const float* patches, float* x, std::int64_t B, std::int64_t C, std::int64_t H,
                          std::int64_t W, std::int64_t p) = 0;

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
  // LayerNorm with FP32 accumulation whose tensors may be FP16/BF16 codes:
  // x (format fx) is FP32, FP16 or BF16 and, backward, dy (fdy) one of those
  // or unscaled FP8 (E4M3, E5M2), decoded exactly into sx / sdy where not
  // FP32; y (fy) and dx (fdx) FP32, FP16 or BF16, encoded from
  // sy / sdx (forward: opt, saturation) where not FP32; dx is required.
  // mean, rstd, gamma, beta, dgamma and dbeta are f32 as above. Decode,
  // layernorm_forward / layernorm_backward, encode is the default (scratch:
  // rows * cols floats of backend memory each, contents undefined after); a
  // backend may do it in one pass with the same bits.
  virtual void layernorm_coded_forward(Format fx, const void* x, const float* gamma, const float* beta, Format fy,
                                       void* y, float* mean, float* rstd, std::int64_t rows, std::int64_t cols,
                                       float eps, const CastOptions& opt, float* sx, float* sy) {
    const std::int64_t n = rows * cols;
    const float* xf = fx == Format::FP32 ? static_cast<const float*>(x) : sx;
    float* yf = fy == Format::FP32 ? static_cast<float*>(y) : sy;
    if (fx != Format::FP32) convert(fx, x, Format::FP32, sx, n, {});
    layernorm_forward(xf, gamma, beta, yf, mean, rstd, rows, cols, eps, Format::FP32);
    if (fy != Format::FP32) convert(Format::FP32, sy, fy, y, n, opt);
  }
  virtual void layernorm_coded_backward(Format fdy, const void* dy, Format fx, const void* x, const float* mean,
                                        const float* rstd, const float* gamma, Format fdx, void* dx, float* dgamma,
                                        float* dbeta, std::int64_t rows, std::int64_t cols, float* sdy, float* sx,
                                        float* sdx) {
    const std::int64_t n = rows * cols;
    const float* dyf = fdy == Format::FP32 ? static_cast<const float*>(dy) : sdy;
    const float* xf = fx == Format::FP32 ? static_cast<const float*>(x) : sx;
    float* dxf = fdx == Format::FP32 ? static_cast<float*>(dx) : sdx;
    if (fdy != Format::FP32) convert(fdy, dy, Format::FP32, sdy, n, {});
    if (fx != Format::FP32) convert(fx, x, Format::FP32, sx, n, {});
    layernorm_backward(dyf, xf, mean, rstd, gamma, dxf, dgamma, dbeta, rows, cols);
    if (fdx != Format::FP32) convert(Format::FP32, sdx, fdx, dx, n, {});
  }
  // A pre-norm block's LayerNorm backward meeting its residual connection:
  // dx (FP32) = r + the LayerNorm's dx, where r (FP32, rows * cols) is the
  // gradient arriving through the skip path, and, where `codes` is not
  // null, that sum also encoded to fc (FP16 or BF16, RNE) there: the next
  // Linear's rounded dy. The bits of layernorm_coded_backward with an FP32
  // dx, add(r, dx, dx) and convert(FP32, dx, fc, codes), which is this
  // default (sdy, sx as that op takes them); a backend may add and encode
  // each block of rows as it finishes it.
  virtual void layernorm_backward_add(Format fdy, const void* dy, Format fx, const void* x, const float* mean,
                                      const float* rstd, const float* gamma, const float* r, float* dx, Format fc,
                                      void* codes, float* dgamma, float* dbeta, std::int64_t rows, std::int64_t cols,
                                      float* sdy, float* sx) {
    layernorm_coded_backward(fdy, dy, fx, x, mean, rstd, gamma, Format::FP32, dx, dgamma, dbeta, rows, cols, sdy, sx,
                             nullptr);
    add(r, dx, dx, rows * cols);
    if (codes) convert(Format::FP32, dx, fc, codes, rows * cols, {});
  }
  // Numerically stable softmax (max subtracted) over each row; FP16/BF16
  // accumulate rounds the exponentials' running sum after every addition.
  virtual void softmax_forward(const float* x, float* y, std::int64_t rows, std::int64_t cols,
                               Format accumulate) = 0;
  // dx = y * (dy - sum(dy * y)) per row
  virtual void softmax_backward(const float* y, const float* dy, float* dx, std::int64_t rows,
                                std::int64_t cols) = 0;
  // Softmax with FP32 accumulation whose input (forward: x, format fx;
  // backward: dy, fdy) is FP32 or codes: decoded exactly into sx / sdy
  // (rows * cols floats of backend memory, contents undefined after) and
  // softmax_forward(.., FP32) / softmax_backward is the default; a backend
  // may decode row blocks as it goes, with the same bits.
  virtual void softmax_coded_forward(Format fx, const void* x, float* y, std::int64_t rows, std::int64_t cols,
                                     float* sx) {
    const float* xf = static_cast<const float*>(x);
    if (fx != Format::FP32) {
      convert(fx, x, Format::FP32, sx, rows * cols, {});
      xf = sx;
    }
    softmax_forward(xf, y, rows, cols, Format::FP32);
  }
  virtual void softmax_coded_backward(const float* y, Format fdy, const void* dy, float* dx, std::int64_t rows,
                                      std::int64_t cols, float* sdy) {
    const float* dyf = static_cast<const float*>(dy);
    if (fdy != Format::FP32) {
      convert(fdy, dy, Format::FP32, sdy, rows * cols, {});
      dyf = sdy;
    }
    softmax_backward(y, dyf, dx, rows, cols);
  }

  // --- losses (mean over rows), written to *loss (double, backend memory) ---
  // Softmax cross-entropy over integer labels. probs (rows x classes) is
  // written for backward; `correct` (optional, backend memory) receives the
  // count of rows whose argmax equals the label.
  virtual void cross_entropy_forward(const float* logits, const std::int32_t* labels,
                                     std::int64_t rows, std::int64_t classes, float* probs,
                                     double* loss, std::int64_t* correct) = 0;
  // dlogits = (probs - onehot) * scale / rows   (scale carries the loss scale)
  virtual void cross_entropy_backward(const float* probs, const std::int32_t* labels,
                                      std::int64_t rows, std::int64_t classes, float scale,
                                      float* dlogits) = 0;
  // Mean over all rows*cols elements of (pred - target)^2.
  virtual void mse_forward(const float* pred, const float* target, std::int64_t n, double* loss) = 0;
  // dpred = 2 * (pred - target) * scale / n
  virtual void mse_backward(const float* pred, const float* target, std::int64_t n, float scale,
                            float* dpred) = 0;
};

// The CPU backend (oneDNN). `threads` <= 0: use the engine's default
// (all cores). Throws std::runtime_error if oneDNN cannot be initialised.
std::unique_ptr<Backend> make_cpu_backend(int threads = 0);

}  // namespace engine
