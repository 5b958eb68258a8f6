// The per-element and per-block math of the step entries (step.cu): the
// loss scaler's unscale and scale update, SGD, Adam/AdamW, the gradient census, FP8 amax and
// block quantization (MX, NVFP4), bit for bit what engine/backend/cpu/
// step_ops.cpp and numeric/block.cpp compute.
//
// __host__ __device__ and free of CUDA headers, as fp_convert.cuh: the host
// test (tests/engine/backend/test_cuda_step_math.cpp) holds these functions
// to the CPU backend. Float arithmetic goes through the *_rn helpers:
// explicit round-to-nearest operations that nvcc never contracts into an
// FMA (the CPU is compiled without contraction), with x86's NaN results
// (a NaN operand, the first one when both are, made quiet; an invalid
// operation gives the default NaN 0xFFC00000) instead of the GPU's
// canonical 0x7FFFFFFF, so NaN results match the CPU's bits too, except
// where two NaNs meet in an addition or product (the CPU's operand order is
// its compiler's). In their own namespace: ops_math.cuh has helpers of the
// same names without the NaN rule.
#pragma once

#include <cstdint>

#include "backend/cuda/fp_convert.cuh"
#include "backend/cuda/ops_math.cuh"
#include "backend/cuda_module.h"

namespace pl_cuda::step_math {

// ---- float operations ---------------------------------------------------------

inline constexpr std::uint32_t kF32Abs = 0x7fffffffu;
inline constexpr std::uint32_t kF32Inf = 0x7f800000u;
inline constexpr std::uint32_t kF32QuietNaN = 0x7fc00000u;    // std::numeric_limits<float>::quiet_NaN()
inline constexpr std::uint32_t kF32DefaultNaN = 0xffc00000u;  // x86's result of an invalid operation
inline constexpr float kFltMax = 3.40282346638528859812e+38f;
inline constexpr double kDblMax = 1.79769313486231570815e+308;

PL_HD bool is_nan_f32(float x) { return (f32_bits(x) & kF32Abs) > kF32Inf; }
PL_HD float quiet_f32(float x) { return f32_from_bits(f32_bits(x) | 0x00400000u); }
// The NaN x86 (SSE/AVX) returns for a op b.
PL_HD float x86_nan(float a, float b) {
  return is_nan_f32(a) ? quiet_f32(a) : is_nan_f32(b) ? quiet_f32(b) : f32_from_bits(kF32DefaultNaN);
}

PL_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  const float r = __fmul_rn(a, b);
#else
  const float r = a * b;
#endif
  return r != r ? x86_nan(a, b) : r;
}
PL_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  const float r = __fadd_rn(a, b);
#else
  const float r = a + b;
#endif
  return r != r ? x86_nan(a, b) : r;
}
PL_HD float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  const float r = __fsub_rn(a, b);
#else
  const float r = a - b;
#endif
  return r != r ? x86_nan(a, b) : r;
}
PL_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  const float r = __fdiv_rn(a, b);
#else
  const float r = a / b;
#endif
  return r != r ? x86_nan(a, b) : r;
}
PL_HD float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
  const float r = __fsqrt_rn(a);
#else
  const float r = __builtin_sqrtf(a);
#endif
  return r != r ? x86_nan(a, a) : r;
}
// std::fmin(x, FLT_MAX): NaN and +inf give FLT_MAX.
PL_HD float min_flt_max(float x) { return x <= kFltMax ? x : kFltMax; }

PL_HD int clz32(std::uint32_t x) {  // x != 0
#if defined(__CUDA_ARCH__)
  return __clz(static_cast<int>(x));
#else
  return __builtin_clz(x);
#endif
}

// std::ilogb of a finite, nonzero float (subnormals included).
PL_HD int ilogb_f32(float x) {
  const std::uint32_t a = f32_bits(x) & kF32Abs;
  if (a >= 0x00800000u) return static_cast<int>(a >> 23) - 127;
  return (31 - clz32(a)) - 149;
}

// ---- unscale and FP8 amax -------------------------------------------------------

// The unscaled gradient (p * inv) and whether it is inf or NaN.
PL_HD float unscale_value(float p, float inv) { return mul_rn(p, inv); }
PL_HD bool nonfinite_f32(float v) { return (f32_bits(v) & kF32Inf) == kF32Inf; }
// Its square in double, a term of the sum of squares.
PL_HD double square_f64(float v) { return dmul_rn(static_cast<double>(v), static_cast<double>(v)); }

