// The module's one export: the versioned table of functions. Entries the
// module implements point into device.cu, memory.cu and cast.cu; the CUDA
// Backend's ops are NULL until the next issue fills them in.
#include "backend/cuda/context.cuh"
#include "backend/cuda_module.h"

namespace {

// Every entry named, in the table's order (designated initializers must
// follow it); a NULL entry is what the table's users test for.
constexpr PlCudaBackendTable kTable = {
    .abi_version = PL_CUDA_ABI_VERSION,
    .table_size = sizeof(PlCudaBackendTable),
    .device_count = pl_cuda::device_count,
    .device_properties = pl_cuda::device_properties,
    .create_context = pl_cuda::create_context,
    .destroy_context = pl_cuda::destroy_context,
    .synchronize = pl_cuda::synchronize,
    .memory_info = pl_cuda::memory_info,
    .allocate = pl_cuda::allocate,
    .release = pl_cuda::release,
    .upload = pl_cuda::upload,
    .download = pl_cuda::download,
    .copy = pl_cuda::copy,
    .fill_zero = pl_cuda::fill_zero,
    .convert = pl_cuda::convert,
    // The CUDA Backend's ops: the next issue fills them in.
    .gemm = nullptr,
    .conv2d_forward = nullptr,
    .conv2d_backward_data = nullptr,
    .conv2d_backward_weights = nullptr,
    .maxpool2d_forward = nullptr,
    .maxpool2d_backward = nullptr,
    .relu_forward = nullptr,
    .relu_backward = nullptr,
    .gelu_forward = nullptr,
    .gelu_backward = nullptr,
    .add = nullptr,
    .scale = nullptr,
    .fill = nullptr,
    .quantize = nullptr,
    .count_nonfinite = nullptr,
    .amax = nullptr,
    .column_sums = nullptr,
    .error_sums = nullptr,
    .layernorm_forward = nullptr,
    .layernorm_backward = nullptr,
    .softmax_forward = nullptr,
    .softmax_backward = nullptr,
    .cross_entropy_forward = nullptr,
    .cross_entropy_backward = nullptr,
    .mse_forward = nullptr,
    .mse_backward = nullptr,
    .unscale_grads = nullptr,
    .sgd_update = nullptr,
    .adam_update = nullptr,
    .scale_amax = nullptr,
    .block_quantize = nullptr,
    .gradient_census = nullptr,
};

}  // namespace

extern "C" PL_CUDA_API const PlCudaBackendTable* pl_cuda_backend_table(void) { return &kTable; }
