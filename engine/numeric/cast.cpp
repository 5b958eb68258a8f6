// Bulk casts: run-time choice of the vectorized path, the scalar loops every
// path falls back to, and the counter-based random bits of stochastic rounding.
#include "numeric/cast.h"

#include <cpuid.h>

#include <bit>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "numeric/cast_kernels.h"
#include "numeric/convert.h"
#include "numeric/random_bits.h"

namespace engine {

namespace {

// ---- CPU features ----------------------------------------------------------
// __builtin_cpu_supports also checks that the OS saves the AVX/AVX-512
// register state (XCR0), so a "true" here means the instructions can run.
struct CpuFeatures {
  bool f16c = false;
  bool avx512 = false;
  bool avx512bf16 = false;
  bool avx2_capped = false;  // PL_MAX_CPU_ISA=avx2
  bool bf16_capped = false;  // PL_MAX_CPU_ISA=avx512 (or avx2)
};

// F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does
// not know "f16c". The AVX2 check above it already covers the OS state.
bool cpu_has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  return (c & (1u << 29)) != 0;
}

// PL_MAX_CPU_ISA (any case) caps the ISA the engine's own kernels use, as
// DNNL_MAX_CPU_ISA does for oneDNN, so that another machine's code runs (and
// is measured) on this one: avx2 takes the AVX2 paths on an AVX-512 CPU (an
// AVX2 machine), avx512 (or oneDNN's name avx512_core) keeps AVX-512 but not
// its BF16 instructions (Skylake-SP to Ice Lake: FP32 -> BF16 by integer
// rounding). Other values change nothing. The tests still check every path
// the CPU has (cast_path_supported is not capped).
std::string max_cpu_isa() {
  const char* v = std::getenv("PL_MAX_CPU_ISA");
  std::string s(v ? v : "");
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

CpuFeatures detect_features() {
  CpuFeatures c;
  __builtin_cpu_init();
  c.f16c = __builtin_cpu_supports("avx2") && cpu_has_f16c() && __builtin_cpu_supports("fma");
  c.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  c.avx512bf16 = c.avx512 && __builtin_cpu_supports("avx512bf16");
  const std::string cap = max_cpu_isa();
  c.avx2_capped = cap == "avx2";
  c.bf16_capped = c.avx2_capped || cap == "avx512" || cap == "avx512_core";
  return c;
}

const CpuFeatures& features() {
  static const CpuFeatures kFeatures = detect_features();  // thread-safe static init
  return kFeatures;
}

// ---- stochastic rounding random bits (numeric/random_bits.h) -------------------
using random_bits::random_at;
using random_bits::stream_key;

// TF32 stochastic rounding: the 13 dropped bits plus 13 random bits carry
// into the kept part with probability (dropped / 2^13). FP32 subnormals and
// overflow to inf need no special case since the exponent is FP32's own.
inline float tf32_sr(float x, std::uint32_t random) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return round_to_tf32(x);  // NaN: the RNE path's quiet NaN
  if (a == 0x7F800000u) return x;
  const std::uint32_t r = (a + (random & 0x1FFFu)) & 0xFFFFE000u;
  return std::bit_cast<float>((u & 0x80000000u) | r);
}

// ---- scalar loops ----------------------------------------------------------
// Block formats have no per-value cast (numeric/block.h quantizes blocks).
void require_value_format(Format f) {
  if (is_block_format(f))
    throw std::invalid_argument(std::string(format_name(f)) + " is a block format: cast with numeric/block.h");
}

void scalar_from_f32(Format to, const float* src, void* dst, std::size_t n, bool saturate) {
  switch (to) {
    case Format::FP32:
      if (n) std::memmove(dst, src, n * sizeof(float));
      return;
    case Format::TF32: {
      auto* d = static_cast<float*>(dst);
      for (std::size_t i = 0; i < n; ++i) d[i] = round_to_tf32(src[i]);
      return;
    }
    case Format::BF16: {
      auto* d = static_cast<std::uint16_t*>(dst);
      for (std::size_t i = 0; i < n; ++i) d[i] = fp32_to_bf16(src[i]);
      return;
    }
    case Format::FP16: {
      auto* d = static_cast<std::uint16_t*>(dst);
      for (std::size_t i = 0; i < n; ++i) d[i] = fp32_to_fp16(src[i]);
      return;
    }
    case Format::E5M2: {
      auto* d = static_cast<std::uint8_t*>(dst);
      for (std::size_t i = 0; i < n; ++i) d[i] = fp32_to_e5m2(src[i], saturate);
      return;
    }
    case Format::E4M3: {
      auto* d = static_cast<std::uint8_t*>(dst);
      for (std::size_t i = 0; i < n; ++i) d[i] = fp32_to_e4m3(src[i], saturate);
      return;
    }
    default: {
      // Element formats (one code per byte); block formats throw.
      require_value_format(to);
      auto* d = static_cast<std::uint8_t*>(dst);
      for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<std::uint8_t>(encode(to, src[i], saturate));
      return;
    }
  }
}

void stochastic_from_f32(Format to, const float* src, void* dst, std::size_t n,
                         const CastOptions& opt) {
  const std::uint64_t key = stream_key(opt.seed);
  const std::uint64_t base = opt.index_offset;
  const bool sat = opt.saturate;
  switch (to) {
    case Format::FP32:
      if (n) std::memmove(dst, src, n * sizeof(float));
      return;
    case Format::TF32: {
      auto* d = static_cast<float*>(dst);
      for (std::size_t i = 0; i < n; ++i) d[i] = tf32_sr(src[i], random_at(key, base + i));
      return;
    }
    case Format::BF16: {
      auto* d = static_cast<std::uint16_t*>(dst);
      for (std::size_t i = 0; i < n; ++i) d[i] = fp32_to_bf16_sr(src[i], random_at(key, base + i));
      return;
    }
    case Format::FP16: {
      auto* d = static_cast<std::uint16_t*>(dst);
      for (std::size_t i = 0; i < n; ++i) d[i] = fp32_to_fp16_sr(src[i], random_at(key, base + i));
      return;
    }
    case Format::E5M2: {
      auto* d = static_cast<std::uint8_t*>(dst);
      for (std::size_t i = 0; i < n; ++i)
        d[i] = fp32_to_e5m2_sr(src[i], random_at(key, base + i), sat);
      return;
    }
    case Format::E4M3: {
      auto* d = static_cast<std::uint8_t*>(dst);
      for (std::size_t i = 0; i < n; ++i)
        d[i] = fp32_to_e4m3_sr(src[i], random_at(key, base + i), sat);
      return;
    }
    default: {
      require_value_format(to);
      auto* d = static_cast<std::uint8_t*>(dst);
      for (std::size_t i = 0; i < n; ++i)
        d[i] = static_cast<std::uint8_t>(encode_sr(to, src[i], random_at(key, base + i), sat));
      return;
    }
  }
}

// dst[i] = decode(src[i]) over n storage words of type T.
template <class T, class Decode>
void decode_each(const void* src, float* dst, std::size_t n, Decode decode) {
  const auto* s = static_cast<const T*>(src);
  for (std::size_t i = 0; i < n; ++i) dst[i] = decode(s[i]);
}

void scalar_to_f32(Format from, const void* src, float* dst, std::size_t n) {
  switch (from) {
    case Format::FP32:
    case Format::TF32:
      if (n) std::memmove(dst, src, n * sizeof(float));
      return;
    case Format::BF16: return decode_each<std::uint16_t>(src, dst, n, bf16_to_fp32);
    case Format::FP16: return decode_each<std::uint16_t>(src, dst, n, fp16_to_fp32);
    case Format::E5M2: return decode_each<std::uint8_t>(src, dst, n, e5m2_to_fp32);
    case Format::E4M3: return decode_each<std::uint8_t>(src, dst, n, e4m3_to_fp32);
    default: {
      require_value_format(from);
      const auto* s = static_cast<const std::uint8_t*>(src);
      for (std::size_t i = 0; i < n; ++i) dst[i] = decode(from, s[i]);
      return;
    }
  }
}

void scalar_quantize(Format f, float* x, std::size_t n, bool saturate) {
  switch (f) {
    case Format::FP32: return;
    case Format::TF32:
      for (std::size_t i = 0; i < n; ++i) x[i] = round_to_tf32(x[i]);
      return;
    case Format::BF16:
      for (std::size_t i = 0; i < n; ++i) x[i] = bf16_to_fp32(fp32_to_bf16(x[i]));
      return;
    case Format::FP16:
      for (std::size_t i = 0; i < n; ++i) x[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
      return;
    case Format::E5M2:
      for (std::size_t i = 0; i < n; ++i) x[i] = e5m2_to_fp32(fp32_to_e5m2(x[i], saturate));
      return;
    case Format::E4M3:
      for (std::size_t i = 0; i < n; ++i) x[i] = e4m3_to_fp32(fp32_to_e4m3(x[i], saturate));
      return;
    default:
      require_value_format(f);
      for (std::size_t i = 0; i < n; ++i) x[i] = decode(f, encode(f, x[i], saturate));
      return;
  }
}

void stochastic_quantize(Format f, float* x, std::size_t n, const CastOptions& opt) {
  if (f == Format::FP32) return;
  require_value_format(f);
  const std::uint64_t key = stream_key(opt.seed);
  const std::uint64_t base = opt.index_offset;
  const bool sat = opt.saturate;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t r = random_at(key, base + i);
    switch (f) {
      case Format::FP32: break;
      case Format::TF32: x[i] = tf32_sr(x[i], r); break;
      case Format::BF16: x[i] = bf16_to_fp32(fp32_to_bf16_sr(x[i], r)); break;
      case Format::FP16: x[i] = fp16_to_fp32(fp32_to_fp16_sr(x[i], r)); break;
      case Format::E5M2: x[i] = e5m2_to_fp32(fp32_to_e5m2_sr(x[i], r, sat)); break;
      case Format::E4M3: x[i] = e4m3_to_fp32(fp32_to_e4m3_sr(x[i], r, sat)); break;
      default: x[i] = decode(f, encode_sr(f, x[i], r, sat)); break;
    }
  }
}

}  // namespace

