// The CPU backend's optimizer ops: the loss scaler's unscale pass and the
// SGD and Adam updates (with their encodes), in the blocks of update_blocks.h.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "backend/cpu/cast_pieces.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/step_kernels.h"
#include "backend/cpu/update_blocks.h"
#include "numeric/cast.h"
#include "numeric/format.h"

namespace engine {

using cpu::f32_container;
using cpu::convert_range;
using cpu::kScaledChunk;
using cpu::scale_amax_encode_chunk;

namespace {

// Thread t's blocks [b0, b1) of `blocks` blocks of `block` values over n
// gradients: the block boundaries nearest to where the optimizer's split
// (cpu::first_block over its kBlock blocks) divides n, so that a
// thread unscales mostly the values its own update reads next, which the
// weight gradient's GEMM also wrote on that thread (its rows of C in the
// same halves). Which thread runs a block changes no bits.
std::pair<std::int64_t, std::int64_t> blocks_near_split(std::int64_t n, std::int64_t block, std::int64_t blocks,
                                                        int t, int nt) {
  const std::size_t ob = (static_cast<std::size_t>(n) + cpu::kBlock - 1) / cpu::kBlock;
  auto boundary = [&](int u) -> std::int64_t {
    if (u <= 0) return 0;
    if (u >= nt) return blocks;
    const auto start = static_cast<std::int64_t>(
        cpu::first_block(ob, static_cast<std::size_t>(u), static_cast<std::size_t>(nt)) * cpu::kBlock);
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

// sgd_update over values [i0, i1) (a block of cpu::kBlock).
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
  cpu::for_blocks(static_cast<std::size_t>(u.n),
                           [&](std::size_t i0, std::size_t i1) { sgd_block(u, c, i0, i1); });
}

void CpuBackend::sgd_update_encode(const SgdUpdate& u, const UpdateEncode& e) { sgd_encode_blocks(u, e, false); }

void CpuBackend::sgd_update_coded(const SgdUpdate& u, const UpdateEncode& e) { sgd_encode_blocks(u, e, true); }

// An update that also encodes does about twice an update's work a value:
// it goes parallel from a quarter of kUpdateParallelMin (the mlp's
// fc2 weights, 32768 values).
constexpr std::int64_t kEncodeParallelMin = static_cast<std::int64_t>(cpu::kUpdateParallelMin / 4);

void CpuBackend::sgd_encode_blocks(const SgdUpdate& u, const UpdateEncode& e, bool decode_first) {
  const std::size_t es = storage_bytes(e.format);
  // The default: the empty, the f32-container and (for codes to decode) the
  // scaled cases.
  if (u.n <= 0 || es == 0 || (e.amax && f32_container(e.format)) ||
      (decode_first && (e.amax || f32_container(e.format)))) {
    if (decode_first) fused::compose(*this, fused::SgdUpdateCodedOp{u, e});
    else fused::compose(*this, fused::SgdUpdateEncodeOp{u, e});
    return;
  }
  use_threads();
  // Each block is encoded right after its update, while it is in L1, by
  // convert's cast or scale_amax_encode's chunk: the bits of
  // encode_updated.
  const cpu::SgdCoeffs c{u.lr, u.momentum, u.keep, u.weight_decay};
  constexpr auto kBlock = static_cast<std::int64_t>(cpu::kBlock);
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
  // Each thread its cpu::first_block run, as sgd_update's blocks
  // (the unscale pass lines up with it).
  std::uint32_t m = 0;
#pragma omp parallel reduction(max : m) if (n >= kEncodeParallelMin)
  {
    const auto nt = static_cast<std::size_t>(omp_get_num_threads());
    const auto t = static_cast<std::size_t>(omp_get_thread_num());
    const auto nb = static_cast<std::size_t>(blocks);
    for (std::size_t b = cpu::first_block(nb, t, nt); b < cpu::first_block(nb, t + 1, nt); ++b)
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
  cpu::for_blocks(static_cast<std::size_t>(u.n), [&](std::size_t i0, std::size_t i1) {
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

}  // namespace engine
