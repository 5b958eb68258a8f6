// The step entries of the CUDA module (step.cu): the loss scaler's fused
// unscale, the optimizer updates, FP8 delayed scaling's amax, block
// quantization and the gradient census. Signatures of PlCudaBackendTable's
// entries of the same names; the math is step_math.cuh's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda_module.h"

namespace pl_cuda {

// As the CPU backend: each gradient's non-finite count overwrites its
// counter (when not null) and the sum of squares overwrites *sum_squares
// (when not null); grads is a host array.
PlCudaStatus unscale_grads(PlCudaContext* ctx, const PlCudaGradBuffer* grads, std::size_t count,
                           float inv_scale, double* sum_squares, char* message, std::size_t message_size);
PlCudaStatus sgd_update(PlCudaContext* ctx, float* value, const float* grad, float* momentum_buf,
                        std::int64_t n, float lr, float momentum, float keep, float weight_decay,
                        std::int32_t nesterov, std::int32_t first, PlCudaFormat state_format, char* message,
                        std::size_t message_size);
PlCudaStatus adam_update(PlCudaContext* ctx, float* value, const float* grad, float* exp_avg, float* exp_avg_sq,
                         std::int64_t n, float step_size, float bc2_sqrt, float one_minus_beta1, float beta2,
                         float one_minus_beta2, float eps, float l2, float shrink, PlCudaFormat state_format,
                         char* message, std::size_t message_size);
PlCudaStatus scale_amax(PlCudaContext* ctx, const float* x, float scale, float* y, std::int64_t n, float* amax,
                        char* message, std::size_t message_size);
PlCudaStatus block_quantize(PlCudaContext* ctx, PlCudaBlockFormat f, const float* src, float* dst,
                            std::int64_t rows, std::int64_t cols, PlCudaBlockLayout layout,
                            std::int32_t stochastic, std::uint64_t seed, PlCudaBlockQuantized* info,
                            char* message, std::size_t message_size);
PlCudaStatus gradient_census(PlCudaContext* ctx, const float* values, const float* own, const float* block,
                             std::int64_t n, double underflow, double subnormal_hi, double overflow,
                             std::int32_t tie_overflows, double scale, std::int32_t log2_lo, std::int64_t* out,
                             char* message, std::size_t message_size);

// ABI 6 (update_scale in step.cu; the capture entries in capture.cu).
PlCudaStatus update_scale(PlCudaContext* ctx, const std::int64_t* counts, std::int64_t count, std::int32_t mode,
                          double growth_factor, double backoff_factor, std::int64_t growth_interval,
                          PlCudaScaleState* state, char* message, std::size_t message_size);
PlCudaStatus set_step_state(PlCudaContext* ctx, const PlCudaScaleState* state, char* message,
                            std::size_t message_size);
PlCudaStatus capture_begin(PlCudaContext* ctx, char* message, std::size_t message_size);
PlCudaStatus capture_end(PlCudaContext* ctx, PlCudaGraph** graph, char* message, std::size_t message_size);
PlCudaStatus graph_launch(PlCudaContext* ctx, PlCudaGraph* graph, char* message, std::size_t message_size);
PlCudaStatus graph_destroy(PlCudaContext* ctx, PlCudaGraph* graph, char* message, std::size_t message_size);
PlCudaStatus host_allocate(PlCudaContext* ctx, std::size_t bytes, void** out, char* message,
                           std::size_t message_size);
PlCudaStatus host_release(PlCudaContext* ctx, void* ptr, char* message, std::size_t message_size);
PlCudaStatus download_async(PlCudaContext* ctx, void* host_dst, const void* src, std::size_t bytes,
                            char* message, std::size_t message_size);
PlCudaStatus record_mark(PlCudaContext* ctx, std::uint64_t* mark, char* message, std::size_t message_size);
PlCudaStatus wait_mark(PlCudaContext* ctx, std::uint64_t mark, char* message, std::size_t message_size);

}  // namespace pl_cuda
