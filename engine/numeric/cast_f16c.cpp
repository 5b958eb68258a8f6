// F16C path (compiled with -mavx2 -mf16c): FP16 <-> FP32 with the hardware
// conversion, E5M2 through it both ways and E4M3 decoded through it
// (fp8_encode16, fp8_decode16; E4M3 encoded with integer rounding), BF16
// and TF32 with 256-bit integer bit manipulation (the scalar reference's
// algorithm, 8 lanes at a time), so CPUs without AVX-512 still get fast
// casts. Only called after the run-time CPU check in cast.cpp; tails take
// the scalar functions.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "numeric/cast_kernels.h"
#include "numeric/convert.h"

namespace engine::cast_kernels {

namespace {

// VCVTPS2PH with an immediate rounding mode ignores MXCSR.RC; its NaN
// result (quiet, payload truncated) is what fp32_to_fp16 is defined to give.
constexpr int kRne = _MM_FROUND_TO_NEAREST_INT;

inline __m256i c32(std::uint32_t v) { return _mm256_set1_epi32(static_cast<int>(v)); }

// BF16 RNE on 8 FP32 patterns, result in the low 16 bits of each lane.
// NaN lanes take (u >> 16) | 0x40 (quiet, sign and payload kept) instead of
// the rounded value, whose carry could otherwise turn a NaN into inf.
inline __m256i bf16_rne(__m256i u) {
  const __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF));
  const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7F800000));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(
      _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb), 16);
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  return _mm256_blendv_epi8(rounded, quiet, nan);
}

// bf16_rne's rounding alone (no NaN lanes): the carry of the rounded
// mantissa runs into the exponent as it should for every finite value and
// inf, and only a NaN can come out wrong (as inf).
inline __m256i bf16_rne_no_nan(__m256i u) {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  return _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb);
}

// Folds 8 patterns into m, whose lanes exceed 0xFF000000 once a NaN was
// among them (the pattern without its sign, doubled: NaN above inf's).
inline __m256i nan_screen(__m256i m, __m256i u) { return _mm256_max_epu32(m, _mm256_slli_epi32(u, 1)); }
inline bool screened_nan(__m256i m) {
  return !_mm256_testz_si256(_mm256_cmpgt_epi32(_mm256_xor_si256(m, c32(0x80000000u)), c32(0x7F000000u)),
                             _mm256_set1_epi32(-1));
}

// FP32 -> BF16 codes in blocks of kBf16Block values: a block is rounded
// without the NaN select, its patterns screened for NaN on the way, and
// redone with bf16_rne where it held one (bench_cast, 64Ki values, one
// thread: 6.2-7.6 -> 5.4-5.7 us; the same codes for every FP32 pattern).
// Rounding in place (quantize) would need the screen first, as a pass of
// its own, and measured no faster: it keeps bf16_rne.
constexpr std::size_t kBf16Block = 256;

// TF32 RNE on 8 FP32 patterns (result is an FP32 pattern).
inline __m256i tf32_rne(__m256i u) {
  const __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF));
  const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7F800000));
  const __m256i keep = _mm256_set1_epi32(static_cast<int>(0xFFFFE000u));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 13), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x0FFF)), lsb), keep);
  const __m256i quiet = _mm256_and_si256(_mm256_or_si256(u, _mm256_set1_epi32(0x00400000)), keep);
  return _mm256_blendv_epi8(rounded, quiet, nan);
}

// The FP8 encoders below round with FP32 additions, which round as
// MXCSR.RC says: the FP8 loops set it to nearest (RNE) while they run, when
// something (the engine, a library) left another mode, and put it back
// after. DAZ and FTZ change nothing there: a denormal input rounds to zero
// either way, and no sum or result is denormal.
class NearestRounding {
 public:
  NearestRounding() : m_saved(_mm_getcsr()) {
    if (m_saved & kRoundingBits) _mm_setcsr(m_saved & ~kRoundingBits);
  }
  ~NearestRounding() {
    if (m_saved & kRoundingBits) _mm_setcsr(m_saved);
  }
  NearestRounding(const NearestRounding&) = delete;
  NearestRounding& operator=(const NearestRounding&) = delete;