// |x| as bits (NaN patterns above inf's): the max of these is the amax.
PL_HD std::uint32_t abs_bits_f32(float x) { return f32_bits(x) & kF32Abs; }
// Only finite values count (NVFP4's tensor amax).
PL_HD std::uint32_t finite_abs_bits_f32(float x) {
  const std::uint32_t a = f32_bits(x) & kF32Abs;
  return a < kF32Inf ? a : 0u;
}
// The amax a max of abs bits stands for: NaN (the quiet NaN), else the value.
PL_HD float amax_from_bits(std::uint32_t m) { return f32_from_bits(m > kF32Inf ? kF32QuietNaN : m); }

// ---- optimizer state --------------------------------------------------------------

// x rounded (RNE, not saturating) to a state format and kept in f32, as
// quantize_inplace; FP32 (and an unknown format) leave x as is.
PL_HD float round_state(PlCudaFormat f, float x) { return pl_cuda::quantize_value(f, x, false); }

// torch.optim.SGD (engine::SgdUpdate); keep = 1 - dampening.
struct SgdParams {
  float lr, momentum, keep, weight_decay;
  bool nesterov, first;
  PlCudaFormat state_format;
};

// Without momentum: p - lr * (g + wd * p).
PL_HD float sgd_plain(const SgdParams& s, float p, float g) {
  return sub_rn(p, mul_rn(s.lr, add_rn(g, mul_rn(s.weight_decay, p))));
}

// With momentum: buf updated (a copy of the decayed gradient at the first
// step), rounded to the state format, then p.
PL_HD void sgd_momentum(const SgdParams& s, float& p, float g, float& buf) {
  const float d = add_rn(g, mul_rn(s.weight_decay, p));
  float b = s.first ? d : add_rn(mul_rn(s.momentum, buf), mul_rn(s.keep, d));
  b = round_state(s.state_format, b);
  buf = b;
  p = s.nesterov ? sub_rn(p, mul_rn(s.lr, add_rn(d, mul_rn(s.momentum, b)))) : sub_rn(p, mul_rn(s.lr, b));
}

// torch.optim.Adam / AdamW (engine::AdamUpdate).
struct AdamParams {
  float step_size, bc2_sqrt, one_minus_beta1, beta2, one_minus_beta2, eps, l2, shrink;
  PlCudaFormat state_format;
};

PL_HD void adam_element(const AdamParams& a, float& p, float g, float& m, float& v) {
  const float gi = add_rn(g, mul_rn(a.l2, p));
  float mi = add_rn(m, mul_rn(a.one_minus_beta1, sub_rn(gi, m)));
  float vi = add_rn(mul_rn(a.beta2, v), mul_rn(mul_rn(a.one_minus_beta2, gi), gi));
  mi = round_state(a.state_format, mi);
  vi = round_state(a.state_format, vi);
  m = mi;
  v = vi;
  const float denom = add_rn(div_rn(sqrt_rn(vi), a.bc2_sqrt), a.eps);
  p = sub_rn(mul_rn(p, a.shrink), mul_rn(a.step_size, div_rn(mi, denom)));
}

// ---- gradient census ----------------------------------------------------------------

// engine::GradCensus's thresholds and scale.
struct CensusParams {
  double underflow, subnormal_hi, overflow;
  bool tie_overflows;
  double scale;
  int log2_lo;
};

inline constexpr int kCensusBins = PL_CUDA_CENSUS_BINS;
inline constexpr int kCensusSlots = PL_CUDA_CENSUS_SLOTS;
inline constexpr int kCensusScaled = 1 + kCensusBins;  // first Magnitude slot as the run saw it
inline constexpr int kCensusUnscaled = kCensusScaled + 5;
// engine::Magnitude
inline constexpr int kMagZero = 0, kMagUnderflow = 1, kMagSubnormal = 2, kMagNormal = 3, kMagOverflow = 4;

// engine::classify_magnitude
PL_HD int classify_magnitude(const CensusParams& c, double a) {
  if (a < 0.0) a = -a;
  if (a == 0.0) return kMagZero;
  if (!(a <= kDblMax)) return kMagOverflow;
  if (a <= c.underflow) return kMagUnderflow;
  if (a < c.subnormal_hi) return kMagSubnormal;
  if (a > c.overflow || (c.tie_overflows && a == c.overflow)) return kMagOverflow;
  return kMagNormal;
}

