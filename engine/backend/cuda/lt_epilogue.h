// Which cuBLASLt epilogue a fused GEMM asks for: a pure function of the
// request (formats, bias, GELU, the encoded output and its rounding), with
// no CUDA header, so that the CUDA Backend (to decide whether to offer the
// op to the module), the module (gemm.cu, to set the descriptor) and the
// host tests all read the same decision.
//
// What is fused, and what is declined and why:
//  - bias: CUBLASLT_EPILOGUE_BIAS, an FP32 bias vector (BIAS_DATA_TYPE FP32),
//    D = round_D(alpha * sum + bias) as the lab's gemm then convert give it
//    (the f32 sums may differ from another algorithm's by the summation
//    bound the conformance suite already allows between CUDA and the CPU).
//  - GELU: the lab's GELU is the exact erf form (Backend::gelu_forward,
//    PyTorch's approximate='none'); cuBLASLt's GELU epilogues compute the
//    tanh approximation (PyTorch routes only approximate='tanh' to them).
//    An erf GELU is therefore never fused: the plan keeps the bias in the
//    epilogue and says the GELU runs after (gelu_after). A tanh GELU (no
//    layer of the lab asks for one) would get GELU_AUX_BIAS / GELU_AUX with
//    its pre-activation in the aux buffer.
//  - D in FP16 or BF16: written by cuBLASLt, round to nearest even, which is
//    the lab's convert. Not with stochastic rounding (cuBLASLt has none).
//  - D in FP8: the hardware converts to FP8 only with saturation (PTX's
//    cvt to e4m3/e5m2 requires .satfinite: finite overflow and inf go to
//    the largest finite value, NaN stays NaN). That is the lab's E4M3 with
//    saturate; the lab's E5M2 with saturate keeps inf, and without saturate
//    both formats overflow to NaN / inf, so those are declined. FP8 D also
//    needs FP8 operands on FP8 Tensor Cores (sm_89+, TN, sizes and leading
//    dimensions multiples of 16, not E5M2 x E5M2), and cuBLASLt's bias for an
//    FP8 D is a 16-bit vector, not the lab's FP32 one: with a bias, declined.
//    The one FP8 output that would match (saturating E4M3, FP8 operands, no
//    bias) is asked for by no layer, so FP8 D, its D scale pointer and
//    AMAX_D_POINTER are not wired yet: the plan declines them all.
//  - the bias gradient (BGRADA/BGRADB: the sums of the GEMM's operand over
//    its k dimension) is summed in cuBLASLt's order, not column_sums' double
//    sums: not bit for bit the lab's, so plan_bias_grad declines it (the
//    lab keeps column_sums / column_sums16 and their fused casts).
#pragma once

#include <cstdint>

#include "backend/cuda_module.h"