 private:
  static constexpr unsigned kRoundingBits = 0x6000u;
  unsigned m_saved;
};

// 8 FP32 values on E5M2's grid, as FP16 patterns (E5M2 is FP16's top
// byte). The rounding is the FPU's own RNE in FP32: x + c - c with
// c = 1.5 * 2^(e + 21), e the exponent of x raised to FP16's smallest
// normal one (2^-14) and capped at its largest (so c stays finite): the
// add rounds x to a multiple of E5M2's step there (2^(e-2); 2^-16 below
// the normals; x and -x alike: c - |x| stays in c's binade, and c is an
// even multiple of the step), the subtract is exact, and so is VCVTPS2PH
// of the result. x's sign goes back on afterwards (a zero keeps it). A
// value past 57344 rounds to 65536 or beyond, which VCVTPS2PH makes inf
// (RNE) or 0x7BFF (toward zero: saturating, 0x7B); inf and NaN stay.
// (It replaced a conversion toward zero with a sticky bit and an integer
// rounding of the dropped bits: 2 FP16 conversions per 16 values instead
// of 4; bench_cast, 64Ki values, one thread: 13.5 -> 9.8 us.)
inline __m128i e5m2_grid8(__m256 x, bool saturate) {
  const __m256 sign = _mm256_and_ps(x, _mm256_castsi256_ps(c32(0x80000000u)));
  __m256i e = _mm256_max_epi32(_mm256_and_si256(_mm256_castps_si256(x), c32(0x7F800000u)), c32(113u << 23));
  e = _mm256_min_epi32(e, c32(142u << 23));
  const __m256 c = _mm256_castsi256_ps(_mm256_add_epi32(e, c32((21u << 23) | 0x400000u)));
  const __m256 r = _mm256_or_ps(_mm256_sub_ps(_mm256_add_ps(x, c), c), sign);
  return saturate ? _mm256_cvtps_ph(r, _MM_FROUND_TO_ZERO) : _mm256_cvtps_ph(r, kRne);
}

// 16 FP32 values (x0: elements 0-7, x1: 8-15) -> 16 E5M2 codes, RNE, as
// fp32_to_e5m2 gives them: the top bytes of e5m2_grid8's patterns, with
// VCVTPS2PH's NaN (0x7E00 and above) left 0x7E or 0x7F: 0x7F (and 0xFF)
// become E5M2's NaN 0x7E (0xFE), the sign kept.
inline __m128i e5m2_encode16(__m256 x0, __m256 x1, bool saturate) {
  const __m128i c =
      _mm_packus_epi16(_mm_srli_epi16(e5m2_grid8(x0, saturate), 8), _mm_srli_epi16(e5m2_grid8(x1, saturate), 8));
  return _mm_add_epi8(c, _mm_cmpeq_epi8(_mm_or_si128(c, _mm_set1_epi8(-128)), _mm_set1_epi8(-1)));
}

// Packs the low 16 bits of 2 x 8 lanes into 16 uint16 in order.
inline __m256i pack16(__m256i lo, __m256i hi) {
  // packus works within 128-bit halves: [lo0 hi0 | lo1 hi1]; restore order.
  const __m256i p = _mm256_packus_epi32(lo, hi);
  return _mm256_permute4x64_epi64(p, 0xD8);
}

// Packs bytes held in the low 8 bits of 2 x 8 lanes into 16 bytes in order.
inline __m128i pack_bytes16(__m256i lo, __m256i hi) {
  const __m256i p = pack16(lo, hi);
  return _mm_packus_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
}

// 16 FP32 values -> 16 BF16 codes, NaN lanes included.
inline void bf16_encode16(const float* src, std::uint16_t* d) {
  const __m256i lo = bf16_rne(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)));
  const __m256i hi = bf16_rne(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 8)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), pack16(lo, hi));
}

