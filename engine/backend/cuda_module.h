// The CUDA module's C ABI (implemented in backend/cuda/, libpl_cuda.so): one
// versioned table of functions, after ggml's backend interface, and the
// run-time loader the CPU side uses to reach it without CUDA headers.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "numeric/cast.h"
#include "numeric/format.h"

// ---------------------------------------------------------------------------
// C ABI. libpl_cuda.so exports exactly one symbol, pl_cuda_backend_table(),
// which returns a table of function pointers. Plain C types only, so the
// module and the app may be built by different compilers. Bump
// PL_CUDA_ABI_VERSION on any change of a signature, a struct, an enum
// value or the table's layout; the loader refuses a module whose version
// differs, or whose table is smaller than this build's.
//
// Conventions of every entry:
//  - returns a PlCudaStatus; on failure it writes one line into `message`
//    (truncated to message_size, always NUL-terminated when message_size >
//    0) naming the failing CUDA call (or kernel), file and line, or the
//    argument at fault. `message` may be null when message_size is 0.
//  - the work runs on a context (PlCudaContext, create_context): one device
//    and one stream. A context is used by one thread at a time. The entry
//    makes the context's device current for its duration and restores the
//    caller's device, so no entry changes which device the thread uses.
//  - every data pointer is device memory of the context's device (allocate)
//    except the host side of upload and download, and the small argument
//    arrays documented as host arguments (descriptor lists, shapes).
//  - work is queued on the context's stream in call order and runs
//    asynchronously to the host unless documented otherwise; an error of
//    queued work is reported by the next synchronize or download (one
//    download per training step reads the step's results and its errors).
//  - counts are int64_t elements, byte sizes size_t. Booleans are int32_t
//    (0 / 1).
//  - entries documented "(next issue)" are NULL in this module: the table
//    declares what the CUDA Backend needs, and the next issue fills them
//    in. Their comments mirror engine/backend/backend.h's virtual of the
//    same name, with results written to device memory.
// ---------------------------------------------------------------------------
extern "C" {

#define PL_CUDA_ABI_VERSION 6  // 3: gemm takes a PlCudaGemmBatch; 4: the layout, ReLU16 and block-conv entries; 5: embedding, z_loss; 6: fused casts (gemm_encode ...), memory_allocated, the step on the device (update_scale ... wait_mark)
// The module is built with hidden visibility; only PL_CUDA_API is exported.
#define PL_CUDA_API __attribute__((visibility("default")))

typedef enum PlCudaStatus {
  PL_CUDA_OK = 0,
  PL_CUDA_NO_DEVICE = 1,         // driver missing or too old, or zero devices
  PL_CUDA_INVALID_ARGUMENT = 2,  // bad device index, format, null pointer
  PL_CUDA_OUT_OF_MEMORY = 3,
  PL_CUDA_ERROR = 4,             // any other CUDA runtime error
} PlCudaStatus;

// Storage formats of tensors. Numbered independently of engine::Format so
// the ABI does not move when the engine enum does (1-4 kept from ABI 1).
// Element width: FP32/TF32 4 bytes (TF32 is an FP32 container holding
// values with 10 fraction bits), FP16/BF16 2, E4M3/E5M2 1.
typedef enum PlCudaFormat {
  PL_CUDA_FP16 = 1,
  PL_CUDA_BF16 = 2,
  PL_CUDA_E4M3 = 3,  // OCP E4M3FN: no inf, NaN = S.1111.111, max 448
  PL_CUDA_E5M2 = 4,
  PL_CUDA_FP32 = 5,
  PL_CUDA_TF32 = 6,
} PlCudaFormat;

// Block-scaled formats (engine/numeric/block.h) and their block layouts.
typedef enum PlCudaBlockFormat {
  PL_CUDA_MXFP8 = 1,       // 32 x E4M3 + E8M0 scale
  PL_CUDA_MXFP8_E5M2 = 2,  // 32 x E5M2 + E8M0 scale
  PL_CUDA_MXFP6 = 3,       // 32 x E2M3 + E8M0 scale
  PL_CUDA_MXFP6_E3M2 = 4,  // 32 x E3M2 + E8M0 scale
  PL_CUDA_MXFP4 = 5,       // 32 x E2M1 + E8M0 scale
  PL_CUDA_NVFP4 = 6,       // 16 x E2M1 + E4M3 scale + one FP32 tensor scale
} PlCudaBlockFormat;
typedef enum PlCudaBlockLayout {
  PL_CUDA_BLOCK_ROWS = 0,     // consecutive elements along each row
  PL_CUDA_BLOCK_COLUMNS = 1,  // consecutive rows down each column
  PL_CUDA_BLOCK_TILES = 2,    // block x block tiles (NVFP4 only)
} PlCudaBlockLayout;

// What block_quantize writes about its output (device memory), and what a
// GEMM operand's block pointer reads. Same layout as engine::BlockQuantized
// ({float, bool}: the byte at offset 4), so the CUDA Backend can pass its
// own (static_assert the offsets there).
typedef struct PlCudaBlockQuantized {
  float tensor_decode;  // NVFP4: 1 / S_enc (multiplies the GEMM's alpha); MX: 1
  uint8_t bf16_exact;   // every value is exactly a normal BF16 value (or zero)
  uint8_t reserved[3];
} PlCudaBlockQuantized;

// Batched GEMMs (host argument; engine::GemmArgs::batch): count[0] x
// count[1] products of one shape, product (i, j) reading A at
// a + i * a_stride[0] + j * a_stride[1] elements, B likewise, and writing C
// at c + i * c_stride[0] + j * c_stride[1] (attention: batch x heads over
// column slices of one qkv tensor). cuBLASLt's strided batch takes one
// stride: the inner count is its batch, the outer a loop (or one call when
// the strides compose: stride[0] == count[1] * stride[1]).
typedef struct PlCudaGemmBatch {
  int64_t count[2];
  int64_t a_stride[2], b_stride[2], c_stride[2];
} PlCudaGemmBatch;

typedef struct PlCudaDeviceProperties {
  char name[256];
  int compute_major;
  int compute_minor;
  uint64_t memory_total;  // bytes, cudaMemGetInfo
  uint64_t memory_free;   // bytes, at the time of the query
  int sm_count;           // streaming multiprocessors
} PlCudaDeviceProperties;

// A 2-D convolution (host argument): NCHW activations, OIHW weights, f32
// values, square stride and padding (engine::ConvShape).
typedef struct PlCudaConvShape {
  int64_t n, c_in, h, w;  // input
  int64_t c_out, kh, kw;
  int64_t stride, pad;
} PlCudaConvShape;

// One gradient of unscale_grads (host argument; the pointers are device
// memory): nonfinite receives the count of its inf/NaN values after the
// multiply (overwritten).
typedef struct PlCudaGradBuffer {
  float* data;
  int64_t n;
  int64_t* nonfinite;
} PlCudaGradBuffer;

// gradient_census's output: PL_CUDA_CENSUS_SLOTS int64 counters (device
// memory): [0] zeros, [1 .. 64] the log2|g| histogram from 2^log2_lo,
// [65 .. 69] the 5 magnitude classes (zero, underflow, subnormal, normal,
// overflow: engine::Magnitude's order) as the run saw them (the magnitude
// times `scale`), [70 .. 74] the same without loss scaling.
#define PL_CUDA_CENSUS_BINS 64
#define PL_CUDA_CENSUS_SLOTS (1 + PL_CUDA_CENSUS_BINS + 10)

typedef struct PlCudaContext PlCudaContext;  // opaque: a device and its stream

// ---- ABI 6: the step on the device ----
// The loss scaler's state in device memory (torch._amp_update_scale_'s
// scale and growth tracker, with the step's found-inf decision beside
// them), so a step needs no host decision. update_scale writes it;
// unscale_grads and the optimizer entries read it while it is the
// context's step state (set_step_state).
typedef enum PlCudaScaleMode {
  PL_CUDA_SCALE_NONE = 0,     // scale 1, every step taken, never changes
  PL_CUDA_SCALE_STATIC = 1,   // fixed scale; non-finite steps skipped
  PL_CUDA_SCALE_DYNAMIC = 2,  // backoff on overflow, growth after N clean steps
} PlCudaScaleMode;
typedef struct PlCudaScaleState {
  float scale;             // engine::LossScaler's scale (kept in mode NONE too)
  float loss_scale;        // what the next step multiplies its loss by (1 in mode NONE)
  float inv_scale;         // 1 / loss_scale as GradScaler takes it (double reciprocal, to float)
  int32_t taken;           // the last step's optimizer update was applied
  int64_t growth_tracker;  // consecutive clean steps since the last change
  int64_t nonfinite;       // the last step's non-finite gradient count
  float lr;                // the learning rate sgd_update takes (written by the host before each replay)
  int32_t reserved;
} PlCudaScaleState;
typedef struct PlCudaGraph PlCudaGraph;  // opaque: an instantiated, replayable capture


// `char* message, size_t message_size` ends every entry's argument list.
#define PL_CUDA_MSG char *message, size_t message_size

typedef struct PlCudaBackendTable {
  uint32_t abi_version;  // PL_CUDA_ABI_VERSION of the module
  uint32_t table_size;   // sizeof(PlCudaBackendTable) in the module

  // ---- devices (no context) -------------------------------------------------
  // Number of devices the runtime sees. With no driver or no device:
  // PL_CUDA_NO_DEVICE, *count = 0, and the runtime's error in message.
  PlCudaStatus (*device_count)(int* count, PL_CUDA_MSG);
  // Properties of device `device` (0-based); memory_free at call time.
  PlCudaStatus (*device_properties)(int device, PlCudaDeviceProperties* props, PL_CUDA_MSG);

  // ---- contexts --------------------------------------------------------------
  // A context on `device`: a non-blocking stream and a stream-ordered memory
  // pool (cudaMallocAsync) where the device has one. *out is NULL on error.
  PlCudaStatus (*create_context)(int device, PlCudaContext** out, PL_CUDA_MSG);
  // Waits for the stream, then frees the stream and the pool's cached
  // memory. Release every allocation first. NULL is a no-op.
  PlCudaStatus (*destroy_context)(PlCudaContext* ctx, PL_CUDA_MSG);
  // Waits for all work queued on the context; reports its first error.
  PlCudaStatus (*synchronize)(PlCudaContext* ctx, PL_CUDA_MSG);
  // Free and total memory of the context's device (cudaMemGetInfo), bytes.
  PlCudaStatus (*memory_info)(PlCudaContext* ctx, uint64_t* free_bytes, uint64_t* total_bytes,
                              PL_CUDA_MSG);

  // ---- memory ----------------------------------------------------------------
  // `bytes` of device memory, 256-byte aligned, contents unspecified;
  // bytes == 0 gives NULL. Stream-ordered: usable by the context's work at
  // once, by other streams after synchronize.
  PlCudaStatus (*allocate)(PlCudaContext* ctx, size_t bytes, void** out, PL_CUDA_MSG);
  // Frees an allocation of this context after the work queued before it
  // (stream-ordered). NULL is a no-op.
  PlCudaStatus (*release)(PlCudaContext* ctx, void* ptr, PL_CUDA_MSG);
  // host -> device, ordered after earlier work; the host buffer may be
  // reused when the call returns.
  PlCudaStatus (*upload)(PlCudaContext* ctx, void* dst, const void* host_src, size_t bytes,
                         PL_CUDA_MSG);
  // device -> host: waits for earlier work and the copy (synchronous), so
  // it reports any error of the work queued before it.
  PlCudaStatus (*download)(PlCudaContext* ctx, void* host_dst, const void* src, size_t bytes,
                           PL_CUDA_MSG);
  // device -> device (the ranges must not overlap).
  PlCudaStatus (*copy)(PlCudaContext* ctx, void* dst, const void* src, size_t bytes, PL_CUDA_MSG);
  PlCudaStatus (*fill_zero)(PlCudaContext* ctx, void* dst, size_t bytes, PL_CUDA_MSG);

  // ---- casts between storage formats ----------------------------------------
  // dst[i] = src[i] decoded exactly and rounded to `to` bit for bit as
  // engine/numeric/cast.h does: round-to-nearest-even, or stochastic
  // rounding with the random bits stochastic_bits(seed, index_offset + i);
  // subnormals kept, NaN stays NaN, FP16/BF16/E5M2/TF32 overflow to inf,
  // E4M3 to NaN; `saturate` (FP8 only) clamps finite overflow to the
  // largest finite value and E4M3's inf to +-448 (E5M2 keeps inf). Any
  // pair of PlCudaFormat; FP32 to FP32, and a format to itself without
  // saturate or stochastic, copy. dst may equal src (in place) when both
  // formats have one width (FP32 -> TF32: TF32 rounding in place); other
  // overlapping ranges are refused. Asynchronous, no host memory involved.
  PlCudaStatus (*convert)(PlCudaContext* ctx, PlCudaFormat from, const void* src, PlCudaFormat to,
                          void* dst, int64_t n, int32_t saturate, int32_t stochastic, uint64_t seed,
                          uint64_t index_offset, PL_CUDA_MSG);

  // ======== (next issue) the CUDA Backend's ops: NULL in this module ========
  // ---- matmul and convolution ----
  // C[m x n] = alpha * op(A)[m x k] * op(B)[k x n] + beta * C (+ bias[n] per
  // row). A and B in their own formats (row-major, leading dimension
  // lda/ldb elements before the transpose; 0: packed), multiplied as the format
  // dictates (FP16/BF16 with FP32 compute, TF32 mode, FP8 on sm_89+);
  // a_block/b_block (optional): block-quantized FP32 operands, alpha
  // multiplied by their tensor_decode. accumulate FP32, or FP16/BF16
  // rounded after every addition (the CPU's bits). batch: NULL for one
  // product.
  PlCudaStatus (*gemm)(PlCudaContext* ctx, int64_t m, int64_t n, int64_t k, const void* a,
                       PlCudaFormat a_format, int32_t a_trans, int64_t lda,
                       const PlCudaBlockQuantized* a_block, const void* b, PlCudaFormat b_format,
                       int32_t b_trans, int64_t ldb, const PlCudaBlockQuantized* b_block, float* c,
                       int64_t ldc, float alpha, float beta, const float* bias,
                       PlCudaFormat accumulate, const PlCudaGemmBatch* batch, PL_CUDA_MSG);
  // y = conv(x, w) + bias (optional); `compute` says which path is exact.
  PlCudaStatus (*conv2d_forward)(PlCudaContext* ctx, const PlCudaConvShape* s, PlCudaFormat compute,
                                 const float* x, const float* w, const float* bias, float* y,
                                 PL_CUDA_MSG);
  // dx = conv_transpose(dy, w) (overwritten).
  PlCudaStatus (*conv2d_backward_data)(PlCudaContext* ctx, const PlCudaConvShape* s,
                                       PlCudaFormat compute, const float* dy, const float* w,
                                       float* dx, PL_CUDA_MSG);
  // dw (and db when non-null) are overwritten, not accumulated.
  PlCudaStatus (*conv2d_backward_weights)(PlCudaContext* ctx, const PlCudaConvShape* s,
                                          PlCudaFormat compute, const float* x, const float* dy,
                                          float* dw, float* db, PL_CUDA_MSG);

  // ---- pooling (kernel k x k, stride k, no padding) ----
  // argmax: per output, the flat input index (in the image plane) of the max.
  PlCudaStatus (*maxpool2d_forward)(PlCudaContext* ctx, int64_t n, int64_t c, int64_t h, int64_t w,
                                    int64_t k, const float* x, float* y, int32_t* argmax,
                                    PL_CUDA_MSG);
  // Scatters dy to the argmax positions (dx overwritten).
  PlCudaStatus (*maxpool2d_backward)(PlCudaContext* ctx, int64_t n, int64_t c, int64_t h, int64_t w,
                                     int64_t k, const float* dy, const int32_t* argmax, float* dx,
                                     PL_CUDA_MSG);

  // ---- elementwise (n f32 elements; y may alias x) ----
  PlCudaStatus (*relu_forward)(PlCudaContext* ctx, const float* x, float* y, int64_t n, PL_CUDA_MSG);
  // dx = dy where x > 0 else 0 (dx may alias dy).
  PlCudaStatus (*relu_backward)(PlCudaContext* ctx, const float* x, const float* dy, float* dx,
                                int64_t n, PL_CUDA_MSG);
  // GELU, exact erf form (PyTorch's approximate='none').
  PlCudaStatus (*gelu_forward)(PlCudaContext* ctx, const float* x, float* y, int64_t n, PL_CUDA_MSG);
  PlCudaStatus (*gelu_backward)(PlCudaContext* ctx, const float* x, const float* dy, float* dx,
                                int64_t n, PL_CUDA_MSG);
  // y = a + b; y may alias a or b.
  PlCudaStatus (*add)(PlCudaContext* ctx, const float* a, const float* b, float* y, int64_t n,
                      PL_CUDA_MSG);
  // x *= s
  PlCudaStatus (*scale)(PlCudaContext* ctx, float* x, float s, int64_t n, PL_CUDA_MSG);
  // x[i] = value (fault injection writes one element).
  PlCudaStatus (*fill)(PlCudaContext* ctx, float* x, float value, int64_t n, PL_CUDA_MSG);
  // Rounds in place to format f's values (RNE, as convert); FP32: no-op.
  PlCudaStatus (*quantize)(PlCudaContext* ctx, PlCudaFormat f, float* x, int64_t n,
                           int32_t saturate, PL_CUDA_MSG);
  // *counter += the count of inf/NaN values (per-layer overflow attribution).
  PlCudaStatus (*count_nonfinite)(PlCudaContext* ctx, const float* x, int64_t n, int64_t* counter,
                                  PL_CUDA_MSG);
  // *out = max |x_i| (0 for n == 0; NaN, else inf, propagates).
  PlCudaStatus (*amax)(PlCudaContext* ctx, const float* x, int64_t n, float* out, PL_CUDA_MSG);
  // db[j] = sum_i dy[i, j] over `rows` rows (overwritten).
  PlCudaStatus (*column_sums)(PlCudaContext* ctx, const float* dy, int64_t rows, int64_t cols,
                              float* db, PL_CUDA_MSG);
  // out[0] += sum (a-b)^2, out[1] += sum b^2, out[2] += sum (a-b)*b, in
  // double (relative errors against the FP32 shadow pass).
  PlCudaStatus (*error_sums)(PlCudaContext* ctx, const float* a, const float* b, int64_t n,
                             double* out, PL_CUDA_MSG);

  // ---- rows of a [rows x cols] matrix ----
  // LayerNorm over the last dimension; mean and rstd (rows) saved for
  // backward. accumulate FP16/BF16 rounds every partial sum to that format.
  PlCudaStatus (*layernorm_forward)(PlCudaContext* ctx, const float* x, const float* gamma,
                                    const float* beta, float* y, float* mean, float* rstd,
                                    int64_t rows, int64_t cols, float eps, PlCudaFormat accumulate,
                                    PL_CUDA_MSG);
  // dx, and dgamma/dbeta overwritten.
  PlCudaStatus (*layernorm_backward)(PlCudaContext* ctx, const float* dy, const float* x,
                                     const float* mean, const float* rstd, const float* gamma,
                                     float* dx, float* dgamma, float* dbeta, int64_t rows,
                                     int64_t cols, PL_CUDA_MSG);
  // Softmax per row, max subtracted; FP16/BF16 accumulate rounds the sum.
  PlCudaStatus (*softmax_forward)(PlCudaContext* ctx, const float* x, float* y, int64_t rows,
                                  int64_t cols, PlCudaFormat accumulate, PL_CUDA_MSG);
  // dx = y * (dy - sum(dy * y)) per row.
  PlCudaStatus (*softmax_backward)(PlCudaContext* ctx, const float* y, const float* dy, float* dx,
                                   int64_t rows, int64_t cols, PL_CUDA_MSG);

  // ---- losses (mean over rows), written to device memory ----
  // Softmax cross-entropy over int32 labels: probs written for backward,
  // *loss (double) the mean loss, *correct (optional) the count of rows
  // whose argmax equals the label.
  PlCudaStatus (*cross_entropy_forward)(PlCudaContext* ctx, const float* logits,
                                        const int32_t* labels, int64_t rows, int64_t classes,
                                        float* probs, double* loss, int64_t* correct, PL_CUDA_MSG);
  // dlogits = (probs - onehot) * scale / rows (scale carries the loss scale).
  PlCudaStatus (*cross_entropy_backward)(PlCudaContext* ctx, const float* probs,
                                         const int32_t* labels, int64_t rows, int64_t classes,
                                         float scale, float* dlogits, PL_CUDA_MSG);
  // *loss (double) = mean of (pred - target)^2 over n elements.
  PlCudaStatus (*mse_forward)(PlCudaContext* ctx, const float* pred, const float* target, int64_t n,
                              double* loss, PL_CUDA_MSG);
  // dpred = 2 * (pred - target) * scale / n
  PlCudaStatus (*mse_backward)(PlCudaContext* ctx, const float* pred, const float* target,
                               int64_t n, float scale, float* dpred, PL_CUDA_MSG);

  // ---- the step's fused passes ----
  // The loss scaler's pass over `count` gradients (grads: host array):
  // data *= inv_scale, each gradient's non-finite count written to its
  // nonfinite counter (optional), and the sum of squares of all unscaled
  // gradients (double) written to *sum_squares (device, optional);
  // overwritten, as on the CPU.
  PlCudaStatus (*unscale_grads)(PlCudaContext* ctx, const PlCudaGradBuffer* grads, size_t count,
                                float inv_scale, double* sum_squares, PL_CUDA_MSG);
  // torch.optim.SGD on one parameter (optim/sgd.h's order): momentum_buf
  // NULL without momentum; `first` initialises it (t == 1); keep =
  // 1 - dampening; the buffer rounded (RNE) to state_format after every
  // update and before use.
  PlCudaStatus (*sgd_update)(PlCudaContext* ctx, float* value, const float* grad,
                             float* momentum_buf, int64_t n, float lr, float momentum, float keep,
                             float weight_decay, int32_t nesterov, int32_t first,
                             PlCudaFormat state_format, PL_CUDA_MSG);
  // torch.optim.Adam / AdamW on one parameter (optim/adam.h's order): l2
  // is Adam's weight decay added to the gradient, shrink AdamW's factor
  // 1 - lr * wd; step_size = lr / (1 - beta1^t), bc2_sqrt = sqrt(1 -
  // beta2^t); exp_avg/exp_avg_sq rounded to state_format before use.
  PlCudaStatus (*adam_update)(PlCudaContext* ctx, float* value, const float* grad, float* exp_avg,
                              float* exp_avg_sq, int64_t n, float step_size, float bc2_sqrt,
                              float one_minus_beta1, float beta2, float one_minus_beta2, float eps,
                              float l2, float shrink, PlCudaFormat state_format, PL_CUDA_MSG);
  // FP8 delayed scaling: y = x * scale (y may alias x), *amax = max|x|
  // (device float; NaN, else inf, propagates).
  PlCudaStatus (*scale_amax)(PlCudaContext* ctx, const float* x, float scale, float* y, int64_t n,
                             float* amax, PL_CUDA_MSG);
  // numeric/block.h's block_quantize of a [rows x cols] matrix into dst
  // (floats, bit for bit the CPU's; dst may alias src), stochastic element
  // rounding seeded by `seed`; *info (device) what the GEMM needs to know.
  PlCudaStatus (*block_quantize)(PlCudaContext* ctx, PlCudaBlockFormat f, const float* src,
                                 float* dst, int64_t rows, int64_t cols, PlCudaBlockLayout layout,
                                 int32_t stochastic, uint64_t seed, PlCudaBlockQuantized* info,
                                 PL_CUDA_MSG);
  // Gradient statistics of one tensor (statistics steps), added to out
  // (PL_CUDA_CENSUS_SLOTS device int64s): `values` the gradient measured,
  // `own` (optional) the run's gradient (a zero there counts as flushed),
  // `block` (optional) the values quantized in a block format (zero there:
  // flushed; no overflow). Magnitudes are classified with the format's
  // rounding thresholds (engine::RoundingThresholds: |a| <= underflow ->
  // underflow, < subnormal_hi -> subnormal, > overflow (or == with
  // tie_overflows) -> overflow; inf/NaN overflow).
  PlCudaStatus (*gradient_census)(PlCudaContext* ctx, const float* values, const float* own,
                                  const float* block, int64_t n, double underflow,
                                  double subnormal_hi, double overflow, int32_t tie_overflows,
                                  double scale, int32_t log2_lo, int64_t* out, PL_CUDA_MSG);

  // ---- ABI 4: the rest of engine::Backend ----
  // ReLU on FP16 or BF16 patterns (f) without decoding: y = x < 0 ? +0 : x
  // (-0 and NaN pass through); y may alias x.
  PlCudaStatus (*relu16_forward)(PlCudaContext* ctx, PlCudaFormat f, const void* x, void* y,
                                 int64_t n, PL_CUDA_MSG);
  // dx = x > 0 ? dy : +0, x in format f, dy and dx in format g (FP16 or
  // BF16); dx may alias dy.
  PlCudaStatus (*relu16_backward)(PlCudaContext* ctx, PlCudaFormat f, const void* x, PlCudaFormat g,
                                  const void* dy, void* dx, int64_t n, PL_CUDA_MSG);
  // dst[b, t, :] = src[b, :] for t < T.
  PlCudaStatus (*repeat_rows)(PlCudaContext* ctx, const float* src, float* dst, int64_t B, int64_t T,
                              int64_t C, PL_CUDA_MSG);
  // x [B, C, H, W] -> patches [B * (H/p) * (W/p), C * p * p] (pixels outside
  // the grid dropped), and back (unpatchify overwrites x; outside: 0).
  PlCudaStatus (*patchify)(PlCudaContext* ctx, const float* x, float* patches, int64_t B, int64_t C,
                           int64_t H, int64_t W, int64_t p, PL_CUDA_MSG);
  PlCudaStatus (*unpatchify)(PlCudaContext* ctx, const float* patches, float* x, int64_t B,
                             int64_t C, int64_t H, int64_t W, int64_t p, PL_CUDA_MSG);
  // y[n, c, :] += bias[c] over planes of hw values.
  PlCudaStatus (*bias_add_channels)(PlCudaContext* ctx, float* y, const float* bias, int64_t n,
                                    int64_t c, int64_t hw, PL_CUDA_MSG);
  // db[c] = sum over n and the plane of dy[n, c, :] (double accumulation,
  // overwritten).
  PlCudaStatus (*channel_sums)(PlCudaContext* ctx, const float* dy, float* db, int64_t n, int64_t c,
                               int64_t hw, PL_CUDA_MSG);
  // engine::ConvBlockArgs: kind 0 forward (a = x, b = w, out = y), 1
  // backward data (a = dy, b = w, out = dx), 2 backward weights (a = x, b =
  // dy, out = dw); f32 operands, a_block/b_block (optional, device) whose
  // tensor_decode multiplies the result; bias (forward only, optional)
  // added per channel after the scale.
  PlCudaStatus (*conv2d_block)(PlCudaContext* ctx, int32_t kind, const PlCudaConvShape* s,
                               const float* a, const PlCudaBlockQuantized* a_block, const float* b,
                               const PlCudaBlockQuantized* b_block, const float* bias, float* out,
                               PL_CUDA_MSG);

  // ---- ABI 5 ----
  // Token embedding (engine::Backend::embedding): pass 0 forward (src the
  // [vocab, dim] table, dst [n, dim]), 1 backward (src dy [n, dim], dst the
  // table's gradient, overwritten; each sum over tokens in increasing order).
  PlCudaStatus (*embedding)(PlCudaContext* ctx, int32_t pass, const float* ids, const float* src, float* dst,
                            int64_t n, int64_t vocab, int64_t dim, PL_CUDA_MSG);
  // The z-loss (engine::Backend::z_loss): pass 0 forward (lse, *z), 1
  // backward (grad += (f * lse) * probs).
  PlCudaStatus (*z_loss)(PlCudaContext* ctx, int32_t pass, const float* logits, const float* probs, float* lse,
                         double* z, float* grad, int64_t rows, int64_t cols, float coef, float scale, PL_CUDA_MSG);

  // ==== ABI 6 (gpufuse): fused casts. Optional: the CUDA Backend composes
  // the op from the entries above where one is NULL. ====
  // engine::fused::GemmEncodeOp with C as the caller's scratch (c_scratch):
  // the gemm's C [m x n] = alpha op(A) op(B) (+ bias[n] per row; no batch,
  // no block operands, beta 0, FP32 accumulation; lda/ldb 0: packed, C
  // packed) encoded to d_format at d (m x n codes, packed) bit for bit as
  // convert(FP32 -> d_format, saturate) rounds it, C's values left
  // undefined. The module writes D from cuBLASLt's epilogue where
  // backend/cuda/lt_epilogue.h's plan fuses (bias epilogue, FP16/BF16 D);
  // otherwise it runs gemm into c and convert.
  PlCudaStatus (*gemm_encode)(PlCudaContext* ctx, int64_t m, int64_t n, int64_t k, const void* a,
                              PlCudaFormat a_format, int32_t a_trans, int64_t lda, const void* b,
                              PlCudaFormat b_format, int32_t b_trans, int64_t ldb, float* c, float alpha,
                              const float* bias, PlCudaFormat d_format, void* d, int32_t saturate, PL_CUDA_MSG);
  // FP8 delayed scaling's whole cast in one pass (engine::fused::
  // ScaleAmaxEncode*Op, ActivationForwardEncodeOp): x (n values in
  // x_format: FP32, or FP16/BF16 codes decoded exactly), after `activation`
  // (0 none, 1 ReLU, 2 GELU: relu_forward's / gelu_forward's values; the
  // amax is then that of the activation's output), times scale (rounded,
  // as scale_amax), encoded to
  // q_format as convert encodes it (saturate, stochastic with
  // random_bits(seed, index_offset + i)) into q; *amax = max |x| as
  // scale_amax gives it; where decoded is not NULL, q's values decoded
  // there (n floats, as convert(q_format -> FP32)). q must not overlap x
  // or decoded.
  PlCudaStatus (*scale_amax_encode)(PlCudaContext* ctx, PlCudaFormat x_format, const void* x, int64_t n,
                                    int32_t activation, float scale, PlCudaFormat q_format, void* q, int32_t saturate,
                                    int32_t stochastic, uint64_t seed, uint64_t index_offset, float* amax,
                                    float* decoded, PL_CUDA_MSG);
  // column_sums of FP16 or BF16 codes (f), read as they are: the bits of
  // column_sums of their decoded values.
  PlCudaStatus (*column_sums16)(PlCudaContext* ctx, PlCudaFormat f, const void* dy, int64_t rows, int64_t cols,
                                float* db, PL_CUDA_MSG);
  // y = op(a, b) element by element in one pass, a (fa) and b (fb) decoded
  // exactly, y encoded to fy as convert encodes it (saturate, stochastic
  // with random_bits(seed, index_offset + i)): op 0 GELU(a) (b unused), 1
  // GELU's gradient (x = a, dy = b), 2 a + b, 3 ReLU's gradient (x = a, dy
  // = b), each the per-element value of gelu_forward, gelu_backward, add,
  // relu_backward (engine::fused::Gelu16ForwardOp, Gelu16BackwardOp,
  // AddEncodeOp, ActivationBackwardCodedOp). y may be one of the inputs
  // (same width), not a shifted view of one.
  PlCudaStatus (*pointwise_coded)(PlCudaContext* ctx, int32_t op, PlCudaFormat fa, const void* a, PlCudaFormat fb,
                                  const void* b, PlCudaFormat fy, void* y, int64_t n, int32_t saturate,
                                  int32_t stochastic, uint64_t seed, uint64_t index_offset, PL_CUDA_MSG);
  // ==== end of ABI 6 (gpufuse) ====
  // ---- ABI 6: memory the device reports (gpupeer) ----
  // *live_bytes = the bytes the context's allocator holds live: its memory
  // pool's used bytes (cudaMemPoolAttrUsedMemCurrent: every allocate not
  // yet released, the scratch buffer and library workspaces taken from the
  // pool included, each rounded to the pool's granularity); UINT64_MAX when
  // the context allocates with cudaMalloc (a device without memory pools),
  // which keeps no count. Host call, no synchronization. May be NULL in a
  // module (engine::Backend::allocated_bytes() is then -1).
  PlCudaStatus (*memory_allocated)(PlCudaContext* ctx, uint64_t* live_bytes, PL_CUDA_MSG);
  // ---- end ABI 6 (gpupeer) ----
  // ======== ABI 6: the step on the device, captured once (gpustep) ========
  // The scale update of torch._amp_update_scale_ with the found-inf check
  // folded in: total = the sum of counts[0 .. count) (device int64s: the
  // results slots unscale_grads wrote), then, on *state (device), what
  // engine::LossScaler's record_nonfinite, should_step and update do:
  // nonfinite = total, taken = (mode NONE or total == 0), DYNAMIC backs
  // off (scale * backoff in double, to float; tracker 0) or grows after
  // growth_interval clean steps (kept when the grown scale is not finite),
  // then loss_scale and inv_scale for the next step. One thread; no host.
  PlCudaStatus (*update_scale)(PlCudaContext* ctx, const int64_t* counts, int64_t count, int32_t mode,
                               double growth_factor, double backoff_factor, int64_t growth_interval,
                               PlCudaScaleState* state, PL_CUDA_MSG);
  // Makes *state (device; NULL: none, the default) the context's step
  // state for the entries queued after this call: cross_entropy_backward
  // and mse_backward take state->loss_scale for their scale argument,
  // unscale_grads multiplies by state->inv_scale (its inv_scale argument is
  // ignored), sgd_update takes state->lr for its lr (a schedule's rate,
  // written before each replay), and sgd_update / adam_update leave the
  // value and the optimizer state
  // untouched when state->taken is 0 (the optimizer's found-inf guard, as
  // PyTorch's fused optimizers take found_inf). Read when the work runs,
  // so a captured graph follows the state from replay to replay.
  PlCudaStatus (*set_step_state)(PlCudaContext* ctx, const PlCudaScaleState* state, PL_CUDA_MSG);
  // Stream capture of the context's stream (cudaStreamBeginCapture,
  // relaxed mode): the entries called until capture_end are recorded, not
  // run; capture_end instantiates them as *graph (NULL on error, and the
  // capture is abandoned). During a capture download and synchronize are
  // refused, host arguments (descriptor lists, shapes) are copied into
  // memory the graph keeps, and host sources of upload are read when the
  // graph runs: upload from memory of host_allocate that the host fills
  // before each graph_launch (the batch's rows, the step's inputs).
  PlCudaStatus (*capture_begin)(PlCudaContext* ctx, PL_CUDA_MSG);
  PlCudaStatus (*capture_end)(PlCudaContext* ctx, PlCudaGraph** graph, PL_CUDA_MSG);
  // Queues one replay of graph on the context's stream (asynchronous).
  PlCudaStatus (*graph_launch)(PlCudaContext* ctx, PlCudaGraph* graph, PL_CUDA_MSG);
  // Frees graph and the memory it kept, after the work queued before. NULL: no-op.
  PlCudaStatus (*graph_destroy)(PlCudaContext* ctx, PlCudaGraph* graph, PL_CUDA_MSG);
  // Page-locked host memory (cudaHostAlloc), for download_async and for
  // upload sources a graph reads; release waits for the stream first.
  PlCudaStatus (*host_allocate)(PlCudaContext* ctx, size_t bytes, void** out, PL_CUDA_MSG);
  PlCudaStatus (*host_release)(PlCudaContext* ctx, void* ptr, PL_CUDA_MSG);
  // device -> host_allocate memory, queued and not waited for (capturable):
  // the step's one read, taken a step later. The host reads host_dst after
  // wait_mark on a mark recorded after this call.
  PlCudaStatus (*download_async)(PlCudaContext* ctx, void* host_dst, const void* src, size_t bytes, PL_CUDA_MSG);
  // *mark = a point in the stream's order (an event recorded now; not
  // during a capture); wait_mark blocks until the work before it has run
  // and reports its first error. The context keeps the last
  // PL_CUDA_MARKS marks; an older mark waits for the whole stream.
  PlCudaStatus (*record_mark)(PlCudaContext* ctx, uint64_t* mark, PL_CUDA_MSG);
  PlCudaStatus (*wait_mark)(PlCudaContext* ctx, uint64_t mark, PL_CUDA_MSG);
  // ======== end of ABI 6 (gpustep) ========
} PlCudaBackendTable;
#define PL_CUDA_MARKS 4

#undef PL_CUDA_MSG

// The module's one export: its table (static storage, never NULL).
PL_CUDA_API const PlCudaBackendTable* pl_cuda_backend_table(void);
typedef const PlCudaBackendTable* (*PlCudaBackendTableFn)(void);

}  // extern "C"

