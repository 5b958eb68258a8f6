// Number formats of Precision Lab: the one runtime enum and its properties.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace engine {

// The formats of docs/numerics.md "Number formats". Runtime enum with one dispatch point
// (format_info) because the app changes precision while it runs. Three
// families:
//  - tensor formats (kAllFormats): a Tensor can be stored in them, and a
//    layer can compute, store and accumulate in them;
//  - element and scale formats of OCP Microscaling (kElementFormats): single
//    values with a scalar codec (convert.h) and a one-code-per-byte bulk
//    cast, shown by the explorer and `formats`, but no layer format on their
//    own (without a block scale FP4's range is 0.5..6);
//  - block-scaled formats (kBlockFormats, numeric/block.h): the compute and
//    gradient formats of GEMM layers, never a tensor's storage.
enum class Format : std::uint8_t {
  FP32 = 0,
  TF32,   // compute-only: 19 significant bits in a 32-bit container
  BF16,
  FP16,
  E5M2,   // FP8, IEEE-like: has inf
  E4M3,   // FP8, OCP E4M3FN: no inf, NaN = S.1111.111
  E3M2,   // FP6 (OCP MX): no inf, no NaN, max 28
  E2M3,   // FP6 (OCP MX): no inf, no NaN, max 7.5
  E2M1,   // FP4 (OCP MX): no inf, no NaN, max 6
  E8M0,   // block scale (OCP MX): 2^-127..2^127, 0xFF = NaN, no zero, no sign
  MXFP8,       // 32 x E4M3 + one E8M0 scale
  MXFP8_E5M2,  // 32 x E5M2 + one E8M0 scale
  MXFP6,       // 32 x E2M3 + one E8M0 scale
  MXFP6_E3M2,  // 32 x E3M2 + one E8M0 scale
  MXFP4,       // 32 x E2M1 + one E8M0 scale
  NVFP4,       // 16 x E2M1 + one E4M3 scale, and one FP32 scale per tensor
};
// The tensor formats (kFormatCount of them: the explorer rows, the
// exhaustive cast tests and every per-tensor path iterate these).
inline constexpr int kFormatCount = 6;
inline constexpr Format kAllFormats[kFormatCount] = {Format::FP32, Format::TF32, Format::BF16,
                                                     Format::FP16, Format::E5M2, Format::E4M3};
inline constexpr int kElementFormatCount = 4;
inline constexpr Format kElementFormats[kElementFormatCount] = {Format::E3M2, Format::E2M3, Format::E2M1,
                                                                Format::E8M0};
inline constexpr int kBlockFormatCount = 6;
inline constexpr Format kBlockFormats[kBlockFormatCount] = {Format::MXFP8, Format::MXFP8_E5M2, Format::MXFP6,
                                                            Format::MXFP6_E3M2, Format::MXFP4, Format::NVFP4};
// Every value of the enum (format_info is defined for each).
inline constexpr int kFormatEnumCount = kFormatCount + kElementFormatCount + kBlockFormatCount;

inline constexpr bool is_element_format(Format f) { return f >= Format::E3M2 && f <= Format::E8M0; }
inline constexpr bool is_block_format(Format f) { return f >= Format::MXFP8; }
// A format a Tensor can hold (one of kAllFormats).
inline constexpr bool is_tensor_format(Format f) { return f <= Format::E4M3; }
// The 16-bit float formats, whose codes the backends' *16 ops take.
inline constexpr bool is_half_format(Format f) { return f == Format::FP16 || f == Format::BF16; }
// The 8-bit float formats (E4M3, E5M2).
inline constexpr bool is_fp8(Format f) { return f == Format::E4M3 || f == Format::E5M2; }

// For a block format the fields describe its element format (bits, exponent,
// mantissa, range) except name, storage_bytes (0: never a tensor's storage)
// and has_inf; numeric/block.h has the block layout and bits per element.
struct FormatInfo {
  const char* name;        // "FP32", "TF32", "BF16", "FP16", "FP8-E5M2", "FP8-E4M3", "FP4-E2M1", "MXFP8", ...
  int bits;                // significant encoding bits (TF32: 19; FP6: 6; FP4: 4)
  int exp_bits;
  int man_bits;            // explicit mantissa (fraction) bits
  int bias;
  int storage_bytes;       // bytes one element occupies in memory (TF32: 4; FP6/FP4 codes: 1 unpacked)
  double max;              // largest finite value
  double min_normal;       // E8M0: 2^-127 (its smallest value)
  double min_subnormal;    // E8M0: 2^-127 (it has no subnormals)
  double epsilon;          // 2^-man_bits: distance from 1 to the next value (E8M0: 1, the gap from 1 to 2)
  bool has_inf;
  bool has_nan = true;     // FP6 and FP4 have no NaN
};

// Thread-safe, constant data.
const FormatInfo& format_info(Format f);
inline std::size_t storage_bytes(Format f) { return static_cast<std::size_t>(format_info(f).storage_bytes); }
inline const char* format_name(Format f) { return format_info(f).name; }

// Accepts the display names and the lower-case config spellings
// ("fp32", "tf32", "bf16", "fp16", "fp8-e5m2"/"e5m2", "fp8-e4m3"/"e4m3",
// "fp6-e3m2"/"e3m2", "fp6-e2m3"/"e2m3", "fp4-e2m1"/"e2m1", "e8m0", "mxfp8",
// "mxfp8-e5m2", "mxfp6", "mxfp6-e3m2", "mxfp4", "nvfp4"; also
// "mxfp8-e4m3" and "mxfp6-e2m3").
std::optional<Format> parse_format(std::string_view s);
// The spelling used in config files and CSV: "fp32", "tf32", "bf16", "fp16",
// "e5m2", "e4m3", "e3m2", "e2m3", "e2m1", "e8m0", "mxfp8", "mxfp8-e5m2",
// "mxfp6", "mxfp6-e3m2", "mxfp4", "nvfp4".
const char* format_key(Format f);

// FP8 scaling's pass over one range, for a caller that splits a tensor
// itself (the backends' amax and fused casts):
// out[i] = x[i] * scale on the calling thread, returning max |x_i| as a bit
// pattern (NaN patterns order above inf's, so partial results combine with
// max in any order); amax_from_bits turns that pattern into the amax (NaN
// when above inf's).
std::uint32_t scale_amax_bits(const float* x, float scale, float* out, std::int64_t n);
float amax_from_bits(std::uint32_t m);

}  // namespace engine