// 8 E4M3 codes in 32-bit lanes from a = |value| (NaN as any NaN) and the
// values' signs in sign_src's sign bits: normals by integer RNE of the 20
// dropped bits (the rebias folded into the constant; an arithmetic shift,
// so that values below 2^-7 come out negative), subnormals by an FP32 add
// of 2^14 (its ulp 2^-9, the smallest subnormal) to a capped at 2^-6,
// whose low bits are then the code; the larger of the two is the code (for
// a below 2^-6 the normal formula gives at most the subnormal code, from
// 2^-6 up the subnormal one gives 8, the smallest normal code). Saturating,
// a is first capped at 448 (min_ps keeps a NaN); the cap at 0x7F then
// sends overflow, inf and NaN to NaN, saturating only NaN. No FP16
// conversion: it replaced VCVTPS2PH of the value times 2^-8 rounded as
// e5m2_grid8 rounds (bench_cast, 64Ki values, one thread: 13.4 -> 11.9
// us; 14.9 us with the sticky-bit conversions before that), and the max
// and the caps replaced two compares and blends (the scaled cast with its
// amax, 2048 values hot, capped to AVX2: 0.198 -> 0.188 ns a value;
// 100352: 0.191 -> 0.179).
template <bool kSat>
inline __m256i e4m3_code8(__m256 a, __m256 sign_src) {
  constexpr int kDrop = 20;
  if constexpr (kSat) a = _mm256_min_ps(_mm256_set1_ps(448.0f), a);
  const __m256i ai = _mm256_castps_si256(a);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(ai, kDrop), c32(1));
  constexpr std::uint32_t kBiasConst = ((1u << (kDrop - 1)) - 1u) - (120u << 23);
  const __m256i code_n = _mm256_srai_epi32(_mm256_add_epi32(_mm256_add_epi32(ai, c32(kBiasConst)), lsb), kDrop);
  const __m256 magic = _mm256_castsi256_ps(c32(141u << 23));  // 2^14, whose ulp is 2^-9
  const __m256 low = _mm256_min_ps(a, _mm256_castsi256_ps(c32(121u << 23)));  // 2^-6
  const __m256i code_s =
      _mm256_sub_epi32(_mm256_castps_si256(_mm256_add_ps(low, magic)), _mm256_castps_si256(magic));
  const __m256i code = _mm256_min_epi32(_mm256_max_epi32(code_n, code_s), c32(0x7Fu));
  return _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(code),
                                              _mm256_castsi256_ps(_mm256_or_si256(code, c32(0x80u))), sign_src));
}

// 8 FP32 values -> 8 E4M3 codes in 32-bit lanes, RNE.
template <bool kSat>
inline __m256i e4m3_int8(__m256 x) {
  return e4m3_code8<kSat>(_mm256_and_ps(x, _mm256_castsi256_ps(c32(0x7FFFFFFFu))), x);
}

// 16 FP32 values (x0: elements 0-7, x1: 8-15) -> 16 E4M3 codes, RNE, as
// fp32_to_e4m3 gives them.
template <bool kSat>
inline __m128i e4m3_encode16(__m256 x0, __m256 x1) {
  return pack_bytes16(e4m3_int8<kSat>(x0), e4m3_int8<kSat>(x1));
}

template <bool kE4M3>
inline __m128i fp8_encode16(__m256 x0, __m256 x1, bool saturate) {
  if constexpr (kE4M3) return saturate ? e4m3_encode16<true>(x0, x1) : e4m3_encode16<false>(x0, x1);
  return e5m2_encode16(x0, x1, saturate);
}