// ---------------------------------------------------------------------------
// Loader (engine_cpu, no CUDA headers). The module is searched, in order:
//   1. $PL_CUDA_MODULE (a full path), when set;
//   2. next to the executable (/proc/self/exe's directory, then ../lib);
//   3. the build tree (the path CMake compiled in);
//   4. the dynamic loader's library path (dlopen of the bare file name).
// Loading happens once, lazily, on the first call of any function below
// (thread-safe); the module stays loaded for the life of the process.
// ---------------------------------------------------------------------------
namespace engine {

enum class CudaStatus : std::uint8_t {
  Ok = 0,
  NotLoaded,        // libpl_cuda.so missing, unloadable, or ABI mismatch
  NoDevice,
  InvalidArgument,
  OutOfMemory,
  Error,
};
const char* cuda_status_name(CudaStatus s);

struct CudaResult {
  CudaStatus status = CudaStatus::Ok;
  std::string message;  // one line; empty on success
  bool ok() const { return status == CudaStatus::Ok; }
};

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  std::uint64_t memory_total = 0;
  std::uint64_t memory_free = 0;
  int sm_count = 0;
  // "NVIDIA H100 80GB HBM3 (sm_90)": how the app and the CLI name the device.
  std::string label() const {
    return name + " (sm_" + std::to_string(compute_major) + std::to_string(compute_minor) + ")";
  }
};

