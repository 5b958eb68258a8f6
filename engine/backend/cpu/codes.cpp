// The CPU backend's elementwise ops on FP16/BF16/FP8 codes: the residual
// add's encode, GELU and ReLU on codes, and the backwards that decode dy as
// they go.
#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/gelu_simd.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/parallel.h"
#include "numeric/cast.h"

namespace engine {

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
    fused::compose(*this, fused::AddEncodeOp{fa, a, fb, b, fy, y, n, opt, sa, sb, sy});
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
    fused::compose(*this, fused::Gelu16ForwardOp{f, x, y, n, sx, sy});
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
    fused::compose(*this, fused::Gelu16BackwardOp{f, x, g, dy, dx, n, sx, sdy, sdx});
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
    fused::compose(*this, fused::ActivationBackwardCodedOp{Activation::Gelu, x, g, dy, dx, n, sdy});
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
    fused::compose(*this, fused::ActivationBackwardCodedOp{Activation::Relu, x, g, dy, dx, n, sdy});
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
