// The property table of the number formats and their names.
#include "numeric/format.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstring>
#include <limits>
#include <string>

#include "numeric/clones.h"

namespace engine {

namespace {

// 2^e as a double, exact for the exponents used here.
constexpr double pow2(int e) {
  double r = 1.0;
  if (e >= 0) {
    for (int i = 0; i < e; ++i) r *= 2.0;
  } else {
    for (int i = 0; i < -e; ++i) r *= 0.5;
  }
  return r;
}

// Largest finite value of an IEEE-like format whose top exponent is reserved
// for inf/NaN: (2 - 2^-m) * 2^(2^(e-1) - 1).
constexpr double ieee_max(int exp_bits, int man_bits) {
  const int emax = (1 << (exp_bits - 1)) - 1;
  return (2.0 - pow2(-man_bits)) * pow2(emax);
}

constexpr FormatInfo make_ieee(const char* name, int bits, int exp_bits, int man_bits,
                               int storage_bytes) {
  const int bias = (1 << (exp_bits - 1)) - 1;
  return FormatInfo{name,
                    bits,
                    exp_bits,
                    man_bits,
                    bias,
                    storage_bytes,
                    ieee_max(exp_bits, man_bits),
                    pow2(1 - bias),
                    pow2(1 - bias - man_bits),
                    pow2(-man_bits),
                    true};
}

// An OCP MX element format: every exponent holds finite values (no inf, no
// NaN), so the largest value is (2 - 2^-m) * 2^(2^e - 1 - bias).
constexpr FormatInfo make_mx_element(const char* name, int bits, int exp_bits, int man_bits) {
  const int bias = (1 << (exp_bits - 1)) - 1;
  const int emax = (1 << exp_bits) - 1 - bias;
  return FormatInfo{name,           bits,          exp_bits,       man_bits,       bias, 1,
                    (2.0 - pow2(-man_bits)) * pow2(emax), pow2(1 - bias), pow2(1 - bias - man_bits),
                    pow2(-man_bits), false,         false};
}

// A block format described by its element format (see format.h).
constexpr FormatInfo make_block(const char* name, FormatInfo element) {
  element.name = name;
  element.storage_bytes = 0;
  element.has_inf = false;
  return element;
}

constexpr FormatInfo kE4M3{"FP8-E4M3", 8, 4, 3, 7, 1, 448.0, pow2(-6), pow2(-9), pow2(-3), false};

// Indexed by Format. E4M3 (OCP E4M3FN) gives up inf and uses the top
// exponent for finite values: only S.1111.111 is NaN, so its largest finite
// value is 1.75 * 2^8 = 448 rather than the IEEE-like 240.
constexpr FormatInfo kInfo[kFormatEnumCount] = {
    make_ieee("FP32", 32, 8, 23, 4),
    make_ieee("TF32", 19, 8, 10, 4),
    make_ieee("BF16", 16, 8, 7, 2),
    make_ieee("FP16", 16, 5, 10, 2),
    make_ieee("FP8-E5M2", 8, 5, 2, 1),
    kE4M3,
    make_mx_element("FP6-E3M2", 6, 3, 2),
    make_mx_element("FP6-E2M3", 6, 2, 3),
    make_mx_element("FP4-E2M1", 4, 2, 1),
    // E8M0: an unsigned exponent, bias 127, codes 0..254 = 2^-127..2^127, 0xFF NaN.
    FormatInfo{"E8M0", 8, 8, 0, 127, 1, pow2(127), pow2(-127), pow2(-127), 1.0, false, true},
    make_block("MXFP8", kE4M3),
    make_block("MXFP8-E5M2", make_ieee("FP8-E5M2", 8, 5, 2, 1)),
    make_block("MXFP6", make_mx_element("FP6-E2M3", 6, 2, 3)),
    make_block("MXFP6-E3M2", make_mx_element("FP6-E3M2", 6, 3, 2)),
    make_block("MXFP4", make_mx_element("FP4-E2M1", 4, 2, 1)),
    make_block("NVFP4", make_mx_element("FP4-E2M1", 4, 2, 1)),
};

static_assert(kInfo[0].max == 3.4028234663852886e38);
static_assert(kInfo[3].max == 65504.0);
static_assert(kInfo[4].max == 57344.0);
static_assert(kInfo[2].min_subnormal == pow2(-133));
static_assert(kInfo[static_cast<int>(Format::E3M2)].max == 28.0);
static_assert(kInfo[static_cast<int>(Format::E2M3)].max == 7.5);
static_assert(kInfo[static_cast<int>(Format::E2M1)].max == 6.0);
static_assert(kInfo[static_cast<int>(Format::E3M2)].min_subnormal == pow2(-4));
static_assert(kInfo[static_cast<int>(Format::E2M3)].min_subnormal == pow2(-3));
static_assert(kInfo[static_cast<int>(Format::E2M1)].min_subnormal == 0.5);

}  // namespace

const FormatInfo& format_info(Format f) { return kInfo[static_cast<int>(f)]; }

const char* format_key(Format f) {
  switch (f) {
    case Format::FP32: return "fp32";
    case Format::TF32: return "tf32";
    case Format::BF16: return "bf16";
    case Format::FP16: return "fp16";
    case Format::E5M2: return "e5m2";
    case Format::E4M3: return "e4m3";
    case Format::E3M2: return "e3m2";
    case Format::E2M3: return "e2m3";
    case Format::E2M1: return "e2m1";
    case Format::E8M0: return "e8m0";
    case Format::MXFP8: return "mxfp8";
    case Format::MXFP8_E5M2: return "mxfp8-e5m2";
    case Format::MXFP6: return "mxfp6";
    case Format::MXFP6_E3M2: return "mxfp6-e3m2";
    case Format::MXFP4: return "mxfp4";
    case Format::NVFP4: return "nvfp4";
  }
  return "fp32";
}

std::optional<Format> parse_format(std::string_view s) {
  // Case-insensitive, so the display names ("FP8-E4M3") and the config keys
  // ("e4m3") both parse; '_' is accepted for '-' ("fp8_e4m3").
  std::string key;
  key.reserve(s.size());
  for (char c : s) {
    const char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    key.push_back(lower == '_' ? '-' : lower);
  }
  if (key == "fp32") return Format::FP32;
  if (key == "tf32") return Format::TF32;
  if (key == "bf16") return Format::BF16;
  if (key == "fp16") return Format::FP16;
  if (key == "e5m2" || key == "fp8-e5m2") return Format::E5M2;
  if (key == "e4m3" || key == "fp8-e4m3") return Format::E4M3;
  if (key == "e3m2" || key == "fp6-e3m2") return Format::E3M2;
  if (key == "e2m3" || key == "fp6-e2m3") return Format::E2M3;
  if (key == "e2m1" || key == "fp4-e2m1") return Format::E2M1;
  if (key == "e8m0") return Format::E8M0;
  if (key == "mxfp8" || key == "mxfp8-e4m3") return Format::MXFP8;
  if (key == "mxfp8-e5m2") return Format::MXFP8_E5M2;
  if (key == "mxfp6" || key == "mxfp6-e2m3") return Format::MXFP6;
  if (key == "mxfp6-e3m2") return Format::MXFP6_E3M2;
  if (key == "mxfp4") return Format::MXFP4;
  if (key == "nvfp4") return Format::NVFP4;
  return std::nullopt;
}

float amax_from_bits(std::uint32_t m) {
  if (m > 0x7F800000u) return std::numeric_limits<float>::quiet_NaN();
  return std::bit_cast<float>(m);
}

PL_CPU_CLONES std::uint32_t scale_amax_bits(const float* x, float scale, float* out, std::int64_t n) {
  std::uint32_t m = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    std::uint32_t u;
    std::memcpy(&u, &v, 4);
    m = std::max(m, u & 0x7FFFFFFFu);
    out[i] = v * scale;
  }
  return m;
}

}  // namespace engine
