// The gemm entry: cuBLASLt for every FP32-accumulated product (FP16/BF16
// inputs with FP32 compute on Tensor Cores, TF32 mode, FP8 on sm_89+), and
// the engine's own kernels: sequential rounding for FP16/BF16 accumulation
// (bit for bit the CPU's gemm_lowp.cpp), and attention's small batched
// products.
//
// Row-major to cuBLASLt's column-major: C = op(A) op(B) is computed as
// C^T = op(B)^T op(A)^T, with B's buffer as cuBLASLt's A and A's as its B;
// a row-major buffer read column-major is its transpose, so no data moves.
//
// Plans (descriptors, layouts and the heuristic's algorithm) are cached per
// shape, types, transposes, leading dimensions, batch and pointer alignment;
// the workspace is allocated once per context. A shape cuBLASLt has no
// algorithm for runs with both operands decoded to FP32 (exact, slower).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <new>

#include "backend/cuda/context.cuh"
#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/fp_convert.cuh"
#include "backend/cuda/gemm_conv.cuh"
#include "backend/cuda/lt_epilogue.h"
#include "backend/cuda/ops_math.cuh"
#include "backend/cuda_module.h"

// A cuBLASLt call: a failure becomes "<expr> returned <status> at file:line".
#define PL_CUBLAS_CHECK(sink, expr)                                                          \
  do {                                                                                       \
    const cublasStatus_t pl_cublas_st_ = (expr);                                             \
    if (pl_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                              \
      return ::pl_cuda::fail((sink), ::pl_cuda::cublas_status(pl_cublas_st_), "%s returned %s at %s:%d", \
                             #expr, cublasLtGetStatusName(pl_cublas_st_), ::pl_cuda::base_name(__FILE__), \
                             __LINE__);                                                      \
  } while (0)

namespace pl_cuda {

PlCudaStatus cublas_status(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_ALLOC_FAILED: return PL_CUDA_OUT_OF_MEMORY;
    case CUBLAS_STATUS_INVALID_VALUE:
    case CUBLAS_STATUS_NOT_SUPPORTED: return PL_CUDA_INVALID_ARGUMENT;
    case CUBLAS_STATUS_NOT_INITIALIZED: return PL_CUDA_NO_DEVICE;
    default: return PL_CUDA_ERROR;
  }
}

namespace {

// cuBLASLt's recommended workspace for Hopper (32 MiB); smaller cards use less.
constexpr std::size_t kWorkspaceBytes = 32u << 20;

// One cached plan: everything cublasLtMatmul needs except the pointers.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;  // the heuristic returned an algorithm
};

// m, n, k, types, compute, transposes, lds, batch count and strides,
// alignments, epilogue, pointer mode.
using PlanKey = std::array<std::int64_t, 20>;

}  // namespace

struct GemmState {
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  float* scalars = nullptr;  // device: alpha, beta for the device pointer mode
  std::map<PlanKey, Plan> plans;
  char last_refusal[256] = {};  // why the last plan could not be made (for the final message)
};

void destroy_gemm_state(PlCudaContext* ctx) {
  GemmState* g = ctx->gemm;
  if (!g) return;
  for (auto& [key, p] : g->plans) {
    if (p.a) cublasLtMatrixLayoutDestroy(p.a);
    if (p.b) cublasLtMatrixLayoutDestroy(p.b);
    if (p.c) cublasLtMatrixLayoutDestroy(p.c);
    if (p.desc) cublasLtMatmulDescDestroy(p.desc);
  }
  // The stream was synchronized by the caller (teardown).
  if (g->workspace) cudaFree(g->workspace);
  if (g->scalars) cudaFree(g->scalars);
  if (g->lt) cublasLtDestroy(g->lt);
  delete g;
  ctx->gemm = nullptr;
}

