// Block-scaled formats: the scalar reference encoder and the engine's
// vectorized quantize, held to it bit for bit (tests/engine/numeric).
#include "numeric/block.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <stdexcept>
#include <string>

#include "numeric/cast.h"
#include "numeric/clones.h"
#include "numeric/convert.h"
#include "numeric/random_bits.h"

namespace engine {

namespace {

constexpr BlockInfo kMxfp8{Format::E4M3, Format::E8M0, 32, false, 8, 8.25};
constexpr BlockInfo kMxfp8E5m2{Format::E5M2, Format::E8M0, 32, false, 15, 8.25};
constexpr BlockInfo kMxfp6{Format::E2M3, Format::E8M0, 32, false, 2, 6.25};
constexpr BlockInfo kMxfp6E3m2{Format::E3M2, Format::E8M0, 32, false, 4, 6.25};
constexpr BlockInfo kMxfp4{Format::E2M1, Format::E8M0, 32, false, 2, 4.25};
constexpr BlockInfo kNvfp4{Format::E2M1, Format::E4M3, 16, true, 2, 4.5};

constexpr std::uint32_t kAbs = 0x7FFFFFFFu;
constexpr std::uint32_t kInfBits = 0x7F800000u;
constexpr std::uint8_t kE8m0NaN = 0xFF;
constexpr std::uint8_t kE4m3NaN = 0x7F;

inline std::uint32_t abs_bits(float v) { return std::bit_cast<std::uint32_t>(v) & kAbs; }
inline float pow2f(int e) { return std::bit_cast<float>(static_cast<std::uint32_t>(e + 127) << 23); }  // normal range

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Element codes, always saturating (as the MX spec and Transformer Engine
// cast elements).
std::uint8_t encode_element(Format e, float v, bool stochastic, std::uint32_t random) {
  return static_cast<std::uint8_t>(stochastic ? encode_sr(e, v, random, true) : encode(e, v, true));
}

// The MX shared exponent X of a block with finite amax (see block.h).
int mx_exponent(float amax, int emax) {
  if (amax == 0.0f) return -127;
  return std::clamp(std::ilogb(amax) - emax, -127, 127);
}

// Lowest block exponent X whose values are all normal BF16 values: the
// element's smallest subnormal times 2^X must be at least 2^-126. (BF16
// subnormals would be exact too, but the native BF16 dot product,
// VDPBF16PS, reads them as zero.)
int bf16_exact_min_exponent(Format element) {
  const FormatInfo& fi = format_info(element);
  return -126 - (1 - fi.bias - fi.man_bits);
}

// Block geometry of a layout.
struct Geometry {
  std::int64_t br, bc;      // block extent in rows and columns
  std::int64_t nbr, nbc;    // blocks in each direction
};
Geometry geometry(std::int64_t rows, std::int64_t cols, BlockLayout layout, int b) {
  switch (layout) {
    case BlockLayout::Rows: return {1, b, rows, ceil_div(cols, b)};
    case BlockLayout::Columns: return {b, 1, ceil_div(rows, b), cols};
    case BlockLayout::Tiles: return {b, b, ceil_div(rows, b), ceil_div(cols, b)};
  }
  return {1, b, rows, ceil_div(cols, b)};
}

// Largest finite |x| (NVFP4's tensor amax), on |x| as bits.
PL_CPU_CLONES float finite_amax(const float* x, std::int64_t n) {
  std::uint32_t m = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint32_t a = abs_bits(x[i]);
    m = std::max(m, a & (0u - static_cast<std::uint32_t>(a < kInfBits)));
  }
  return std::bit_cast<float>(m);
}

// ---- the vectorized path ---------------------------------------------------------
// Round-to-nearest-even of v to an element format with M mantissa bits,
// smallest normal exponent EMIN and largest value `maxv`, saturating, in
// float arithmetic: |v| * 2^(M - e) is exact, (t + 2^23) - 2^23 rounds it
// to an integer (RNE, for t < 2^22), and scaling back by 2^(e - M) is exact.
// Equals decode(encode(v, saturate)) of convert.h for every finite v and for
// +-inf (clamped to 2 * maxv first, which still saturates).
template <int M, int EMIN>
inline float round_element(float v, float maxv) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(v);
  float av = std::bit_cast<float>(u & kAbs);
  const float clampv = 2.0f * maxv;
  av = av < clampv ? av : clampv;
  int e = static_cast<int>(std::bit_cast<std::uint32_t>(av) >> 23) - 127;
  e = e < EMIN ? EMIN : e;
  const float qinv = std::bit_cast<float>(static_cast<std::uint32_t>(M - e + 127) << 23);
  const float q = std::bit_cast<float>(static_cast<std::uint32_t>(e - M + 127) << 23);
  float r = ((av * qinv + 0x1p23f) - 0x1p23f) * q;
  r = r < maxv ? r : maxv;
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(r) | (u & 0x80000000u));
}

