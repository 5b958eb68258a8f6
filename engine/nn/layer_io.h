// Layer boundaries: rounding inputs, outputs and gradients to a layer's formats.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "nn/layer.h"
#include "nn/parameter.h"
#include "tensor/tensor.h"

namespace engine {

// Every layer moves tensors between formats the same way; these helpers are
// that one way. All of them leave FP32 tensors untouched when FP32 is asked
// for (no copy, no cast), which is what keeps the fp32 recipe plain FP32
// training. Trainer thread only (they use the caller's workspaces).

// Forward casts to FP8 saturate (the FP8 recipes clamp to the largest finite
// value after scaling, as Transformer Engine does). Gradient casts never do:
// an overflowing gradient must surface as inf for the loss scaler to see.
inline bool saturates_forward(Format f) { return f == Format::E4M3 || f == Format::E5M2; }

// True for the formats stored as float (FP32, and TF32's 32-bit container).
inline bool is_f32_container(Format f) { return f == Format::FP32 || f == Format::TF32; }

// x's values rounded to format f, stored in f: x itself when it already is
// (a TF32 tensor counts as FP32: its values are FP32 values), else `ws`
// (resized to x's shape and format f). TF32 results live in an FP32
// container with TF32 values.
const Tensor& round_to(Backend& be, const Tensor& x, Format f, Tensor& ws, bool saturate);

// x's values as floats: x's own storage for FP32/TF32 tensors, else decoded
// (exactly) into `ws`.
const float* f32_values(Backend& be, const Tensor& x, Tensor& ws);

// x's values rounded to f, as floats: x's storage when that needs neither a
// decode nor a rounding, else `ws`.
const float* f32_rounded(Backend& be, const Tensor& x, Format f, Tensor& ws, bool saturate);

// An op's float output that ends up in `y` with shape s and format f:
// output_begin resizes y and returns where the op writes (y itself for
// FP32/TF32, else `ws`); output_end rounds to f (in place for 32-bit
// containers, by encoding ws into y otherwise) and adds the count of inf/NaN
// values of the rounded result to *nonfinite (a backend counter, tracked())
// when it is non-null (an FP16 overflow happens in the rounding, so the
// count is taken after it).
float* output_begin(Tensor& y, const Shape& s, Format f, Tensor& ws);
void output_end(Backend& be, Tensor& y, Format f, Tensor& ws, bool saturate, std::int64_t* nonfinite);

// A parameter gradient: grad_begin returns where the op writes n floats
// (p.grad's storage when it is FP32, else `ws`); grad_end rounds them to
// `grad_format` (the layer's precision().grad), stores them in p.grad's own
// format and adds the non-finite count to *nonfinite when non-null.
float* grad_begin(Parameter& p, Tensor& ws);
void grad_end(Backend& be, Parameter& p, Format grad_format, Tensor& ws, std::int64_t* nonfinite);

// The weight a layer multiplies with, as floats with 1/weight_scale folded
// in (FP8 weights hold value * scale): p.weight's storage when it is FP32
// with scale 1, else `ws`. Rounded to `compute` when p.weight is not already
// in it (the AMP code normally keeps it there).
const float* weight_f32(Backend& be, const Parameter& p, Format compute, Tensor& ws);

// One FP8 GEMM operand under per-tensor delayed scaling (nn/fp8_scaling.h):
// x's values times `scale`, rounded with saturation to the FP8 format f
// (Transformer Engine's cast: finite overflow clamps to the format's max;
// inf and NaN stay), stored in `q` (resized to x's shape and f). `ws` is
// scratch; with `rounded_floats` it holds the same rounded values as floats
// afterwards (for the conv kernels). `amax` (backend memory: a DelayedScale's
// pending slot) receives max|x| before scaling (NaN/inf propagate), recorded
// with the step's one read. With `sums` (backend memory, cols floats) x is
// an n x cols x hw tensor (hw 1: a rows x cols matrix; NCHW: cols channels
// of hw pixels) whose column (channel) sums of the unscaled values are
// written there too, in the same pass where x is FP32 (an FP8 layer's bias
// gradient: Backend::scale_amax_encode_sums, scale_amax_encode_planes), as
// column_sums (channel_sums) would give them. FP32 x with rounded_floats
// is cast and decoded in one pass too.
void round_scaled(Backend& be, const Tensor& x, Format f, float scale, Tensor& q, Tensor& ws, bool rounded_floats,
                  float* amax, float* sums = nullptr, std::int64_t cols = 0, std::int64_t hw = 1);

// The alpha of a GEMM whose operands hold value * scale_a and value *
// scale_b: 1/scale_a * 1/scale_b (each reciprocal rounded to float, as
// Transformer Engine keeps scale_inv per tensor). 1 when both are 1.
inline float unscale_alpha(float scale_a, float scale_b) {
  return scale_a == 1.0f && scale_b == 1.0f ? 1.0f : (1.0f / scale_a) * (1.0f / scale_b);
}

// A GEMM operand over t's storage starting `offset` elements in.
GemmOperand gemm_operand(const Tensor& t, std::int64_t offset, std::int64_t ld, bool trans);

// The format conv2d should be told its operands are in, when the operands
// are in formats a and b: a format both are exactly representable in
// (FP8 values are exact in FP16 and BF16), so the backend picks an exact path.
Format common_compute(Format a, Format b);

// A new parameter as layers create it: `weight` FP32 (zeros until
// Model::init), `grad` FP32, no master (the AMP code lays out the rest).
Parameter make_parameter(std::string name, Shape shape, bool decay);

// Where a layer adds a non-finite count: its backend counter when the layer
// tracks them (Layer::track_nonfinite), else null (nothing is counted).
inline std::int64_t* tracked(Layer& l, NonfiniteSlot slot) { return l.nonfinite_slot(slot); }

// Throws std::invalid_argument "<layer>: <what> (got <shape>)".
[[noreturn]] void throw_shape(const std::string& layer, const std::string& what, const Shape& got);

}  // namespace engine