namespace {

// Everything of the state made, or nothing: a failure frees what was made
// (a half-made state would hand null workspaces to later calls).
PlCudaStatus make_gemm_state(GemmState& g, ErrorSink sink) {
  PL_CUBLAS_CHECK(sink, cublasLtCreate(&g.lt));
  std::size_t free_bytes = 0, total_bytes = 0;
  PL_CUDA_CHECK(sink, cudaMemGetInfo(&free_bytes, &total_bytes));
  const std::size_t ws = std::min(kWorkspaceBytes, free_bytes / 16);
  PL_CUDA_CHECK(sink, cudaMalloc(&g.workspace, ws));
  g.workspace_bytes = ws;
  PL_CUDA_CHECK(sink, cudaMalloc(&g.scalars, 2 * sizeof(float)));
  return PL_CUDA_OK;
}

PlCudaStatus gemm_state(PlCudaContext* ctx, ErrorSink sink, GemmState** out) {
  if (!ctx->gemm) {
    auto* g = new (std::nothrow) GemmState;
    if (!g) return fail(sink, PL_CUDA_OUT_OF_MEMORY, "gemm: out of host memory");
    ctx->gemm = g;
    if (const PlCudaStatus s = make_gemm_state(*g, sink); s != PL_CUDA_OK) {
      destroy_gemm_state(ctx);  // resets ctx->gemm
      return s;
    }
  }
  *out = ctx->gemm;
  return PL_CUDA_OK;
}

cudaDataType_t cuda_type(PlCudaFormat f) {
  switch (f) {
    case PL_CUDA_FP16: return CUDA_R_16F;
    case PL_CUDA_BF16: return CUDA_R_16BF;
    case PL_CUDA_E4M3: return CUDA_R_8F_E4M3;
    case PL_CUDA_E5M2: return CUDA_R_8F_E5M2;
    case PL_CUDA_FP32:
    case PL_CUDA_TF32: return CUDA_R_32F;
  }
  return CUDA_R_32F;
}

bool is_fp8(PlCudaFormat f) { return f == PL_CUDA_E4M3 || f == PL_CUDA_E5M2; }
// Every value of the format is exactly a BF16 (FP16) value.
bool bf16_exact(PlCudaFormat f) { return f == PL_CUDA_BF16 || is_fp8(f); }
bool fp16_exact(PlCudaFormat f) { return f == PL_CUDA_FP16 || is_fp8(f); }

// The largest power of two (up to 256) dividing the address and every batch
// offset in bytes: what cuBLASLt may assume of the operand's alignment.
std::int64_t alignment_of(const void* p, std::int64_t stride0, std::int64_t stride1, std::size_t esize) {
  std::uint64_t bits = reinterpret_cast<std::uintptr_t>(p) | 256u;
  bits |= static_cast<std::uint64_t>(stride0) * esize;
  bits |= static_cast<std::uint64_t>(stride1) * esize;
  return static_cast<std::int64_t>(bits & (~bits + 1));
}

// Elements an operand spans: `rows` x `cols` as stored (row-major, ld),
// over every product of the batch.
std::int64_t extent(std::int64_t rows, std::int64_t cols, std::int64_t ld, const std::int64_t count[2],
                    const std::int64_t stride[2]) {
  if (rows == 0 || cols == 0) return 0;
  return (count[0] - 1) * stride[0] + (count[1] - 1) * stride[1] + (rows - 1) * ld + cols;
}

// One product's problem, as the entry received it after the batch was
// split (see run_lt).
struct Problem {
  std::int64_t m, n, k;
  const void* a;
  PlCudaFormat af;
  bool at;
  std::int64_t lda;
  const void* b;
  PlCudaFormat bf;
  bool bt;
  std::int64_t ldb;
  float* c;
  std::int64_t ldc;
  std::int64_t count[2];
  std::int64_t a_stride[2], b_stride[2], c_stride[2];
};

// ---- kernels ----

__device__ __forceinline__ float decode_of(const PlCudaBlockQuantized* q) { return q ? q->tensor_decode : 1.0f; }

// Output t of a batched problem (grid-stride index over every product's
// m x n outputs): its product (bi, bj), row i and column j.
struct Out {
  std::int64_t bi, bj, i, j;
};
__device__ __forceinline__ Out out_of(const Problem& p, std::int64_t t) {
  const std::int64_t total = p.m * p.n, prod = t / total, e = t % total;
  return {prod / p.count[1], prod % p.count[1], e / p.n, e % p.n};
}
__device__ __forceinline__ float* c_at(const Problem& p, const Out& o) {
  return p.c + o.bi * p.c_stride[0] + o.bj * p.c_stride[1] + o.i * p.ldc + o.j;
}
// c = v + beta * c + bias[j], each step rounded in f32 (beta == 0 leaves c unread).
__device__ __forceinline__ void store_epilogue(const Problem& p, const Out& o, float v, float beta,
                                               const float* bias) {
  float* c = c_at(p, o);
  if (beta != 0.0f) v = add_rn(v, mul_rn(beta, *c));
  if (bias) v = add_rn(v, bias[o.j]);
  *c = v;
}
#define PL_FOR_EACH_OUTPUT(p, t)                                                                          \
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x,                \
                    end_ = (p).m * (p).n * (p).count[0] * (p).count[1];                                    \
       t < end_; t += static_cast<std::int64_t>(blockDim.x) * gridDim.x)