// dst[i * ld] = round(src[i * ld] * enc[i or 0]) * dec[i or 0] over n
// elements of one row; `per_column`: enc/dec vary along the row (Columns and
// Tiles layouts), else one pair for the whole run (a Rows block).
template <int M, int EMIN>
PL_CPU_CLONES void quantize_run(const float* src, float* dst, std::int64_t n, const float* enc, const float* dec,
                                bool per_column, float maxv) {
  if (per_column) {
    for (std::int64_t i = 0; i < n; ++i) dst[i] = round_element<M, EMIN>(src[i] * enc[i], maxv) * dec[i];
  } else {
    const float e = enc[0], d = dec[0];
    for (std::int64_t i = 0; i < n; ++i) dst[i] = round_element<M, EMIN>(src[i] * e, maxv) * d;
  }
}

// max |x| as bits along a row (NaN: above inf's bits) into m[i].
PL_CPU_CLONES void column_amax(const float* x, std::uint32_t* m, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) m[i] = std::max(m[i], abs_bits(x[i]));
}

PL_CPU_CLONES std::uint32_t run_amax(const float* x, std::int64_t n) {
  std::uint32_t m = 0;
  for (std::int64_t i = 0; i < n; ++i) m = std::max(m, abs_bits(x[i]));
  return m;
}

using RunFn = void (*)(const float*, float*, std::int64_t, const float*, const float*, bool, float);

RunFn run_for(Format element) {
  switch (element) {
    case Format::E4M3: return quantize_run<3, -6>;
    case Format::E5M2: return quantize_run<2, -14>;
    case Format::E3M2: return quantize_run<2, -2>;
    case Format::E2M3: return quantize_run<3, 0>;
    case Format::E2M1: return quantize_run<1, 0>;
    default: break;
  }
  throw std::logic_error("block quantize: no element kernel");
}

