// The gpt's fused ops (backend/fused.h): the causal mask of attention's
// score rows and the column copies of qk-norm, and the pointer walk every
// fused op's for_each_buffer uses.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace engine::fused {

// Calls f on each pointer: an op's for_each_buffer (the guarded backend
// checks that each is its own memory; null pointers are allowed).
template <class F, class... P>
void each_pointer(F& f, const P*... p) {
  (f(static_cast<const void*>(p)), ...);
}

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

// Each op offered to the backend, else its composition (fused.cpp).
void copy_columns(Backend& be, const float* src, std::int64_t src_ld, float* dst, std::int64_t dst_ld,
                  std::int64_t rows, std::int64_t cols);
void causal_zero(Backend& be, float* x, std::int64_t rows, std::int64_t T);
void causal_softmax(Backend& be, Pass pass, const float* in, const float* dy, float* out, std::int64_t rows,
                    std::int64_t T, Format accumulate);

}  // namespace engine::fused
