// Attention's core forward in one pass (Backend::attention_forward): per
// batch row b, the H heads' scores, softmax, rounded probs and values are
// computed in thread-local buffers and stored once, instead of six passes
// over [B, H, T, T] and [B, T, C] tensors with a parallel region each. The
// arithmetic is the separate ops' own: small_product_at is the batched small
// GEMM's per-product kernel, softmax_rows_f32 the softmax rows' kernel, and
// the stores are the library casts, so the bits are the same.
#include <cstddef>
#include <cstring>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/row_kernels.h"
#include "numeric/cast.h"

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

}  // namespace

bool attention_forward(const AttentionForward& f, bool native_bf16) {
  const std::int64_t B = f.B, T = f.T, C = f.C, H = f.H;
  if (B <= 0 || T <= 0 || H <= 0 || C <= 0 || C % H != 0) return false;
  const std::int64_t d = C / H;
  if (!f32_or_half(f.format) || !f32_or_half(f.scores_format) || !f32_or_half(f.values_format)) return false;
  if (!small_gemm_fits(T, T, d, f.format, f.format) || !small_gemm_fits(T, d, T, f.format, f.format)) return false;

  const std::size_t es = storage_bytes(f.format);
  const auto* qkv = static_cast<const std::byte*>(f.qkv);
  // scores[b, h] = q k^T * alpha: the batched GEMM attention_scores_forward
  // makes, its output redirected to the thread's buffer (head h at h T T).
  SmallBatch sc;
  sc.m = T;
  sc.n = T;
  sc.k = d;
  sc.batch0 = B;
  sc.batch1 = H;
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
  sc.native_bf16 = native_bf16;
  // values[b, :, h d ..] = probs[b, h] v: attention_values_forward's GEMM,
  // its output the thread's [T, C] buffer.
  SmallBatch sv;
  sv.m = T;
  sv.n = d;
  sv.k = T;
  sv.batch0 = B;
  sv.batch1 = H;
  sv.a = f.format == Format::FP32 ? static_cast<const void*>(f.probs) : f.probs_codes;
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
  sv.native_bf16 = native_bf16;

  const std::int64_t plane = H * T * T;  // one batch row's scores
#pragma omp parallel for schedule(static) if (B > 1 && worth_parallel(B * plane))
  for (std::int64_t b = 0; b < B; ++b) {
    thread_local std::vector<float> s_buf, o_buf;
    if (s_buf.size() < static_cast<std::size_t>(plane)) s_buf.resize(static_cast<std::size_t>(plane));
    if (o_buf.size() < static_cast<std::size_t>(T * C)) o_buf.resize(static_cast<std::size_t>(T * C));
    float* s = s_buf.data();
    SmallBatch scb = sc;
    scb.c = s;
    for (std::int64_t h = 0; h < H; ++h) small_product_at(scb, b * H + h);
    // Stored, and read back as the softmax reads the stored scores.
    store(f.scores_format, s, f.scores, b * plane, plane, f.scores_saturate);
    if (f.scores_format != Format::FP32)
      cast_to_f32(f.scores_format,
                  static_cast<const std::byte*>(f.scores) +
                      static_cast<std::size_t>(b * plane) * storage_bytes(f.scores_format),
                  s, static_cast<std::size_t>(plane));
    float* probs = f.probs + b * plane;
    const std::int64_t rows = H * T;
    std::int64_t r = 0;
    for (; r + kSoftmaxRows <= rows; r += kSoftmaxRows)
      softmax_rows_f32(s + r * T, probs + r * T, kSoftmaxRows, T);
    for (; r < rows; ++r) softmax_rows_f32(s + r * T, probs + r * T, 1, T);
    if (f.format != Format::FP32) store(f.format, probs, f.probs_codes, b * plane, plane, f.probs_saturate);
    SmallBatch svb = sv;
    svb.c = o_buf.data();
    for (std::int64_t h = 0; h < H; ++h) small_product_at(svb, b * H + h);
    store(f.values_format, o_buf.data(), f.values, b * T * C, T * C, f.values_saturate);
  }
  return true;
}

}  // namespace engine::cpu