// Stochastic rounding of v (finite, or +-inf) to an element format with E
// exponent bits, M mantissa bits and largest code kMaxCode, saturating, and
// back to its value: convert.h's round_magnitude / shift_sr written without
// branches so the loop below vectorizes. Rounds up with probability (dropped
// part) / 2^shift using the low `shift` bits of `random` (all 32 and a
// comparison beyond 32), exactly as the scalar encoder.
template <int E, int M, std::uint32_t kMaxCode>
inline float sr_element(float v, std::uint32_t random) {
  constexpr int kBias = (1 << (E - 1)) - 1;
  constexpr int kDrop = 23 - M;
  constexpr std::uint32_t kMinNormalExp32 = 127 - kBias + 1;
  const std::uint32_t u = std::bit_cast<std::uint32_t>(v);
  const std::uint32_t a = u & kAbs;
  const std::uint32_t exp32 = a >> 23;
  const bool normal = exp32 >= kMinNormalExp32;
  const std::uint32_t m = exp32 != 0 ? ((a & 0x7FFFFFu) | 0x800000u) : a;
  const std::uint32_t e1 = exp32 != 0 ? exp32 : 1u;
  const std::uint32_t val = normal ? a - (static_cast<std::uint32_t>(127 - kBias) << 23) : m;
  const std::uint32_t shift = normal ? static_cast<std::uint32_t>(kDrop)
                                     : static_cast<std::uint32_t>(kDrop) + (kMinNormalExp32 - (normal ? 1u : e1));
  const std::uint64_t mask = shift >= 32 ? 0xFFFFFFFFull : ((std::uint64_t{1} << shift) - 1u);
  const std::uint64_t low = (static_cast<std::uint64_t>(val) + (random & mask)) >> (shift <= 32 ? shift : 32u);
  const std::uint64_t far = shift - 32u < 32u ? (static_cast<std::uint64_t>(val) >> (shift - 32u)) : 0u;
  std::uint32_t code = shift <= 32 ? static_cast<std::uint32_t>(low) : (random < far ? 1u : 0u);
  code = a >= kInfBits || code > kMaxCode ? kMaxCode : code;
  // Decode: a normal code keeps its exponent rebiased; a subnormal one is
  // man * 2^(1 - bias - M).
  const std::uint32_t cexp = code >> M, cman = code & ((1u << M) - 1u);
  const float sub = static_cast<float>(cman) * std::bit_cast<float>(static_cast<std::uint32_t>(127 + 1 - kBias - M) << 23);
  const std::uint32_t nbits = ((cexp + static_cast<std::uint32_t>(127 - kBias)) << 23) | (cman << (23 - M));
  const std::uint32_t mag = cexp != 0 ? nbits : std::bit_cast<std::uint32_t>(sub);
  return std::bit_cast<float>(mag | (u & 0x80000000u));
}

// Stochastic rounding of one run: element i uses stochastic_bits(seed,
// index0 + i); the same values as the reference's scalar encoders.
template <int E, int M, std::uint32_t kMaxCode>
PL_CPU_CLONES void sr_loop(const float* src, float* dst, std::int64_t n, const float* enc, const float* dec,
                           bool per_column, std::uint64_t key, std::uint64_t index0) {
  if (per_column) {
    for (std::int64_t i = 0; i < n; ++i) {
      const std::uint32_t r = random_bits::random_at(key, index0 + static_cast<std::uint64_t>(i));
      dst[i] = sr_element<E, M, kMaxCode>(src[i] * enc[i], r) * dec[i];
    }
  } else {
    const float e = enc[0], d = dec[0];
    for (std::int64_t i = 0; i < n; ++i) {
      const std::uint32_t r = random_bits::random_at(key, index0 + static_cast<std::uint64_t>(i));
      dst[i] = sr_element<E, M, kMaxCode>(src[i] * e, r) * d;
    }
  }
}

void sr_run(Format element, const float* src, float* dst, std::int64_t n, const float* enc, const float* dec,
            bool per_column, std::uint64_t seed, std::uint64_t index0) {
  const std::uint64_t key = random_bits::stream_key(seed);
  switch (element) {
    // FP8 with saturation: E4M3's top code 0x7F is NaN, E5M2's from 0x7C on are inf/NaN.
    case Format::E4M3: return sr_loop<4, 3, 0x7Eu>(src, dst, n, enc, dec, per_column, key, index0);
    case Format::E5M2: return sr_loop<5, 2, 0x7Bu>(src, dst, n, enc, dec, per_column, key, index0);
    case Format::E3M2: return sr_loop<3, 2, 0x1Fu>(src, dst, n, enc, dec, per_column, key, index0);
    case Format::E2M3: return sr_loop<2, 3, 0x1Fu>(src, dst, n, enc, dec, per_column, key, index0);
    case Format::E2M1: return sr_loop<2, 1, 0x7u>(src, dst, n, enc, dec, per_column, key, index0);
    default: break;
  }
  throw std::logic_error("block quantize: no element kernel");
}