const char* cast_path_name(CastPath p) {
  switch (p) {
    case CastPath::Scalar: return "scalar";
    case CastPath::F16C: return "f16c";
    case CastPath::AVX512: return "avx512";
    case CastPath::AVX512BF16: return "avx512bf16";
  }
  return "scalar";
}

bool cast_path_supported(CastPath p) {
  switch (p) {
    case CastPath::Scalar: return true;
    case CastPath::F16C: return features().f16c;
    case CastPath::AVX512: return features().avx512;
    case CastPath::AVX512BF16: return features().avx512bf16;
  }
  return false;
}

bool cpu_runs_avx512() { return features().avx512 && !features().avx2_capped; }

CastPath best_cast_path() {
  if (features().avx512bf16 && !features().bf16_capped) return CastPath::AVX512BF16;
  if (cpu_runs_avx512()) return CastPath::AVX512;
  if (features().f16c) return CastPath::F16C;
  return CastPath::Scalar;
}

bool cast_path_covers(CastPath p, Format f, bool from_f32) {
  switch (p) {
    case CastPath::Scalar: return true;
    case CastPath::F16C: return cast_kernels::f16c_covers(f, from_f32);
    case CastPath::AVX512:
    case CastPath::AVX512BF16: return cast_kernels::avx512_covers(f, from_f32);
  }
  return false;
}

