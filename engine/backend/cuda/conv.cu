// The convolution entries: cuDNN forward, backward data and backward
// weights on f32 NCHW tensors (OIHW weights), with a descriptor set and an
// algorithm per direction cached per shape and math mode.
//
// The values arrive already rounded to the compute format, so the math mode
// decides exactness: FP16, BF16, FP8 and TF32 values have at most 11
// significant bits and are exact in TF32, so those convolutions may run on
// TF32 Tensor Cores (CUDNN_TENSOR_OP_MATH); FP32 values are not, and run
// with CUDNN_FMA_MATH (plain FP32). Only deterministic algorithms are taken, so a
// run repeats bit for bit.
//
// Uses cuDNN's descriptor API (cudnn_cnn.h), which cuDNN 9 still ships.
//
// FP16/BF16 activations are not handed to cuDNN as 16-bit tensors: its
// FP16/BF16 configurations (PSEUDO_HALF / PSEUDO_BF16) write y, dx and dw in
// 16 bits, where the lab's convolutions give f32 results (y with its bias,
// dx, dw and the bias sums) that the layer then rounds, counts for
// overflow and sums in its own order. The values are exact in TF32, so the
// Tensor Core path below already runs them at TF32 speed; the casts around
// it stay until an FP16/BF16-in, FP32-out configuration (cuDNN's graph API)
// is wired and held to these bits.
#include <cudnn.h>
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <new>

#include "backend/cuda/context.cuh"
#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/gemm_conv.cuh"
#include "backend/cuda/ops.cuh"
#include "backend/cuda_module.h"

#define PL_CUDNN_CHECK(sink, expr)                                                                     \
  do {                                                                                                 \
    const cudnnStatus_t pl_cudnn_st_ = (expr);                                                         \
    if (pl_cudnn_st_ != CUDNN_STATUS_SUCCESS)                                                          \
      return ::pl_cuda::fail((sink), ::pl_cuda::cudnn_status(pl_cudnn_st_), "%s returned %s at %s:%d", #expr, \
                             cudnnGetErrorString(pl_cudnn_st_), ::pl_cuda::base_name(__FILE__), __LINE__); \
  } while (0)

namespace pl_cuda {

namespace {

PlCudaStatus cudnn_status(cudnnStatus_t s) {
  switch (s) {
    case CUDNN_STATUS_ALLOC_FAILED: return PL_CUDA_OUT_OF_MEMORY;
    case CUDNN_STATUS_BAD_PARAM:
    case CUDNN_STATUS_NOT_SUPPORTED: return PL_CUDA_INVALID_ARGUMENT;
    case CUDNN_STATUS_NOT_INITIALIZED: return PL_CUDA_NO_DEVICE;
    default: return PL_CUDA_ERROR;
  }
}

// The largest workspace an algorithm may ask for.
constexpr std::size_t kMaxWorkspace = 256u << 20;

// One direction's algorithm, the math type it runs in and its workspace.
template <class Algo>
struct Choice {
  bool ready = false;
  Algo algo{};
  cudnnMathType_t math{};
  std::size_t ws = 0;
};

struct Plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  // Chosen on first use of each direction.
  Choice<cudnnConvolutionFwdAlgo_t> fwd;
  Choice<cudnnConvolutionBwdDataAlgo_t> bwd_data;
  Choice<cudnnConvolutionBwdFilterAlgo_t> bwd_filter;
};

void destroy_plan(Plan& p) {
  if (p.x) cudnnDestroyTensorDescriptor(p.x);
  if (p.y) cudnnDestroyTensorDescriptor(p.y);
  if (p.bias) cudnnDestroyTensorDescriptor(p.bias);
  if (p.w) cudnnDestroyFilterDescriptor(p.w);
  if (p.conv) cudnnDestroyConvolutionDescriptor(p.conv);
  p = Plan{};
}

// The shape (n, c_in, h, w, c_out, kh, kw, stride, pad) and tensor-op math.
using PlanKey = std::array<std::int64_t, 10>;

// Values with at most 11 significant bits (FP16, BF16, FP8, TF32) are
// exact in TF32; only FP32 values are not.
bool tensor_op_exact(PlCudaFormat compute) { return compute != PL_CUDA_FP32; }

// An algorithm is usable when it succeeded, is deterministic, fits the
// workspace limit, never converts FP32 inputs to FP16 (a BF16 value may
// overflow there), and (strict FP32) does not use Tensor Cores.
template <class Perf>
bool usable(const Perf& p, bool allow_tensor_ops) {
  return p.status == CUDNN_STATUS_SUCCESS && p.determinism == CUDNN_DETERMINISTIC && p.memory <= kMaxWorkspace &&
         p.mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION && (allow_tensor_ops || p.mathType == CUDNN_FMA_MATH);
}

}  // namespace

