// Block-scaled formats: OCP Microscaling v1.0 (MXFP8, MXFP6, MXFP4: 32
// elements sharing one E8M0 power-of-two scale) and NVIDIA's NVFP4 (16 E2M1
// elements sharing one E4M3 scale, plus one FP32 scale per tensor).
//
// MX (OCP MX v1.0 section 6.3, as Microsoft's microxcaling reference
// computes it): a block's shared exponent is
//     X = floor(log2(amax)) - emax(element)        (amax = max |v| of the block)
// clamped to [-127, 127] (amax 0 gives -127); the scale is 2^X, stored as
// the E8M0 code X + 127. Each element is v / 2^X rounded to the element
// format, round-to-nearest-even (or stochastically), saturating at the
// element's max. A block holding an inf or NaN gets the NaN scale 0xFF:
// every value of that block decodes to NaN.
//
// NVFP4 (Transformer Engine's kernels, f32 arithmetic throughout):
//     S_enc = 448 * 6 / amax_tensor   (clamped to FLT_MAX; 1 when amax_tensor is 0)
//     s_b   = E4M3(min(amax_block * (S_enc * (1/6)), FLT_MAX))   (RNE, saturating)
//     enc_b = min(1 / (s_b * (1 / S_enc)), FLT_MAX)
//     e_i   = E2M1(v_i * enc_b)                                   (RNE or stochastic, saturating)
// and the value is e_i * s_b / S_enc. Deviations, both to keep an overflow
// visible to the loss scaler and the divergence check: amax_tensor is taken
// over finite values only, and a block holding an inf or NaN gets the E4M3
// NaN scale (0x7F) and decodes to NaN (Transformer Engine saturates it).
//
// Blocks run along one axis of a [rows x cols] row-major matrix: the GEMM's
// reduction dimension (BlockLayout::Rows for an operand stored [m x k],
// Columns for one stored [k x n]); NVFP4 weights use 16 x 16 tiles so the
// forward and the transposed backward GEMM see the same values. A block cut
// short by the matrix edge is a block of fewer elements.
//
// Every dequantized value e * 2^X (MX) and e * s_b (NVFP4) is exact in FP32
// and, unless its block scale is tiny, a normal BF16 value too (the native
// BF16 dot product reads BF16 subnormals as zero): below 2^-117 (MXFP8),
// 2^-110 (MXFP8-E5M2), 2^-123 (MXFP6), 2^-122 (MXFP6-E3M2) or 2^-125
// (MXFP4) BlockQuantized::bf16_exact is false and the GEMM runs on f32
// operands. NVFP4's values are at least 2^-10. So the CPU's GEMMs on these
// values are exact (a product below 2^-126 aside, which the native BF16
// path flushes), and NVFP4's 1/S_enc goes into the GEMM's f32 alpha.
#pragma once

#include <cstdint>
#include <vector>

#include "numeric/format.h"

namespace engine {

struct BlockInfo {
  Format element;           // E4M3, E5M2, E2M3, E3M2, E2M1
  Format scale;             // E8M0 (MX) or E4M3 (NVFP4)
  int block;                // elements per block: 32 (MX) or 16 (NVFP4)
  bool tensor_scale;        // NVFP4: one FP32 scale per tensor as well
  int emax;                 // floor(log2(element max)): MX's shared-exponent offset
  double bits_per_element;  // element bits + scale bits / block: 8.25, 6.25, 4.25, 4.5
};
// Throws std::invalid_argument when f is not a block format.
const BlockInfo& block_info(Format f);

enum class BlockLayout : std::uint8_t {
  Rows,     // consecutive elements along each row
  Columns,  // consecutive rows down each column
  Tiles,    // block x block square tiles, one scale per tile
};

// Bytes a device holds for a [rows x cols] matrix in format f: packed
// elements, one scale byte per block, and NVFP4's 4-byte tensor scale.
std::int64_t block_bytes(Format f, std::int64_t rows, std::int64_t cols, BlockLayout layout);

struct BlockRounding {
  bool stochastic = false;  // elements only; scales are always deterministic
  std::uint64_t seed = 0;   // element (r, c) uses stochastic_bits(seed, r * cols + c)
};

// ---- scalar reference ---------------------------------------------------------
// The E8M0 scale code of an MX block whose largest magnitude is amax.
std::uint8_t mx_scale_code(float amax, Format element);
// NVFP4's S_enc for a tensor whose largest finite magnitude is amax.
float nvfp4_tensor_scale(float amax);
// NVFP4's E4M3 block scale code for a block's amax under S_enc.
std::uint8_t nvfp4_scale_code(float block_amax, float s_enc);
// NVFP4's encode multiplier enc_b for a block scale code.
float nvfp4_block_encode(std::uint8_t scale_code, float s_enc);

// A matrix in a block format, as codes (one element code per byte,
// row-major) and scale codes (the block grid in row-major order).
struct BlockEncoding {
  Format format = Format::MXFP8;
  BlockLayout layout = BlockLayout::Rows;
  std::int64_t rows = 0, cols = 0;
  float tensor_scale = 1.0f;  // NVFP4: S_enc; MX: 1
  std::vector<std::uint8_t> scales;
  std::vector<std::uint8_t> codes;
  // Blocks in each direction and the block of element (r, c).
  std::int64_t block_rows() const;
  std::int64_t block_cols() const;
  std::int64_t block_of(std::int64_t r, std::int64_t c) const;
  // The value of element (r, c): element * scale (/ S_enc when with_tensor_scale).
  float value(std::int64_t r, std::int64_t c, bool with_tensor_scale = true) const;
};

// The reference encoder: one block at a time, through convert.h's scalar
// conversions. Tiles are for NVFP4 only (throws std::invalid_argument for MX).
BlockEncoding block_encode_reference(Format f, const float* x, std::int64_t rows, std::int64_t cols,
                                     BlockLayout layout, const BlockRounding& rounding = {});
// out[r * cols + c] = e.value(r, c, with_tensor_scale).
void block_decode(const BlockEncoding& e, float* out, bool with_tensor_scale);

// ---- the engine's path ----------------------------------------------------------
struct BlockQuantized {
  float tensor_decode = 1.0f;  // NVFP4: 1 / S_enc, for the GEMM's alpha; MX: 1
  bool bf16_exact = true;      // every value of dst is exactly a normal BF16 value (or zero)
};
// dst[r * cols + c] = the quantized value of src (same layout), without
// NVFP4's tensor scale: bit for bit block_decode(block_encode_reference(...),
// dst, false). Vectorized (AVX-512 / AVX2 clones) for round-to-nearest; the
// stochastic path rounds element by element with convert.h's encoders. dst
// may alias src. Any thread; uses
// the engine's OpenMP threads for large matrices.
BlockQuantized block_quantize(Format f, const float* src, float* dst, std::int64_t rows, std::int64_t cols,
                              BlockLayout layout, const BlockRounding& rounding = {});

}  // namespace engine
