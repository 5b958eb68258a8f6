// The CPU backend's own kernels (everything but matmul and convolution).
// Semantics are those of backend.h; these are called by CpuBackend on the
// backend's calling thread and use OpenMP above kParallelMin.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/workspace.h"
#include "numeric/format.h"

namespace engine {
struct CastOptions;
struct AttentionForward;
struct AttentionBackward;
}

namespace engine::cpu {

// pool.cpp
// One plane of 2x2 max pooling on AVX-512 (pool_avx512.cpp): the scalar
// plane's rule and bits; call only where the CPU has AVX-512F.
void maxpool2x2_plane_avx512(const float* xp, float* yp, std::int32_t* ap, std::int64_t h, std::int64_t w);
void maxpool2d_forward(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                       const float* x, float* y, std::int32_t* argmax);
void maxpool2d_backward(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                        std::int64_t k, const float* dy, const std::int32_t* argmax, float* dx);
// Backend::maxpool2d_forward16 for 2x2 windows over planes of at most
// kPool16MaxPlane values, one plane at a time through stack buffers; false
// (nothing written) for any other shape.
inline constexpr std::int64_t kPool16MaxPlane = 64 * 64;
bool maxpool2d_forward16(Format f, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                         const std::uint16_t* x, std::uint16_t* y, std::int32_t* argmax);

// elementwise.cpp
void relu_forward(const float* x, float* y, std::int64_t n);
// relu_forward's select over [0, n) on the calling thread (the fused
// ReLU-and-cast runs it chunk by chunk).
void relu_run(const float* x, float* y, std::int64_t n);
void relu_backward(const float* x, const float* dy, float* dx, std::int64_t n);
void gelu_forward(const float* x, float* y, std::int64_t n);
void gelu_backward(const float* x, const float* dy, float* dx, std::int64_t n);
void add(const float* a, const float* b, float* y, std::int64_t n);
void scale(float* x, float s, std::int64_t n);
void quantize(Format f, float* x, std::int64_t n, bool saturate);
std::int64_t count_nonfinite(const float* x, std::int64_t n);
double sum_squares(const float* x, std::int64_t n);
void column_sums(const float* dy, std::int64_t rows, std::int64_t cols, float* db, Workspace& ws);
// column_sums of FP16/BF16 codes, decoding blocks of rows on the stack as
// it sums (the same sums in the same order); false, with nothing written,
// for other formats or rows wider than the stack block.
bool column_sums16(Format f, const void* dy, std::int64_t rows, std::int64_t cols, float* db, Workspace& ws);
// column_sums (f FP32) or column_sums16 (FP16/BF16 codes) that hands each
// block of rows [i0, i1) as f32 values to visit(ctx, i0, i1, values) (when
// not null) before summing it: at most 4096 values on the thread about to
// sum them, or, for FP32 rows too few to split (the threads share the
// columns out instead), a thread's share of the rows. The same sums in the
// same order. false, with nothing done, for other formats or code rows
// wider than a block.
using ColumnVisit = void (*)(void* ctx, std::int64_t i0, std::int64_t i1, const float* values);
bool column_sums_visiting(Format f, const void* dy, std::int64_t rows, std::int64_t cols, float* db, Workspace& ws,
                          ColumnVisit visit, void* ctx);

// casts.cpp
// scale_amax_encode of len <= kScaledChunk values at x into q (their format
// f's codes; `at`: the first value's index in the whole, for stochastic
// rounding): returns their amax as a bit pattern (amax_from_bits).
inline constexpr std::int64_t kScaledChunk = 4096;
std::uint32_t scale_amax_encode_span(const float* x, float scale, Format f, std::byte* q, std::int64_t len,
                                     const CastOptions& opt, std::int64_t at);

// attention.cpp
// Backend::attention_forward for products small enough for the small-GEMM
// kernels (gemm.h) and formats FP32, FP16, BF16; false, with nothing
// written, otherwise. native_bf16: the backend's (small_product_at).
bool attention_forward(const AttentionForward& f, bool native_bf16);
// Backend::attention_backward, where attention_forward fits.
bool attention_backward(const AttentionBackward& f, bool native_bf16);

// rows.cpp
// dx = y * (dy - sum_j dy_j y_j) for `count` rows of `cols` values: softmax
// backward's arithmetic, shared by every path that runs it.
void softmax_backward_block(const float* y, const float* dy, float* dx, std::int64_t count, std::int64_t cols);
void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                       float* rstd, std::int64_t rows, std::int64_t cols, float eps,
                       Format accumulate);