struct ConvState {
  cudnnHandle_t handle = nullptr;
  std::map<PlanKey, Plan> plans;
};

void destroy_conv_state(PlCudaContext* ctx) {
  ConvState* s = ctx->conv;
  if (!s) return;
  for (auto& [key, p] : s->plans) destroy_plan(p);
  if (s->handle) cudnnDestroy(s->handle);
  delete s;
  ctx->conv = nullptr;
}

namespace {

PlCudaStatus conv_state(PlCudaContext* ctx, ErrorSink sink, ConvState** out) {
  if (!ctx->conv) {
    cudnnHandle_t handle = nullptr;
    PL_CUDNN_CHECK(sink, cudnnCreate(&handle));
    auto* s = new (std::nothrow) ConvState;
    if (!s) {
      cudnnDestroy(handle);
      return fail(sink, PL_CUDA_OUT_OF_MEMORY, "conv: out of host memory");
    }
    s->handle = handle;
    ctx->conv = s;
  }
  PL_CUDNN_CHECK(sink, cudnnSetStream(ctx->conv->handle, ctx->stream));
  *out = ctx->conv;
  return PL_CUDA_OK;
}

PlCudaStatus validate(const PlCudaConvShape* s, const char* fn, ErrorSink sink) {
  if (!s) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "%s: shape is null", fn);
  if (s->n < 0 || s->c_in < 1 || s->h < 1 || s->w < 1 || s->c_out < 1 || s->kh < 1 || s->kw < 1 || s->stride < 1 ||
      s->pad < 0 || s->h + 2 * s->pad < s->kh || s->w + 2 * s->pad < s->kw)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "%s: invalid convolution shape", fn);
  const std::int64_t oh = (s->h + 2 * s->pad - s->kh) / s->stride + 1, ow = (s->w + 2 * s->pad - s->kw) / s->stride + 1;
  // cuDNN's descriptors hold int dimensions and tensors of < 2^31 elements.
  if (s->n > INT32_MAX || s->n * s->c_in * s->h * s->w > INT32_MAX || s->n * s->c_out * oh * ow > INT32_MAX ||
      s->c_out * s->c_in * s->kh * s->kw > INT32_MAX)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "%s: tensors beyond cuDNN's 2^31 elements", fn);
  return PL_CUDA_OK;
}

