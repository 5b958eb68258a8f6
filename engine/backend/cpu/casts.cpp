// The CPU backend's casts: convert, block_quantize, and FP8 delayed
// scaling's scaled casts (scale_amax and its fused encodes, amax).
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cast_pieces.h"
#include "backend/cpu/gelu_simd.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/row_kernels.h"
#include "backend/cpu/step_kernels.h"
#include "numeric/cast.h"
#include "numeric/format.h"

namespace engine {

using cpu::channel_blocks;
using cpu::convert_range;
using cpu::f32_container;

namespace {


// Converts n values between two non-f32 storage formats through a small
// stack buffer (decodes are exact; the encode rounds once).
void transcode(Format from, const void* src, Format to, void* dst, std::int64_t n, CastOptions opt) {
  constexpr std::int64_t kChunk = 1024;
  float buf[kChunk];
  const auto* s = static_cast<const std::byte*>(src);
  auto* d = static_cast<std::byte*>(dst);
  const std::size_t sb = storage_bytes(from), db = storage_bytes(to);
  const std::uint64_t base = opt.index_offset;
  for (std::int64_t i = 0; i < n; i += kChunk) {
    const std::int64_t m = std::min(kChunk, n - i);
    cast_to_f32(from, s + static_cast<std::size_t>(i) * sb, buf, static_cast<std::size_t>(m));
    opt.index_offset = base + static_cast<std::uint64_t>(i);
    cast_from_f32(to, buf, d + static_cast<std::size_t>(i) * db, static_cast<std::size_t>(m), opt);
  }
}

}  // namespace

// CpuBackend::convert over one range on the calling thread.
void cpu::convert_range(Format from, const void* src, Format to, void* dst, std::int64_t n, const CastOptions& opt) {
  const auto un = static_cast<std::size_t>(n);
  if (f32_container(from)) {
    if (f32_container(to)) {
      if (dst != src) std::memcpy(dst, src, un * sizeof(float));
      if (to == Format::TF32) quantize_inplace(Format::TF32, static_cast<float*>(dst), un, opt);
    } else {
      cast_from_f32(to, static_cast<const float*>(src), dst, un, opt);
    }
  } else if (f32_container(to)) {
    cast_to_f32(from, src, static_cast<float*>(dst), un);
    if (to == Format::TF32) quantize_inplace(Format::TF32, static_cast<float*>(dst), un, opt);
  } else if (from == to && !opt.stochastic && !opt.saturate) {
    if (dst != src) std::memcpy(dst, src, un * storage_bytes(to));
  } else {
    transcode(from, src, to, dst, n, opt);
  }
}

void CpuBackend::convert(Format from, const void* src, Format to, void* dst, std::int64_t n, const CastOptions& opt) {
  if (n <= 0) return;
  use_threads();
  // Large tensors are split over the threads; stochastic rounding hashes
  // each element's index, so a chunk passes its start and the bits do not
  // depend on the split.
  const std::size_t fs = storage_bytes(from), ts = storage_bytes(to);
  if (cpu::worth_parallel(n) && fs > 0 && ts > 0) {
    const auto* s = static_cast<const std::byte*>(src);
    auto* d = static_cast<std::byte*>(dst);
    cpu::for_chunks(n, [&](std::int64_t b, std::int64_t e) {
      CastOptions o = opt;
      o.index_offset += static_cast<std::uint64_t>(b);
      convert_range(from, s + static_cast<std::size_t>(b) * fs, to, d + static_cast<std::size_t>(b) * ts, e - b, o);
    });
    return;
  }
  convert_range(from, src, to, dst, n, opt);
}

void CpuBackend::block_quantize(Format f, const float* src, float* dst, std::int64_t rows, std::int64_t cols,
                                BlockLayout layout, const BlockRounding& rounding, BlockQuantized* info) {
  use_threads();
  const BlockQuantized q = engine::block_quantize(f, src, dst, rows, cols, layout, rounding);
  if (info) *info = q;
}

namespace {

// max over [0, n) of f(begin, end) -> bits, in two halves on two threads
// and so on above the threshold (max is exact in any order): the amax
// passes of scale_amax and amax.
constexpr std::int64_t kAmaxParallelMin = std::int64_t{1} << 17;

template <class F>
std::uint32_t max_over_halves(std::int64_t n, F&& f) {
  if (n < kAmaxParallelMin) return f(std::int64_t{0}, n);
  constexpr int kChunks = 16;
  const std::int64_t chunk = (n + kChunks - 1) / kChunks;
  std::uint32_t m = 0;
#pragma omp parallel for schedule(static) reduction(max : m)
  for (int c = 0; c < kChunks; ++c) {
    const std::int64_t b = c * chunk, e = std::min(n, b + chunk);
    if (b < e) m = std::max(m, f(b, e));
  }
  return m;
}

}  // namespace

void CpuBackend::scale_amax(const float* x, float scale, float* y, std::int64_t n, float* amax) {
  use_threads();
  *amax = amax_from_bits(
      max_over_halves(n, [=](std::int64_t b, std::int64_t e) { return scale_amax_bits(x + b, scale, y + b, e - b); }));
}

namespace cpu {

std::uint32_t scale_amax_encode_span(const float* x, float scale, Format f, std::byte* q, std::int64_t len,
                                     const CastOptions& opt, std::int64_t at) {
  // In one pass by the cast library's fused kernel where it has one, else
  // scaled into a stack buffer by the pass scale_amax runs, then encoded
  // from there by the cast convert runs. The same bits either way.
  std::uint32_t fused = 0;
  if (scale_amax_cast(Format::FP32, x, scale, f, q, static_cast<std::size_t>(len), opt, &fused)) return fused;
  alignas(64) float buf[kScaledChunk];
  const std::uint32_t m = scale_amax_bits(x, scale, buf, len);
  CastOptions o = opt;
  o.index_offset += static_cast<std::uint64_t>(at);
  cast_from_f32(f, buf, q, static_cast<std::size_t>(len), o);
  return m;
}

}  // namespace cpu

std::uint32_t cpu::scale_amax_encode_chunk(const float* x, float scale, Format f, void* q, std::int64_t b,
                                           std::int64_t len, const CastOptions& opt) {
  return scale_amax_encode_span(x + b, scale, f, static_cast<std::byte*>(q) + static_cast<std::size_t>(b) * storage_bytes(f),
                                len, opt, b);
}

namespace {

using cpu::kScaledChunk;
using cpu::scale_amax_encode_chunk;
using cpu::scale_amax_encode_span;

// The max over the chunks [b, b + len) of [0, n) (len <= kScaledChunk) of
// chunk(b, len), over the threads: the chunks' amaxes combine as bit
// patterns, so the bits do not depend on the split.
template <class Chunk>
std::uint32_t max_over_scaled_chunks(std::int64_t n, Chunk&& chunk) {
  const std::int64_t chunks = (n + kScaledChunk - 1) / kScaledChunk;
  std::uint32_t m = 0;
#pragma omp parallel for schedule(static) reduction(max : m) if (cpu::worth_parallel(n))
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t b = c * kScaledChunk;
    m = std::max(m, chunk(b, std::min(kScaledChunk, n - b)));
  }
  return m;
}

}  // namespace