// 16 E4M3 or E5M2 codes -> 16 floats at dst, through FP16: E5M2 is FP16's
// top byte; for E4M3 the sign-extended byte shifted left 7 (bit 14, the
// sign's copy, cleared) is the FP16 pattern of value / 256, subnormals
// included, with NaN (0x3F80 there) moved to FP16's quiet NaN 0x7E00, which
// VCVTPH2PS makes 0x7FC00000 as e4m3_to_fp32 does; times 256 is exact.
template <bool kE4M3>
inline void fp8_decode16(__m128i codes, float* dst) {
  __m256i h;
  if constexpr (kE4M3) {
    h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(codes), 7),
                         _mm256_set1_epi16(static_cast<short>(0xBF80)));
    const __m256i nan = _mm256_cmpeq_epi16(_mm256_slli_epi16(h, 1), _mm256_set1_epi16(0x7F00));
    h = _mm256_add_epi16(h, _mm256_and_si256(nan, _mm256_set1_epi16(0x3E80)));
  } else {
    h = _mm256_slli_epi16(_mm256_cvtepu8_epi16(codes), 8);
  }
  __m256 lo = _mm256_cvtph_ps(_mm256_castsi256_si128(h)), hi = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
  if constexpr (kE4M3) {
    const __m256 up = _mm256_set1_ps(256.0f);
    lo = _mm256_mul_ps(lo, up);
    hi = _mm256_mul_ps(hi, up);
  }
  _mm256_storeu_ps(dst, lo);
  _mm256_storeu_ps(dst + 8, hi);
}

template <bool kE4M3>
void fp8_to_f32(const std::uint8_t* s, float* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) fp8_decode16<kE4M3>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)), dst + i);
  for (; i < n; ++i) dst[i] = kE4M3 ? e4m3_to_fp32(s[i]) : e5m2_to_fp32(s[i]);
}

// x[i] rounded to E4M3 or E5M2 in place: the encode and the decode above.
template <bool kE4M3>
void fp8_quantize(float* x, std::size_t n, bool saturate) {
  const NearestRounding rne;
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16)
    fp8_decode16<kE4M3>(fp8_encode16<kE4M3>(_mm256_loadu_ps(x + i), _mm256_loadu_ps(x + i + 8), saturate), x + i);
  for (; i < n; ++i)
    x[i] = kE4M3 ? e4m3_to_fp32(fp32_to_e4m3(x[i], saturate)) : e5m2_to_fp32(fp32_to_e5m2(x[i], saturate));
}

// 8 values of format From at src + i as FP32 (FP32, or BF16 / FP16 codes).
template <Format From>
inline __m256 load8(const void* src, std::size_t i) {
  if constexpr (From == Format::FP32) return _mm256_loadu_ps(static_cast<const float*>(src) + i);
  const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const std::uint16_t*>(src) + i));
  if constexpr (From == Format::BF16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(c), 16));
  return _mm256_cvtph_ps(c);
}

template <Format From>
inline float value_at(const void* src, std::size_t i) {
  if constexpr (From == Format::FP32) return static_cast<const float*>(src)[i];
  const std::uint16_t c = static_cast<const std::uint16_t*>(src)[i];
  if constexpr (From == Format::BF16) return bf16_to_fp32(c);
  return fp16_to_fp32(c);
}

// fp8_scaled's vector loop over the 16-value groups of [0, n), one
// instantiation per case so that no test or reload is left in it: kSat the
// saturation, kAmax whether the max of |x| is wanted (into *amax_bits),
// kScaled whether x is multiplied by vs. Returns the values done.
template <Format From, bool kE4M3, bool kSat, bool kAmax, bool kScaled>
std::size_t fp8_scaled_body(const void* src, std::uint8_t* d, std::size_t n, __m256 vs, std::uint32_t* amax_bits) {
  __m256i m = _mm256_setzero_si256();
  std::size_t i = 0;
  if constexpr (kE4M3) {
    // E4M3 from |x| * scale, the signs from x (the caller's scale is
    // positive: |x * s| is |x| * s, RNE being symmetric), |x| shared with
    // the amax.
    auto code8 = [&](__m256 x) {
      __m256 a = _mm256_and_ps(x, _mm256_castsi256_ps(c32(0x7FFFFFFFu)));
      if constexpr (kAmax) m = _mm256_max_epu32(m, _mm256_castps_si256(a));
      if constexpr (kScaled) a = _mm256_mul_ps(a, vs);
      return e4m3_code8<kSat>(a, x);
    };
    for (; i + 16 <= n; i += 16)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                       pack_bytes16(code8(load8<From>(src, i)), code8(load8<From>(src, i + 8))));
  } else {
    auto prep = [&](__m256 x) {
      if constexpr (kAmax) m = _mm256_max_epu32(m, _mm256_and_si256(_mm256_castps_si256(x), c32(0x7FFFFFFFu)));
      if constexpr (kScaled) x = _mm256_mul_ps(x, vs);
      return x;
    };
    for (; i + 16 <= n; i += 16) {
      const __m256 x0 = prep(load8<From>(src, i));
      const __m256 x1 = prep(load8<From>(src, i + 8));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), fp8_encode16<kE4M3>(x0, x1, kSat));
    }
  }
  if constexpr (kAmax) {
    alignas(32) std::uint32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), m);
    std::uint32_t mx = 0;
    for (std::uint32_t v : lanes) mx = v > mx ? v : mx;
    *amax_bits = mx;
  }
  return i;
}