// What happened when the module was looked for. Any thread.
struct CudaModuleInfo {
  bool loaded = false;     // found, dlopen'ed, table resolved, ABI matches
  std::string path;        // the file that was loaded (or last tried)
  int device_count = 0;    // 0 when not loaded or no device
  std::string reason;      // one line when !cuda_available(), else empty
};
const CudaModuleInfo& cuda_module_info();

// The loaded module's table; null when it is not loaded (whatever the
// device count). Entries marked "(next issue)" in the table are null.
const PlCudaBackendTable* cuda_table();

// True when the module is loaded and sees at least one device. Any thread.
bool cuda_available();
// One line saying why CUDA cannot be used ("libpl_cuda.so not found ...",
// "no CUDA device: cudaGetDeviceCount returned ..."); empty when available.
const std::string& cuda_unavailable_reason();

// Tries one explicit module path without touching the process-wide state:
// for tests and diagnostics. The library stays loaded when it loads.
CudaModuleInfo cuda_probe_module(const std::string& path);

// Wrappers over the table; when the module is not loaded they return
// CudaStatus::NotLoaded with the loader's reason. Any thread.
CudaResult cuda_device_count(int& count);
CudaResult cuda_device_info(int device, CudaDeviceInfo& info);

// engine::Format -> the ABI's format; false for formats without one (the
// element and block formats).
bool cuda_format(Format f, PlCudaFormat& out);

