// The property table of the six number formats and their names.
#include "numeric/format.h"

#include <cctype>
#include <string>

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

// Indexed by Format. E4M3 (OCP E4M3FN) gives up inf and uses the top
// exponent for finite values: only S.1111.111 is NaN, so its largest finite
// value is 1.75 * 2^8 = 448 rather than the IEEE-like 240.
constexpr FormatInfo kInfo[kFormatCount] = {
    make_ieee("FP32", 32, 8, 23, 4),
    make_ieee("TF32", 19, 8, 10, 4),
    make_ieee("BF16", 16, 8, 7, 2),
    make_ieee("FP16", 16, 5, 10, 2),
    make_ieee("FP8-E5M2", 8, 5, 2, 1),
    FormatInfo{"FP8-E4M3", 8, 4, 3, 7, 1, 448.0, pow2(-6), pow2(-9), pow2(-3), false},
};

static_assert(kInfo[0].max == 3.4028234663852886e38);
static_assert(kInfo[3].max == 65504.0);
static_assert(kInfo[4].max == 57344.0);
static_assert(kInfo[2].min_subnormal == pow2(-133));

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
  return std::nullopt;
}

}  // namespace engine
