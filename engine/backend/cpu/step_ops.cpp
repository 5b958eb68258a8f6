// The CPU backend's step-level ops: memory, casts, the loss scaler's fused
// unscale, optimizer updates, FP8 amax, gradient statistics.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/gelu_simd.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/row_kernels.h"
#include "backend/cpu/step_kernels.h"
#include "nn/fp8_scaling.h"
#include "numeric/cast.h"
#include "optim/parallel.h"

namespace engine {

void* CpuBackend::allocate(std::size_t bytes) {
  void* p = std::aligned_alloc(64, (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64);
  if (!p) throw std::bad_alloc();
  return p;
}

void CpuBackend::release(void* p) noexcept { std::free(p); }

void CpuBackend::upload(void* dst, const void* host_src, std::size_t bytes) {
  if (bytes) std::memcpy(dst, host_src, bytes);
}

void CpuBackend::download(void* host_dst, const void* src, std::size_t bytes) {
  if (bytes) std::memcpy(host_dst, src, bytes);
}

void CpuBackend::copy(void* dst, const void* src, std::size_t bytes) {
  if (!bytes || dst == src) return;
  // Large copies (the mlp's Flatten, 400 KB a step) over the threads, in
  // whole floats: a 16-core Xeon took 74 us for it on one thread.
  const auto n = static_cast<std::int64_t>(bytes / sizeof(float));
  if (!cpu::worth_parallel(n)) {
    std::memcpy(dst, src, bytes);
    return;
  }
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  cpu::for_chunks(n, [&](std::int64_t b, std::int64_t e) {
    std::memcpy(d + b * 4, s + b * 4, static_cast<std::size_t>(e - b) * 4);
  });
  if (const std::size_t tail = bytes % sizeof(float)) std::memcpy(d + n * 4, s + n * 4, tail);
}

void CpuBackend::upload_rows(void* dst, const void* host_base, std::size_t row_bytes, const std::uint32_t* rows,
                             std::size_t count) {
  auto* d = static_cast<std::byte*>(dst);
  const auto* b = static_cast<const std::byte*>(host_base);
  // A batch's rows are scattered over the whole data set (tens to hundreds
  // of MB, mostly out of cache): each row copy waits on memory. The next
  // rows are prefetched while one is copied, and a large batch is split
  // over the threads, so several rows are in flight at once.
  constexpr std::size_t kAhead = 2;
  const auto gather = [=](std::size_t k0, std::size_t k1) {
    for (std::size_t k = k0; k < k1; ++k) {
      if (k + kAhead < k1) {
        const std::byte* next = b + static_cast<std::size_t>(rows[k + kAhead]) * row_bytes;
        for (std::size_t o = 0; o < row_bytes; o += 64) __builtin_prefetch(next + o);
      }
      std::memcpy(d + k * row_bytes, b + static_cast<std::size_t>(rows[k]) * row_bytes, row_bytes);
    }
  };
  if (row_bytes * count < (std::size_t{64} << 10) || row_bytes < 256) {
    gather(0, count);
    return;
  }
  use_threads();
#pragma omp parallel
  {
    const auto t = static_cast<std::size_t>(omp_get_thread_num());
    const auto nt = static_cast<std::size_t>(omp_get_num_threads());
    gather(count * t / nt, count * (t + 1) / nt);
  }
}

void CpuBackend::fill_zero(void* dst, std::size_t bytes) {
  if (bytes) std::memset(dst, 0, bytes);
}

void CpuBackend::fill(float* x, float value, std::int64_t n) { std::fill(x, x + n, value); }

namespace {

bool f32_container(Format f) { return f == Format::FP32 || f == Format::TF32; }

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

// CpuBackend::convert over one range on the calling thread.
void convert_range(Format from, const void* src, Format to, void* dst, std::int64_t n, const CastOptions& opt) {
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

}  // namespace

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

void CpuBackend::scale_amax(const float* x, float scale, float* y, std::int64_t n, float* amax) {
  use_threads();
  *amax = scale_and_amax(x, scale, y, n);
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

namespace {

using cpu::kScaledChunk;
using cpu::scale_amax_encode_span;
std::uint32_t scale_amax_encode_chunk(const float* x, float scale, Format f, void* q, std::int64_t b,
                                      std::int64_t len, const CastOptions& opt) {
  return scale_amax_encode_span(x + b, scale, f, static_cast<std::byte*>(q) + static_cast<std::size_t>(b) * storage_bytes(f),
                                len, opt, b);
}

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
    Backend::gelu_forward_encode(x, n, scale, f, q, opt, amax, scratch);
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
    Backend::relu_forward_encode(x, n, scale, f, q, opt, amax, scratch);
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
    Backend::scale_amax_encode_sums(from, x, rows, cols, scale, f, q, opt, amax, db, scratch);
    return;
  }
  *amax = amax_from_bits(v.m.load(std::memory_order_relaxed));
}

namespace {

// db = the channel sums of an n x c x hw (NCHW) tensor x: blocks of
// channels, one a thread, each summing its planes image by image (memory
// order) with add_plane_sums, so a channel's adds are the same for any
// split. visit(at, len) -> bits then runs on each image's run of the
// block's planes [at, at + len) just summed; the results combine by max
// (the FP8 casts' amax bits).
template <class Visit>
std::uint32_t channel_blocks(const float* x, std::int64_t n, std::int64_t c, std::int64_t hw, float* db,
                             cpu::Workspace& ws, Visit&& visit) {
  const int nt = cpu::worth_parallel(n * c * hw) ? omp_get_max_threads() : 1;
  const std::int64_t per = (c + nt - 1) / nt;
  double* sums = ws.get<double>(static_cast<std::size_t>(c));
  std::uint32_t m = 0;
#pragma omp parallel for schedule(static) reduction(max : m) if (nt > 1)
  for (std::int64_t j0 = 0; j0 < c; j0 += per) {
    const std::int64_t j1 = std::min(c, j0 + per);
    for (std::int64_t j = j0; j < j1; ++j) sums[j] = 0.0;
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t at = (i * c + j0) * hw;
      cpu::add_plane_sums(x + at, hw, j1 - j0, sums + j0);
      m = std::max(m, visit(at, (j1 - j0) * hw));
    }
  }
  for (std::int64_t j = 0; j < c; ++j) db[j] = static_cast<float>(sums[j]);
  return m;
}

}  // namespace

void CpuBackend::scale_amax_encode_planes(const float* x, std::int64_t n, std::int64_t c, std::int64_t hw, float scale,
                                          Format f, void* q, const CastOptions& opt, float* amax, float* decoded,
                                          float* db, float* scratch) {
  use_threads();
  const std::size_t qs = storage_bytes(f);
  const std::int64_t total = n * c * hw;
  if (total <= 0 || qs == 0 || f32_container(f)) {
    Backend::scale_amax_encode_planes(x, n, c, hw, scale, f, q, opt, amax, decoded, db, scratch);
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
    Backend::scale_amax_encode16(from, x, scale, f, q, n, opt, amax, scratch);
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

namespace {

// The 16-bit elementwise ops' one pass: [0, n) in chunks of kCodesChunk,
// each handed to f(begin, length) on some thread. Chunk boundaries depend
// on n only.
constexpr std::int64_t kCodesChunk = 2048;
template <class F>
void over_code_chunks(std::int64_t n, F&& f) {
  const std::int64_t chunks = (n + kCodesChunk - 1) / kCodesChunk;
#pragma omp parallel for schedule(static) if (cpu::worth_parallel(n))
  for (std::int64_t c = 0; c < chunks; ++c) f(c * kCodesChunk, std::min(kCodesChunk, n - c * kCodesChunk));
}

// y (format fy) = op(a, b) over n values stored in formats fa and fb, in
// one pass: each chunk decoded into stack buffers by the casts convert
// runs, op(a_chunk, b_chunk, out_chunk, len) in f32, and encoded from there
// (stochastic rounding at the chunk's index offset), so the bits are those
// of decode, op, encode.
template <class Op>
void binary_on_codes(Format fa, const void* a, Format fb, const void* b, Format fy, void* y, std::int64_t n,
                     const CastOptions& opt, Op&& op) {
  const std::size_t as = storage_bytes(fa), bs = storage_bytes(fb), ys = storage_bytes(fy);
  const auto* ap = static_cast<const std::byte*>(a);
  const auto* bp = static_cast<const std::byte*>(b);
  auto* yp = static_cast<std::byte*>(y);
  over_code_chunks(n, [&](std::int64_t i0, std::int64_t len) {
    alignas(64) float x0[kCodesChunk];
    alignas(64) float x1[kCodesChunk];
    alignas(64) float r[kCodesChunk];
    const auto i = static_cast<std::size_t>(i0), m = static_cast<std::size_t>(len);
    cast_to_f32(fa, ap + i * as, x0, m);
    cast_to_f32(fb, bp + i * bs, x1, m);
    op(x0, x1, r, len);
    CastOptions o = opt;
    o.index_offset += static_cast<std::uint64_t>(i0);
    cast_from_f32(fy, r, yp + i * ys, m, o);
  });
}

}  // namespace

void CpuBackend::add_encode(Format fa, const void* a, Format fb, const void* b, Format fy, void* y, std::int64_t n,
                            const CastOptions& opt, float* sa, float* sb, float* sy) {
  use_threads();
  const std::size_t as = storage_bytes(fa), bs = storage_bytes(fb), ys = storage_bytes(fy);
  if (n <= 0 || as == 0 || bs == 0 || ys == 0) {
    Backend::add_encode(fa, a, fb, b, fy, y, n, opt, sa, sb, sy);
    return;
  }
  // One pass instead of four, added as add() adds.
  binary_on_codes(fa, a, fb, b, fy, y, n, opt, [](const float* x0, const float* x1, float* r, std::int64_t len) {
    for (std::int64_t k = 0; k < len; ++k) r[k] = x0[k] + x1[k];
  });
}

namespace {

// GELU of every FP16 or BF16 code, through the f32 kernels: y holds the
// encoded forward value of code c, gp the f32 factor Phi(x) + x phi(x) (one
// fma) the backward kernel multiplies dy by (gelu_backward with dy = 1).
// A 16-bit input has 65536 values, so a lookup gives the bits of decode,
// GELU, encode (forward) and of decode, gelu_backward (backward) without
// the erf polynomial. Built once per format, on first use.
struct Gelu16Table {
  std::vector<std::uint16_t> y;
  std::vector<float> gp;
};

Gelu16Table build_gelu16_table(Format f) {
  constexpr std::size_t kCodes = 1u << 16;
  std::vector<std::uint16_t> codes(kCodes);
  for (std::size_t c = 0; c < kCodes; ++c) codes[c] = static_cast<std::uint16_t>(c);
  std::vector<float> x(kCodes), y(kCodes), ones(kCodes, 1.0f);
  cast_to_f32(f, codes.data(), x.data(), kCodes);
  Gelu16Table t{std::vector<std::uint16_t>(kCodes), std::vector<float>(kCodes)};
  const auto n = static_cast<std::int64_t>(kCodes);
  cpu::gelu_forward(x.data(), y.data(), n);
  cast_from_f32(f, y.data(), t.y.data(), kCodes, {});
  cpu::gelu_backward(x.data(), ones.data(), t.gp.data(), n);
  return t;
}

const Gelu16Table& gelu16_table(Format f) {
  if (f == Format::BF16) {
    static const Gelu16Table bf16 = build_gelu16_table(Format::BF16);
    return bf16;
  }
  static const Gelu16Table fp16 = build_gelu16_table(Format::FP16);
  return fp16;
}

}  // namespace

void CpuBackend::gelu16_forward(Format f, const void* x, void* y, std::int64_t n, float* sx, float* sy) {
  use_threads();
  if (!is_half_format(f)) {
    Backend::gelu16_forward(f, x, y, n, sx, sy);
    return;
  }
  // A lookup per code (gelu16_table): the bits of decode, GELU, encode.
  const std::uint16_t* table = gelu16_table(f).y.data();
  const auto* xs = static_cast<const std::uint16_t*>(x);
  auto* ys = static_cast<std::uint16_t*>(y);
  over_code_chunks(n, [&](std::int64_t i, std::int64_t len) {
    // Four codes per 8-byte load and store (little-endian lanes): the loop
    // is bound by memory operations (AVX-512 gathers measured no faster on
    // an EPYC).
    static_assert(std::endian::native == std::endian::little);
    std::int64_t k = i;
    for (; k + 4 <= i + len; k += 4) {
      std::uint64_t c;
      std::memcpy(&c, xs + k, sizeof c);
      const std::uint64_t v = std::uint64_t{table[c & 0xFFFFu]} | std::uint64_t{table[(c >> 16) & 0xFFFFu]} << 16 |
                              std::uint64_t{table[(c >> 32) & 0xFFFFu]} << 32 | std::uint64_t{table[c >> 48]} << 48;
      std::memcpy(ys + k, &v, sizeof v);
    }
    for (; k < i + len; ++k) ys[k] = table[xs[k]];
  });
}

void CpuBackend::gelu16_backward(Format f, const void* x, Format g, const void* dy, void* dx, std::int64_t n,
                                 float* sx, float* sdy, float* sdx) {
  use_threads();
  if (!is_half_format(f) || !is_half_format(g)) {
    Backend::gelu16_backward(f, x, g, dy, dx, n, sx, sdy, sdx);
    return;
  }
  // dx = dy * gp[x] (gelu16_table), the product gelu_backward forms;
  // dy decoded and dx encoded chunk by chunk.
  const float* gp = gelu16_table(f).gp.data();
  const auto* xs = static_cast<const std::uint16_t*>(x);
  const auto* ds = static_cast<const std::uint16_t*>(dy);
  auto* dxs = static_cast<std::uint16_t*>(dx);
  over_code_chunks(n, [&](std::int64_t i, std::int64_t len) {
    alignas(64) float d[kCodesChunk];
    const auto m = static_cast<std::size_t>(len);
    cast_to_f32(g, ds + i, d, m);
    for (std::int64_t k = 0; k < len; ++k) d[k] = d[k] * gp[xs[i + k]];
    cast_from_f32(g, d, dxs + i, m, {});
  });
}

namespace {

// The *_backward_coded ops: dy (FP16/BF16/FP8 codes of format g) decoded
// chunk by chunk into the stack, then f(i, dy_chunk, len) does the f32 math
// on that chunk (element by element: the same values whatever the chunk).
// false, with nothing done, for other formats (the caller's default).
template <class F>
bool over_decoded_dy(Format g, const void* dy, std::int64_t n, F&& f) {
  if (!is_half_format(g) && !is_fp8(g)) return false;
  const std::size_t es = storage_bytes(g);
  const auto* d = static_cast<const std::byte*>(dy);
  over_code_chunks(n, [&](std::int64_t i, std::int64_t len) {
    alignas(64) float b[kCodesChunk];
    cast_to_f32(g, d + static_cast<std::size_t>(i) * es, b, static_cast<std::size_t>(len));
    f(i, b, len);
  });
  return true;
}

}  // namespace

void CpuBackend::gelu_backward_coded(const float* x, Format g, const void* dy, float* dx, std::int64_t n,
                                     float* sdy) {
  use_threads();
  if (!over_decoded_dy(g, dy, n, [&](std::int64_t i, const float* b, std::int64_t len) {
        cpu::gelu_backward(x + i, b, dx + i, len);
      }))
    Backend::gelu_backward_coded(x, g, dy, dx, n, sdy);
}

void CpuBackend::relu_backward_coded(const float* x, Format g, const void* dy, float* dx, std::int64_t n,
                                     float* sdy) {
  use_threads();
  // relu_backward's select (cpu/elementwise.cpp), serial within the chunk;
  // dy read unconditionally so that it compiles to a blend, not a branch
  // on each activation's sign (64 against 2 us a call, 32768 values).
  if (!over_decoded_dy(g, dy, n, [&](std::int64_t i, const float* b, std::int64_t len) {
        const float* __restrict xi = x + i;
        float* __restrict di = dx + i;
#pragma omp simd
        for (std::int64_t k = 0; k < len; ++k) {
          const float d = b[k];
          di[k] = xi[k] > 0.0f ? d : 0.0f;
        }
      }))
    Backend::relu_backward_coded(x, g, dy, dx, n, sdy);
}

void CpuBackend::amax(const float* x, std::int64_t n, float* out) {
  use_threads();
  *out = amax_of(x, n);
}

namespace {

// Thread t's blocks [b0, b1) of `blocks` blocks of `block` values over n
// gradients: the block boundaries nearest to where the optimizer's split
// (optim_detail::first_block over its kBlock blocks) divides n, so that a
// thread unscales mostly the values its own update reads next, which the
// weight gradient's GEMM also wrote on that thread (its rows of C in the
// same halves). Which thread runs a block changes no bits.
std::pair<std::int64_t, std::int64_t> blocks_near_split(std::int64_t n, std::int64_t block, std::int64_t blocks,
                                                        int t, int nt) {
  const std::size_t ob = (static_cast<std::size_t>(n) + optim_detail::kBlock - 1) / optim_detail::kBlock;
  auto boundary = [&](int u) -> std::int64_t {
    if (u <= 0) return 0;
    if (u >= nt) return blocks;
    const auto start = static_cast<std::int64_t>(
        optim_detail::first_block(ob, static_cast<std::size_t>(u), static_cast<std::size_t>(nt)) * optim_detail::kBlock);
    return (start + block / 2) / block;  // start < n + 2048: at most blocks
  };
  return {boundary(t), boundary(t + 1)};
}

}  // namespace

void CpuBackend::unscale_grads(const GradBuffer* grads, std::size_t count, float inv, double* sum_squares) {
  unscale_grads_coded(grads, nullptr, count, inv, sum_squares);
}

void CpuBackend::unscale_grads_coded(const GradBuffer* grads, const GradCodes* codes, std::size_t count, float inv,
                                     double* sum_squares) {
  use_threads();
  // Fixed blocks, whatever the thread count: the sum of squares (the
  // gradient norm, clipping) is the same bits on any machine.
  constexpr std::int64_t kBlock = 1 << 14;
  double sq = 0.0;
  for (std::size_t k = 0; k < count; ++k) {
    float* p = grads[k].data;
    const std::int64_t n = grads[k].n;
    const std::int64_t blocks = (n + kBlock - 1) / kBlock;
    if (m_partial_sums.size() < static_cast<std::size_t>(blocks)) m_partial_sums.resize(static_cast<std::size_t>(blocks));
    if (m_partial_counts.size() < static_cast<std::size_t>(blocks))
      m_partial_counts.resize(static_cast<std::size_t>(blocks));
    double* part = m_partial_sums.data();
    std::int64_t* bad = m_partial_counts.data();
    // inv == 1 (no loss scaling): v == p[i] for every finite value, so the
    // pass only reads; a block holding inf or NaN is written after all (the
    // multiply quiets a signalling NaN, as with any other scale).
    const bool write = inv != 1.0f;
    // Codes are decoded block by block, each just before its pass.
    const GradCodes src = codes ? codes[k] : GradCodes{};
    const auto* src_bytes = static_cast<const std::byte*>(src.data);
    const std::size_t src_es = src.data ? storage_bytes(src.format) : 0;
    // Two blocks are worth the threads (the mlp's fc2 gradients, 32768
    // values; the whole pass a step, capped AVX2: fp16 40.0 -> 37.0 us,
    // fp32 28.2 -> 26.4).
    // Blocks by blocks_near_split rather than a static schedule (the
    // mlp's fc1 gradients: 13 blocks, 7 on the first thread, whose update
    // then takes 6 1/8): the whole pass a step, bench_ops mlp, four
    // alternations, 2 threads with native bf16: fp32 16.5 -> 13.5 us,
    // fp16 23.3 -> 19.9, mixed-fp16 17.2 -> 14.3, fp8 17.3 -> 14.5.
#pragma omp parallel if (blocks >= 2)
    {
      const auto [b0, b1] = blocks_near_split(n, kBlock, blocks, omp_get_thread_num(), omp_get_num_threads());
      for (std::int64_t b = b0; b < b1; ++b) {
        const std::int64_t i0 = b * kBlock, len = std::min(n, i0 + kBlock) - i0;
        if (src_bytes)
          cast_to_f32(src.format, src_bytes + static_cast<std::size_t>(i0) * src_es, p + i0,
                      static_cast<std::size_t>(len));
        std::int64_t local = 0;
        double local_sq = 0.0;
        if (!write) local_sq = cpu::sum_squares_run(p + i0, len, &local);
        if (write || local > 0) local_sq = cpu::unscale_run(p + i0, len, inv, &local);
        part[b] = local_sq;
        bad[b] = local;
      }
    }
    std::int64_t nonfinite = 0;
    for (std::int64_t b = 0; b < blocks; ++b) {
      sq += part[b];
      nonfinite += bad[b];
    }
    if (grads[k].nonfinite) *grads[k].nonfinite = nonfinite;
  }
  if (sum_squares) *sum_squares = sq;
}

namespace {

void round_state(Format f, float* s, std::size_t n) {
  if (f != Format::FP32) quantize_inplace(f, s, n);
}

}  // namespace

namespace {

// sgd_update over values [i0, i1) (a block of optim_detail::kBlock).
void sgd_block(const SgdUpdate& u, const cpu::SgdCoeffs& c, std::size_t i0, std::size_t i1) {
  float* p = u.value + i0;
  const float* g = u.grad + i0;
  const auto len = static_cast<std::int64_t>(i1 - i0);
  if (!u.momentum_buf) {
    cpu::sgd_plain_run(p, g, len, c);
    return;
  }
  // The block (three 8 KiB arrays) stays in L1 across the two passes.
  float* buf = u.momentum_buf + i0;
  cpu::sgd_buffer_run(buf, p, g, len, c, u.first);
  round_state(u.state_format, buf, i1 - i0);
  cpu::sgd_step_run(p, g, buf, len, c, u.nesterov);
}

}  // namespace

void CpuBackend::sgd_update(const SgdUpdate& u) {
  use_threads();
  const cpu::SgdCoeffs c{u.lr, u.momentum, u.keep, u.weight_decay};
  optim_detail::for_blocks(static_cast<std::size_t>(u.n),
                           [&](std::size_t i0, std::size_t i1) { sgd_block(u, c, i0, i1); });
}

void CpuBackend::sgd_update_encode(const SgdUpdate& u, const UpdateEncode& e) { sgd_encode_blocks(u, e, false); }

void CpuBackend::sgd_update_coded(const SgdUpdate& u, const UpdateEncode& e) { sgd_encode_blocks(u, e, true); }

// An update that also encodes does about twice an update's work a value:
// it goes parallel from a quarter of optim_detail::kParallelMin (the mlp's
// fc2 weights, 32768 values).
constexpr std::int64_t kEncodeParallelMin = static_cast<std::int64_t>(optim_detail::kParallelMin / 4);

void CpuBackend::sgd_encode_blocks(const SgdUpdate& u, const UpdateEncode& e, bool decode_first) {
  const std::size_t es = storage_bytes(e.format);
  // The default: the empty, the f32-container and (for codes to decode) the
  // scaled cases.
  if (u.n <= 0 || es == 0 || (e.amax && f32_container(e.format)) ||
      (decode_first && (e.amax || f32_container(e.format)))) {
    if (decode_first) Backend::sgd_update_coded(u, e);
    else Backend::sgd_update_encode(u, e);
    return;
  }
  use_threads();
  // Each block is encoded right after its update, while it is in L1, by
  // convert's cast or scale_amax_encode's chunk: the bits of
  // encode_updated.
  const cpu::SgdCoeffs c{u.lr, u.momentum, u.keep, u.weight_decay};
  constexpr auto kBlock = static_cast<std::int64_t>(optim_detail::kBlock);
  static_assert(kBlock <= kScaledChunk, "an optimizer block is one scaled-encode chunk");
  const std::int64_t n = u.n, blocks = (n + kBlock - 1) / kBlock;
  auto* codes = static_cast<std::byte*>(e.codes);
  // The fp16 recipe's weights (FP16 codes, FP16 momentum, nearest
  // rounding): one pass a block instead of five (cpu::sgd_fp16_block).
  static const bool f16c = cast_path_supported(CastPath::F16C);
  const bool fp16_pass = decode_first && f16c && e.format == Format::FP16 && !e.opt.stochastic &&
                         !e.opt.saturate && u.momentum_buf && !u.nesterov &&
                         (u.state_format == Format::FP16 || u.state_format == Format::FP32);
  // Block b updated and encoded; returns its amax bits (0 without one).
  auto block = [&](std::int64_t b) -> std::uint32_t {
    const std::int64_t i0 = b * kBlock, len = std::min(kBlock, n - i0);
    if (fp16_pass) {
      cpu::sgd_fp16_block(reinterpret_cast<std::uint16_t*>(codes) + i0, u.value + i0, u.grad + i0,
                          u.momentum_buf + i0, len, c, u.first, u.state_format == Format::FP16);
      return 0;
    }
    // Weights kept only as codes: this block's values decoded first.
    if (decode_first)
      cast_to_f32(e.format, codes + static_cast<std::size_t>(i0) * es, u.value + i0, static_cast<std::size_t>(len));
    sgd_block(u, c, static_cast<std::size_t>(i0), static_cast<std::size_t>(i0 + len));
    if (e.amax) return scale_amax_encode_chunk(u.value, e.scale, e.format, e.codes, i0, len, e.opt);
    CastOptions o = e.opt;
    o.index_offset += static_cast<std::uint64_t>(i0);
    convert_range(Format::FP32, u.value + i0, e.format, codes + static_cast<std::size_t>(i0) * es, len, o);
    return 0;
  };
  // Each thread its optim_detail::first_block run, as sgd_update's blocks
  // (the unscale pass lines up with it).
  std::uint32_t m = 0;
#pragma omp parallel reduction(max : m) if (n >= kEncodeParallelMin)
  {
    const auto nt = static_cast<std::size_t>(omp_get_num_threads());
    const auto t = static_cast<std::size_t>(omp_get_thread_num());
    const auto nb = static_cast<std::size_t>(blocks);
    for (std::size_t b = optim_detail::first_block(nb, t, nt); b < optim_detail::first_block(nb, t + 1, nt); ++b)
      m = std::max(m, block(static_cast<std::int64_t>(b)));
  }
  if (e.amax) *e.amax = amax_from_bits(m);
}

void CpuBackend::adam_update(const AdamUpdate& u) {
  use_threads();
  float* __restrict p = u.value;
  const float* __restrict g = u.grad;
  float* __restrict m = u.exp_avg;
  float* __restrict v = u.exp_avg_sq;
  const float l2 = u.l2, one_minus_b1 = u.one_minus_beta1, beta2 = u.beta2, one_minus_b2 = u.one_minus_beta2;
  const float bc2_sqrt = u.bc2_sqrt, eps = u.eps, shrink = u.shrink, step_size = u.step_size;
  optim_detail::for_blocks(static_cast<std::size_t>(u.n), [&](std::size_t i0, std::size_t i1) {
#pragma omp simd
    for (std::size_t i = i0; i < i1; ++i) {
      const float gi = g[i] + l2 * p[i];
      m[i] += one_minus_b1 * (gi - m[i]);
      v[i] = beta2 * v[i] + one_minus_b2 * gi * gi;
    }
    round_state(u.state_format, m + i0, i1 - i0);
    round_state(u.state_format, v + i0, i1 - i0);
#pragma omp simd
    for (std::size_t i = i0; i < i1; ++i) {
      const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
      p[i] = p[i] * shrink - step_size * (m[i] / denom);
    }
  });
}

namespace {

// The census of values [b, e) added into out (kCensusSlots counts).
void census_range(const GradCensus& c, std::int64_t b, std::int64_t e, std::int64_t* out) {
  std::int64_t* hist = out + 1;
  std::int64_t* scaled = out + 1 + kCensusBins;
  std::int64_t* unscaled = scaled + 5;
  for (std::int64_t i = b; i < e; ++i) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(c.values[i]) & 0x7FFFFFFFu;
    if (u == 0) {
      ++out[0];
    } else if (u < 0x7F800000u) {
      // floor(log2|v|) (std::ilogb's, a libm call a value): the exponent
      // field, or for a subnormal the position of its top bit.
      const int e2 = u >= 0x00800000u ? static_cast<int>(u >> 23) - 127 : std::bit_width(u) - 150;
      ++hist[std::clamp(e2 - c.log2_lo, 0, kCensusBins - 1)];
    }
  }
  if (c.block) {
    // Flushed by the block quantization (or zero as the run computed it):
    // Underflow, else Normal, scaled and unscaled alike.
    for (std::int64_t i = b; i < e; ++i) {
      if (c.values[i] == 0.0f) continue;
      const bool flushed = c.block[i] == 0.0f || (c.own && c.own[i] == 0.0f);
      const int m = static_cast<int>(flushed ? Magnitude::Underflow : Magnitude::Normal);
      ++scaled[m];
      ++unscaled[m];
    }
    return;
  }
  // classify_magnitude of |v| * scale (Underflow where the run's own value
  // is zero: flushed somewhere on the way, whatever the exact value's
  // size) and of |v|, as nested counts: class k is (>= k) - (>= k + 1).
  // With scale 1 the two are one count (the forcing included).
  const RoundingThresholds& t = c.thresholds;
  std::int64_t s[10] = {};
  cpu::census_class_sums(c.values + b, c.own ? c.own + b : nullptr, e - b, c.scale, t.underflow, t.subnormal_hi,
                         t.overflow, t.tie_overflows, s);
  if (c.scale != 1.0)
    cpu::census_class_sums(c.values + b, nullptr, e - b, 1.0, t.underflow, t.subnormal_hi, t.overflow,
                           t.tie_overflows, s + 5);
  const std::int64_t* un = c.scale == 1.0 ? s : s + 5;
  for (int k = 0; k < 4; ++k) {
    scaled[k] += s[k] - s[k + 1];
    unscaled[k] += un[k] - un[k + 1];
  }
  scaled[4] += s[4];
  unscaled[4] += un[4];
}

}  // namespace

void CpuBackend::gradient_census(const GradCensus& c) {
  // Counts are integers: any split over the threads gives the same sums.
  if (!cpu::worth_parallel(c.n)) {
    census_range(c, 0, c.n, c.out);
    return;
  }
  use_threads();
#pragma omp parallel
  {
    std::int64_t local[kCensusSlots] = {};
    const auto t = static_cast<std::int64_t>(omp_get_thread_num());
    const auto nt = static_cast<std::int64_t>(omp_get_num_threads());
    census_range(c, c.n * t / nt, c.n * (t + 1) / nt, local);
#pragma omp critical(pl_gradient_census)
    for (int k = 0; k < kCensusSlots; ++k) c.out[k] += local[k];
  }
}

void CpuBackend::error_sums(const float* a, const float* b, std::int64_t n, double* out) {
  cpu::error_sums_run(a, b, n, out);
}

void CpuBackend::conv2d_block(const ConvBlockArgs& g) {
  const bool a_exact = g.a_block ? g.a_block->bf16_exact : g.a_exact;
  const bool b_exact = g.b_block ? g.b_block->bf16_exact : g.b_exact;
  const Format fmt = a_exact && b_exact ? Format::BF16 : Format::FP32;
  const float alpha = (g.a_block ? g.a_block->tensor_decode : 1.0f) * (g.b_block ? g.b_block->tensor_decode : 1.0f);
  const ConvShape& cs = g.shape;
  switch (g.kind) {
    case ConvBlockArgs::Kind::Forward:
      conv2d_forward(cs, fmt, g.a, g.b, alpha == 1.0f ? g.bias : nullptr, g.out);
      if (alpha != 1.0f) {
        scale(g.out, alpha, cs.n * cs.c_out * cs.out_h() * cs.out_w());
        if (g.bias) bias_add_channels(g.out, g.bias, cs.n, cs.c_out, cs.out_h() * cs.out_w());
      }
      break;
    case ConvBlockArgs::Kind::BackwardData:
      conv2d_backward_data(cs, fmt, g.a, g.b, g.out);
      if (alpha != 1.0f) scale(g.out, alpha, cs.n * cs.c_in * cs.h * cs.w);
      break;
    case ConvBlockArgs::Kind::BackwardWeights:
      conv2d_backward_weights(cs, fmt, g.a, g.b, g.out, nullptr);
      if (alpha != 1.0f) scale(g.out, alpha, cs.c_out * cs.c_in * cs.kh * cs.kw);
      break;
  }
}

void CpuBackend::bias_add_channels(float* y, const float* bias, std::int64_t n, std::int64_t c, std::int64_t hw) {
  use_threads();
  // One plane per iteration: the same additions for any thread count.
#pragma omp parallel for schedule(static) if (n * c * hw >= 65536)
  for (std::int64_t plane = 0; plane < n * c; ++plane) {
    float* p = y + plane * hw;
    const float b = bias[plane % c];
    for (std::int64_t k = 0; k < hw; ++k) p[k] += b;
  }
}

void CpuBackend::scale_bias_add_channels(float* y, float alpha, const float* bias, std::int64_t n, std::int64_t c,
                                         std::int64_t hw) {
  use_threads();
  // bias_add_channels' planes, each scaled as it is read: two roundings,
  // as the two passes (no FMA contraction: ISO C++ mode for baseline
  // x86-64).
#pragma omp parallel for schedule(static) if (n * c * hw >= 65536)
  for (std::int64_t plane = 0; plane < n * c; ++plane) {
    float* p = y + plane * hw;
    const float b = bias ? bias[plane % c] : 0.0f;
    if (bias)
      for (std::int64_t k = 0; k < hw; ++k) p[k] = p[k] * alpha + b;
    else
      for (std::int64_t k = 0; k < hw; ++k) p[k] = p[k] * alpha;
  }
}

void CpuBackend::channel_sums(const float* dy, float* db, std::int64_t n, std::int64_t c, std::int64_t hw) {
  use_threads();
  // Each channel summed in channel_blocks' fixed order: the result does
  // not depend on the thread count. (One double add after another ran at
  // the add's latency: the cnn's two bias gradients took 1.9 ms of its FP8
  // step.)
  channel_blocks(dy, n, c, hw, db, m_reduce_ws, [](std::int64_t, std::int64_t) { return std::uint32_t{0}; });
}

// The copies below run over the threads above the size threshold: on one
// thread they write memory the other cores' GEMMs last wrote (transformer,
// 16-core Xeon: repeat_rows 115 us and patchify 87 us a step serial).
void CpuBackend::repeat_rows(const float* src, float* dst, std::int64_t B, std::int64_t T, std::int64_t C) {
#pragma omp parallel for schedule(static) if (cpu::worth_parallel(B * T * C))
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      std::memcpy(dst + (b * T + t) * C, src + b * C, static_cast<std::size_t>(C) * sizeof(float));
}

void CpuBackend::patchify(const float* x, float* patches, std::int64_t B, std::int64_t C, std::int64_t H,
                          std::int64_t W, std::int64_t p) {
  const std::int64_t gh = H / p, gw = W / p, P = C * p * p;
#pragma omp parallel for schedule(static) if (cpu::worth_parallel(B * gh * gw * P))
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t ty = 0; ty < gh; ++ty)
      for (std::int64_t tx = 0; tx < gw; ++tx) {
        float* dst = patches + ((b * gh + ty) * gw + tx) * P;
        for (std::int64_t c = 0; c < C; ++c)
          for (std::int64_t i = 0; i < p; ++i)
            std::memcpy(dst + (c * p + i) * p, x + ((b * C + c) * H + ty * p + i) * W + tx * p,
                        static_cast<std::size_t>(p) * sizeof(float));
      }
}

void CpuBackend::unpatchify(const float* patches, float* x, std::int64_t B, std::int64_t C, std::int64_t H,
                            std::int64_t W, std::int64_t p) {
  const std::int64_t gh = H / p, gw = W / p, P = C * p * p;
  // Pixels outside the patch grid (H or W not a multiple of p) get no gradient.
  if (gh * p != H || gw * p != W) std::memset(x, 0, static_cast<std::size_t>(B * C * H * W) * sizeof(float));
#pragma omp parallel for schedule(static) if (cpu::worth_parallel(B * gh * gw * P))
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t ty = 0; ty < gh; ++ty)
      for (std::int64_t tx = 0; tx < gw; ++tx) {
        const float* src = patches + ((b * gh + ty) * gw + tx) * P;
        for (std::int64_t c = 0; c < C; ++c)
          for (std::int64_t i = 0; i < p; ++i)
            std::memcpy(x + ((b * C + c) * H + ty * p + i) * W + tx * p, src + (c * p + i) * p,
                        static_cast<std::size_t>(p) * sizeof(float));
      }
}

namespace {

std::uint16_t inf_bits16(Format f) { return f == Format::BF16 ? 0x7F80 : 0x7C00; }

}  // namespace

// y = x < 0 ? 0 : x on the patterns: x < 0 exactly when the sign is set,
// the magnitude is non-zero and not NaN (-0 and NaN pass through, as in
// the f32 kernel).
void CpuBackend::relu16_forward(Format f, const void* x, void* y, std::int64_t n) {
  const auto* xs = static_cast<const std::uint16_t*>(x);
  auto* ys = static_cast<std::uint16_t*>(y);
  // Branch-free (the sign of an activation is a coin flip for a predictor):
  // negative non-NaN, non-zero patterns are 0x8001 .. 0x8000 + inf, one
  // unsigned compare after the subtraction.
  const std::uint32_t span = inf_bits16(f);
  use_threads();
  cpu::for_chunks(n, [=](std::int64_t b, std::int64_t e) {
#pragma omp simd
    for (std::int64_t i = b; i < e; ++i) {
      const std::uint16_t v = xs[i];
      ys[i] = static_cast<std::uint32_t>(v) - 0x8001u < span ? std::uint16_t{0} : v;
    }
  });
}

// dx = x > 0 ? dy : 0 on the patterns (x > 0: sign clear, magnitude
// non-zero and not NaN); 0 is +0, as the f32 kernel's 0.0f encodes.
void CpuBackend::relu16_backward(Format f, const void* x, Format, const void* dy, void* dx, std::int64_t n) {
  const auto* xs = static_cast<const std::uint16_t*>(x);
  const auto* dys = static_cast<const std::uint16_t*>(dy);
  auto* dxs = static_cast<std::uint16_t*>(dx);
  // Positive patterns are 0x0001 .. inf (branch-free, as above).
  const std::uint32_t span = inf_bits16(f);
  use_threads();
  cpu::for_chunks(n, [=](std::int64_t b, std::int64_t e) {
#pragma omp simd
    for (std::int64_t i = b; i < e; ++i) {
      const std::uint16_t v = xs[i], d = dys[i];  // d read unconditionally: a blend, not a branch
      dxs[i] = static_cast<std::uint32_t>(v) - 1u < span ? d : std::uint16_t{0};
    }
  });
}

}  // namespace engine