// A context of the module (one device, one stream) with the table's memory
// and cast entries, for tests and diagnostics; the CUDA Backend (next
// issue) calls the table itself. One thread at a time. Device pointers
// are the context's allocations; errors come back as CudaResult.
class CudaContext {
 public:
  // NotLoaded without the module, InvalidArgument for a bad device index.
  static CudaResult create(int device, std::unique_ptr<CudaContext>& out);
  ~CudaContext();  // synchronizes and destroys the context
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  PlCudaContext* handle() const { return m_ctx; }
  int device() const { return m_device; }

  CudaResult synchronize();
  CudaResult memory_info(std::uint64_t& free_bytes, std::uint64_t& total_bytes);
  CudaResult allocate(std::size_t bytes, void** out);
  CudaResult release(void* ptr);
  CudaResult upload(void* dst, const void* host_src, std::size_t bytes);
  CudaResult download(void* host_dst, const void* src, std::size_t bytes);
  CudaResult copy(void* dst, const void* src, std::size_t bytes);
  CudaResult fill_zero(void* dst, std::size_t bytes);
  // Tensor formats only (others: InvalidArgument). See the table's convert.
  CudaResult convert(Format from, const void* src, Format to, void* dst, std::size_t n,
                     const CastOptions& opt = {});

 private:
  CudaContext(PlCudaContext* ctx, int device) : m_ctx(ctx), m_device(device) {}
  PlCudaContext* m_ctx;
  int m_device;
};

}  // namespace engine
