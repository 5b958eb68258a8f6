// Attention's core in one pass each way (Backend::attention_forward and
// attention_backward): per batch row b, the H heads' products, softmax and
// roundings run in thread-local buffers, and only what a later step reads
// is stored (probs, their rounded copy, values; dqkv), instead of passes
// over [B, H, T, T] and [B, T, C] tensors with a parallel region each and
// scores, dprobs and dscores written out. The arithmetic is the separate
// ops' own: small_product_at is the batched small GEMM's per-product
// kernel, softmax_rows_f32 and softmax_backward_block the softmax kernels,
// and the roundings are the library casts, so the bits are the same.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "backend/backend.h"
#include "backend/fused.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/row_kernels.h"
#include "numeric/cast.h"
#include "numeric/format.h"

namespace engine::cpu {

namespace {

bool f32_or_half(Format f) { return f == Format::FP32 || is_half_format(f); }

// n f32 values stored in format f at element `at` of dst (a copy for FP32).
void store(Format f, const float* src, void* dst, std::int64_t at, std::int64_t n, bool saturate) {
  const std::size_t es = storage_bytes(f);
  std::byte* d = static_cast<std::byte*>(dst) + static_cast<std::size_t>(at) * es;
  if (f == Format::FP32) {
    std::memcpy(d, src, static_cast<std::size_t>(n) * sizeof(float));
    return;
  }
  CastOptions opt;
  opt.saturate = saturate;
  cast_from_f32(f, src, d, static_cast<std::size_t>(n), opt);
}

// Shapes the small-GEMM kernels take (T x T x d and T x d x T products).
bool fits(std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t H, Format a, Format b) {
  if (B <= 0 || T <= 0 || H <= 0 || C <= 0 || C % H != 0) return false;
  const std::int64_t d = C / H;
  return small_gemm_fits(T, T, d, a, b) && small_gemm_fits(T, d, T, a, b);
}

// A thread's buffer of at least n values of T, kept between calls.
template <class T>
T* scratch(std::vector<T>& v, std::int64_t n) {
  if (v.size() < static_cast<std::size_t>(n)) v.resize(static_cast<std::size_t>(n));
  return v.data();
}

// x[0, n) encoded to f (FP16/BF16) in `codes` and decoded back: the values
// a tensor stored in f gives its next reader. Nothing to do for FP32.
void round_trip(Format f, float* x, std::uint16_t* codes, std::int64_t n, bool saturate) {
  if (f == Format::FP32) return;
  CastOptions opt;
  opt.saturate = saturate;
  cast_from_f32(f, x, codes, static_cast<std::size_t>(n), opt);
  cast_to_f32(f, codes, x, static_cast<std::size_t>(n));
}

// Batch row b's n values of a [B, n] operand in format f decoded into buf
// (exact: the values the f32 kernel would decode per product).
const float* decode_row(Format f, const void* base, std::int64_t b, std::int64_t n, std::vector<float>& buf) {
  float* out = scratch(buf, n);
  cast_to_f32(f, static_cast<const std::byte*>(base) + static_cast<std::size_t>(b * n) * storage_bytes(f), out,
              static_cast<std::size_t>(n));
  return out;
}

// A product's operand redirected to batch row b's decoded copy (`row`, its
// first element the batch row's first): FP32, batch stride 0 along b.
void use_row_a(SmallBatch& s, const float* row, std::int64_t col0) {
  s.a = row + col0;
  s.a_format = Format::FP32;
  s.sa[0] = 0;
}
void use_row_b(SmallBatch& s, const float* row, std::int64_t col0) {
  s.b = row + col0;
  s.b_format = Format::FP32;
  s.sb[0] = 0;
}

// Whether small_product_at runs s on the AVX512-BF16 kernel (else on the
// f32 kernel, which decodes each product's operands: those are decoded
// once per batch row instead, the same values).
bool on_bf16_kernel(const SmallBatch& s) { return s.native_bf16 && small_bf16_fits(s); }

// A B x H batch of m x n x k products for small_product_at.
SmallBatch products(std::int64_t B, std::int64_t H, std::int64_t m, std::int64_t n, std::int64_t k,
                    bool native_bf16) {
  SmallBatch s;
  s.m = m;
  s.n = n;
  s.k = k;
  s.batch0 = B;
  s.batch1 = H;
  s.native_bf16 = native_bf16;
  return s;
}

// Head h of batch row b for every h: the products a batch row needs.
void run_heads(const SmallBatch& s, std::int64_t b) {
  for (std::int64_t h = 0; h < s.batch1; ++h) small_product_at(s, b * s.batch1 + h);
}

// Causal attention in blocks of kCausalRows query rows: block [r0, r1)
// needs scores and dprobs only in columns [0, r1) (the rest are masked and
// never read), and its products with the probabilities or dscores only the
// positions [0, r1) (out = P v, dq = dS k) or, transposed, the query rows
// [r0, T) (dv = P^T dO, dk = dS^T q): the terms left out are products with
// a stored zero. Every output is the same chain of multiply-adds over the
// same k as in the whole product, less those zeros at its start or end
// (the kernels sum each output over k in order from +0; a zero product
// added there changes nothing while the other factor is finite: hence the
// finiteness check). Blocks of 16 keep every k even and a whole number of
// the bf16 kernel's pairs, so each block runs on the kernel the whole
// product would.
constexpr std::int64_t kCausalRows = 16;

enum class Skip {
  Columns,     // n = r1: outputs past the block's last position are masked
  KTail,       // k = r1: P or dS is zero past the row
  KHead,       // k from r0: op(A) = P^T or dS^T is zero before the column
};

// Rows [r0, r1) of s's products, skipping what `skip` says.
SmallBatch rows_of(const SmallBatch& s, std::int64_t r0, std::int64_t r1, Skip skip) {
  SmallBatch x = s;
  const std::size_t ea = storage_bytes(s.a_format), eb = storage_bytes(s.b_format);
  auto at = [](const void* p, std::int64_t elems, std::size_t es) {
    return static_cast<const void*>(static_cast<const std::byte*>(p) + static_cast<std::size_t>(elems) * es);
  };
  x.m = r1 - r0;
  x.a = at(s.a, s.trans_a ? r0 : r0 * s.lda, ea);
  x.c = s.c + r0 * s.ldc;
  if (skip == Skip::Columns) {
    x.n = r1;
  } else if (skip == Skip::KTail) {
    x.k = r1;
  } else {
    // op(A)(i, p) = A[p * lda + i]: rows p < r0 of the stored A and of B left out.
    x.a = at(s.a, r0 * s.lda + r0, ea);
    x.b = at(s.b, s.trans_b ? r0 : r0 * s.ldb, eb);
    x.k = s.k - r0;
  }
  return x;
}

// run_heads over row blocks (causal) or whole.
void run_heads_causal(const SmallBatch& s, std::int64_t b, bool blocks, Skip skip) {
  if (!blocks) {
    run_heads(s, b);
    return;
  }
  for (std::int64_t r0 = 0; r0 < s.m; r0 += kCausalRows)
    run_heads(rows_of(s, r0, std::min(s.m, r0 + kCausalRows), skip), b);
}

// Whether n values of format f (FP32 or FP16/BF16 codes) are all finite.
bool all_finite(Format f, const void* data, std::int64_t n) {
  if (f == Format::FP32) {
    const auto* u = static_cast<const std::uint32_t*>(data);
    std::uint32_t bad = 0;
    for (std::int64_t i = 0; i < n; ++i) bad |= static_cast<std::uint32_t>((u[i] & 0x7F800000u) == 0x7F800000u);
    return bad == 0;
  }
  const std::uint16_t mask = f == Format::BF16 ? 0x7F80u : 0x7C00u;
  const auto* u = static_cast<const std::uint16_t*>(data);
  std::uint32_t bad = 0;
  for (std::int64_t i = 0; i < n; ++i) bad |= static_cast<std::uint32_t>((u[i] & mask) == mask);
  return bad == 0;
}

// Batch row b's n values of a [B, n] operand in format f: all finite?
bool row_finite(Format f, const void* base, std::int64_t b, std::int64_t n) {
  return all_finite(f, static_cast<const std::byte*>(base) + static_cast<std::size_t>(b * n) * storage_bytes(f), n);
}

}  // namespace

bool attention_forward(const AttentionForward& f, bool native_bf16) {
  const std::int64_t B = f.B, T = f.T, C = f.C, H = f.H;
  for (Format x : {f.format, f.scores_format, f.softmax_format, f.values_format})
    if (!f32_or_half(x)) return false;
  const bool cast = f.values_cast != Format::FP32;
  if (cast && (!is_fp8(f.values_cast) || f.values_format != Format::FP32 || !f.values_codes || !f.values_amax))
    return false;
  if (f.probs_format != Format::FP32 && f.probs_format != f.format) return false;
  if (!fits(B, T, C, H, f.format, f.format)) return false;
  const std::int64_t d = C / H;

  const std::size_t es = storage_bytes(f.format);
  const auto* qkv = static_cast<const std::byte*>(f.qkv);
  // scores[b, h] = q k^T * alpha: the batched GEMM attention_scores_forward
  // makes, its output redirected to the thread's buffer (head h at h T T).
  SmallBatch sc = products(B, H, T, T, d, native_bf16);
  sc.a = qkv;
  sc.b = qkv + static_cast<std::size_t>(C) * es;
  sc.a_format = sc.b_format = f.format;
  sc.trans_b = true;
  sc.lda = sc.ldb = 3 * C;
  sc.sa[0] = sc.sb[0] = T * 3 * C;
  sc.sa[1] = sc.sb[1] = d;
  sc.ldc = T;
  sc.sc[1] = T * T;
  sc.alpha = f.alpha;
  // values[b, :, h d ..] = probs[b, h] v: attention_values_forward's GEMM,
  // its output the thread's [T, C] buffer.
  SmallBatch sv = products(B, H, T, d, T, native_bf16);
  sv.a = f.format == Format::FP32 ? static_cast<const void*>(f.probs) : f.probs_codes;  // probs in `format`
  sv.b = qkv + static_cast<std::size_t>(2 * C) * es;
  sv.a_format = sv.b_format = f.format;
  sv.lda = T;
  sv.sa[0] = H * T * T;
  sv.sa[1] = T * T;
  sv.ldb = 3 * C;
  sv.sb[0] = T * 3 * C;
  sv.sb[1] = d;
  sv.ldc = C;
  sv.sc[1] = d;

  const std::int64_t plane = H * T * T;  // one batch row's scores
  const bool f32_s = f.format != Format::FP32 && !on_bf16_kernel(sc);
  const bool f32_v = f.format != Format::FP32 && !on_bf16_kernel(sv);
  CastOptions cast_opt;
  cast_opt.saturate = true;  // round_scaled's
  std::uint32_t amax_bits = 0;  // the cast's, as bit patterns
#pragma omp parallel for schedule(static) reduction(max : amax_bits) if (B > 1 && worth_parallel(B * plane))
  for (std::int64_t b = 0; b < B; ++b) {
    thread_local std::vector<float> s_buf, o_buf, q_buf, p_buf, y_buf;
    thread_local std::vector<std::uint16_t> c_buf;
    float* s = scratch(s_buf, plane);
    // FP32 values go straight to their place; others, and cast ones,
    // through the buffer.
    float* o = f.values_format == Format::FP32 && !cast ? static_cast<float*>(f.values) + b * T * C
                                                        : scratch(o_buf, T * C);
    const float* q32 = f32_s || f32_v ? decode_row(f.format, f.qkv, b, T * 3 * C, q_buf) : nullptr;
    SmallBatch scb = sc;
    if (f32_s) {
      use_row_a(scb, q32, 0);
      use_row_b(scb, q32, C);
    }
    scb.c = s;
    // Masked scores are never computed; P v skips the masked zeros where v
    // is finite (rows_of).
    const bool blocks = f.causal && T % kCausalRows == 0;
    run_heads_causal(scb, b, blocks, Skip::Columns);
    // Stored (here in the thread's buffer) and read back, as the softmax
    // reads the stored scores.
    round_trip(f.scores_format, s, scratch(c_buf, plane), plane, f.scores_saturate);
    // The softmax layer's own rounding of its input (f32_rounded's quantize).
    if (f.softmax_format != Format::FP32 && f.softmax_format != f.scores_format) {
      CastOptions q;
      q.saturate = f.softmax_saturate;
      quantize_inplace(f.softmax_format, s, static_cast<std::size_t>(plane), q);
    }
    float* probs = f.probs_format == Format::FP32 ? f.probs + b * plane : scratch(y_buf, plane);
    const std::int64_t rows = H * T;
    std::int64_t r = 0;
    if (f.causal) {
      // causal_softmax's rows: the first t + 1 scores as a row of their own.
      for (; r < rows; ++r) {
        const std::int64_t seen = r % T + 1;
        softmax_rows_f32(s + r * T, probs + r * T, 1, seen);
        std::fill(probs + r * T + seen, probs + (r + 1) * T, 0.0f);
      }
    }
    for (; r + kSoftmaxRows <= rows; r += kSoftmaxRows)
      softmax_rows_f32(s + r * T, probs + r * T, kSoftmaxRows, T);
    for (; r < rows; ++r) softmax_rows_f32(s + r * T, probs + r * T, 1, T);
    if (f.format != Format::FP32) store(f.format, probs, f.probs_codes, b * plane, plane, f.probs_saturate);
    SmallBatch svb = sv;
    if (f32_v) {
      use_row_a(svb, decode_row(f.format, f.probs_codes, b, plane, p_buf), 0);
      use_row_b(svb, q32, 2 * C);
    }
    svb.c = o;
    run_heads_causal(svb, b, blocks && row_finite(f.format, f.qkv, b, T * 3 * C), Skip::KTail);
    if (cast) {
      auto* q = static_cast<std::byte*>(f.values_codes);
      for (std::int64_t at = b * T * C, end = at + T * C; at < end; at += kScaledChunk)
        amax_bits = std::max(amax_bits, scale_amax_encode_span(o + (at - b * T * C), f.values_scale, f.values_cast,
                                                               q + at, std::min(kScaledChunk, end - at), cast_opt, at));
    } else if (f.values_format != Format::FP32) {
      store(f.values_format, o, f.values, b * T * C, T * C, f.values_saturate);
    }
  }
  if (cast) *f.values_amax = amax_from_bits(amax_bits);
  return true;
}

bool attention_backward(const AttentionBackward& f, bool native_bf16) {
  const std::int64_t B = f.B, T = f.T, C = f.C, H = f.H;
  for (Format x : {f.format, f.dvalues_format, f.dprobs_format, f.softmax_grad_format, f.dscores_format})
    if (!f32_or_half(x)) return false;
  if (f.probs_format != Format::FP32 && f.probs_format != f.format) return false;
  if (!f32_or_half(f.dqkv_format)) return false;
  // Every product pairs two of format, dvalues_format and dscores_format.
  if (!fits(B, T, C, H, f.format, f.dvalues_format) || !fits(B, T, C, H, f.dscores_format, f.format)) return false;
  const std::int64_t d = C / H, plane = H * T * T, ld = 3 * C;
  const Format fq = f.format, gv = f.dvalues_format, gs = f.dscores_format, fg = f.softmax_grad_format;
  const std::size_t es = storage_bytes(fq);
  const auto* qkv = static_cast<const std::byte*>(f.qkv);
  // The operands as attention_values_backward and attention_scores_backward
  // pass them; the outputs (and the rounded dS, which only lives here)
  // redirected to the thread's buffers.
  // dP [T, T] = dO [T, d] v^T
  SmallBatch dp = products(B, H, T, T, d, native_bf16);
  dp.a = f.dvalues;
  dp.a_format = gv;
  dp.lda = C;
  dp.sa[0] = T * C;
  dp.sa[1] = d;
  dp.b = qkv + static_cast<std::size_t>(2 * C) * es;
  dp.b_format = fq;
  dp.trans_b = true;
  dp.ldb = ld;
  dp.sb[0] = T * ld;
  dp.sb[1] = d;
  dp.ldc = T;
  dp.sc[1] = T * T;
  // dv [T, d] = P^T dO
  SmallBatch dv = products(B, H, T, d, T, native_bf16);
  dv.a = f.probs_operand;
  dv.a_format = fq;
  dv.trans_a = true;
  dv.lda = T;
  dv.sa[0] = plane;
  dv.sa[1] = T * T;
  dv.b = f.dvalues;
  dv.b_format = gv;
  dv.ldb = C;
  dv.sb[0] = T * C;
  dv.sb[1] = d;
  dv.ldc = ld;
  dv.sc[1] = d;
  // dq [T, d] = alpha dS k, dk = alpha dS^T q
  SmallBatch dq = products(B, H, T, d, T, native_bf16);
  dq.a_format = gs;
  dq.lda = T;
  dq.sa[1] = T * T;  // dS: the thread's buffer, head h at h T T
  dq.b = qkv + static_cast<std::size_t>(C) * es;
  dq.b_format = fq;
  dq.ldb = ld;
  dq.sb[0] = T * ld;
  dq.sb[1] = d;
  dq.ldc = ld;
  dq.sc[1] = d;
  dq.alpha = f.alpha;
  SmallBatch dk = dq;
  dk.trans_a = true;
  dk.b = qkv;

  // Operands the f32 kernel would decode per product, decoded per batch row.
  const bool f32_dp = !on_bf16_kernel(dp), f32_dv = !on_bf16_kernel(dv), f32_ds = !on_bf16_kernel(dq);
  const bool row_qkv = fq != Format::FP32 && (f32_dp || f32_ds);
  const bool row_do = gv != Format::FP32 && (f32_dp || f32_dv);
  const bool row_p = fq != Format::FP32 && f32_dv;
#pragma omp parallel for schedule(static) if (B > 1 && worth_parallel(B * plane))
  for (std::int64_t b = 0; b < B; ++b) {
    thread_local std::vector<float> p_buf, s_buf, g_buf, qkv_buf, do_buf, pr_buf, y_buf;
    thread_local std::vector<std::uint16_t> q_buf, c_buf;
    float* p = scratch(p_buf, plane);
    float* ds = scratch(s_buf, plane);
    // f32 dqkv rows are written in place; codes through the buffer.
    float* g = f.dqkv_codes ? scratch(g_buf, T * ld) : f.dqkv + b * T * ld;
    const float* q32 = row_qkv ? decode_row(fq, f.qkv, b, T * ld, qkv_buf) : nullptr;
    const float* do32 = row_do ? decode_row(gv, f.dvalues, b, T * C, do_buf) : nullptr;
    // Causal: the masked dprobs are never computed; the products with P and
    // dS skip their masked zeros where the other operand is finite (rows_of).
    const bool blocks = f.causal && T % kCausalRows == 0;
    const bool skip_zeros =
        blocks && row_finite(fq, f.qkv, b, T * ld) && row_finite(gv, f.dvalues, b, T * C);
    SmallBatch x = dp;
    if (f32_dp) {
      if (do32) use_row_a(x, do32, 0);
      if (q32) use_row_b(x, q32, 2 * C);
    }
    x.c = p;
    run_heads_causal(x, b, blocks, Skip::Columns);
    x = dv;
    if (f32_dv) {
      if (row_p) use_row_a(x, decode_row(fq, f.probs_operand, b, plane, pr_buf), 0);
      if (do32) use_row_b(x, do32, 0);
    }
    x.c = g + 2 * C;
    run_heads_causal(x, b, skip_zeros, Skip::KHead);
    // dprobs as stored in its format, read by the softmax backward, which
    // rounds it to its grad format (f32_rounded's quantize) and stores its
    // result in that format.
    round_trip(f.dprobs_format, p, scratch(c_buf, plane), plane, false);
    if (fg != Format::FP32 && fg != f.dprobs_format) quantize_inplace(fg, p, static_cast<std::size_t>(plane), {});
    const float* y = f.probs_format == Format::FP32 ? static_cast<const float*>(f.probs) + b * plane
                                                    : decode_row(f.probs_format, f.probs, b, plane, y_buf);
    if (f.causal) {
      for (std::int64_t r = 0; r < H * T; ++r) {
        const std::int64_t seen = r % T + 1;
        softmax_backward_block(y + r * T, p + r * T, ds + r * T, 1, seen);
        std::fill(ds + r * T + seen, ds + (r + 1) * T, 0.0f);
      }
    } else {
      softmax_backward_block(y, p, ds, H * T, T);
    }
    round_trip(fg, ds, scratch(c_buf, plane), plane, false);
    // dS: codes for the bf16 kernel, else their values in f32.
    const void* s_op = ds;
    Format s_format = Format::FP32;
    if (gs != Format::FP32) {
      std::uint16_t* q = scratch(q_buf, plane);
      if (f32_ds) {
        if (gs != fg) round_trip(gs, ds, q, plane, false);
      } else {
        cast_from_f32(gs, ds, q, static_cast<std::size_t>(plane), CastOptions{});
        s_op = q;
        s_format = gs;
      }
    }
    for (const SmallBatch* prod : {&dq, &dk}) {
      x = *prod;
      x.a = s_op;
      x.a_format = s_format;
      if (f32_ds && q32) use_row_b(x, q32, prod == &dq ? C : 0);
      x.c = prod == &dq ? g : g + C;
      run_heads_causal(x, b, skip_zeros, prod == &dq ? Skip::KTail : Skip::KHead);
    }
    if (f.dqkv_codes) {
      store(f.dqkv_format, g, f.dqkv_codes, b * T * ld, T * ld, false);
    } else if (f.dqkv_format != Format::FP32) {
      quantize_inplace(f.dqkv_format, g, static_cast<std::size_t>(T * ld), {});
    }
  }
  return true;
}

}  // namespace engine::cpu