// The CPU's gemm_lowp: per output, s = round(s + a_p * b_p) for p = 0..k-1
// (the product and the sum each rounded to f32, no FMA; round: to `acc`,
// nothing for FP32), then alpha * s +
// beta * c + bias in f32, in that order. A TF32 operand is rounded first, as
// the CPU decodes it. One thread per output.
__global__ void lowp_kernel(Problem p, PlCudaFormat acc, float alpha, float beta, const float* bias,
                            const PlCudaBlockQuantized* a_block, const PlCudaBlockQuantized* b_block) {
  const float scale = a_block || b_block ? alpha * decode_of(a_block) * decode_of(b_block) : alpha;
  PL_FOR_EACH_OUTPUT(p, t) {
    const Out o = out_of(p, t);
    const std::int64_t a_off = o.bi * p.a_stride[0] + o.bj * p.a_stride[1];
    const std::int64_t b_off = o.bi * p.b_stride[0] + o.bj * p.b_stride[1];
    float s = 0.0f;
    for (std::int64_t q = 0; q < p.k; ++q) {
      const auto ai = static_cast<std::size_t>(a_off + (p.at ? q * p.lda + o.i : o.i * p.lda + q));
      const auto bi = static_cast<std::size_t>(b_off + (p.bt ? o.j * p.ldb + q : q * p.ldb + o.j));
      float av = load_value(p.af, p.a, ai), bv = load_value(p.bf, p.b, bi);
      if (p.af == PL_CUDA_TF32) av = fp32_round_tf32(av);
      if (p.bf == PL_CUDA_TF32) bv = fp32_round_tf32(bv);
      s = quantize_value(acc, add_rn(s, mul_rn(av, bv)), false);
    }
    store_epilogue(p, o, mul_rn(scale, s), beta, bias);
  }
}

// C = beta * C + bias (k == 0: an empty product).
__global__ void epilogue_kernel(Problem p, float beta, const float* bias) {
  PL_FOR_EACH_OUTPUT(p, t) store_epilogue(p, out_of(p, t), 0.0f, beta, bias);
}

// Adds bias[j] to every row of every product's C (the FP8 path, whose
// epilogue bias types exclude FP32).
__global__ void bias_rows_kernel(Problem p, const float* bias) {
  PL_FOR_EACH_OUTPUT(p, t) {
    const Out o = out_of(p, t);
    float* c = c_at(p, o);
    *c = add_rn(*c, bias[o.j]);
  }
}

#undef PL_FOR_EACH_OUTPUT

// Device alpha and beta for block operands: alpha times their tensor decodes.
__global__ void block_scalars_kernel(float* out, float alpha, float beta, const PlCudaBlockQuantized* a_block,
                                     const PlCudaBlockQuantized* b_block) {
  out[0] = alpha * decode_of(a_block) * decode_of(b_block);
  out[1] = beta;
}

// ---- cuBLASLt ----

struct LtCall {
  cudaDataType_t a_type, b_type, c_type;  // of the buffers as cuBLASLt sees them (A' = b, B' = a)
  cublasComputeType_t compute;
  cudaDataType_t scale_type;
  bool bias_epilogue;  // FP32 bias in the epilogue
  bool device_scalars;
};

PlCudaStatus make_plan(GemmState& g, const Problem& p, const LtCall& call, const std::int64_t align[3],
                       std::int64_t batch, std::int64_t a_bstride, std::int64_t b_bstride, std::int64_t c_bstride,
                       Plan& plan, ErrorSink sink) {
  PL_CUBLAS_CHECK(sink, cublasLtMatmulDescCreate(&plan.desc, call.compute, call.scale_type));
  // cuBLASLt's A is our B, its B our A.
  const cublasOperation_t op_a = p.bt ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = p.at ? CUBLAS_OP_T : CUBLAS_OP_N;
  PL_CUBLAS_CHECK(sink, cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
  PL_CUBLAS_CHECK(sink, cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
  if (call.device_scalars) {
    const cublasLtPointerMode_t mode = CUBLASLT_POINTER_MODE_DEVICE;
    PL_CUBLAS_CHECK(sink, cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode,
                                                         sizeof mode));
  }
  if (call.bias_epilogue) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    const cudaDataType_t bias_type = CUDA_R_32F;
    PL_CUBLAS_CHECK(sink, cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    PL_CUBLAS_CHECK(sink, cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                         sizeof bias_type));
  }
  // Column-major views of the row-major buffers.
  const std::uint64_t a_rows = p.bt ? p.k : p.n, a_cols = p.bt ? p.n : p.k;
  const std::uint64_t b_rows = p.at ? p.m : p.k, b_cols = p.at ? p.k : p.m;
  PL_CUBLAS_CHECK(sink, cublasLtMatrixLayoutCreate(&plan.a, call.a_type, a_rows, a_cols, p.ldb));
  PL_CUBLAS_CHECK(sink, cublasLtMatrixLayoutCreate(&plan.b, call.b_type, b_rows, b_cols, p.lda));
  PL_CUBLAS_CHECK(sink, cublasLtMatrixLayoutCreate(&plan.c, call.c_type, static_cast<std::uint64_t>(p.n),
                                                   static_cast<std::uint64_t>(p.m), p.ldc));
  if (batch > 1) {
    const std::int32_t count = static_cast<std::int32_t>(batch);
    const std::pair<cublasLtMatrixLayout_t, std::int64_t> layouts[3] = {
        {plan.a, b_bstride}, {plan.b, a_bstride}, {plan.c, c_bstride}};
    for (const auto& [layout, stride] : layouts) {
      PL_CUBLAS_CHECK(sink, cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                             sizeof count));
      PL_CUBLAS_CHECK(sink, cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                             &stride, sizeof stride));
    }
  }
  cublasLtMatmulPreference_t pref = nullptr;
  PL_CUBLAS_CHECK(sink, cublasLtMatmulPreferenceCreate(&pref));
  const std::uint64_t ws = g.workspace_bytes;
  const std::uint32_t al_a = static_cast<std::uint32_t>(align[1]), al_b = static_cast<std::uint32_t>(align[0]),
                      al_c = static_cast<std::uint32_t>(align[2]);
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c);
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(g.lt, plan.desc, plan.a, plan.b, plan.c, plan.c, pref, 1, &result, &returned);
  cublasLtMatmulPreferenceDestroy(pref);
  // No algorithm (or a combination the library refuses): not an error, the
  // caller falls back to FP32 operands.
  plan.found = st == CUBLAS_STATUS_SUCCESS && returned > 0;
  if (plan.found) plan.algo = result.algo;
  return PL_CUDA_OK;
}

