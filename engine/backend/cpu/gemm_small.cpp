// Batched GEMMs of small products (attention's per-head T x T and T x d
// products: 512 products of 16 x 16 x 16 per call at batch 128). oneDNN's
// batched matmul spends its time on per-product overhead there (about
// 20 GFLOP/s); this kernel packs one product's operands into f32 blocks on
// the stack, decoding them from their own formats on the way (attention's
// q, k and v are column slices of one qkv tensor: decoding a whole span per
// call read three times what the products use), and runs one vectorizable
// pass over a row of B per element of A, the products split over the
// threads.
//
// The decode is exact (TF32: rounded, RNE), as in gemm.cpp, and each output
// is the k-sequential sum s_{p+1} = fma(a(i,p), b(p,j), s_p) from s_0 = 0:
// std::fma rounds once, on every CPU and in every clone, so the bits do not
// depend on the machine or the thread count. Then
//   c = alpha * s_k (+ beta * c_old) (+ bias[j]),
// the order oneDNN's output scale, sum post-op and bias take.
#include <array>
#include <cmath>
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cpu/parallel.h"
#include "numeric/cast.h"
#include "numeric/clones.h"
#include "numeric/convert.h"

namespace engine::cpu {

namespace {

// The FP8 decode table, built once from numeric/convert's exact decoders.
const float* fp8_table(Format f) {
  static const std::array<float, 512> t = [] {
    std::array<float, 512> v{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      v[i] = e4m3_to_fp32(static_cast<std::uint8_t>(i));
      v[256 + i] = e5m2_to_fp32(static_cast<std::uint8_t>(i));
    }
    return v;
  }();
  return t.data() + (f == Format::E5M2 ? 256 : 0);
}

// One operand of the batch: element (r, c) of a product's stored matrix at
// data + (offset + r * ld + c) * element size.
struct Source {
  const void* data;
  Format format;
  const float* table;  // E4M3, E5M2
};

// dst[c] = value of stored element at + c for c < count, decoded exactly:
// contiguous loops with the format fixed outside them, so they vectorize.
__attribute__((always_inline)) inline void decode_run(const Source& s, std::int64_t at, std::int64_t count,
                                                      float* __restrict dst) {
  switch (s.format) {
    case Format::FP32: {
      const float* p = static_cast<const float*>(s.data) + at;
      for (std::int64_t c = 0; c < count; ++c) dst[c] = p[c];
      return;
    }
    case Format::BF16: {
      const std::uint16_t* p = static_cast<const std::uint16_t*>(s.data) + at;
#pragma omp simd
      for (std::int64_t c = 0; c < count; ++c) {
        const std::uint32_t u = static_cast<std::uint32_t>(p[c]) << 16;
        float v;
        std::memcpy(&v, &u, 4);
        dst[c] = v;
      }
      return;
    }
    case Format::FP16: {
      const std::uint16_t* p = static_cast<const std::uint16_t*>(s.data) + at;
#pragma omp simd
      for (std::int64_t c = 0; c < count; ++c) dst[c] = fp16_to_fp32_inline(p[c]);
      return;
    }
    case Format::E4M3:
    case Format::E5M2: {
      const std::uint8_t* p = static_cast<const std::uint8_t*>(s.data) + at;
      for (std::int64_t c = 0; c < count; ++c) dst[c] = s.table[p[c]];
      return;
    }
    default: {  // TF32
      const float* p = static_cast<const float*>(s.data) + at;
      for (std::int64_t c = 0; c < count; ++c) dst[c] = round_to_tf32(p[c]);
      return;
    }
  }
}

// op(X) of one product packed row-major into dst (rows x cols, leading
// dimension dst_ld): X stored with leading dimension ld at element offset
// `base`, transposed when `trans`.
__attribute__((always_inline)) inline void pack(const Source& s, std::int64_t base, std::int64_t ld, bool trans,
                                                std::int64_t rows, std::int64_t cols, float* dst,
                                                std::int64_t dst_ld) {
  if (!trans) {
    for (std::int64_t r = 0; r < rows; ++r) decode_run(s, base + r * ld, cols, dst + r * dst_ld);
    return;
  }
  // Stored cols x rows: each stored row is a column of op(X).
  float run[kSmallGemmMaxM > kSmallGemmMaxK ? kSmallGemmMaxM : kSmallGemmMaxK];
  for (std::int64_t c = 0; c < cols; ++c) {
    decode_run(s, base + c * ld, rows, run);
    for (std::int64_t r = 0; r < rows; ++r) dst[r * dst_ld + c] = run[r];
  }
}

// R rows of C at once from op(A) packed as rows of k floats and op(B)
// packed as k rows of NW floats (columns beyond n are zero): acc[R][NW]
// has compile-time bounds, so it lives in vector registers across the k
// loop, and R independent sums hide the FMA latency.
template <int NW, int R>
__attribute__((always_inline)) inline void rows_block(std::int64_t n, std::int64_t k, const float* a,
                                                      std::int64_t a_row, std::int64_t a_col, const float* bp,
                                                      float* c, std::int64_t ldc, float alpha, float beta,
                                                      const float* bias) {
  float acc[R][NW] = {};
  for (std::int64_t p = 0; p < k; ++p) {
    const float* br = bp + p * NW;
    for (int r = 0; r < R; ++r) {
      const float av = a[r * a_row + p * a_col];
#pragma omp simd
      for (int j = 0; j < NW; ++j) acc[r][j] = std::fma(av, br[j], acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r) {
    float* ci = c + r * ldc;
    if (beta == 0.0f) {
      for (std::int64_t j = 0; j < n; ++j) ci[j] = alpha * acc[r][j];
    } else if (beta == 1.0f) {
      for (std::int64_t j = 0; j < n; ++j) ci[j] = alpha * acc[r][j] + ci[j];
    } else {
      for (std::int64_t j = 0; j < n; ++j) ci[j] = alpha * acc[r][j] + beta * ci[j];
    }
    if (bias)
      for (std::int64_t j = 0; j < n; ++j) ci[j] += bias[j];
  }
}

template <int NW, int R>
__attribute__((always_inline)) inline void product(const SmallBatch& s, const Source& a, std::int64_t a0,
                                                   const Source& b, std::int64_t b0, float* c) {
  alignas(64) float ap[kSmallGemmMaxM * kSmallGemmMaxK];
  alignas(64) float bp[kSmallGemmMaxK * NW];
  const std::int64_t m = s.m, n = s.n, k = s.k;
  // An FP32 A is read in place through its strides; others are decoded.
  const float* a_at = ap;
  std::int64_t a_row = k, a_col = 1;
  if (a.format == Format::FP32) {
    a_at = static_cast<const float*>(a.data) + a0;
    a_row = s.trans_a ? 1 : s.lda;
    a_col = s.trans_a ? s.lda : 1;
  } else {
    pack(a, a0, s.lda, s.trans_a, m, k, ap, k);
  }
  pack(b, b0, s.ldb, s.trans_b, k, n, bp, NW);
  if (n < NW)
    for (std::int64_t p = 0; p < k; ++p)
      for (std::int64_t j = n; j < NW; ++j) bp[p * NW + j] = 0.0f;
  std::int64_t i = 0;
  for (; i + R <= m; i += R)
    rows_block<NW, R>(n, k, a_at + i * a_row, a_row, a_col, bp, c + i * s.ldc, s.ldc, s.alpha, s.beta, s.bias);
  for (; i < m; ++i)
    rows_block<NW, 1>(n, k, a_at + i * a_row, a_row, a_col, bp, c + i * s.ldc, s.ldc, s.alpha, s.beta, s.bias);
}

// Element offset of product t's first stored element of A (or of B).
inline std::int64_t a_offset(const SmallBatch& s, std::int64_t t) {
  return (t / s.batch1) * s.sa[0] + (t % s.batch1) * s.sa[1];
}
inline std::int64_t b_offset(const SmallBatch& s, std::int64_t t) {
  return (t / s.batch1) * s.sb[0] + (t % s.batch1) * s.sb[1];
}

// Product t of the batch; a's and b's data start at element a_lo and b_lo
// of the batch's operands (a thread's decoded spans), 0 for the operands
// themselves.
PL_CPU_CLONES void small_product(const SmallBatch& s, const Source& a, const Source& b, std::int64_t t,
                                 std::int64_t a_lo, std::int64_t b_lo) {
  const std::int64_t i = t / s.batch1, j = t % s.batch1;
  const std::int64_t a0 = a_offset(s, t) - a_lo, b0 = b_offset(s, t) - b_lo;
  float* c = s.c + i * s.sc[0] + j * s.sc[1];
  if (s.n <= 16) product<16, 8>(s, a, a0, b, b0, c);
  else if (s.n <= 32) product<32, 4>(s, a, a0, b, b0, c);
  else product<64, 2>(s, a, a0, b, b0, c);
}

Source source(const void* data, Format f) {
  const float* table = f == Format::E4M3 || f == Format::E5M2 ? fp8_table(f) : nullptr;
  return {data, f, table};
}

}  // namespace

void small_product_at(const SmallBatch& s, std::int64_t t) {
  if (s.native_bf16 && small_bf16_fits(s)) small_product_bf16(s, t);
  else small_product(s, source(s.a, s.a_format), source(s.b, s.b_format), t, 0, 0);
}

bool small_gemm_fits(std::int64_t m, std::int64_t n, std::int64_t k, Format a, Format b) {
  auto ok = [](Format f) {
    return f == Format::FP32 || f == Format::TF32 || f == Format::BF16 || f == Format::FP16 || f == Format::E4M3 ||
           f == Format::E5M2;
  };
  return m > 0 && n > 0 && k > 0 && n <= kSmallGemmMaxN && k <= kSmallGemmMaxK && m <= kSmallGemmMaxM && ok(a) &&
         ok(b);
}

namespace {

// One operand's elements [lo, hi) as f32, decoded as gemm.cpp's prepare
// decodes (decode_operand: the library's vectorized casts).
void decode_span(const void* data, Format f, std::int64_t lo, std::int64_t hi, std::vector<float>& out) {
  const auto n = static_cast<std::size_t>(hi - lo);
  if (out.size() < n) out.resize(n);
  decode_operand(f, static_cast<const std::uint8_t*>(data) + static_cast<std::size_t>(lo) * storage_bytes(f),
                 out.data(), n);
}

}  // namespace

void gemm_small_batched(const SmallBatch& s) {
  const Source a = source(s.a, s.a_format), b = source(s.b, s.b_format);
  const std::int64_t count = s.batch0 * s.batch1;
  const std::int64_t work = count * s.m * s.n * s.k;
  const bool decode_a = s.a_format != Format::FP32, decode_b = s.b_format != Format::FP32;
  if (s.native_bf16 && small_bf16_fits(s)) {
#pragma omp parallel for schedule(static) if (work >= 8 * kParallelMin)
    for (std::int64_t t = 0; t < count; ++t) small_product_bf16(s, t);
    return;
  }
  if (!decode_a && !decode_b) {
#pragma omp parallel for schedule(static) if (work >= 8 * kParallelMin)
    for (std::int64_t t = 0; t < count; ++t) small_product(s, a, b, t, 0, 0);
    return;
  }
  // Operands in other formats: each thread decodes the spans of A and B its
  // products read, once, with the vectorized casts, into buffers of its own
  // (no line the other core holds is written), and its products then read
  // them as FP32 -- the same values, so the same bits as decoding per
  // product.
  const std::int64_t a_ext = ((s.trans_a ? s.k : s.m) - 1) * s.lda + (s.trans_a ? s.m : s.k);
  const std::int64_t b_ext = ((s.trans_b ? s.n : s.k) - 1) * s.ldb + (s.trans_b ? s.k : s.n);
  // The decodes are work too: the transformer's mean pooling of BF16 codes
  // (128 products of 1 x 64 x 16) decodes as many values as it multiplies.
  const std::int64_t decoded = count * ((decode_a ? s.m * s.k : 0) + (decode_b ? s.k * s.n : 0));
#pragma omp parallel if (work >= 8 * kParallelMin || decoded >= kParallelMin)
  {
    const auto th = static_cast<std::int64_t>(omp_get_thread_num());
    const auto nth = static_cast<std::int64_t>(omp_get_num_threads());
    const std::int64_t t0 = count * th / nth, t1 = count * (th + 1) / nth;
    if (t0 < t1) {
      thread_local std::vector<float> a_buf, b_buf;
      std::int64_t a_lo = a_offset(s, t0), a_hi = a_lo, b_lo = b_offset(s, t0), b_hi = b_lo;
      for (std::int64_t t = t0; t < t1; ++t) {
        a_lo = std::min(a_lo, a_offset(s, t));
        a_hi = std::max(a_hi, a_offset(s, t) + a_ext);
        b_lo = std::min(b_lo, b_offset(s, t));
        b_hi = std::max(b_hi, b_offset(s, t) + b_ext);
      }
      // A span is decoded only where the products use at least half of it:
      // attention's q, k and v are column thirds of qkv, and decoding all of
      // qkv for one of them costs more than decoding per product.
      const std::int64_t products = t1 - t0;
      const bool span_a = decode_a && 2 * products * s.m * s.k >= a_hi - a_lo;
      const bool span_b = decode_b && 2 * products * s.k * s.n >= b_hi - b_lo;
      Source ad = a, bd = b;
      if (span_a) {
        decode_span(s.a, s.a_format, a_lo, a_hi, a_buf);
        ad = {a_buf.data(), Format::FP32, nullptr};
      }
      if (span_b) {
        decode_span(s.b, s.b_format, b_lo, b_hi, b_buf);
        bd = {b_buf.data(), Format::FP32, nullptr};
      }
      for (std::int64_t t = t0; t < t1; ++t) small_product(s, ad, bd, t, span_a ? a_lo : 0, span_b ? b_lo : 0);
    }
  }
}

}  // namespace engine::cpu
