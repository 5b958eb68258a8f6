// Internal: the ISA-specific bulk cast kernels behind cast.h. Each lives in a
// file compiled with its own -m flags (sources.cmake) and may only be called
// after cast_path_supported() said the CPU has that ISA.
#pragma once

#include <cstddef>
#include <cstdint>

#include "numeric/format.h"

namespace engine::cast_kernels {

// Each returns false, doing nothing, when it has no kernel for the format in
// that direction; the caller then runs the scalar loop. Round-to-nearest-even
// only (stochastic casts always take the scalar loop).
bool f16c_covers(Format f, bool from_f32);
bool f16c_from_f32(Format to, const float* src, void* dst, std::size_t n, bool saturate);
bool f16c_to_f32(Format from, const void* src, float* dst, std::size_t n);
bool f16c_quantize(Format f, float* x, std::size_t n, bool saturate);
// As avx512_scale_amax_cast, 8 lanes at a time.
bool f16c_scale_amax_cast(Format from, const void* src, float scale, Format to, void* dst, std::size_t n,
                          bool saturate, std::uint32_t* amax_bits);

// use_bf16_insn: FP32 -> BF16 through VCVTNEPS2BF16 (AVX512-BF16 path).
bool avx512_covers(Format f, bool from_f32);
bool avx512_from_f32(Format to, const float* src, void* dst, std::size_t n, bool saturate,
                     bool use_bf16_insn);
bool avx512_to_f32(Format from, const void* src, float* dst, std::size_t n);
bool avx512_quantize(Format f, float* x, std::size_t n, bool saturate);
// E4M3/E5M2 codes of x[i] * scale (no multiply for scale 1), RNE, with x
// the FP32 values or BF16/FP16 codes (`from`) at src, and the max of the
// unscaled |x[i]| as FP32 bit patterns (sign cleared) in *amax_bits; false
// for other formats.
bool avx512_scale_amax_cast(Format from, const void* src, float scale, Format to, void* dst, std::size_t n,
                            bool saturate, std::uint32_t* amax_bits);

}  // namespace engine::cast_kernels