// One block's (enc, dec) pair from its amax bits; false for a NaN block.
struct BlockScale {
  float enc = 1.0f, dec = 1.0f;
  int exponent = 0;  // MX: X
  bool nan = false;
};
BlockScale block_scale(const BlockInfo& bi, std::uint32_t amax_bits, float s_enc) {
  BlockScale s;
  if (amax_bits >= kInfBits) {
    s.nan = true;
    s.dec = std::numeric_limits<float>::quiet_NaN();
    return s;
  }
  const float amax = std::bit_cast<float>(amax_bits);
  if (bi.tensor_scale) {
    const std::uint8_t code = nvfp4_scale_code(amax, s_enc);
    s.enc = nvfp4_block_encode(code, s_enc);
    s.dec = e4m3_to_fp32(code);
  } else {
    s.exponent = mx_exponent(amax, bi.emax);
    s.enc = pow2f(-s.exponent);
    s.dec = e8m0_to_fp32(static_cast<std::uint8_t>(s.exponent + 127));
  }
  return s;
}

constexpr std::int64_t kParallelMin = std::int64_t{1} << 15;

}  // namespace

const BlockInfo& block_info(Format f) {
  switch (f) {
    case Format::MXFP8: return kMxfp8;
    case Format::MXFP8_E5M2: return kMxfp8E5m2;
    case Format::MXFP6: return kMxfp6;
    case Format::MXFP6_E3M2: return kMxfp6E3m2;
    case Format::MXFP4: return kMxfp4;
    case Format::NVFP4: return kNvfp4;
    default: break;
  }
  throw std::invalid_argument(std::string(format_name(f)) + " is not a block format");
}

std::int64_t block_bytes(Format f, std::int64_t rows, std::int64_t cols, BlockLayout layout) {
  const BlockInfo& bi = block_info(f);
  const Geometry g = geometry(rows, cols, layout, bi.block);
  const std::int64_t element_bits = format_info(bi.element).bits * rows * cols;
  return ceil_div(element_bits, 8) + g.nbr * g.nbc + (bi.tensor_scale ? 4 : 0);
}

std::uint8_t mx_scale_code(float amax, Format element) {
  const std::uint32_t a = abs_bits(amax);
  if (a >= kInfBits) return kE8m0NaN;
  // emax: floor(log2) of the element format's largest value.
  const int emax = std::ilogb(format_info(element).max);
  return static_cast<std::uint8_t>(mx_exponent(std::bit_cast<float>(a), emax) + 127);
}

float nvfp4_tensor_scale(float amax) {
  float s = 2688.0f / amax;  // 448 * 6
  s = std::fmin(s, FLT_MAX);
  if (amax == 0.0f || s == 0.0f) return 1.0f;
  return s;
}

std::uint8_t nvfp4_scale_code(float block_amax, float s_enc) {
  if (!(std::fabs(block_amax) <= FLT_MAX)) return kE4m3NaN;
  float d = block_amax * (s_enc * (1.0f / 6.0f));
  d = std::fmin(d, FLT_MAX);
  return fp32_to_e4m3(d, true);
}

float nvfp4_block_encode(std::uint8_t scale_code, float s_enc) {
  const float enc = 1.0f / (e4m3_to_fp32(scale_code) * (1.0f / s_enc));
  return std::fmin(enc, FLT_MAX);
}

std::int64_t BlockEncoding::block_rows() const {
  return geometry(rows, cols, layout, block_info(format).block).nbr;
}
std::int64_t BlockEncoding::block_cols() const {
  return geometry(rows, cols, layout, block_info(format).block).nbc;
}
std::int64_t BlockEncoding::block_of(std::int64_t r, std::int64_t c) const {
  const Geometry g = geometry(rows, cols, layout, block_info(format).block);
  return (r / g.br) * g.nbc + c / g.bc;
}

float BlockEncoding::value(std::int64_t r, std::int64_t c, bool with_tensor_scale) const {
  const BlockInfo& bi = block_info(format);
  const std::uint8_t sc = scales[static_cast<std::size_t>(block_of(r, c))];
  const float scale = decode(bi.scale, sc);
  const float v = decode(bi.element, codes[static_cast<std::size_t>(r * cols + c)]) * scale;
  if (!with_tensor_scale || !bi.tensor_scale) return v;
  return v * (1.0f / tensor_scale);
}