namespace pl_cuda {

// cublasLtEpilogue_t's values (gemm.cu static_asserts each against cublasLt.h).
enum class LtEpilogue : std::uint32_t {
  Default = 1,
  Bias = 4,
  Gelu = 32,
  GeluAux = 160,
  GeluBias = 36,
  GeluAuxBias = 164,
  DGelu = 192,
  DGeluBgrad = 208,
  BgradA = 256,
  BgradB = 512,
};

enum class LtGelu : std::uint8_t { None, Erf, Tanh };

// A product C [m x n] = alpha op(A) op(B) (+ bias[n] per row) whose output
// is wanted as D codes (`d`; FP32: C itself). Row-major as GemmArgs.
struct LtRequest {
  std::int64_t m = 0, n = 0, k = 0;
  PlCudaFormat a = PL_CUDA_FP32, b = PL_CUDA_FP32;
  bool a_trans = false, b_trans = false;
  std::int64_t lda = 0, ldb = 0, ldc = 0;  // 0: packed
  bool blocks = false;                     // a block-quantized operand
  bool batched = false;
  PlCudaFormat accumulate = PL_CUDA_FP32;
  float beta = 0.0f;
  bool bias = false;
  LtGelu gelu = LtGelu::None;
  PlCudaFormat d = PL_CUDA_FP32;
  bool saturate = false;
  bool stochastic = false;
  bool c_scratch = false;    // the caller does not read C after the call
  bool fp8_tensor_cores = false;  // the device has them (sm_89+)
  bool amax = false;         // max |D| wanted (AMAX_D_POINTER; FP8 D only)
};

struct LtPlan {
  bool fused = false;               // cuBLASLt writes D in one call
  const char* why = "";             // why not (fused false), or what stays outside
  LtEpilogue epilogue = LtEpilogue::Default;
  PlCudaFormat d_type = PL_CUDA_FP32;  // the descriptor's D (and C) type
  bool bias_fp32 = false;           // BIAS_DATA_TYPE = FP32
  bool gelu_after = false;          // the GELU runs after the GEMM (erf)
  std::int64_t aux_ld = 0;          // GELU_AUX: the pre-activation's leading dimension
};

constexpr bool lt_is_fp8(PlCudaFormat f) { return f == PL_CUDA_E4M3 || f == PL_CUDA_E5M2; }

// The GEMM's own conditions for running FP8 operands on FP8 Tensor Cores
// (gemm.cu's FP8 branch: TN only, multiples of 16).
constexpr bool lt_fp8_operands(const LtRequest& r) {
  const std::int64_t lda = r.lda ? r.lda : (r.a_trans ? r.m : r.k);
  const std::int64_t ldb = r.ldb ? r.ldb : (r.b_trans ? r.k : r.n);
  return r.fp8_tensor_cores && lt_is_fp8(r.a) && lt_is_fp8(r.b) && !(r.a == PL_CUDA_E5M2 && r.b == PL_CUDA_E5M2) &&
         r.b_trans && !r.a_trans && r.m % 16 == 0 && r.n % 16 == 0 && r.k % 16 == 0 && lda % 16 == 0 &&
         ldb % 16 == 0;
}

constexpr LtPlan plan_gemm_epilogue(const LtRequest& r) {
  LtPlan p;
  p.d_type = r.d;
  auto no = [&p](const char* why) {
    p.fused = false;
    p.why = why;
    p.epilogue = LtEpilogue::Default;
    return p;
  };
  if (r.m <= 0 || r.n <= 0 || r.k <= 0) return no("empty product");
  if (r.accumulate != PL_CUDA_FP32) return no("FP16/BF16 accumulation runs the sequential kernel");
  if (r.blocks) return no("block-quantized operands");
  if (r.batched) return no("batched products");
  if (r.beta != 0.0f) return no("beta != 0 reads C");
  if (r.ldc != 0 && r.ldc != r.n) return no("C rows not packed");
  if (r.d != PL_CUDA_FP32 && !r.c_scratch) return no("the caller reads C's f32 values too");
  if (r.stochastic) return no("stochastic rounding (cuBLASLt rounds to nearest even)");
  if (r.d == PL_CUDA_TF32) return no("TF32 output is an FP32 container");
  if (lt_is_fp8(r.d)) {
    if (r.d != PL_CUDA_E4M3 || !r.saturate)
      return no("cuBLASLt's FP8 output saturates; the lab's encode here does not (or keeps E5M2's inf)");
    if (!lt_fp8_operands(r)) return no("FP8 output needs FP8 operands on FP8 Tensor Cores");
    if (r.bias) return no("cuBLASLt's bias for an FP8 output is 16-bit, the lab's is FP32");
    // What remains is a saturating E4M3 D without bias: no layer of the lab
    // asks for one (an FP8 layer's dx codes do not saturate), and it needs a
    // 16-bit C layout beside the FP8 D, which gemm.cu does not build.
    return no("saturating E4M3 output: not wired (no layer asks for it)");
  }
  if (r.amax) return no("AMAX_D is for FP8 outputs");
  p.fused = true;
  p.bias_fp32 = r.bias;
  switch (r.gelu) {
    case LtGelu::None:
      p.epilogue = r.bias ? LtEpilogue::Bias : LtEpilogue::Default;
      break;
    case LtGelu::Erf:
      // The bias stays in the epilogue; GELU (erf) is the caller's.
      p.epilogue = r.bias ? LtEpilogue::Bias : LtEpilogue::Default;
      p.gelu_after = true;
      p.why = "GELU: the lab's is the erf form, cuBLASLt's epilogue the tanh approximation";
      break;
    case LtGelu::Tanh:
      p.epilogue = r.bias ? LtEpilogue::GeluAuxBias : LtEpilogue::GeluAux;
      // The pre-activation in D's column-major view (n x m), its ld a
      // multiple of 8 as cuBLASLt requires of the aux buffer.
      p.aux_ld = (r.n + 7) / 8 * 8;
      break;
  }
  return p;
}

// The bias gradient of a weight-gradient GEMM (dW = dy^T x, db = column sums
// of dy): never fused, see the file comment.
constexpr LtPlan plan_bias_grad(const LtRequest&) {
  LtPlan p;
  p.why = "BGRAD sums in cuBLASLt's order, not column_sums' (the lab's bits)";
  return p;
}

}  // namespace pl_cuda