// Runs one cuBLASLt call per outer batch index (one in all when the batch
// strides compose). *ran = false when cuBLASLt has no algorithm.
PlCudaStatus run_lt(PlCudaContext* ctx, GemmState& g, const Problem& p, const LtCall& call, float alpha, float beta,
                    const float* bias, const void* d_out, bool* ran, ErrorSink sink) {
  const std::size_t ea = p.bf == PL_CUDA_FP32 || p.bf == PL_CUDA_TF32 ? 4 : (is_fp8(p.bf) ? 1 : 2);
  const std::size_t eb = p.af == PL_CUDA_FP32 || p.af == PL_CUDA_TF32 ? 4 : (is_fp8(p.af) ? 1 : 2);
  const std::size_t ec = call.c_type == CUDA_R_32F ? 4 : 2;  // C (and D): FP32, or FP16/BF16 (gemm_encode)
  // One strided batch over both counts when every stride composes (or one
  // count is 1).
  const bool flat = p.count[0] == 1 || p.count[1] == 1 || (p.a_stride[0] == p.count[1] * p.a_stride[1] &&
                                        p.b_stride[0] == p.count[1] * p.b_stride[1] &&
                                        p.c_stride[0] == p.count[1] * p.c_stride[1]);
  const std::int64_t batch = flat ? p.count[0] * p.count[1] : p.count[1];
  const std::int64_t loops = flat ? 1 : p.count[0];
  // The stride of the flat batch: the inner one, or the outer one when the
  // inner count is 1.
  const bool outer = flat && p.count[1] == 1 && p.count[0] > 1;
  const std::int64_t sa = outer ? p.a_stride[0] : p.a_stride[1], sb = outer ? p.b_stride[0] : p.b_stride[1],
                     sc = outer ? p.c_stride[0] : p.c_stride[1];
  std::int64_t align[3] = {alignment_of(p.a, p.a_stride[0], p.a_stride[1], eb),
                           alignment_of(p.b, p.b_stride[0], p.b_stride[1], ea),
                           alignment_of(d_out, p.c_stride[0], p.c_stride[1], ec)};
  if (bias) align[2] = std::min(align[2], alignment_of(bias, 0, 0, 4));
  const PlanKey key = {p.m, p.n, p.k, call.a_type, call.b_type, call.c_type, call.compute,
                       (p.at ? 1 : 0) | (p.bt ? 2 : 0) | (call.bias_epilogue ? 4 : 0) | (call.device_scalars ? 8 : 0),
                       p.lda, p.ldb, p.ldc, batch, sa, sb, sc,
                       align[0], align[1], align[2], call.scale_type, 0};
  auto it = g.plans.find(key);
  if (it == g.plans.end()) {
    Plan plan;
    // A descriptor cuBLASLt refuses (a type combination this version or
    // card lacks) is not an error of the call: the caller falls back to
    // another type, and the refusal is kept for the final message.
    char why[256] = {};
    const PlCudaStatus s =
        make_plan(g, p, call, align, batch, sa, sb, sc, plan, ErrorSink{why, sizeof why});
    it = g.plans.emplace(key, plan).first;  // kept even when partly made: destroyed with the state
    if (s != PL_CUDA_OK) {
      it->second.found = false;
      std::snprintf(g.last_refusal, sizeof g.last_refusal, "%s", why);
    }
  }
  const Plan& plan = it->second;
  *ran = plan.found;
  if (!plan.found) return PL_CUDA_OK;
  if (call.bias_epilogue)
    PL_CUBLAS_CHECK(sink, cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                         sizeof bias));
  const void* alpha_p = call.device_scalars ? static_cast<const void*>(g.scalars) : static_cast<const void*>(&alpha);
  const void* beta_p = call.device_scalars ? static_cast<const void*>(g.scalars + 1) : static_cast<const void*>(&beta);
  for (std::int64_t i = 0; i < loops; ++i) {
    const char* a = static_cast<const char*>(p.a) + static_cast<std::size_t>(i * p.a_stride[0]) * eb;
    const char* b = static_cast<const char*>(p.b) + static_cast<std::size_t>(i * p.b_stride[0]) * ea;
    char* c = static_cast<char*>(const_cast<void*>(d_out)) + static_cast<std::size_t>(i * p.c_stride[0]) * ec;
    PL_CUBLAS_CHECK(sink, cublasLtMatmul(g.lt, plan.desc, alpha_p, b, plan.a, a, plan.b, beta_p, c, plan.c, c, plan.c,
                                         &plan.algo, g.workspace, g.workspace_bytes, ctx->stream));
  }
  return PL_CUDA_OK;
}