// The descriptors of one shape, all set, or a failure and nothing cached.
PlCudaStatus make_plan(const PlCudaConvShape& s, bool tensor_ops, Plan& p, ErrorSink sink) {
  const int n = static_cast<int>(s.n), c = static_cast<int>(s.c_in), h = static_cast<int>(s.h),
            w = static_cast<int>(s.w), k = static_cast<int>(s.c_out);
  const int oh = static_cast<int>((s.h + 2 * s.pad - s.kh) / s.stride + 1);
  const int ow = static_cast<int>((s.w + 2 * s.pad - s.kw) / s.stride + 1);
  PL_CUDNN_CHECK(sink, cudnnCreateTensorDescriptor(&p.x));
  PL_CUDNN_CHECK(sink, cudnnCreateTensorDescriptor(&p.y));
  PL_CUDNN_CHECK(sink, cudnnCreateTensorDescriptor(&p.bias));
  PL_CUDNN_CHECK(sink, cudnnCreateFilterDescriptor(&p.w));
  PL_CUDNN_CHECK(sink, cudnnCreateConvolutionDescriptor(&p.conv));
  PL_CUDNN_CHECK(sink, cudnnSetTensor4dDescriptor(p.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
  PL_CUDNN_CHECK(sink, cudnnSetTensor4dDescriptor(p.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, k, oh, ow));
  PL_CUDNN_CHECK(sink, cudnnSetTensor4dDescriptor(p.bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, k, 1, 1));
  PL_CUDNN_CHECK(sink, cudnnSetFilter4dDescriptor(p.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k, c,
                                                  static_cast<int>(s.kh), static_cast<int>(s.kw)));
  // Cross-correlation, as PyTorch and oneDNN compute "convolution".
  PL_CUDNN_CHECK(sink, cudnnSetConvolution2dDescriptor(p.conv, static_cast<int>(s.pad), static_cast<int>(s.pad),
                                                       static_cast<int>(s.stride), static_cast<int>(s.stride), 1, 1,
                                                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  PL_CUDNN_CHECK(sink, cudnnSetConvolutionMathType(p.conv, tensor_ops ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
  return PL_CUDA_OK;
}

PlCudaStatus plan_for(ConvState& st, const PlCudaConvShape& s, bool tensor_ops, Plan** out, ErrorSink sink) {
  const PlanKey key = {s.n, s.c_in, s.h, s.w, s.c_out, s.kh, s.kw, s.stride, s.pad, tensor_ops ? 1 : 0};
  auto it = st.plans.find(key);
  if (it == st.plans.end()) {
    Plan p;
    if (const PlCudaStatus status = make_plan(s, tensor_ops, p, sink); status != PL_CUDA_OK) {
      destroy_plan(p);
      return status;
    }
    it = st.plans.emplace(key, p).first;
  }
  *out = &it->second;
  return PL_CUDA_OK;
}

constexpr int kAlgos = 16;

// The first usable algorithm of cuDNN's heuristic list (best first).
template <class Perf, class Algo>
PlCudaStatus pick(const Perf* perf, int returned, bool tensor_ops, Choice<Algo>& c, const char* fn, ErrorSink sink) {
  for (int i = 0; i < returned; ++i)
    if (usable(perf[i], tensor_ops)) {
      c = {true, perf[i].algo, perf[i].mathType, perf[i].memory};
      return PL_CUDA_OK;
    }
  return fail(sink, PL_CUDA_ERROR, "%s: cuDNN offers no deterministic%s algorithm for this shape", fn,
              tensor_ops ? "" : " FP32 (FMA)");
}

PlCudaStatus choose_forward(ConvState& st, Plan& p, bool tensor_ops, ErrorSink sink) {
  if (p.fwd.ready) return PL_CUDA_OK;
  cudnnConvolutionFwdAlgoPerf_t perf[kAlgos];
  int returned = 0;
  PL_CUDNN_CHECK(sink, cudnnGetConvolutionForwardAlgorithm_v7(st.handle, p.x, p.w, p.conv, p.y, kAlgos, &returned, perf));
  return pick(perf, returned, tensor_ops, p.fwd, "conv2d_forward", sink);
}

PlCudaStatus choose_backward_data(ConvState& st, Plan& p, bool tensor_ops, ErrorSink sink) {
  if (p.bwd_data.ready) return PL_CUDA_OK;
  cudnnConvolutionBwdDataAlgoPerf_t perf[kAlgos];
  int returned = 0;
  PL_CUDNN_CHECK(sink, cudnnGetConvolutionBackwardDataAlgorithm_v7(st.handle, p.w, p.y, p.conv, p.x, kAlgos, &returned,
                                                                   perf));
  return pick(perf, returned, tensor_ops, p.bwd_data, "conv2d_backward_data", sink);
}

PlCudaStatus choose_backward_filter(ConvState& st, Plan& p, bool tensor_ops, ErrorSink sink) {
  if (p.bwd_filter.ready) return PL_CUDA_OK;
  cudnnConvolutionBwdFilterAlgoPerf_t perf[kAlgos];
  int returned = 0;
  PL_CUDNN_CHECK(sink, cudnnGetConvolutionBackwardFilterAlgorithm_v7(st.handle, p.x, p.y, p.conv, p.w, kAlgos,
                                                                     &returned, perf));
  return pick(perf, returned, tensor_ops, p.bwd_filter, "conv2d_backward_weights", sink);
}

// What one direction's call needs: the state, the plan, the algorithm
// chosen, its workspace, and the descriptor set to its math type.
struct Ready {
  ConvState* st = nullptr;
  Plan* p = nullptr;
  void* ws = nullptr;
};
template <class Algo>
PlCudaStatus prepare(PlCudaContext* ctx, const PlCudaConvShape& s, bool tensor_ops,
                     PlCudaStatus (*choose)(ConvState&, Plan&, bool, ErrorSink), Choice<Algo> Plan::*dir, Ready& r,
                     ErrorSink sink) {
  PL_CUDA_TRY(conv_state(ctx, sink, &r.st));
  PL_CUDA_TRY(plan_for(*r.st, s, tensor_ops, &r.p, sink));
  PL_CUDA_TRY(choose(*r.st, *r.p, tensor_ops, sink));
  const Choice<Algo>& c = r.p->*dir;
  if (c.ws) PL_CUDA_TRY(scratch(ctx, c.ws, &r.ws, sink));
  PL_CUDNN_CHECK(sink, cudnnSetConvolutionMathType(r.p->conv, c.math));
  return PL_CUDA_OK;
}

PlCudaStatus run_forward(PlCudaContext* ctx, const PlCudaConvShape& s, bool tensor_ops, const float* x,
                         const float* w, const float* bias, float* y, ErrorSink sink) {
  Ready r;
  PL_CUDA_TRY(prepare(ctx, s, tensor_ops, choose_forward, &Plan::fwd, r, sink));
  const Plan& p = *r.p;
  const float one = 1.0f, zero = 0.0f;
  PL_CUDNN_CHECK(sink, cudnnConvolutionForward(r.st->handle, &one, p.x, x, p.w, w, p.conv, p.fwd.algo, r.ws, p.fwd.ws,
                                               &zero, p.y, y));
  if (bias) PL_CUDNN_CHECK(sink, cudnnAddTensor(r.st->handle, &one, p.bias, bias, &one, p.y, y));
  return PL_CUDA_OK;
}

PlCudaStatus run_backward_data(PlCudaContext* ctx, const PlCudaConvShape& s, bool tensor_ops, const float* dy,
                               const float* w, float* dx, ErrorSink sink) {
  Ready r;
  PL_CUDA_TRY(prepare(ctx, s, tensor_ops, choose_backward_data, &Plan::bwd_data, r, sink));
  const Plan& p = *r.p;
  const float one = 1.0f, zero = 0.0f;
  PL_CUDNN_CHECK(sink, cudnnConvolutionBackwardData(r.st->handle, &one, p.w, w, p.y, dy, p.conv, p.bwd_data.algo, r.ws,
                                                    p.bwd_data.ws, &zero, p.x, dx));
  return PL_CUDA_OK;
}

PlCudaStatus run_backward_filter(PlCudaContext* ctx, const PlCudaConvShape& s, bool tensor_ops, const float* x,
                                 const float* dy, float* dw, ErrorSink sink) {
  Ready r;
  PL_CUDA_TRY(prepare(ctx, s, tensor_ops, choose_backward_filter, &Plan::bwd_filter, r, sink));
  const Plan& p = *r.p;
  const float one = 1.0f, zero = 0.0f;
  PL_CUDNN_CHECK(sink, cudnnConvolutionBackwardFilter(r.st->handle, &one, p.x, x, p.y, dy, p.conv, p.bwd_filter.algo,
                                                      r.ws, p.bwd_filter.ws, &zero, p.w, dw));
  return PL_CUDA_OK;
}

std::int64_t out_h(const PlCudaConvShape& s) { return (s.h + 2 * s.pad - s.kh) / s.stride + 1; }
std::int64_t out_w(const PlCudaConvShape& s) { return (s.w + 2 * s.pad - s.kw) / s.stride + 1; }

// out = out * a_decode * b_decode (+ bias[c] over planes of hw values).
__global__ void block_epilogue_kernel(float* out, std::int64_t total, std::int64_t c, std::int64_t hw,
                                      const PlCudaBlockQuantized* a_block, const PlCudaBlockQuantized* b_block,
                                      const float* bias) {
  const float scale = (a_block ? a_block->tensor_decode : 1.0f) * (b_block ? b_block->tensor_decode : 1.0f);
  const std::int64_t stride = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    float v = __fmul_rn(out[i], scale);
    if (bias) v = __fadd_rn(v, bias[(i / hw) % c]);
    out[i] = v;
  }
}

}  // namespace

PlCudaStatus conv2d_forward(PlCudaContext* ctx, const PlCudaConvShape* s, PlCudaFormat compute, const float* x,
                            const float* w, const float* bias, float* y, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "conv2d_forward");
  PL_CUDA_TRY(validate(s, "conv2d_forward", sink));
  if (s->n == 0) return PL_CUDA_OK;
  if (!x || !w || !y) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "conv2d_forward: null tensor");
  return run_forward(ctx, *s, tensor_op_exact(compute), x, w, bias, y, sink);
}

PlCudaStatus conv2d_backward_data(PlCudaContext* ctx, const PlCudaConvShape* s, PlCudaFormat compute,
                                  const float* dy, const float* w, float* dx, char* message,
                                  std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "conv2d_backward_data");
  PL_CUDA_TRY(validate(s, "conv2d_backward_data", sink));
  if (s->n == 0) return PL_CUDA_OK;
  if (!dy || !w || !dx) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "conv2d_backward_data: null tensor");
  return run_backward_data(ctx, *s, tensor_op_exact(compute), dy, w, dx, sink);
}