void CpuBackend::scale_amax_encode(const float* x, float scale, Format f, void* q, std::int64_t n,
                                   const CastOptions& opt, float* amax, float* scratch) {
  use_threads();
  const std::size_t qs = storage_bytes(f);
  if (n <= 0 || qs == 0 || f32_container(f)) {
    CpuBackend::scale_amax(x, scale, scratch, n, amax);
    convert(Format::FP32, scratch, f, q, n, opt);
    return;
  }
  // One pass instead of two, chunk by chunk.
  *amax = amax_from_bits(max_over_scaled_chunks(n, [&](std::int64_t b, std::int64_t len) {
    return scale_amax_encode_chunk(x, scale, f, q, b, len, opt);
  }));
}

void CpuBackend::gelu_forward_encode(const float* x, std::int64_t n, float scale, Format f, void* q,
                                     const CastOptions& opt, float* amax, float* scratch) {
  use_threads();
  // The approximation's argument needs round-to-nearest codes, a scale
  // whose products stay in range, and AVX-512 or AVX2 lanes; else the two
  // calls.
  const cpu::MvecIsa isa = cpu::mvec_isa();
  if (n <= 0 || !is_fp8(f) || opt.stochastic || !(scale >= 0x1p-60f && scale <= 0x1p60f) ||
      isa == cpu::MvecIsa::Scalar) {
    fused::compose(*this, fused::ActivationForwardEncodeOp{Activation::Gelu, x, n, scale, f, q, opt, amax, scratch});
    return;
  }
  // Chunk by chunk, each within the kernel's block.
  static_assert(kScaledChunk <= cpu::kGeluCastBlock);
  const auto kernel = isa == cpu::MvecIsa::Avx512 ? cpu::gelu_cast_avx512 : cpu::gelu_cast_avx2;
  *amax = amax_from_bits(max_over_scaled_chunks(n, [&](std::int64_t b, std::int64_t len) {
    return kernel(x + b, static_cast<std::uint8_t*>(q) + b, len, scale, f == Format::E4M3, opt.saturate);
  }));
}