void layernorm_backward(const float* dy, const float* x, const float* mean, const float* rstd,
                        const float* gamma, float* dx, float* dgamma, float* dbeta,
                        std::int64_t rows, std::int64_t cols, Workspace& ws);
// LayerNorm (FP32 accumulation) whose x, dy, y, dx are each FP32 or
// FP16/BF16 codes: code rows decoded and encoded (opt: saturation,
// stochastic rounding) on the stack around the kernels above, so the bits
// of decode, layernorm, encode in one pass. false, with nothing written,
// for other formats, rows over 2048 values or (backward) no dx.
bool layernorm_coded_forward(Format fx, const void* x, const float* gamma, const float* beta, Format fy, void* y,
                         float* mean, float* rstd, std::int64_t rows, std::int64_t cols, float eps,
                         const CastOptions& opt);
// Backend::layernorm_backward_add in one pass: each block of rows' dx
// plus r, and encoded to fc where codes is not null, as it is finished.
// false, with nothing done, where layernorm_coded_backward would be.
bool layernorm_backward_add(Format fdy, const void* dy, Format fx, const void* x, const float* mean, const float* rstd,
                            const float* gamma, const float* r, float* dx, Format fc, void* codes, float* dgamma,
                            float* dbeta, std::int64_t rows, std::int64_t cols, Workspace& ws);
bool layernorm_coded_backward(Format fdy, const void* dy, Format fx, const void* x, const float* mean, const float* rstd,
                          const float* gamma, Format fdx, void* dx, float* dgamma, float* dbeta, std::int64_t rows,
                          std::int64_t cols, Workspace& ws);
void softmax_forward(const float* x, float* y, std::int64_t rows, std::int64_t cols,
                     Format accumulate);
void softmax_backward(const float* y, const float* dy, float* dx, std::int64_t rows,
                      std::int64_t cols);
// fused::CausalZeroOp and CausalSoftmaxOp over the threads: each row as
// the composition's core calls compute it (softmax_forward or
// softmax_backward of one row of t + 1 values), so the same bits.
void causal_zero(float* x, std::int64_t rows, std::int64_t T);
// fused::CopyColumnsOp over the threads.
void copy_columns(const float* src, std::int64_t src_ld, float* dst, std::int64_t dst_ld, std::int64_t rows,
                  std::int64_t cols);
void causal_softmax(bool forward, const float* in, const float* dy, float* out, std::int64_t rows, std::int64_t T,
                    Format accumulate);
// FP32 softmax with x (backward: dy) in FP32, FP16, BF16 or FP8 codes,
// decoded by row blocks; false where the rows do not fit a block or the
// format is not one of those (the caller falls back).
bool softmax_coded_forward(Format fx, const void* x, float* y, std::int64_t rows, std::int64_t cols);
bool softmax_coded_backward(const float* y, Format fdy, const void* dy, float* dx, std::int64_t rows,
                            std::int64_t cols);

// loss.cpp
double cross_entropy_forward(const float* logits, const std::int32_t* labels, std::int64_t rows,
                             std::int64_t classes, float* probs, std::int64_t* correct);
void cross_entropy_backward(const float* probs, const std::int32_t* labels, std::int64_t rows,
                            std::int64_t classes, float scale, float* dlogits);
double mse_forward(const float* pred, const float* target, std::int64_t n);
void mse_backward(const float* pred, const float* target, std::int64_t n, float scale, float* dpred);

}  // namespace engine::cpu