PlCudaStatus conv2d_backward_weights(PlCudaContext* ctx, const PlCudaConvShape* s, PlCudaFormat compute,
                                     const float* x, const float* dy, float* dw, float* db, char* message,
                                     std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "conv2d_backward_weights");
  PL_CUDA_TRY(validate(s, "conv2d_backward_weights", sink));
  if (!dw) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "conv2d_backward_weights: dw is null");
  if (s->n == 0) {  // no samples: zero gradients
    PL_CUDA_CHECK(sink, cudaMemsetAsync(dw, 0, static_cast<std::size_t>(s->c_out * s->c_in * s->kh * s->kw) * 4,
                                        ctx->stream));
    if (db) PL_CUDA_CHECK(sink, cudaMemsetAsync(db, 0, static_cast<std::size_t>(s->c_out) * 4, ctx->stream));
    return PL_CUDA_OK;
  }
  if (!x || !dy) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "conv2d_backward_weights: null tensor");
  PL_CUDA_TRY(run_backward_filter(ctx, *s, tensor_op_exact(compute), x, dy, dw, sink));
  if (db) return channel_sums(ctx, dy, db, s->n, s->c_out, out_h(*s) * out_w(*s), message, message_size);
  return PL_CUDA_OK;
}

PlCudaStatus conv2d_block(PlCudaContext* ctx, std::int32_t kind, const PlCudaConvShape* s, const float* a,
                          const PlCudaBlockQuantized* a_block, const float* b, const PlCudaBlockQuantized* b_block,
                          const float* bias, float* out, char* message, std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "conv2d_block");
  PL_CUDA_TRY(validate(s, "conv2d_block", sink));
  if (kind < 0 || kind > 2) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "conv2d_block: unknown kind %d", kind);
  if (!out) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "conv2d_block: out is null");
  if (s->n == 0 && kind != 2) return PL_CUDA_OK;
  if (s->n > 0 && (!a || !b)) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "conv2d_block: null operand");
  // Whether the block values are exact in BF16 is known only on the device,
  // so the convolution runs in plain FP32 (exact for every block format).
  std::int64_t total = 0, channels = 0, hw = 1;
  switch (kind) {
    case 0:
      PL_CUDA_TRY(run_forward(ctx, *s, false, a, b, nullptr, out, sink));
      total = s->n * s->c_out * out_h(*s) * out_w(*s);
      channels = s->c_out;
      hw = out_h(*s) * out_w(*s);
      break;
    case 1:
      PL_CUDA_TRY(run_backward_data(ctx, *s, false, a, b, out, sink));
      total = s->n * s->c_in * s->h * s->w;
      channels = s->c_in;
      hw = s->h * s->w;
      bias = nullptr;
      break;
    default:
      if (s->n == 0) {
        PL_CUDA_CHECK(sink, cudaMemsetAsync(out, 0, static_cast<std::size_t>(s->c_out * s->c_in * s->kh * s->kw) * 4,
                                            ctx->stream));
        return PL_CUDA_OK;
      }
      PL_CUDA_TRY(run_backward_filter(ctx, *s, false, a, b, out, sink));
      total = s->c_out * s->c_in * s->kh * s->kw;
      channels = s->c_out;
      hw = s->c_in * s->kh * s->kw;
      bias = nullptr;
      break;
  }
  if (!a_block && !b_block && !bias) return PL_CUDA_OK;
  block_epilogue_kernel<<<grid_for(static_cast<std::size_t>(total)), kThreads, 0, ctx->stream>>>(
      out, total, channels, hw, a_block, b_block, bias);
  PL_CUDA_CHECK_LAUNCH(sink, "block_epilogue_kernel");
  return PL_CUDA_OK;
}

}  // namespace pl_cuda