void CpuBackend::relu_forward_encode(const float* x, std::int64_t n, float scale, Format f, void* q,
                                     const CastOptions& opt, float* amax, float* scratch) {
  use_threads();
  const std::size_t qs = storage_bytes(f);
  if (n <= 0 || qs == 0 || f32_container(f)) {
    fused::compose(*this, fused::ActivationForwardEncodeOp{Activation::Relu, x, n, scale, f, q, opt, amax, scratch});
    return;
  }
  // Each chunk's ReLU into the stack, then scale_amax_encode's chunk cast
  // from there: y never reaches memory.
  *amax = amax_from_bits(max_over_scaled_chunks(n, [&](std::int64_t b, std::int64_t len) {
    alignas(64) float y[kScaledChunk];
    cpu::relu_run(x + b, y, len);
    return scale_amax_encode_span(y, scale, f, static_cast<std::byte*>(q) + static_cast<std::size_t>(b) * qs, len, opt,
                                  b);
  }));
}

void CpuBackend::scale_amax_encode_sums(Format from, const void* x, std::int64_t rows, std::int64_t cols, float scale,
                                        Format f, void* q, const CastOptions& opt, float* amax, float* db,
                                        float* scratch) {
  use_threads();
  const std::size_t qs = storage_bytes(f);
  // column_sums' chunks of rows (codes decoded block by block, as
  // column_sums16 does), each block of rows cast from its f32 values (the
  // decode is exact) in pieces of at most kScaledChunk just before it is
  // summed. The amax combines as bit patterns, so neither the blocks nor
  // the threads change it.
  struct Visit {
    float scale;
    Format f;
    std::byte* q;
    std::size_t qs;
    const CastOptions* opt;
    std::int64_t cols;
    std::atomic<std::uint32_t> m{0};
  } v{scale, f, static_cast<std::byte*>(q), qs, &opt, cols};
  const bool done =
      rows * cols > 0 && qs > 0 && !f32_container(f) &&
      cpu::column_sums_visiting(
          from, x, rows, cols, db, m_reduce_ws,
          [](void* ctx, std::int64_t i0, std::int64_t i1, const float* values) {
            auto& s = *static_cast<Visit*>(ctx);
            std::uint32_t m = 0;
            for (std::int64_t o = 0, e = (i1 - i0) * s.cols; o < e; o += kScaledChunk) {
              const std::int64_t at = i0 * s.cols + o;
              m = std::max(m, scale_amax_encode_span(values + o, s.scale, s.f, s.q + static_cast<std::size_t>(at) * s.qs,
                                                     std::min(kScaledChunk, e - o), *s.opt, at));
            }
            std::uint32_t seen = s.m.load(std::memory_order_relaxed);
            while (seen < m && !s.m.compare_exchange_weak(seen, m, std::memory_order_relaxed)) {
            }
          },
          &v);
  if (!done) {
    fused::compose(*this, fused::ScaleAmaxEncodeSumsOp{from, x, rows, cols, scale, f, q, opt, amax, db, scratch});
    return;
  }
  *amax = amax_from_bits(v.m.load(std::memory_order_relaxed));
}

