// The matmul and convolution entries of the CUDA module (gemm.cu, conv.cu).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda_module.h"

namespace pl_cuda {

PlCudaStatus gemm(PlCudaContext* ctx, std::int64_t m, std::int64_t n, std::int64_t k, const void* a,
                  PlCudaFormat a_format, std::int32_t a_trans, std::int64_t lda, const PlCudaBlockQuantized* a_block,
                  const void* b, PlCudaFormat b_format, std::int32_t b_trans, std::int64_t ldb,
                  const PlCudaBlockQuantized* b_block, float* c, std::int64_t ldc, float alpha, float beta,
                  const float* bias, PlCudaFormat accumulate, const PlCudaGemmBatch* batch, char* message,
                  std::size_t message_size);

// ABI 6 (gpufuse): the gemm with its output encoded (cuda_module.h).
PlCudaStatus gemm_encode(PlCudaContext* ctx, std::int64_t m, std::int64_t n, std::int64_t k, const void* a,
                         PlCudaFormat a_format, std::int32_t a_trans, std::int64_t lda, const void* b,
                         PlCudaFormat b_format, std::int32_t b_trans, std::int64_t ldb, float* c, float alpha,
                         const float* bias, PlCudaFormat d_format, void* d, std::int32_t saturate, char* message,
                         std::size_t message_size);

PlCudaStatus conv2d_forward(PlCudaContext* ctx, const PlCudaConvShape* s, PlCudaFormat compute, const float* x,
                            const float* w, const float* bias, float* y, char* message, std::size_t message_size);
PlCudaStatus conv2d_backward_data(PlCudaContext* ctx, const PlCudaConvShape* s, PlCudaFormat compute,
                                  const float* dy, const float* w, float* dx, char* message,
                                  std::size_t message_size);
PlCudaStatus conv2d_backward_weights(PlCudaContext* ctx, const PlCudaConvShape* s, PlCudaFormat compute,
                                     const float* x, const float* dy, float* dw, float* db, char* message,
                                     std::size_t message_size);
PlCudaStatus conv2d_block(PlCudaContext* ctx, std::int32_t kind, const PlCudaConvShape* s, const float* a,
                          const PlCudaBlockQuantized* a_block, const float* b, const PlCudaBlockQuantized* b_block,
                          const float* bias, float* out, char* message, std::size_t message_size);

}  // namespace pl_cuda
