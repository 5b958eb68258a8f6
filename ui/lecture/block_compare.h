// Block comparison: one short run of values quantized two ways — in a
// block-scaled format (engine::block_encode_reference: a shared scale per
// block of 32, or 16 for NVFP4) and under ONE per-tensor scale in the same
// element format (Transformer Engine's current scaling: scale = element max
// / amax, a saturating cast of value * scale, divided by the scale again,
// through engine::encode / decode) — with every element's code, value and
// error, and the summaries the block view shows, and the words it says them in. No float format code of
// its own: every number comes from the engine.
#pragma once

#include <QString>

#include <cstdint>
#include <vector>

#include "numeric/format.h"

// One element after quantization.
struct QuantizedElement {
  std::uint32_t code = 0;  // the element's code, right-aligned (FP4: 4 bits)
  float value = 0.0f;      // what it decodes to, scales applied
  double relError = 0.0;   // |value - input| / |input|; 0 for an input of 0; NaN when not finite
  bool flushed = false;    // a nonzero input that came out 0
};

// A block's shared scale: its code in the scale format (E8M0 for MX, E4M3
// for NVFP4) and its value.
struct SharedScale {
  std::uint8_t code = 0;
  float value = 0.0f;
  int first = 0;  // the elements it covers: [first, first + count)
  int count = 0;
};

struct ErrorSummary {
  double rmsRelError = 0.0;  // sqrt(mean(relError^2)) over nonzero finite inputs (0 when there are none)
  int nonzero = 0;           // nonzero finite inputs
  int flushed = 0;           // of those, how many came out 0
};

struct BlockComparison {
  engine::Format format = engine::Format::MXFP8;  // the block format
  engine::Format element = engine::Format::E4M3;  // its element format
  engine::Format scaleFormat = engine::Format::E8M0;
  int blockSize = 32;
  std::vector<float> input;

  // Block-scaled side: one scale per block (at most two blocks here).
  std::vector<SharedScale> scales;
  bool hasTensorScale = false;  // NVFP4
  float tensorScale = 1.0f;     // NVFP4's S_enc: value = element * block scale / S_enc
  std::vector<QuantizedElement> block;

  // Per-tensor side: one scale for all the values.
  double amax = 0.0;           // largest finite |value| (of the tensor, when one is given)
  float perTensorScale = 1.0f; // element max / amax (1 when amax is 0)
  std::vector<QuantizedElement> tensor;

  int blocks() const { return static_cast<int>(scales.size()); }
  // Over all elements (blockIndex < 0) or one block's.
  ErrorSummary summary(bool perTensor, int blockIndex = -1) const;
};

// Quantizes `values` (at most two blocks' worth are used) both ways.
// `tensorAmax`: the largest |value| of the whole tensor the values come
// from (a live layer's weight or gradient), when it is larger than theirs:
// the per-tensor scale and NVFP4's tensor scale S_enc are then the
// tensor's, as a run would have them. Throws std::invalid_argument when f
// is not a block format. Any thread.
BlockComparison compareBlocks(engine::Format f, const std::vector<float>& values, double tensorAmax = 0.0);

// --- the block view's words for its numbers ---
// A number as the explorer reads one: a decimal, 2^k, inf, nan.
bool parseBlockNumber(QString text, float* out);
// A scale's value: E8M0 codes are powers of two ("2^-2 = 0.25").
QString scaleValueText(engine::Format scaleFormat, float v);
// An outlier factor ("× 12.5").
QString factorText(double f);
// The error over some values, in a sentence and in short.
QString summaryLine(const ErrorSummary& s);
QString shortSummary(const ErrorSummary& s);
