// The module's one export: the versioned table of functions, every entry
// implemented (a NULL entry would make the CUDA Backend refuse the module).
#include "backend/cuda/context.cuh"
#include "backend/cuda/gemm_conv.cuh"
#include "backend/cuda/ops.cuh"
#include "backend/cuda/step_ops.cuh"
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
    // The CUDA Backend's ops (gemm.cu, conv.cu, elementwise.cu, rows.cu,
    // pool.cu, step.cu).
    .gemm = pl_cuda::gemm,
    .conv2d_forward = pl_cuda::conv2d_forward,
    .conv2d_backward_data = pl_cuda::conv2d_backward_data,
    .conv2d_backward_weights = pl_cuda::conv2d_backward_weights,
    .maxpool2d_forward = pl_cuda::maxpool2d_forward,
    .maxpool2d_backward = pl_cuda::maxpool2d_backward,
    .relu_forward = pl_cuda::relu_forward,
    .relu_backward = pl_cuda::relu_backward,
    .gelu_forward = pl_cuda::gelu_forward,
    .gelu_backward = pl_cuda::gelu_backward,
    .add = pl_cuda::add,
    .scale = pl_cuda::scale,
    .fill = pl_cuda::fill,
    .quantize = pl_cuda::quantize,
    .count_nonfinite = pl_cuda::count_nonfinite,
    .amax = pl_cuda::amax,
    .column_sums = pl_cuda::column_sums,
    .error_sums = pl_cuda::error_sums,
    .layernorm_forward = pl_cuda::layernorm_forward,
    .layernorm_backward = pl_cuda::layernorm_backward,
    .softmax_forward = pl_cuda::softmax_forward,
    .softmax_backward = pl_cuda::softmax_backward,
    .cross_entropy_forward = pl_cuda::cross_entropy_forward,
    .cross_entropy_backward = pl_cuda::cross_entropy_backward,
    .mse_forward = pl_cuda::mse_forward,
    .mse_backward = pl_cuda::mse_backward,
    .unscale_grads = pl_cuda::unscale_grads,
    .sgd_update = pl_cuda::sgd_update,
    .adam_update = pl_cuda::adam_update,
    .scale_amax = pl_cuda::scale_amax,
    .block_quantize = pl_cuda::block_quantize,
    .gradient_census = pl_cuda::gradient_census,
    .relu16_forward = pl_cuda::relu16_forward,
    .relu16_backward = pl_cuda::relu16_backward,
    .repeat_rows = pl_cuda::repeat_rows,
    .patchify = pl_cuda::patchify,
    .unpatchify = pl_cuda::unpatchify,
    .bias_add_channels = pl_cuda::bias_add_channels,
    .channel_sums = pl_cuda::channel_sums,
    .conv2d_block = pl_cuda::conv2d_block,
    .embedding = pl_cuda::embedding,
    .z_loss = pl_cuda::z_loss,
    // ---- ABI 6 (gpufuse): fused casts ----
    .gemm_encode = pl_cuda::gemm_encode,
    .scale_amax_encode = pl_cuda::scale_amax_encode,
    .column_sums16 = pl_cuda::column_sums16,
    .pointwise_coded = pl_cuda::pointwise_coded,
    // gpupeer: memory the device reports
    .memory_allocated = pl_cuda::memory_allocated,
    // ABI 6 (gpustep): the step on the device (step.cu, capture.cu, memory.cu).
    .update_scale = pl_cuda::update_scale,
    .set_step_state = pl_cuda::set_step_state,
    .capture_begin = pl_cuda::capture_begin,
    .capture_end = pl_cuda::capture_end,
    .graph_launch = pl_cuda::graph_launch,
    .graph_destroy = pl_cuda::graph_destroy,
    .host_allocate = pl_cuda::host_allocate,
    .host_release = pl_cuda::host_release,
    .download_async = pl_cuda::download_async,
    .record_mark = pl_cuda::record_mark,
    .wait_mark = pl_cuda::wait_mark,
};

}  // namespace

extern "C" PL_CUDA_API const PlCudaBackendTable* pl_cuda_backend_table(void) { return &kTable; }