BlockEncoding block_encode_reference(Format f, const float* x, std::int64_t rows, std::int64_t cols,
                                     BlockLayout layout, const BlockRounding& rounding) {
  const BlockInfo& bi = block_info(f);
  if (layout == BlockLayout::Tiles && !bi.tensor_scale)
    throw std::invalid_argument(std::string(format_name(f)) + ": square tiles are NVFP4's weight layout only");
  BlockEncoding e;
  e.format = f;
  e.layout = layout;
  e.rows = rows;
  e.cols = cols;
  const Geometry g = geometry(rows, cols, layout, bi.block);
  e.scales.assign(static_cast<std::size_t>(g.nbr * g.nbc), 0);
  e.codes.assign(static_cast<std::size_t>(rows * cols), 0);
  if (bi.tensor_scale) {
    float amax = 0.0f;
    for (std::int64_t i = 0; i < rows * cols; ++i)
      if (std::isfinite(x[i])) amax = std::max(amax, std::fabs(x[i]));
    e.tensor_scale = nvfp4_tensor_scale(amax);
  }
  for (std::int64_t rb = 0; rb < g.nbr; ++rb) {
    for (std::int64_t cb = 0; cb < g.nbc; ++cb) {
      const std::int64_t r0 = rb * g.br, r1 = std::min(rows, r0 + g.br);
      const std::int64_t c0 = cb * g.bc, c1 = std::min(cols, c0 + g.bc);
      // The block's amax, NaN winning over inf winning over finite values.
      float amax = 0.0f;
      bool nan = false, inf = false;
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t c = c0; c < c1; ++c) {
          const float v = x[r * cols + c];
          if (std::isnan(v)) nan = true;
          else if (std::isinf(v)) inf = true;
          else amax = std::max(amax, std::fabs(v));
        }
      std::uint8_t& sc = e.scales[static_cast<std::size_t>(rb * g.nbc + cb)];
      float enc;
      if (bi.tensor_scale) {
        sc = nan || inf ? kE4m3NaN : nvfp4_scale_code(amax, e.tensor_scale);
        if (sc == kE4m3NaN) continue;  // element codes stay 0: the scale makes the block NaN
        enc = nvfp4_block_encode(sc, e.tensor_scale);
      } else {
        sc = nan || inf ? kE8m0NaN : mx_scale_code(amax, bi.element);
        if (sc == kE8m0NaN) continue;
        enc = pow2f(127 - static_cast<int>(sc));  // 2^-X
      }
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t c = c0; c < c1; ++c) {
          const std::int64_t i = r * cols + c;
          const std::uint32_t random =
              rounding.stochastic ? stochastic_bits(rounding.seed, static_cast<std::uint64_t>(i)) : 0u;
          e.codes[static_cast<std::size_t>(i)] = encode_element(bi.element, x[i] * enc, rounding.stochastic, random);
        }
    }
  }
  return e;
}

void block_decode(const BlockEncoding& e, float* out, bool with_tensor_scale) {
  for (std::int64_t r = 0; r < e.rows; ++r)
    for (std::int64_t c = 0; c < e.cols; ++c) out[r * e.cols + c] = e.value(r, c, with_tensor_scale);
}