// FP8 codes of x[i] * scale (no multiply for scale 1) and the max of the
// unscaled |x[i]| as FP32 bit patterns: 16 values a time, the tail scalar.
template <Format From, bool kE4M3>
void fp8_scaled(const void* src, std::uint8_t* d, std::size_t n, float scale, bool saturate,
                std::uint32_t* amax_bits) {
  const NearestRounding rne;
  const __m256 vs = _mm256_set1_ps(scale);
  const bool scaled = scale != 1.0f;
  std::uint32_t mx = 0;
  auto body = [&]<bool kSat, bool kAmax>() -> std::size_t {
    if (scaled) return fp8_scaled_body<From, kE4M3, kSat, kAmax, true>(src, d, n, vs, &mx);
    return fp8_scaled_body<From, kE4M3, kSat, kAmax, false>(src, d, n, vs, &mx);
  };
  auto with_amax = [&]<bool kSat>() {
    return amax_bits ? body.template operator()<kSat, true>() : body.template operator()<kSat, false>();
  };
  // E4M3's vector loop takes a positive scale (the delayed scaling's
  // always is); another one is cast by the scalar loop below.
  std::size_t i = 0;
  if (!kE4M3 || scale > 0.0f)
    i = saturate ? with_amax.template operator()<true>() : with_amax.template operator()<false>();
  for (; i < n; ++i) {
    const float x = value_at<From>(src, i);
    std::uint32_t u = 0;
    std::memcpy(&u, &x, 4);
    u &= 0x7FFFFFFFu;
    mx = u > mx ? u : mx;
    const float y = scaled ? x * scale : x;
    d[i] = kE4M3 ? fp32_to_e4m3(y, saturate) : fp32_to_e5m2(y, saturate);
  }
  if (amax_bits) *amax_bits = mx;
}

template <Format From>
bool fp8_scaled_to(Format to, const void* src, float scale, void* dst, std::size_t n, bool saturate,
                   std::uint32_t* amax_bits) {
  auto* d = static_cast<std::uint8_t*>(dst);
  if (to == Format::E4M3) fp8_scaled<From, true>(src, d, n, scale, saturate, amax_bits);
  else if (to == Format::E5M2) fp8_scaled<From, false>(src, d, n, scale, saturate, amax_bits);
  else return false;
  return true;
}

}  // namespace

bool f16c_covers(Format f, bool from_f32) {
  if (f == Format::FP32) return false;     // a copy
  if (f == Format::TF32) return from_f32;  // TF32 -> FP32 is a copy
  return is_tensor_format(f);
}