// Decodes an operand's whole span into `dst` (same layout), exactly.
PlCudaStatus decode_to(PlCudaContext* ctx, PlCudaFormat from, const void* src, PlCudaFormat to, void* dst,
                       std::int64_t n, ErrorSink sink) {
  return convert(ctx, from, src, to, dst, n, 0, 0, 0, 0, sink.message, sink.size);
}

std::size_t bytes_of(PlCudaFormat f) { return element_bytes(f); }

// The type both (plain) operands run in on cuBLASLt: FP16 or BF16 when both
// are exact in it, TF32 when both are TF32, else FP32.
PlCudaFormat common_type(PlCudaFormat a_format, PlCudaFormat b_format) {
  if (a_format == PL_CUDA_TF32 && b_format == PL_CUDA_TF32) return PL_CUDA_TF32;
  if (bf16_exact(a_format) && bf16_exact(b_format) &&
      (a_format == PL_CUDA_BF16 || b_format == PL_CUDA_BF16 || (is_fp8(a_format) && is_fp8(b_format))))
    return PL_CUDA_BF16;
  if (fp16_exact(a_format) && fp16_exact(b_format)) return PL_CUDA_FP16;
  return PL_CUDA_FP32;
}

// lt_epilogue.h spells cuBLASLt's epilogue values without its header.
static_assert(static_cast<std::uint32_t>(LtEpilogue::Default) == CUBLASLT_EPILOGUE_DEFAULT);
static_assert(static_cast<std::uint32_t>(LtEpilogue::Bias) == CUBLASLT_EPILOGUE_BIAS);
static_assert(static_cast<std::uint32_t>(LtEpilogue::Gelu) == CUBLASLT_EPILOGUE_GELU);
static_assert(static_cast<std::uint32_t>(LtEpilogue::GeluAux) == CUBLASLT_EPILOGUE_GELU_AUX);
static_assert(static_cast<std::uint32_t>(LtEpilogue::GeluBias) == CUBLASLT_EPILOGUE_GELU_BIAS);
static_assert(static_cast<std::uint32_t>(LtEpilogue::GeluAuxBias) == CUBLASLT_EPILOGUE_GELU_AUX_BIAS);
static_assert(static_cast<std::uint32_t>(LtEpilogue::DGelu) == CUBLASLT_EPILOGUE_DGELU);
static_assert(static_cast<std::uint32_t>(LtEpilogue::DGeluBgrad) == CUBLASLT_EPILOGUE_DGELU_BGRAD);
static_assert(static_cast<std::uint32_t>(LtEpilogue::BgradA) == CUBLASLT_EPILOGUE_BGRADA);
static_assert(static_cast<std::uint32_t>(LtEpilogue::BgradB) == CUBLASLT_EPILOGUE_BGRADB);