BlockQuantized block_quantize(Format f, const float* src, float* dst, std::int64_t rows, std::int64_t cols,
                              BlockLayout layout, const BlockRounding& rounding) {
  const BlockInfo& bi = block_info(f);
  BlockQuantized out;
  if (rows <= 0 || cols <= 0) return out;
  const int min_exact = bf16_exact_min_exponent(bi.element);
  if (layout == BlockLayout::Tiles && !bi.tensor_scale)
    throw std::invalid_argument(std::string(format_name(f)) + ": square tiles are NVFP4's weight layout only");
  const float s_enc = bi.tensor_scale ? nvfp4_tensor_scale(finite_amax(src, rows * cols)) : 1.0f;
  out.tensor_decode = bi.tensor_scale ? 1.0f / s_enc : 1.0f;
  const RunFn rne = run_for(bi.element);
  const float maxv = static_cast<float>(format_info(bi.element).max);
  // One run of elements (row r from column c0): RNE vectorized, or SR.
  auto run = [&](std::int64_t r, std::int64_t c0, std::int64_t n, const float* enc, const float* dec, bool per_column) {
    const float* s = src + r * cols + c0;
    float* d = dst + r * cols + c0;
    if (rounding.stochastic)
      sr_run(bi.element, s, d, n, enc, dec, per_column, rounding.seed, static_cast<std::uint64_t>(r * cols + c0));
    else
      rne(s, d, n, enc, dec, per_column, maxv);
  };
  const std::int64_t b = bi.block;
  const bool parallel = rows * cols >= kParallelMin;
  int min_exponent = 127;
  if (layout == BlockLayout::Rows) {
    const std::int64_t nbc = ceil_div(cols, b);
#pragma omp parallel for schedule(static) reduction(min : min_exponent) if (parallel)
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t cb = 0; cb < nbc; ++cb) {
        const std::int64_t c0 = cb * b, n = std::min(b, cols - c0);
        const float* s = src + r * cols + c0;
        float* d = dst + r * cols + c0;
        const BlockScale sc = block_scale(bi, run_amax(s, n), s_enc);
        if (sc.nan) {
          std::fill(d, d + n, sc.dec);
          continue;
        }
        min_exponent = std::min(min_exponent, sc.exponent);
        run(r, c0, n, &sc.enc, &sc.dec, false);
      }
    }
  } else {
    // Columns and Tiles: strips of b rows; per-column (or per-tile) scales.
    const std::int64_t strips = ceil_div(rows, b);
    const bool tiles = layout == BlockLayout::Tiles;
#pragma omp parallel for schedule(static) reduction(min : min_exponent) if (parallel)
    for (std::int64_t sidx = 0; sidx < strips; ++sidx) {
      const std::int64_t r0 = sidx * b, r1 = std::min(rows, r0 + b);
      // Per-column scratch, kept per thread: no allocation per strip.
      thread_local std::vector<std::uint32_t> amax;
      thread_local std::vector<float> enc, dec;
      amax.assign(static_cast<std::size_t>(cols), 0u);
      enc.resize(static_cast<std::size_t>(cols));
      dec.resize(static_cast<std::size_t>(cols));
      for (std::int64_t r = r0; r < r1; ++r) column_amax(src + r * cols, amax.data(), cols);
      // One scale per column (Columns) or per b columns (a tile). A NaN
      // block gets enc 0 and dec NaN: round(x * 0) * NaN is NaN for every x
      // (an inf times 0 is NaN too), so the block decodes to NaN.
      const std::int64_t step = tiles ? b : 1;
      for (std::int64_t c0 = 0; c0 < cols; c0 += step) {
        const auto first = static_cast<std::size_t>(c0), last = static_cast<std::size_t>(std::min(cols, c0 + step));
        const std::uint32_t m = *std::max_element(amax.begin() + static_cast<std::ptrdiff_t>(first),
                                                  amax.begin() + static_cast<std::ptrdiff_t>(last));
        const BlockScale sc = block_scale(bi, m, s_enc);
        std::fill(enc.begin() + static_cast<std::ptrdiff_t>(first), enc.begin() + static_cast<std::ptrdiff_t>(last),
                  sc.nan ? 0.0f : sc.enc);
        std::fill(dec.begin() + static_cast<std::ptrdiff_t>(first), dec.begin() + static_cast<std::ptrdiff_t>(last), sc.dec);
        if (!sc.nan) min_exponent = std::min(min_exponent, sc.exponent);
      }
      for (std::int64_t r = r0; r < r1; ++r) run(r, 0, cols, enc.data(), dec.data(), true);
    }
  }
  if (!bi.tensor_scale && min_exponent < min_exact) out.bf16_exact = false;
  return out;
}

}  // namespace engine