bool f16c_from_f32(Format to, const float* src, void* dst, std::size_t n, bool saturate) {
  std::size_t i = 0;
  switch (to) {
    case Format::FP16: {
      auto* d = static_cast<std::uint16_t*>(dst);
      for (; i + 16 <= n; i += 16) {
        const __m128i h0 = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), kRne);
        const __m128i h1 = _mm256_cvtps_ph(_mm256_loadu_ps(src + i + 8), kRne);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), h0);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i + 8), h1);
      }
      for (; i < n; ++i) d[i] = fp32_to_fp16(src[i]);
      return true;
    }
    case Format::BF16: {
      auto* d = static_cast<std::uint16_t*>(dst);
      for (; i + kBf16Block <= n; i += kBf16Block) {
        __m256i m = _mm256_setzero_si256();
        for (std::size_t k = i; k < i + kBf16Block; k += 16) {
          const __m256i u0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + k));
          const __m256i u1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + k + 8));
          m = nan_screen(nan_screen(m, u0), u1);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + k),
                              pack16(_mm256_srli_epi32(bf16_rne_no_nan(u0), 16), _mm256_srli_epi32(bf16_rne_no_nan(u1), 16)));
        }
        if (!screened_nan(m)) continue;
        for (std::size_t k = i; k < i + kBf16Block; k += 16) bf16_encode16(src + k, d + k);
      }
      for (; i + 16 <= n; i += 16) bf16_encode16(src + i, d + i);
      for (; i < n; ++i) d[i] = fp32_to_bf16(src[i]);
      return true;
    }
    case Format::TF32: {
      auto* d = static_cast<float*>(dst);
      for (; i + 8 <= n; i += 8) {
        const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), tf32_rne(u));
      }
      for (; i < n; ++i) d[i] = round_to_tf32(src[i]);
      return true;
    }
    case Format::E5M2:
    case Format::E4M3: return fp8_scaled_to<Format::FP32>(to, src, 1.0f, dst, n, saturate, nullptr);
    default: return false;
  }
}

bool f16c_scale_amax_cast(Format from, const void* src, float scale, Format to, void* dst, std::size_t n,
                          bool saturate, std::uint32_t* amax_bits) {
  switch (from) {
    case Format::FP32: return fp8_scaled_to<Format::FP32>(to, src, scale, dst, n, saturate, amax_bits);
    case Format::BF16: return fp8_scaled_to<Format::BF16>(to, src, scale, dst, n, saturate, amax_bits);
    case Format::FP16: return fp8_scaled_to<Format::FP16>(to, src, scale, dst, n, saturate, amax_bits);
    default: return false;
  }
}

bool f16c_to_f32(Format from, const void* src, float* dst, std::size_t n) {
  std::size_t i = 0;
  switch (from) {
    case Format::FP16: {
      const auto* s = static_cast<const std::uint16_t*>(src);
      for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
      }
      for (; i < n; ++i) dst[i] = fp16_to_fp32(s[i]);
      return true;
    }
    case Format::BF16: {
      const auto* s = static_cast<const std::uint16_t*>(src);
      for (; i + 8 <= n; i += 8) {
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
        const __m256i u = _mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), u);
      }
      for (; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
      return true;
    }
    case Format::E5M2: fp8_to_f32<false>(static_cast<const std::uint8_t*>(src), dst, n); return true;
    case Format::E4M3: fp8_to_f32<true>(static_cast<const std::uint8_t*>(src), dst, n); return true;
    default: return false;  // TF32 is already FP32: the caller copies
  }
}

bool f16c_quantize(Format f, float* x, std::size_t n, bool saturate) {
  std::size_t i = 0;
  switch (f) {
    case Format::FP16:
      // Round trip through FP16: both conversions are exact apart from the
      // one RNE rounding, and VCVTPH2PS handles FP16 subnormals exactly.
      for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), kRne);
        _mm256_storeu_ps(x + i, _mm256_cvtph_ps(h));
      }
      for (; i < n; ++i) x[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
      return true;
    case Format::BF16:
      for (; i + 8 <= n; i += 8) {
        auto* p = reinterpret_cast<__m256i*>(x + i);
        _mm256_storeu_si256(p, _mm256_slli_epi32(bf16_rne(_mm256_loadu_si256(p)), 16));
      }
      for (; i < n; ++i) x[i] = bf16_to_fp32(fp32_to_bf16(x[i]));
      return true;
    case Format::TF32:
      for (; i + 8 <= n; i += 8) {
        auto* p = reinterpret_cast<__m256i*>(x + i);
        _mm256_storeu_si256(p, tf32_rne(_mm256_loadu_si256(p)));
      }
      for (; i < n; ++i) x[i] = round_to_tf32(x[i]);
      return true;
    case Format::E5M2: fp8_quantize<false>(x, n, saturate); return true;
    case Format::E4M3: fp8_quantize<true>(x, n, saturate); return true;
    default: return false;
  }
}

}  // namespace engine::cast_kernels