std::uint32_t stochastic_bits(std::uint64_t seed, std::uint64_t index) {
  return random_at(stream_key(seed), index);
}

void cast_from_f32_path(CastPath p, Format to, const float* src, void* dst, std::size_t n,
                        const CastOptions& opt) {
  if (opt.stochastic) {
    stochastic_from_f32(to, src, dst, n, opt);
    return;
  }
  bool done = false;
  switch (p) {
    case CastPath::Scalar: break;
    case CastPath::F16C: done = cast_kernels::f16c_from_f32(to, src, dst, n, opt.saturate); break;
    case CastPath::AVX512:
      done = cast_kernels::avx512_from_f32(to, src, dst, n, opt.saturate, false);
      break;
    case CastPath::AVX512BF16:
      done = cast_kernels::avx512_from_f32(to, src, dst, n, opt.saturate, true);
      break;
  }
  if (!done) scalar_from_f32(to, src, dst, n, opt.saturate);
}

void cast_to_f32_path(CastPath p, Format from, const void* src, float* dst, std::size_t n) {
  bool done = false;
  switch (p) {
    case CastPath::Scalar: break;
    case CastPath::F16C: done = cast_kernels::f16c_to_f32(from, src, dst, n); break;
    case CastPath::AVX512:
    case CastPath::AVX512BF16: done = cast_kernels::avx512_to_f32(from, src, dst, n); break;
  }
  if (!done) scalar_to_f32(from, src, dst, n);
}

void quantize_inplace_path(CastPath p, Format f, float* x, std::size_t n, const CastOptions& opt) {
  if (f == Format::FP32) return;
  if (opt.stochastic) {
    stochastic_quantize(f, x, n, opt);
    return;
  }
  bool done = false;
  switch (p) {
    case CastPath::Scalar: break;
    case CastPath::F16C: done = cast_kernels::f16c_quantize(f, x, n, opt.saturate); break;
    case CastPath::AVX512:
    case CastPath::AVX512BF16: done = cast_kernels::avx512_quantize(f, x, n, opt.saturate); break;
  }
  if (!done) scalar_quantize(f, x, n, opt.saturate);
}

bool scale_amax_cast_path(CastPath p, Format from, const void* src, float scale, Format to, void* dst, std::size_t n,
                          const CastOptions& opt, std::uint32_t* amax_bits) {
  if (opt.stochastic || p == CastPath::Scalar) return false;
  if (p == CastPath::F16C) return cast_kernels::f16c_scale_amax_cast(from, src, scale, to, dst, n, opt.saturate, amax_bits);
  return cast_kernels::avx512_scale_amax_cast(from, src, scale, to, dst, n, opt.saturate, amax_bits);
}

bool scale_amax_cast(Format from, const void* src, float scale, Format to, void* dst, std::size_t n,
                     const CastOptions& opt, std::uint32_t* amax_bits) {
  return scale_amax_cast_path(best_cast_path(), from, src, scale, to, dst, n, opt, amax_bits);
}

void cast_from_f32(Format to, const float* src, void* dst, std::size_t n, const CastOptions& opt) {
  cast_from_f32_path(best_cast_path(), to, src, dst, n, opt);
}

void cast_to_f32(Format from, const void* src, float* dst, std::size_t n) {
  cast_to_f32_path(best_cast_path(), from, src, dst, n);
}

void quantize_inplace(Format f, float* x, std::size_t n, const CastOptions& opt) {
  quantize_inplace_path(best_cast_path(), f, x, n, opt);
}

}  // namespace engine