// The slots one value adds 1 to (-1: none): zeros or its histogram bin,
// and its magnitude class as the run saw it and without loss scaling.
struct CensusHit {
  int bin, scaled, unscaled;
};
PL_HD CensusHit census_hit(const CensusParams& c, float v, bool has_own, float own, bool has_block, float block) {
  CensusHit h{-1, -1, -1};
  if (v == 0.0f) {
    h.bin = 0;
    return h;
  }
  if (!nonfinite_f32(v)) {
    int bin = ilogb_f32(v) - c.log2_lo;
    bin = bin < 0 ? 0 : (bin > kCensusBins - 1 ? kCensusBins - 1 : bin);
    h.bin = 1 + bin;
  }
  const double a = static_cast<double>(f32_from_bits(abs_bits_f32(v)));
  const bool own_zero = has_own && own == 0.0f;
  if (has_block) {
    const int m = block == 0.0f || own_zero ? kMagUnderflow : kMagNormal;
    h.scaled = kCensusScaled + m;
    h.unscaled = kCensusUnscaled + m;
    return h;
  }
  int as_run = classify_magnitude(c, dmul_rn(a, c.scale));
  // Nonzero exactly, zero as the run computed it: flushed on the way.
  if (own_zero) as_run = kMagUnderflow;
  h.scaled = kCensusScaled + as_run;
  h.unscaled = kCensusUnscaled + (c.scale == 1.0 ? as_run : classify_magnitude(c, a));
  return h;
}

// ---- block quantization (numeric/block.h) ------------------------------------------

enum BlockElement : int { kElemE4M3 = 0, kElemE5M2, kElemE2M3, kElemE3M2, kElemE2M1 };

struct BlockFormat {
  int element;            // BlockElement
  int block;              // 32 (MX) or 16 (NVFP4)
  int emax;               // MX: floor(log2(element max))
  bool tensor_scale;      // NVFP4
  int bf16_min_exponent;  // MX: the lowest X whose values are all normal BF16 values
};

// false for an unknown format.
PL_HD bool block_format(PlCudaBlockFormat f, BlockFormat& out) {
  switch (f) {
    case PL_CUDA_MXFP8: out = {kElemE4M3, 32, 8, false, -117}; return true;
    case PL_CUDA_MXFP8_E5M2: out = {kElemE5M2, 32, 15, false, -110}; return true;
    case PL_CUDA_MXFP6: out = {kElemE2M3, 32, 2, false, -123}; return true;
    case PL_CUDA_MXFP6_E3M2: out = {kElemE3M2, 32, 4, false, -122}; return true;
    case PL_CUDA_MXFP4: out = {kElemE2M1, 32, 2, false, -125}; return true;
    case PL_CUDA_NVFP4: out = {kElemE2M1, 16, 2, true, 0}; return true;
  }
  return false;
}

// v rounded to an element format (saturating at code kMax; +-inf too) and
// decoded: convert.h's encode / encode_sr with saturate, then decode.
template <int E, int M, std::uint32_t kMax>
PL_HD float element_round(float v, bool stochastic, std::uint32_t random) {
  const std::uint32_t u = f32_bits(v);
  const std::uint32_t a = u & kF32Abs;
  std::uint32_t code = kMax;
  if (a < kF32Inf) {
    code = stochastic ? round_magnitude_sr<E, M>(a, random) : round_magnitude<E, M>(a);
    if (code > kMax) code = kMax;
  }
  return f32_from_bits((u & 0x80000000u) | decode_magnitude<E, M>(code));
}

PL_HD float element_value(int element, float v, bool stochastic, std::uint32_t random) {
  switch (element) {
    case kElemE4M3: return element_round<4, 3, 0x7eu>(v, stochastic, random);
    case kElemE5M2: return element_round<5, 2, 0x7bu>(v, stochastic, random);
    case kElemE2M3: return element_round<2, 3, 0x1fu>(v, stochastic, random);
    case kElemE3M2: return element_round<3, 2, 0x1fu>(v, stochastic, random);
    default: return element_round<2, 1, 0x7u>(v, stochastic, random);
  }
}