void CpuBackend::scale_amax_encode_planes(const float* x, std::int64_t n, std::int64_t c, std::int64_t hw, float scale,
                                          Format f, void* q, const CastOptions& opt, float* amax, float* decoded,
                                          float* db, float* scratch) {
  use_threads();
  const std::size_t qs = storage_bytes(f);
  const std::int64_t total = n * c * hw;
  if (total <= 0 || qs == 0 || f32_container(f)) {
    fused::compose(*this, fused::ScaleAmaxEncodePlanesOp{x, n, c, hw, scale, f, q, opt, amax, decoded, db, scratch});
    return;
  }
  auto* qb = static_cast<std::byte*>(q);
  // [b, b + len): cast, then the codes just written decoded while in cache,
  // a chunk at a time. (Pieces of 1024 values, which keep x, its staging
  // and the decode in L1 together, ran faster on hot data but 5-10% slower
  // in the cnn's step, where x comes from memory.)
  auto cast = [&](std::int64_t b, std::int64_t len) {
    std::uint32_t m = 0;
    for (std::int64_t o = 0; o < len; o += kScaledChunk) {
      const std::int64_t l = std::min(kScaledChunk, len - o);
      m = std::max(m, scale_amax_encode_chunk(x, scale, f, q, b + o, l, opt));
      if (decoded)
        cast_to_f32(f, qb + static_cast<std::size_t>(b + o) * qs, decoded + b + o, static_cast<std::size_t>(l));
    }
    return m;
  };
  if (!db) {
    *amax = amax_from_bits(max_over_scaled_chunks(total, cast));
    return;
  }
  // With the channel sums: channel_sums' blocks, each image's run of a
  // block's planes cast right after it is summed.
  *amax = amax_from_bits(channel_blocks(x, n, c, hw, db, m_reduce_ws, cast));
}

void CpuBackend::scale_amax_encode16(Format from, const void* x, float scale, Format f, void* q, std::int64_t n,
                                     const CastOptions& opt, float* amax, float* scratch) {
  use_threads();
  std::uint32_t probe = 0;
  // The cast library decodes as it casts (FP8 on AVX-512; an empty call
  // says whether it can); otherwise decode into scratch first.
  if (n <= 0 || !scale_amax_cast(from, x, scale, f, q, 0, opt, &probe)) {
    fused::compose(*this, fused::ScaleAmaxEncode16Op{from, x, scale, f, q, n, opt, amax, scratch});
    return;
  }
  const std::size_t xs = storage_bytes(from), qs = storage_bytes(f);
  *amax = amax_from_bits(max_over_scaled_chunks(n, [&](std::int64_t b, std::int64_t len) {
    std::uint32_t m = 0;
    const auto at = static_cast<std::size_t>(b);
    scale_amax_cast(from, static_cast<const std::byte*>(x) + at * xs, scale, f, static_cast<std::byte*>(q) + at * qs,
                    static_cast<std::size_t>(len), opt, &m);
    return m;
  }));
}

void CpuBackend::amax(const float* x, std::int64_t n, float* out) {
  use_threads();
  *out = amax_from_bits(max_over_halves(n, [x](std::int64_t b, std::int64_t e) { return cpu::amax_bits(x + b, e - b); }));
}

}  // namespace engine