std::size_t round_up(std::size_t x) { return (x + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

PlCudaStatus gemm(PlCudaContext* ctx, std::int64_t m, std::int64_t n, std::int64_t k, const void* a,
                  PlCudaFormat a_format, std::int32_t a_trans, std::int64_t lda, const PlCudaBlockQuantized* a_block,
                  const void* b, PlCudaFormat b_format, std::int32_t b_trans, std::int64_t ldb,
                  const PlCudaBlockQuantized* b_block, float* c, std::int64_t ldc, float alpha, float beta,
                  const float* bias, PlCudaFormat accumulate, const PlCudaGemmBatch* batch, char* message,
                  std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "gemm");
  if (element_bytes(a_format) == 0 || element_bytes(b_format) == 0 || element_bytes(accumulate) == 0)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "gemm: unknown format");
  if (m < 0 || n < 0 || k < 0)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "gemm: negative shape %lldx%lldx%lld", static_cast<long long>(m),
                static_cast<long long>(n), static_cast<long long>(k));
  if ((a_block && a_format != PL_CUDA_FP32) || (b_block && b_format != PL_CUDA_FP32))
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "gemm: a block-quantized operand must be FP32");
  if ((a_block || b_block) && batch && (batch->count[0] != 1 || batch->count[1] != 1))
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "gemm: block-quantized operands are not batched");
  // A leading dimension of 0 means packed rows (the Backend's GemmArgs).
  if (lda == 0) lda = a_trans ? m : k;
  if (ldb == 0) ldb = b_trans ? k : n;
  if (ldc == 0) ldc = n;
  Problem p{m, n, k, a, a_format, a_trans != 0, lda, b, b_format, b_trans != 0, ldb, c, ldc,
            {1, 1}, {0, 0}, {0, 0}, {0, 0}};
  if (batch) {
    for (int i = 0; i < 2; ++i) {
      if (batch->count[i] < 1 || batch->a_stride[i] < 0 || batch->b_stride[i] < 0 || batch->c_stride[i] < 0)
        return fail(sink, PL_CUDA_INVALID_ARGUMENT, "gemm: batch count or stride %d out of range", i);
      p.count[i] = batch->count[i];
      p.a_stride[i] = batch->a_stride[i];
      p.b_stride[i] = batch->b_stride[i];
      p.c_stride[i] = batch->c_stride[i];
    }
  }
  if (m == 0 || n == 0) return PL_CUDA_OK;
  if (!a || !b || !c) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "gemm: null operand");
  const std::int64_t outputs = m * n * p.count[0] * p.count[1];

  if (k == 0) {  // C = beta * C + bias
    epilogue_kernel<<<grid_for(static_cast<std::size_t>(outputs)), kThreads, 0, ctx->stream>>>(p, beta, bias);
    PL_CUDA_CHECK_LAUNCH(sink, "epilogue_kernel");
    return PL_CUDA_OK;
  }

  GemmState* g = nullptr;
  PL_CUDA_TRY(gemm_state(ctx, sink, &g));
  g->last_refusal[0] = '\0';
  const std::int64_t a_span = p.at ? extent(k, m, lda, p.count, p.a_stride) : extent(m, k, lda, p.count, p.a_stride);
  const std::int64_t b_span = p.bt ? extent(n, k, ldb, p.count, p.b_stride) : extent(k, n, ldb, p.count, p.b_stride);

  // Reduced-precision accumulation (FP16, BF16): the sequential kernel,
  // which rounds the running sum after every addition, bit for bit the
  // CPU's. cuBLASLt's CUBLAS_COMPUTE_16F was the first choice, but on an
  // H100 its FP16 sums keep far more precision than one rounding per
  // addition (2048 plus 4095 products of 2^-4 came to 2300, where an FP16
  // running sum stays at 2048), and the FP16-accumulation lesson measured
  // fc1's output error at 2.97x FP32 accumulation's against the 11x it
  // promises (and gets from this kernel). The lesson is about the running
  // sum, so the GPU runs the same one as the CPU.
  if (accumulate != PL_CUDA_FP32) {
    lowp_kernel<<<grid_for(static_cast<std::size_t>(outputs)), kThreads, 0, ctx->stream>>>(p, accumulate, alpha,
                                                                                            beta, bias, a_block,
                                                                                            b_block);
    PL_CUDA_CHECK_LAUNCH(sink, "lowp_kernel");
    return PL_CUDA_OK;
  }
  // Small batched products (attention's 16 x 16 x 16 per batch and head):
  // the same kernel with FP32 sums, one launch for every product. cuBLASLt
  // takes one batch stride, and attention's (batch, head) strides do not
  // compose into one, so it ran one call per batch row: 128 calls of about
  // 11 us, 1.4 ms a product and 17 ms of the transformer's 18 ms fp32 step
  // on an H100 (bench_ops transformer fp32 200 cuda-sync).
  if (!a_block && !b_block && p.count[0] * p.count[1] > 1 && m <= 64 && n <= 64 && k <= 64) {
    lowp_kernel<<<grid_for(static_cast<std::size_t>(outputs)), kThreads, 0, ctx->stream>>>(p, PL_CUDA_FP32, alpha,
                                                                                            beta, bias, nullptr,
                                                                                            nullptr);
    PL_CUDA_CHECK_LAUNCH(sink, "lowp_kernel");
    return PL_CUDA_OK;
  }

  // FP32 accumulation. Pick the type both operands run in.
  const bool blocks = a_block || b_block;
  bool ran = false;
  if (blocks) {
    block_scalars_kernel<<<1, 1, 0, ctx->stream>>>(g->scalars, alpha, beta, a_block, b_block);
    PL_CUDA_CHECK_LAUNCH(sink, "block_scalars_kernel");
  }
  // FP8 Tensor Cores (sm_89+): TN only (our B transposed, A not), sizes and
  // leading dimensions multiples of 16, not E5M2 x E5M2.
  const bool sm89 = ctx->compute_major > 8 || (ctx->compute_major == 8 && ctx->compute_minor >= 9);
  if (!blocks && sm89 && is_fp8(a_format) && is_fp8(b_format) &&
      !(a_format == PL_CUDA_E5M2 && b_format == PL_CUDA_E5M2) && p.bt && !p.at && m % 16 == 0 && n % 16 == 0 &&
      k % 16 == 0 && lda % 16 == 0 && ldb % 16 == 0 && ldc % 4 == 0) {
    const LtCall call{cuda_type(b_format), cuda_type(a_format), CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F, false,
                      false};
    PL_CUDA_TRY(run_lt(ctx, *g, p, call, alpha, beta, nullptr, c, &ran, sink));
    if (ran && bias) {
      bias_rows_kernel<<<grid_for(static_cast<std::size_t>(outputs)), kThreads, 0, ctx->stream>>>(p, bias);
      PL_CUDA_CHECK_LAUNCH(sink, "bias_rows_kernel");
    }
    if (ran) return PL_CUDA_OK;
  }
  // The common type: FP16 or BF16 when both operands are exact in it, TF32
  // when both are TF32, else FP32.
  PlCudaFormat common = blocks ? PL_CUDA_FP32 : common_type(a_format, b_format);
  for (int attempt = 0; attempt < 2; ++attempt) {
    // Operands not already in the common type are decoded into scratch (TF32
    // operands rounded, as the CPU decodes them), keeping their layout.
    const bool conv_a = a_format != common || common == PL_CUDA_TF32;
    const bool conv_b = b_format != common || common == PL_CUDA_TF32;
    const std::size_t a_bytes = conv_a ? round_up(static_cast<std::size_t>(a_span) * bytes_of(common)) : 0;
    const std::size_t b_bytes = conv_b ? round_up(static_cast<std::size_t>(b_span) * bytes_of(common)) : 0;
    Problem q = p;
    q.af = q.bf = common;
    if (a_bytes + b_bytes > 0) {
      void* s = nullptr;
      PL_CUDA_TRY(scratch(ctx, a_bytes + b_bytes, &s, sink));
      // A TF32 operand of an FP32 product is rounded to TF32 (its FP32
      // container), as the CPU decodes it.
      auto target = [common](PlCudaFormat f) { return f == PL_CUDA_TF32 ? PL_CUDA_TF32 : common; };
      if (conv_a) {
        PL_CUDA_TRY(decode_to(ctx, a_format, a, target(a_format), s, a_span, sink));
        q.a = s;
      }
      if (conv_b) {
        void* sb = static_cast<char*>(s) + a_bytes;
        PL_CUDA_TRY(decode_to(ctx, b_format, b, target(b_format), sb, b_span, sink));
        q.b = sb;
      }
    }
    const cublasComputeType_t compute = common == PL_CUDA_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const LtCall call{cuda_type(common), cuda_type(common), CUDA_R_32F, compute, CUDA_R_32F, bias != nullptr, blocks};
    PL_CUDA_TRY(run_lt(ctx, *g, q, call, alpha, beta, bias, c, &ran, sink));
    if (ran) return PL_CUDA_OK;
    if (common == PL_CUDA_FP32) break;
    common = PL_CUDA_FP32;  // no algorithm in the narrow type: exact FP32 operands
  }
  return fail(sink, PL_CUDA_ERROR,
              "gemm: cuBLASLt has no algorithm for %lldx%lldx%lld (lda %lld, ldb %lld, ldc %lld) on FP32 operands%s%s",
              static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k),
              static_cast<long long>(lda), static_cast<long long>(ldb), static_cast<long long>(ldc),
              g->last_refusal[0] ? ": " : "", g->last_refusal);
}