// 2^e for e in FP32's normal range (block.cpp's pow2f).
PL_HD float pow2_f32(int e) { return f32_from_bits(static_cast<std::uint32_t>(e + 127) << 23); }
PL_HD float e8m0_value(int code) { return f32_from_bits(code == 0 ? 0x00400000u : static_cast<std::uint32_t>(code) << 23); }

// MX's shared exponent X of a block with finite amax.
PL_HD int mx_exponent(std::uint32_t amax_bits, int emax) {
  if (amax_bits == 0) return -127;
  const int x = ilogb_f32(f32_from_bits(amax_bits)) - emax;
  return x < -127 ? -127 : (x > 127 ? 127 : x);
}

// NVFP4's S_enc for a tensor whose largest finite magnitude is amax.
PL_HD float nvfp4_tensor_scale(float amax) {
  const float s = min_flt_max(div_rn(2688.0f, amax));  // 448 * 6
  if (amax == 0.0f || s == 0.0f) return 1.0f;
  return s;
}
// NVFP4's E4M3 block scale code for a finite block amax.
PL_HD std::uint8_t nvfp4_scale_code(float block_amax, float s_enc) {
  const float d = min_flt_max(mul_rn(block_amax, mul_rn(s_enc, 1.0f / 6.0f)));
  return fp32_to_e4m3(d, true);
}
// NVFP4's encode multiplier enc_b.
PL_HD float nvfp4_block_encode(std::uint8_t code, float s_enc) {
  return min_flt_max(div_rn(1.0f, mul_rn(e4m3_to_fp32(code), div_rn(1.0f, s_enc))));
}

// One block's multipliers: element = round(x * enc) * dec. A block with an
// inf or NaN is NaN throughout.
struct BlockScale {
  float enc, dec;
  int exponent;  // MX: X
  bool nan;
};
PL_HD BlockScale block_scale(const BlockFormat& f, std::uint32_t amax_bits, float s_enc) {
  BlockScale s{1.0f, 1.0f, 0, false};
  if (amax_bits >= kF32Inf) {
    s.nan = true;
    s.dec = f32_from_bits(kF32QuietNaN);
    return s;
  }
  if (f.tensor_scale) {
    const std::uint8_t code = nvfp4_scale_code(f32_from_bits(amax_bits), s_enc);
    s.enc = nvfp4_block_encode(code, s_enc);
    s.dec = e4m3_to_fp32(code);
  } else {
    s.exponent = mx_exponent(amax_bits, f.emax);
    s.enc = pow2_f32(-s.exponent);
    s.dec = e8m0_value(s.exponent + 127);
  }
  return s;
}

PL_HD float quantize_value(const BlockFormat& f, const BlockScale& s, float x, bool stochastic,
                           std::uint32_t random) {
  if (s.nan) return f32_from_bits(kF32QuietNaN);
  return mul_rn(element_value(f.element, mul_rn(x, s.enc), stochastic, random), s.dec);
}

// The blocks of a [rows x cols] matrix: br x bc elements each, nbr x nbc of
// them, block g at (g / nbc, g % nbc). A block is worked on by bc lanes,
// lane l taking column l of the block down its br rows (Rows: 1 x b, b
// lanes; Columns: b x 1, one lane; Tiles: b x b, b lanes).
struct BlockGrid {
  std::int64_t rows, cols;
  int br, bc;
  std::int64_t nbr, nbc;
};
PL_HD BlockGrid block_grid(std::int64_t rows, std::int64_t cols, PlCudaBlockLayout layout, int b) {
  const std::int64_t rb = (rows + b - 1) / b, cb = (cols + b - 1) / b;
  switch (layout) {
    case PL_CUDA_BLOCK_COLUMNS: return {rows, cols, b, 1, rb, cols};
    case PL_CUDA_BLOCK_TILES: return {rows, cols, b, b, rb, cb};
    case PL_CUDA_BLOCK_ROWS: break;
  }
  return {rows, cols, 1, b, rows, cb};
}

// max |x| as bits over a lane's elements of block g (0 past the edge).
PL_HD std::uint32_t lane_amax_bits(const float* src, const BlockGrid& g, std::int64_t block, int lane) {
  const std::int64_t c = (block % g.nbc) * g.bc + lane;
  if (c >= g.cols) return 0;
  const std::int64_t r0 = (block / g.nbc) * g.br;
  const std::int64_t r1 = r0 + g.br < g.rows ? r0 + g.br : g.rows;
  std::uint32_t m = 0;
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::uint32_t a = abs_bits_f32(src[r * g.cols + c]);
    m = a > m ? a : m;
  }
  return m;
}

