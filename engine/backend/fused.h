// Fused ops: the backend calls that do in one pass what a few core ops do
// one after another (decode, op, encode). Each is a plain struct, one free
// function that offers it to the backend (Backend::run_fused) and otherwise
// runs the portable composition of core ops, with the same bits.
//
// Adding a fused op: its struct here (fields, name, for_each_buffer), an
// alternative in FusedOp, its free function and composition in fused.cpp;
// a backend with a fast path adds a case to its run_fused. The guarded
// backend and the CUDA module's ABI need no change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <variant>

#include "backend/backend.h"

namespace engine {

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
  // A decoder's causal attention: query t sees keys 0..t only. The softmax
  // of each row is causal_softmax's (its first t + 1 scores; the other
  // probabilities +0), as the softmax leaf computes it.
  bool causal = false;
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
  // The causal forward's backward: causal_softmax's backward (dscores +0
  // past each row's first t + 1 entries).
  bool causal = false;
};

// Where unscale_grads_coded reads a gradient stored in a narrower format:
// `data` (n codes of `format`, backend memory), or nothing (FP32: the
// GradBuffer's own values).
struct GradCodes {
  Format format = Format::FP32;
  const void* data = nullptr;
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

namespace fused {

// Calls f on each pointer: an op's for_each_buffer (the guarded backend
// checks that each is its own memory; null pointers are allowed).
template <class F, class... P>
void each_pointer(F& f, const P*... p) {
  (f(static_cast<const void*>(p)), ...);
}

// FP8 delayed scaling's whole cast: *amax = max|x| as scale_amax gives it,
// and q = x * scale encoded to f (opt: saturation) in f's storage width.
// Composition: scale_amax into `scratch` (n floats of backend memory,
// contents undefined after), then convert(FP32, scratch, f, q, n, opt).
struct ScaleAmaxEncodeOp {
  static constexpr const char* name = "scale_amax_encode";
  const float* x = nullptr;
  float scale = 1.0f;
  Format f = Format::FP32;
  void* q = nullptr;
  std::int64_t n = 0;
  CastOptions opt;
  float* amax = nullptr;
  float* scratch = nullptr;
  template <class F> void for_each_buffer(F&& f_) const { each_pointer(f_, x, q, amax, scratch); }
};

// scale_amax_encode of the values of FP16/BF16 codes (format `from`).
// Composition: decode into `scratch` (n floats), scale_amax_encode of that.
struct ScaleAmaxEncode16Op {
  static constexpr const char* name = "scale_amax_encode16";
  Format from = Format::FP32;
  const void* x = nullptr;
  float scale = 1.0f;
  Format f = Format::FP32;
  void* q = nullptr;
  std::int64_t n = 0;
  CastOptions opt;
  float* amax = nullptr;
  float* scratch = nullptr;
  template <class F> void for_each_buffer(F&& f_) const { each_pointer(f_, x, q, amax, scratch); }
};

// scale_amax_encode of a rows x cols matrix x (FP32, or FP16/BF16 codes as
// scale_amax_encode16 takes them: format `from`) that also writes db, the
// column sums of the unscaled values, as column_sums (column_sums16) gives
// them: an FP8 layer's dy cast and its bias gradient (Transformer Engine's
// fused cast and dbias). Composition: those two calls (scratch: rows * cols
// floats).
struct ScaleAmaxEncodeSumsOp {
  static constexpr const char* name = "scale_amax_encode_sums";
  Format from = Format::FP32;
  const void* x = nullptr;
  std::int64_t rows = 0, cols = 0;
  float scale = 1.0f;
  Format f = Format::FP32;
  void* q = nullptr;
  CastOptions opt;
  float* amax = nullptr;
  float* db = nullptr;
  float* scratch = nullptr;
  template <class F> void for_each_buffer(F&& f_) const { each_pointer(f_, x, q, amax, db, scratch); }
};

// scale_amax_encode of an n x c x hw (NCHW) tensor x that also writes,
// where not null, `decoded` (n * c * hw floats: the codes' values, as
// convert(f, q, FP32) gives them) and db (c floats: the channel sums of the
// unscaled x, as channel_sums gives them): an FP8 convolution's input cast
// with the f32 copy its convolution reads, and its gradient cast with the
// bias gradient. Composition: the calls one after another (scratch: n * c *
// hw floats, which may be `decoded`).
struct ScaleAmaxEncodePlanesOp {
  static constexpr const char* name = "scale_amax_encode_planes";
  const float* x = nullptr;
  std::int64_t n = 0, c = 0, hw = 0;
  float scale = 1.0f;
  Format f = Format::FP32;
  void* q = nullptr;
  CastOptions opt;
  float* amax = nullptr;
  float* decoded = nullptr;
  float* db = nullptr;
  float* scratch = nullptr;
  template <class F> void for_each_buffer(F&& f_) const { each_pointer(f_, x, q, amax, decoded, db, scratch); }
};

// unscale_grads of gradients kept as codes (FP16 weights' gradients): where
// codes[k].data is set, grads[k].data (n floats) first receives its values
// decoded. Composition: those decodes, then unscale_grads.
struct UnscaleGradsCodedOp {
  static constexpr const char* name = "unscale_grads_coded";
  const GradBuffer* grads = nullptr;  // host arrays of `count` entries
  const GradCodes* codes = nullptr;
  std::size_t count = 0;
  float inv_scale = 1.0f;
  double* sum_squares = nullptr;
  template <class F> void for_each_buffer(F&& f_) const {
    each_pointer(f_, sum_squares);
    for (std::size_t k = 0; k < count; ++k) each_pointer(f_, grads[k].data, grads[k].nonfinite, codes[k].data);
  }
};

// sgd_update, then the updated values encoded as e says (encode_updated).
struct SgdUpdateEncodeOp {
  static constexpr const char* name = "sgd_update_encode";
  SgdUpdate u;
  UpdateEncode e;
  template <class F> void for_each_buffer(F&& f_) const {
    each_pointer(f_, u.value, u.grad, u.momentum_buf, e.codes, e.amax, e.scratch);
  }
};

// sgd_update_encode of weights kept only as e's codes (unscaled: e.amax
// null), which hold the values to update: u.value (n floats) first receives
// them decoded, then the update and its encode back into the codes.
struct SgdUpdateCodedOp {
  static constexpr const char* name = "sgd_update_coded";
  SgdUpdate u;
  UpdateEncode e;
  template <class F> void for_each_buffer(F&& f_) const {
    each_pointer(f_, u.value, u.grad, u.momentum_buf, e.codes, e.amax, e.scratch);
  }
};

// gemm (unbatched, C's rows contiguous: ldc 0 or n) and then C encoded as
// `e` says. Composition: gemm, then convert (codes) or quantize (in place).
struct GemmEncodeOp {
  static constexpr const char* name = "gemm_encode";
  GemmArgs args;
  GemmEncode e;
  template <class F> void for_each_buffer(F&& f_) const {
    each_pointer(f_, args.a.data, args.a.block, args.b.data, args.b.block, args.c, args.bias, e.codes);
  }
};

// Attention's core, fused (AttentionForward / AttentionBackward say which
// bits). No composition here: a backend without a kernel for these shapes
// and formats declines, and the layer runs its own sub-layers (with their
// per-layer overflow counters) one by one.
struct AttentionForwardOp {
  static constexpr const char* name = "attention_forward";
  AttentionForward a;
  template <class F> void for_each_buffer(F&& f_) const {
    each_pointer(f_, a.qkv, a.probs, a.probs_codes, a.values, a.values_codes, a.values_amax);
  }
};
struct AttentionBackwardOp {
  static constexpr const char* name = "attention_backward";
  AttentionBackward a;
  template <class F> void for_each_buffer(F&& f_) const {
    each_pointer(f_, a.qkv, a.probs_operand, a.probs, a.dvalues, a.dqkv, a.dqkv_codes);
  }
};

// The causal mask of attention's score planes: `rows` consecutive rows of
// T values, row r holding query position t = r % T, whose entries j > t
// are the future positions it may not see.
// CausalZeroOp: those entries of x set to +0 (the scores before they are
// rounded to their storage format: a masked score can then neither
// overflow nor widen a scale its row shares).
struct CausalZeroOp {
  static constexpr const char* name = "causal_zero";
  float* x = nullptr;
  std::int64_t rows = 0, T = 0;
  template <class F> void for_each_buffer(F&& f_) const { each_pointer(f_, x); }
};
// CausalSoftmaxOp: Backend::softmax (pass and accumulate as there) of each
// row's first t + 1 values as a row of its own (forward: in the scores;
// backward: in the probabilities, dy their gradient); out's other entries
// +0, so a future position has probability 0 and gradient 0 whatever its
// score held (inf and NaN included).
struct CausalSoftmaxOp {
  static constexpr const char* name = "causal_softmax";
  Pass pass = Pass::Forward;
  const float* in = nullptr;
  const float* dy = nullptr;
  float* out = nullptr;
  std::int64_t rows = 0, T = 0;
  Format accumulate = Format::FP32;
  template <class F> void for_each_buffer(F&& f_) const { each_pointer(f_, in, dy, out); }
};

// CopyColumnsOp: dst[r * dst_ld + j] = src[r * src_ld + j] for r < rows,
// j < cols (f32): a block of columns out of or into wider rows (the
// queries and keys of attention's qkv rows, for their LayerNorms).
struct CopyColumnsOp {
  static constexpr const char* name = "copy_columns";
  const float* src = nullptr;
  std::int64_t src_ld = 0;
  float* dst = nullptr;
  std::int64_t dst_ld = 0;
  std::int64_t rows = 0, cols = 0;
  template <class F> void for_each_buffer(F&& f_) const { each_pointer(f_, src, dst); }
};

// The convolutions with an input (x, dy) given as stored codes (ConvInput;
// FP32 allowed too): the bits of decoding it and calling conv2d_forward /
// _backward_data / _backward_weights. No composition here: a backend
// without such a path declines, and the layer decodes into its own kept
// f32 copy (which it allocates only then) and calls the core op.
struct Conv2dForwardCodedOp {
  static constexpr const char* name = "conv2d_forward_coded";
  ConvShape s;
  Format compute = Format::FP32;
  ConvInput x;
  const float* w = nullptr;
  const float* bias = nullptr;
  float* y = nullptr;
  template <class F> void for_each_buffer(F&& f_) const { each_pointer(f_, x.data, w, bias, y); }
};
struct Conv2dBackwardDataCodedOp {
  static constexpr const char* name = "conv2d_backward_data_coded";
  ConvShape s;
  Format compute = Format::FP32;
  ConvInput dy;
  const float* w = nullptr;
  float* dx = nullptr;
  template <class F> void for_each_buffer(F&& f_) const { each_pointer(f_, dy.data, w, dx); }
};
struct Conv2dBackwardWeightsCodedOp {
  static constexpr const char* name = "conv2d_backward_weights_coded";
  ConvShape s;
  Format compute = Format::FP32;
  ConvInput x;
  ConvInput dy;
  float* dw = nullptr;
  float* db = nullptr;
  template <class F> void for_each_buffer(F&& f_) const { each_pointer(f_, x.data, dy.data, dw, db); }
};

// y = y * alpha (rounded), then + bias[channel] where bias is not null (an
// FP8 convolution's unscaled output). Composition: scale, bias_add_channels.
struct ScaleBiasAddChannelsOp {
  static constexpr const char* name = "scale_bias_add_channels";
  float* y = nullptr;
  float alpha = 1.0f;
  const float* bias = nullptr;
  std::int64_t n = 0, c = 0, hw = 0;
  template <class F> void for_each_buffer(F&& f_) const { each_pointer(f_, y, bias); }
};

// Max pooling of FP16 or BF16 codes (f) into codes of the same format: the
// same y bits and argmax as decoding x into `x32`, maxpool2d_forward into
// `y32` and encoding y32 into y (the maximum is one of the inputs, so only
// a NaN's code changes: it comes back quiet), which is the composition (x32,
// y32: n c h w and n c h/k w/k floats, contents undefined after).
struct MaxPoolForward16Op {
  static constexpr const char* name = "maxpool2d_forward16";
  Format f = Format::FP32;
  std::int64_t n = 0, c = 0, h = 0, w = 0, k = 0;
  const void* x = nullptr;
  void* y = nullptr;
  std::int32_t* argmax = nullptr;
  float* x32 = nullptr;
  float* y32 = nullptr;
  template <class F> void for_each_buffer(F&& f_) const { each_pointer(f_, x, y, argmax, x32, y32); }
};

// GELU on FP16/BF16 codes. Forward: y (format f) from x (f), as decoding x
// into sx, gelu_forward into sy and encoding sy into y (the composition;
// scratch: n floats each, contents undefined after).
struct Gelu16ForwardOp {
  static constexpr const char* name = "gelu16_forward";
  Format f = Format::FP32;
  const void* x = nullptr;
  void* y = nullptr;
  std::int64_t n = 0;
  float* sx = nullptr;
  float* sy = nullptr;
  template <class F> void for_each_buffer(F&& f_) const { each_pointer(f_, x, y, sx, sy); }
};
// Backward: dx (format g) from x (f) and dy (g), as decoding x into sx and
// dy into sdy, gelu_backward into sdx and encoding sdx into dx.
struct Gelu16BackwardOp {
  static constexpr const char* name = "gelu16_backward";
  Format f = Format::FP32;
  const void* x = nullptr;
  Format g = Format::FP32;
  const void* dy = nullptr;
  void* dx = nullptr;
  std::int64_t n = 0;
  float* sx = nullptr;
  float* sdy = nullptr;
  float* sdx = nullptr;
  template <class F> void for_each_buffer(F&& f_) const { each_pointer(f_, x, dy, dx, sx, sdy, sdx); }
};

// An activation's backward with x and dx in f32 and dy stored as codes of
// format g (FP16, BF16, or unscaled E4M3/E5M2: the FP8 recipe's gradients):
// the bits of decoding dy into sdy (n floats, contents undefined after) and
// the f32 backward, which is the composition.
struct ActivationBackwardCodedOp {
  static constexpr const char* name = "activation_backward_coded";
  Activation act = Activation::Relu;
  const float* x = nullptr;
  Format g = Format::FP32;
  const void* dy = nullptr;
  float* dx = nullptr;
  std::int64_t n = 0;
  float* sdy = nullptr;
  template <class F> void for_each_buffer(F&& f_) const { each_pointer(f_, x, dy, dx, sdy); }
};

// An activation's forward straight into an FP8 layer's delayed-scaled input
// cast: q and *amax as the f32 forward into `scratch` (n floats, contents
// undefined after) and scale_amax_encode of that give them (the
// composition: forward, scale_amax in place, convert). y itself is not
// kept, so a backend may compute it only as exactly as the cast can tell.
struct ActivationForwardEncodeOp {
  static constexpr const char* name = "activation_forward_encode";
  Activation act = Activation::Relu;
  const float* x = nullptr;
  std::int64_t n = 0;
  float scale = 1.0f;
  Format f = Format::FP32;
  void* q = nullptr;
  CastOptions opt;
  float* amax = nullptr;
  float* scratch = nullptr;
  template <class F> void for_each_buffer(F&& f_) const { each_pointer(f_, x, q, amax, scratch); }
};

// The residual add on FP16/BF16 codes: a (format fa) plus b (fb), the sum
// encoded to fy (opt: saturation) in y. Composition: decoding a into sa and
// b into sb, add() into sy and convert(FP32, sy, fy, y, n, opt) (sa, sb,
// sy: n floats each, contents undefined after).
struct AddEncodeOp {
  static constexpr const char* name = "add_encode";
  Format fa = Format::FP32;
  const void* a = nullptr;
  Format fb = Format::FP32;
  const void* b = nullptr;
  Format fy = Format::FP32;
  void* y = nullptr;
  std::int64_t n = 0;
  CastOptions opt;
  float* sa = nullptr;
  float* sb = nullptr;
  float* sy = nullptr;
  template <class F> void for_each_buffer(F&& f_) const { each_pointer(f_, a, b, y, sa, sb, sy); }
};

// column_sums of a rows x cols matrix of FP16/BF16 codes (format f).
// Composition: decoding it into `scratch` (rows * cols floats) and
// column_sums of that.
struct ColumnSums16Op {
  static constexpr const char* name = "column_sums16";
  Format f = Format::FP32;
  const void* dy = nullptr;
  std::int64_t rows = 0, cols = 0;
  float* db = nullptr;
  float* scratch = nullptr;
  template <class F> void for_each_buffer(F&& f_) const { each_pointer(f_, dy, db, scratch); }
};

// LayerNorm with FP32 accumulation whose tensors may be FP16/BF16 codes: x
// (format fx) is FP32, FP16 or BF16 and, backward, dy (fdy) one of those or
// unscaled FP8 (E4M3, E5M2), decoded exactly into sx / sdy where not FP32;
// y (fy) and dx (fdx) FP32, FP16 or BF16, encoded from sy / sdx (forward:
// opt, saturation) where not FP32; dx is required. mean, rstd, gamma, beta,
// dgamma and dbeta are f32 as Backend::layernorm takes them. Composition:
// decode, layernorm_forward / layernorm_backward, encode (scratch: rows *
// cols floats each, contents undefined after).
struct LayerNormCodedForwardOp {
  static constexpr const char* name = "layernorm_coded_forward";
  Format fx = Format::FP32;
  const void* x = nullptr;
  const float* gamma = nullptr;
  const float* beta = nullptr;
  Format fy = Format::FP32;
  void* y = nullptr;
  float* mean = nullptr;
  float* rstd = nullptr;
  std::int64_t rows = 0, cols = 0;
  float eps = 1e-5f;
  CastOptions opt;
  float* sx = nullptr;
  float* sy = nullptr;
  template <class F> void for_each_buffer(F&& f_) const { each_pointer(f_, x, gamma, beta, y, mean, rstd, sx, sy); }
};
struct LayerNormCodedBackwardOp {
  static constexpr const char* name = "layernorm_coded_backward";
  Format fdy = Format::FP32;
  const void* dy = nullptr;
  Format fx = Format::FP32;
  const void* x = nullptr;
  const float* mean = nullptr;
  const float* rstd = nullptr;
  const float* gamma = nullptr;
  Format fdx = Format::FP32;
  void* dx = nullptr;
  float* dgamma = nullptr;
  float* dbeta = nullptr;
  std::int64_t rows = 0, cols = 0;
  float* sdy = nullptr;
  float* sx = nullptr;
  float* sdx = nullptr;
  template <class F> void for_each_buffer(F&& f_) const {
    each_pointer(f_, dy, x, mean, rstd, gamma, dx, dgamma, dbeta, sdy, sx, sdx);
  }
};
// A pre-norm block's LayerNorm backward meeting its residual connection: dx
// (FP32) = r + the LayerNorm's dx, where r (FP32, rows * cols) is the
// gradient arriving through the skip path, and, where `codes` is not null,
// that sum also encoded to fc (FP16 or BF16, RNE) there: the next Linear's
// rounded dy. Composition: layernorm_coded_backward with an FP32 dx, add(r,
// dx, dx) and convert(FP32, dx, fc, codes).
struct LayerNormBackwardAddOp {
  static constexpr const char* name = "layernorm_backward_add";
  Format fdy = Format::FP32;
  const void* dy = nullptr;
  Format fx = Format::FP32;
  const void* x = nullptr;
  const float* mean = nullptr;
  const float* rstd = nullptr;
  const float* gamma = nullptr;
  const float* r = nullptr;
  float* dx = nullptr;
  Format fc = Format::FP32;
  void* codes = nullptr;
  float* dgamma = nullptr;
  float* dbeta = nullptr;
  std::int64_t rows = 0, cols = 0;
  float* sdy = nullptr;
  float* sx = nullptr;
  template <class F> void for_each_buffer(F&& f_) const {
    each_pointer(f_, dy, x, mean, rstd, gamma, r, dx, codes, dgamma, dbeta, sdy, sx);
  }
};

// Softmax with FP32 accumulation whose input (forward: x, format fx;
// backward: dy, fdy) is FP32 or codes. Composition: decoded exactly into sx
// / sdy (rows * cols floats, contents undefined after) and
// softmax_forward(.., FP32) / softmax_backward.
struct SoftmaxCodedForwardOp {
  static constexpr const char* name = "softmax_coded_forward";
  Format fx = Format::FP32;
  const void* x = nullptr;
  float* y = nullptr;
  std::int64_t rows = 0, cols = 0;
  float* sx = nullptr;
  template <class F> void for_each_buffer(F&& f_) const { each_pointer(f_, x, y, sx); }
};
struct SoftmaxCodedBackwardOp {
  static constexpr const char* name = "softmax_coded_backward";
  const float* y = nullptr;
  Format fdy = Format::FP32;
  const void* dy = nullptr;
  float* dx = nullptr;
  std::int64_t rows = 0, cols = 0;
  float* sdy = nullptr;
  template <class F> void for_each_buffer(F&& f_) const { each_pointer(f_, y, dy, dx, sdy); }
};

}  // namespace fused

// Every fused op, as Backend::run_fused receives it (on the caller's stack).
struct FusedOp {
  std::variant<fused::ScaleAmaxEncodeOp, fused::ScaleAmaxEncode16Op, fused::ScaleAmaxEncodeSumsOp,
                             fused::ScaleAmaxEncodePlanesOp, fused::UnscaleGradsCodedOp, fused::SgdUpdateEncodeOp,
                             fused::SgdUpdateCodedOp, fused::GemmEncodeOp, fused::AttentionForwardOp,
                             fused::AttentionBackwardOp, fused::Conv2dForwardCodedOp, fused::Conv2dBackwardDataCodedOp,
                             fused::Conv2dBackwardWeightsCodedOp, fused::ScaleBiasAddChannelsOp,
                             fused::MaxPoolForward16Op, fused::Gelu16ForwardOp, fused::Gelu16BackwardOp,
                             fused::ActivationBackwardCodedOp, fused::ActivationForwardEncodeOp, fused::AddEncodeOp,
                             fused::ColumnSums16Op, fused::LayerNormCodedForwardOp, fused::LayerNormCodedBackwardOp,
                             fused::LayerNormBackwardAddOp, fused::SoftmaxCodedForwardOp,
                             fused::SoftmaxCodedBackwardOp, fused::CausalZeroOp, fused::CausalSoftmaxOp,
                             fused::CopyColumnsOp>
      op;
};

namespace fused {

// The portable composition of an op from core ops (each nested fused op
// offered to the backend again), the bits every fast path must give. false
// for the ops that have none (attention, the coded convolutions).
bool compose(Backend& be, const FusedOp& op);
template <class Op>
bool compose(Backend& be, const Op& op) {
  return compose(be, FusedOp{op});
}

// Offers op to the backend's fast path, else runs its composition.
void run(Backend& be, const FusedOp& op);
template <class Op>
void run(Backend& be, const Op& op) {
  run(be, FusedOp{op});
}

inline void scale_amax_encode(Backend& be, const float* x, float scale, Format f, void* q, std::int64_t n,
                              const CastOptions& opt, float* amax, float* scratch) {
  run(be, ScaleAmaxEncodeOp{x, scale, f, q, n, opt, amax, scratch});
}
inline void scale_amax_encode16(Backend& be, Format from, const void* x, float scale, Format f, void* q,
                                std::int64_t n, const CastOptions& opt, float* amax, float* scratch) {
  run(be, ScaleAmaxEncode16Op{from, x, scale, f, q, n, opt, amax, scratch});
}
inline void scale_amax_encode_sums(Backend& be, Format from, const void* x, std::int64_t rows, std::int64_t cols,
                                   float scale, Format f, void* q, const CastOptions& opt, float* amax, float* db,
                                   float* scratch) {
  run(be, ScaleAmaxEncodeSumsOp{from, x, rows, cols, scale, f, q, opt, amax, db, scratch});
}
inline void scale_amax_encode_planes(Backend& be, const float* x, std::int64_t n, std::int64_t c, std::int64_t hw,
                                     float scale, Format f, void* q, const CastOptions& opt, float* amax,
                                     float* decoded, float* db, float* scratch) {
  run(be, ScaleAmaxEncodePlanesOp{x, n, c, hw, scale, f, q, opt, amax, decoded, db, scratch});
}
inline void unscale_grads_coded(Backend& be, const GradBuffer* grads, const GradCodes* codes, std::size_t count,
                                float inv_scale, double* sum_squares) {
  run(be, UnscaleGradsCodedOp{grads, codes, count, inv_scale, sum_squares});
}
inline void sgd_update_encode(Backend& be, const SgdUpdate& u, const UpdateEncode& e) {
  run(be, SgdUpdateEncodeOp{u, e});
}
inline void sgd_update_coded(Backend& be, const SgdUpdate& u, const UpdateEncode& e) {
  run(be, SgdUpdateCodedOp{u, e});
}
// value[0, n) encoded as e says: scale_amax_encode when scaled, else convert
// (a copy for FP32). Not an op of its own: what an update's encode runs.
void encode_updated(Backend& be, const float* value, std::int64_t n, const UpdateEncode& e);
inline void gemm_encode(Backend& be, const GemmArgs& args, const GemmEncode& e) { run(be, GemmEncodeOp{args, e}); }
// true when the backend ran it; false: the caller composes (see the op).
bool attention_forward(Backend& be, const AttentionForward& a);
bool attention_backward(Backend& be, const AttentionBackward& a);
bool conv2d_forward_coded(Backend& be, const ConvShape& s, Format compute, ConvInput x, const float* w,
                          const float* bias, float* y);
bool conv2d_backward_data_coded(Backend& be, const ConvShape& s, Format compute, ConvInput dy, const float* w,
                                float* dx);
bool conv2d_backward_weights_coded(Backend& be, const ConvShape& s, Format compute, ConvInput x, ConvInput dy,
                                   float* dw, float* db);
inline void scale_bias_add_channels(Backend& be, float* y, float alpha, const float* bias, std::int64_t n,
                                    std::int64_t c, std::int64_t hw) {
  run(be, ScaleBiasAddChannelsOp{y, alpha, bias, n, c, hw});
}
inline void maxpool2d_forward16(Backend& be, Format f, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                                std::int64_t k, const void* x, void* y, std::int32_t* argmax, float* x32, float* y32) {
  run(be, MaxPoolForward16Op{f, n, c, h, w, k, x, y, argmax, x32, y32});
}
inline void gelu16_forward(Backend& be, Format f, const void* x, void* y, std::int64_t n, float* sx, float* sy) {
  run(be, Gelu16ForwardOp{f, x, y, n, sx, sy});
}
inline void gelu16_backward(Backend& be, Format f, const void* x, Format g, const void* dy, void* dx, std::int64_t n,
                            float* sx, float* sdy, float* sdx) {
  run(be, Gelu16BackwardOp{f, x, g, dy, dx, n, sx, sdy, sdx});
}
inline void gelu_backward_coded(Backend& be, const float* x, Format g, const void* dy, float* dx, std::int64_t n,
                                float* sdy) {
  run(be, ActivationBackwardCodedOp{Activation::Gelu, x, g, dy, dx, n, sdy});
}
inline void relu_backward_coded(Backend& be, const float* x, Format g, const void* dy, float* dx, std::int64_t n,
                                float* sdy) {
  run(be, ActivationBackwardCodedOp{Activation::Relu, x, g, dy, dx, n, sdy});
}
inline void gelu_forward_encode(Backend& be, const float* x, std::int64_t n, float scale, Format f, void* q,
                                const CastOptions& opt, float* amax, float* scratch) {
  run(be, ActivationForwardEncodeOp{Activation::Gelu, x, n, scale, f, q, opt, amax, scratch});
}
inline void relu_forward_encode(Backend& be, const float* x, std::int64_t n, float scale, Format f, void* q,
                                const CastOptions& opt, float* amax, float* scratch) {
  run(be, ActivationForwardEncodeOp{Activation::Relu, x, n, scale, f, q, opt, amax, scratch});
}
inline void add_encode(Backend& be, Format fa, const void* a, Format fb, const void* b, Format fy, void* y,
                       std::int64_t n, const CastOptions& opt, float* sa, float* sb, float* sy) {
  run(be, AddEncodeOp{fa, a, fb, b, fy, y, n, opt, sa, sb, sy});
}
inline void column_sums16(Backend& be, Format f, const void* dy, std::int64_t rows, std::int64_t cols, float* db,
                          float* scratch) {
  run(be, ColumnSums16Op{f, dy, rows, cols, db, scratch});
}
inline void layernorm_coded_forward(Backend& be, Format fx, const void* x, const float* gamma, const float* beta,
                                    Format fy, void* y, float* mean, float* rstd, std::int64_t rows, std::int64_t cols,
                                    float eps, const CastOptions& opt, float* sx, float* sy) {
  run(be, LayerNormCodedForwardOp{fx, x, gamma, beta, fy, y, mean, rstd, rows, cols, eps, opt, sx, sy});
}
inline void layernorm_coded_backward(Backend& be, Format fdy, const void* dy, Format fx, const void* x,
                                     const float* mean, const float* rstd, const float* gamma, Format fdx, void* dx,
                                     float* dgamma, float* dbeta, std::int64_t rows, std::int64_t cols, float* sdy,
                                     float* sx, float* sdx) {
  run(be, LayerNormCodedBackwardOp{fdy, dy, fx, x, mean, rstd, gamma, fdx, dx, dgamma, dbeta, rows, cols, sdy, sx,
                                   sdx});
}
inline void layernorm_backward_add(Backend& be, Format fdy, const void* dy, Format fx, const void* x,
                                   const float* mean, const float* rstd, const float* gamma, const float* r, float* dx,
                                   Format fc, void* codes, float* dgamma, float* dbeta, std::int64_t rows,
                                   std::int64_t cols, float* sdy, float* sx) {
  run(be, LayerNormBackwardAddOp{fdy, dy, fx, x, mean, rstd, gamma, r, dx, fc, codes, dgamma, dbeta, rows, cols, sdy,
                                 sx});
}
inline void softmax_coded_forward(Backend& be, Format fx, const void* x, float* y, std::int64_t rows, std::int64_t cols,
                                  float* sx) {
  run(be, SoftmaxCodedForwardOp{fx, x, y, rows, cols, sx});
}
inline void copy_columns(Backend& be, const float* src, std::int64_t src_ld, float* dst, std::int64_t dst_ld,
                         std::int64_t rows, std::int64_t cols) {
  run(be, CopyColumnsOp{src, src_ld, dst, dst_ld, rows, cols});
}
inline void causal_zero(Backend& be, float* x, std::int64_t rows, std::int64_t T) {
  run(be, CausalZeroOp{x, rows, T});
}
inline void causal_softmax(Backend& be, Pass pass, const float* in, const float* dy, float* out, std::int64_t rows,
                           std::int64_t T, Format accumulate) {
  run(be, CausalSoftmaxOp{pass, in, dy, out, rows, T, accumulate});
}
inline void softmax_coded_backward(Backend& be, const float* y, Format fdy, const void* dy, float* dx,
                                   std::int64_t rows, std::int64_t cols, float* sdy) {
  run(be, SoftmaxCodedBackwardOp{y, fdy, dy, dx, rows, cols, sdy});
}

}  // namespace fused
}  // namespace engine