// The gemm's product with its output encoded (GemmEncode with C as the
// caller's scratch). Where lt_epilogue.h's plan fuses and both operands run
// in D's own 16-bit type, one cuBLASLt call writes D (bias in its epilogue,
// FP32 bias type; round to nearest even as convert). Anything else, or a
// descriptor cuBLASLt has no algorithm for, runs the composition here: gemm
// into C, then convert.
PlCudaStatus gemm_encode(PlCudaContext* ctx, std::int64_t m, std::int64_t n, std::int64_t k, const void* a,
                         PlCudaFormat a_format, std::int32_t a_trans, std::int64_t lda, const void* b,
                         PlCudaFormat b_format, std::int32_t b_trans, std::int64_t ldb, float* c, float alpha,
                         const float* bias, PlCudaFormat d_format, void* d, std::int32_t saturate, char* message,
                         std::size_t message_size) {
  const ErrorSink sink{message, message_size};
  DeviceScope scope;
  PL_CUDA_ENTER(sink, scope, ctx, "gemm_encode");
  if (element_bytes(a_format) == 0 || element_bytes(b_format) == 0 || element_bytes(d_format) == 0)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "gemm_encode: unknown format");
  if (m < 0 || n < 0 || k < 0)
    return fail(sink, PL_CUDA_INVALID_ARGUMENT, "gemm_encode: negative shape %lldx%lldx%lld",
                static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k));
  if (m == 0 || n == 0) return PL_CUDA_OK;
  if (!a || !b || !c || !d) return fail(sink, PL_CUDA_INVALID_ARGUMENT, "gemm_encode: null operand");
  auto composed = [&]() -> PlCudaStatus {
    PL_CUDA_TRY(gemm(ctx, m, n, k, a, a_format, a_trans, lda, nullptr, b, b_format, b_trans, ldb, nullptr, c, n, alpha,
                     0.0f, bias, PL_CUDA_FP32, nullptr, message, message_size));
    return convert(ctx, PL_CUDA_FP32, c, d_format, d, m * n, saturate, 0, 0, 0, message, message_size);
  };
  const bool sm89 = ctx->compute_major > 8 || (ctx->compute_major == 8 && ctx->compute_minor >= 9);
  LtRequest r;
  r.m = m;
  r.n = n;
  r.k = k;
  r.a = a_format;
  r.b = b_format;
  r.a_trans = a_trans != 0;
  r.b_trans = b_trans != 0;
  r.lda = lda;
  r.ldb = ldb;
  r.bias = bias != nullptr;
  r.d = d_format;
  r.saturate = saturate != 0;
  r.c_scratch = true;
  r.fp8_tensor_cores = sm89;
  const LtPlan plan = plan_gemm_epilogue(r);
  // FP8 operands on FP8 Tensor Cores keep the gemm's own FP8 path (its bias
  // is a pass over C); D in FP32 is the plain gemm.
  const PlCudaFormat common = common_type(a_format, b_format);
  if (!plan.fused || d_format == PL_CUDA_FP32 || lt_fp8_operands(r) || common != d_format) return composed();
  if (lda == 0) lda = a_trans ? m : k;
  if (ldb == 0) ldb = b_trans ? k : n;
  GemmState* g = nullptr;
  PL_CUDA_TRY(gemm_state(ctx, sink, &g));
  Problem p{m, n, k, a, a_format, a_trans != 0, lda, b, b_format, b_trans != 0, ldb, c, n,
            {1, 1}, {0, 0}, {0, 0}, {0, 0}};
  // FP8 operands (not on FP8 Tensor Cores) decoded exactly to D's type.
  const std::int64_t a_span = p.at ? extent(k, m, lda, p.count, p.a_stride) : extent(m, k, lda, p.count, p.a_stride);
  const std::int64_t b_span = p.bt ? extent(n, k, ldb, p.count, p.b_stride) : extent(k, n, ldb, p.count, p.b_stride);
  const bool conv_a = a_format != common, conv_b = b_format != common;
  const std::size_t a_bytes = conv_a ? round_up(static_cast<std::size_t>(a_span) * bytes_of(common)) : 0;
  const std::size_t b_bytes = conv_b ? round_up(static_cast<std::size_t>(b_span) * bytes_of(common)) : 0;
  Problem q = p;
  q.af = q.bf = common;
  if (a_bytes + b_bytes > 0) {
    void* s = nullptr;
    PL_CUDA_TRY(scratch(ctx, a_bytes + b_bytes, &s, sink));
    if (conv_a) {
      PL_CUDA_TRY(decode_to(ctx, a_format, a, common, s, a_span, sink));
      q.a = s;
    }
    if (conv_b) {
      void* sb = static_cast<char*>(s) + a_bytes;
      PL_CUDA_TRY(decode_to(ctx, b_format, b, common, sb, b_span, sink));
      q.b = sb;
    }
  }
  const LtCall call{cuda_type(common), cuda_type(common), cuda_type(plan.d_type), CUBLAS_COMPUTE_32F, CUDA_R_32F,
                    plan.bias_fp32, false};
  bool ran = false;
  PL_CUDA_TRY(run_lt(ctx, *g, q, call, alpha, 0.0f, bias, d, &ran, sink));
  return ran ? PL_CUDA_OK : composed();
}

}  // namespace pl_cuda