// Quantizes a lane's elements of block g (each read before it is written:
// dst may alias src). Stochastic element (r, c) uses random_at(key, r * cols + c).
PL_HD void lane_quantize(const float* src, float* dst, const BlockGrid& g, std::int64_t block, int lane,
                         const BlockFormat& f, const BlockScale& s, bool stochastic, std::uint64_t key) {
  const std::int64_t c = (block % g.nbc) * g.bc + lane;
  if (c >= g.cols) return;
  const std::int64_t r0 = (block / g.nbc) * g.br;
  const std::int64_t r1 = r0 + g.br < g.rows ? r0 + g.br : g.rows;
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::int64_t i = r * g.cols + c;
    const std::uint32_t random = stochastic ? random_at(key, static_cast<std::uint64_t>(i)) : 0u;
    dst[i] = quantize_value(f, s, src[i], stochastic, random);
  }
}

// What block_quantize reports (engine::BlockQuantized): min_exponent is the
// least X over the MX blocks that are not NaN (127 when none).
PL_HD PlCudaBlockQuantized block_result(const BlockFormat& f, float s_enc, int min_exponent) {
  PlCudaBlockQuantized q{};
  q.tensor_decode = f.tensor_scale ? div_rn(1.0f, s_enc) : 1.0f;
  q.bf16_exact = !f.tensor_scale && min_exponent < f.bf16_min_exponent ? 0 : 1;
  return q;
}

// ---- the loss scale on the device (update_scale) ------------------------------------

// engine::LossScalerConfig as update_scale takes it.
struct ScaleRule {
  PlCudaScaleMode mode;
  double growth_factor, backoff_factor;
  std::int64_t growth_interval;
};

// LossScaler::scale() and inverse_scale(): 1 in mode NONE; the reciprocal
// taken in double, then rounded to float (GradScaler's
// scale.double().reciprocal().float()).
PL_HD float loss_scale_of(PlCudaScaleMode mode, float scale) { return mode == PL_CUDA_SCALE_NONE ? 1.0f : scale; }
PL_HD float inverse_of(float loss_scale) { return static_cast<float>(1.0 / static_cast<double>(loss_scale)); }

// A fresh state (LossScaler's constructor and set_config with a reset).
PL_HD PlCudaScaleState initial_scale_state(PlCudaScaleMode mode, double init_scale) {
  PlCudaScaleState s{};
  s.scale = static_cast<float>(init_scale);
  s.loss_scale = loss_scale_of(mode, s.scale);
  s.inv_scale = inverse_of(s.loss_scale);
  s.taken = 1;
  s.growth_tracker = 0;
  s.nonfinite = 0;
  return s;
}

// One step's end on the device: LossScaler::record_nonfinite(total),
// should_step() and update() (torch._amp_update_scale_: the products in
// double, rounded to float; growth only to a finite scale).
PL_HD void update_scale(const ScaleRule& r, std::int64_t total, PlCudaScaleState& s) {
  s.nonfinite = total;
  s.taken = r.mode == PL_CUDA_SCALE_NONE || total == 0 ? 1 : 0;
  if (r.mode == PL_CUDA_SCALE_DYNAMIC) {
    if (total > 0) {
      s.scale = static_cast<float>(dmul_rn(static_cast<double>(s.scale), r.backoff_factor));
      s.growth_tracker = 0;
    } else {
      const std::int64_t successful = s.growth_tracker + 1;
      if (successful == r.growth_interval) {
        const float grown = static_cast<float>(dmul_rn(static_cast<double>(s.scale), r.growth_factor));
        if (!nonfinite_f32(grown)) s.scale = grown;
        s.growth_tracker = 0;
      } else {
        s.growth_tracker = successful;
      }
    }
  }
  s.loss_scale = loss_scale_of(r.mode, s.scale);
  s.inv_scale = inverse_of(s.loss_scale);
}

// The optimizer's found-inf guard: an update runs only when the step
// state (if any) says the step is taken.
PL_HD bool step_taken(const PlCudaScaleState* s) { return !s || s->taken != 0; }
// The learning rate an SGD update uses: the step state's when there is one.
PL_HD float step_lr(const PlCudaScaleState* s, float lr) { return s ? s->lr : lr; }

}  // namespace pl_cuda::step_math
