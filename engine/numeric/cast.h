// Bulk casts between FP32 and stored formats, with vectorized paths chosen
// at run time from the CPU's features. Every path equals the scalar
// reference of convert.h bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "numeric/format.h"

namespace engine {

enum class CastPath : std::uint8_t {
  Scalar = 0,
  F16C,        // AVX2 + F16C: FP16 <-> FP32 (hardware RNE); BF16/TF32/FP8 with AVX2 integer code
  AVX512,      // AVX-512F/BW integer bit manipulation for every format
  AVX512BF16,  // AVX512-BF16 VCVTNEPS2BF16 for FP32 -> BF16
};
const char* cast_path_name(CastPath p);

// Paths this CPU can run (Scalar always), and the one used by default.
bool cast_path_supported(CastPath p);
CastPath best_cast_path();
// The engine's own AVX-512 kernels run: the CPU has AVX-512 F/BW/VL/DQ (with
// the OS saving its state) and PL_MAX_CPU_ISA=avx2 does not cap them.
bool cpu_runs_avx512();

struct CastOptions {
  bool saturate = false;          // see convert.h
  bool stochastic = false;        // stochastic rounding, seeded
  std::uint64_t seed = 0;         // with stochastic: element i uses a counter-based
                                  // hash of (seed, i), so results do not depend on
                                  // the path or the thread split
  std::uint64_t index_offset = 0; // with stochastic: element i of this call uses index
                                  // index_offset + i; a caller that splits one tensor
                                  // into chunks passes each chunk's start here
};

// dst holds n elements of format `to` in its storage width (FP32/TF32: float).
// Safe to call from any thread; no allocation.
void cast_from_f32(Format to, const float* src, void* dst, std::size_t n,
                   const CastOptions& opt = {});
void cast_to_f32(Format from, const void* src, float* dst, std::size_t n);
// Round FP32 values in place to the values representable in f (kept in FP32).
void quantize_inplace(Format f, float* x, std::size_t n, const CastOptions& opt = {});

// FP8 delayed scaling's cast in one pass: dst = the E4M3/E5M2 codes of
// x[i] * scale (the FP32 product, then cast_from_f32's rounding), where x
// is src's FP32 values (from == FP32) or the values of its BF16/FP16 codes,
// and *amax_bits = the largest |x[i]| as an FP32 bit pattern with the sign
// cleared (so NaN > inf > finite; 0 for n == 0). Equal to decoding,
// multiplying, taking the max and casting separately. Returns false, doing
// nothing, where no fused kernel applies (another format, stochastic
// rounding, a path without one); the caller then takes those steps itself.
bool scale_amax_cast(Format from, const void* src, float scale, Format to, void* dst, std::size_t n,
                     const CastOptions& opt, std::uint32_t* amax_bits);

// Same, forcing one path (tests and benchmarks). Falls back to Scalar for a
// (format, direction) the path does not cover; precondition: supported(p).
void cast_from_f32_path(CastPath p, Format to, const float* src, void* dst, std::size_t n,
                        const CastOptions& opt = {});
void cast_to_f32_path(CastPath p, Format from, const void* src, float* dst, std::size_t n);
void quantize_inplace_path(CastPath p, Format f, float* x, std::size_t n,
                           const CastOptions& opt = {});
bool scale_amax_cast_path(CastPath p, Format from, const void* src, float scale, Format to, void* dst, std::size_t n,
                          const CastOptions& opt, std::uint32_t* amax_bits);
// Whether path p has its own kernel for (f, direction); false means it runs
// the scalar loop for that case (benchmarks report it).
bool cast_path_covers(CastPath p, Format f, bool from_f32);

// The 32-bit random number element `index` uses for stochastic rounding.
std::uint32_t stochastic_bits(std::uint64_t seed, std::uint64_t index);

}  // namespace engine
