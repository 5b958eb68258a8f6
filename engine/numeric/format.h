// Number formats of Precision Lab: the one runtime enum and its properties.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace engine {

// The six formats of DESIGN.md. Runtime enum with one dispatch point
// (format_info) because the app changes precision while it runs.
enum class Format : std::uint8_t {
  FP32 = 0,
  TF32,   // compute-only: 19 significant bits in a 32-bit container
  BF16,
  FP16,
  E5M2,   // FP8, IEEE-like: has inf
  E4M3,   // FP8, OCP E4M3FN: no inf, NaN = S.1111.111
};
inline constexpr int kFormatCount = 6;
inline constexpr Format kAllFormats[kFormatCount] = {Format::FP32, Format::TF32, Format::BF16,
                                                     Format::FP16, Format::E5M2, Format::E4M3};

struct FormatInfo {
  const char* name;        // "FP32", "TF32", "BF16", "FP16", "FP8-E5M2", "FP8-E4M3"
  int bits;                // significant encoding bits (TF32: 19)
  int exp_bits;
  int man_bits;            // explicit mantissa (fraction) bits
  int bias;
  int storage_bytes;       // bytes one element occupies in memory (TF32: 4)
  double max;              // largest finite value
  double min_normal;
  double min_subnormal;
  double epsilon;          // 2^-man_bits: distance from 1 to the next value
  bool has_inf;
};

// Thread-safe, constant data.
const FormatInfo& format_info(Format f);
inline std::size_t storage_bytes(Format f) { return static_cast<std::size_t>(format_info(f).storage_bytes); }
inline const char* format_name(Format f) { return format_info(f).name; }

// Accepts the display names and the lower-case config spellings
// ("fp32", "tf32", "bf16", "fp16", "fp8-e5m2"/"e5m2", "fp8-e4m3"/"e4m3").
std::optional<Format> parse_format(std::string_view s);
// The spelling used in config files and CSV: "fp32", "tf32", "bf16", "fp16", "e5m2", "e4m3".
const char* format_key(Format f);

}  // namespace engine
