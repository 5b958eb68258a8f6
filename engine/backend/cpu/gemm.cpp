// Backend::gemm on the CPU: operand decoding, the slices, grids and k
// splits over the threads, and the dispatch to the reduced-precision
// accumulation kernel (the oneDNN plan cache: gemm_plans.cpp).
#include "backend/cpu/gemm.h"

#include <bit>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <type_traits>

#include "backend/cpu/fp8_bf16.h"
#include "backend/cpu/gemm_parts.h"
#include "backend/cpu/gemm_plan.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/step_kernels.h"
#include "numeric/cast.h"
#include "numeric/convert.h"

namespace engine::cpu {

void decode_operand(Format f, const void* src, float* dst, std::size_t n) {
  if (f == Format::TF32) cast_from_f32(Format::TF32, static_cast<const float*>(src), dst, n);
  else cast_to_f32(f, src, dst, n);
}

using namespace gemm_parts;

// GemmEngine::Plan: gemm_plan.h.

GemmEngine::GemmEngine(DnnlContext& ctx, bool native_bf16)
    : m_ctx(ctx), m_native_bf16(native_bf16), m_amx(native_bf16 && cpu_has_amx()) {}
GemmEngine::~GemmEngine() = default;

struct GemmEngine::Slice {
  Workspace a, b, scratch, partial;
  float* part = nullptr;  // run_ksplit: this thread's m x n partial product
  dnnl::stream stream;
  Plan* plan = nullptr;  // this call's primitive for the thread's rows
  // A tagged operand's decoded region: its tag (0: none), where and how it
  // is stored, and the matmul type it was decoded to.
  struct Region {
    std::uint64_t tag = 0;
    const void* data = nullptr;
    Format format = Format::FP32;
    bool bf16 = false;
    std::int64_t rows = 0, cols = 0, ld = 0;
    bool operator==(const Region&) const = default;
  };
  // prepare_kept's copies of whole operands. An entry whose tag is 0 holds
  // nothing (its buffer is reused); `used` is the slice call that last read
  // it, and an entry read in the current call is neither reused nor dropped.
  struct Kept {
    Region r;
    std::uint64_t used = 0;
    Workspace ws;
  };
  std::vector<std::unique_ptr<Kept>> kept;
  // The tagged part a thread decoded into `a` or `b` for the very next
  // product (GemmOperand::keep_next), which finds it there.
  Region a_holds, b_holds;
  std::uint64_t call = 0;  // counts this slice's work calls (run_sliced, run_grid, run_ksplit)
  explicit Slice(const dnnl::engine& e) : stream(e) {}
};

Prepared GemmEngine::prepare_kept(Slice& sl, const GemmOperand& op, std::int64_t rows, std::int64_t cols, bool bf16,
                                  Workspace& ws, bool whole) {
  Slice::Region* holds = &ws == &sl.a ? &sl.a_holds : &ws == &sl.b ? &sl.b_holds : nullptr;
  // A decode into ws replaces what it held.
  auto into_ws = [&](const Slice::Region& now) {
    const Prepared p = prepare(op, rows, cols, bf16, ws, true);
    if (holds) *holds = now;
    return p;
  };
  if (op.keep == 0 || !needs_decode(op.format, bf16)) return into_ws({});
  const Slice::Region want{op.keep, op.data, op.format, bf16, rows, cols, op.ld > 0 ? op.ld : cols};
  if (holds && *holds == want) return {ws.get(0), cols};
  for (auto& e : sl.kept)
    if (e->r == want) {
      e->used = sl.call;
      return {e->ws.get(0), cols};
    }
  // A thread's own part of an operand is kept only for the very next
  // product, in the workspace it decodes into anyway (still in cache then):
  // copies of their own, kept from the forward products to the backward
  // ones, cost the transformer's forwards more than they saved its weight
  // gradients, and even for the next product writing a buffer of its own
  // cost about what the reuse saved. A whole operand, which every thread
  // decodes, gets a copy of its own until its next use.
  if (!whole) return into_ws(op.keep_next && !op.keep_last ? want : Slice::Region{});
  const std::size_t bytes = static_cast<std::size_t>(rows * cols) * (bf16 ? 2 : 4);
  if (op.keep_last || bytes > kKeptMaxBytes / 2) return into_ws({});
  // A free entry if there is one: the smallest that holds the copy, else
  // the largest (it grows), so that the step's copies settle into buffers
  // that fit them and nothing is reallocated once the shapes have been
  // seen; then older entries go (the least recently read first) while the
  // copies would pass the bound.
  Slice::Kept* slot = nullptr;
  for (auto& e : sl.kept) {
    if (e->r.tag != 0 || e->used == sl.call) continue;
    const std::size_t cap = e->ws.capacity();
    if (!slot) {
      slot = e.get();
      continue;
    }
    const std::size_t best = slot->ws.capacity();
    const bool fits = cap >= bytes, best_fits = best >= bytes;
    if ((fits && (!best_fits || cap < best)) || (!fits && !best_fits && cap > best)) slot = e.get();
  }
  auto held = [&] {  // the copies' bytes once this one is in
    std::size_t n = 0;
    for (auto& e : sl.kept) n += e->ws.capacity();
    if (!slot) return n + bytes;
    return slot->ws.capacity() >= bytes ? n : n - slot->ws.capacity() + bytes;
  };
  while (held() > kKeptMaxBytes) {
    Slice::Kept* oldest = nullptr;
    for (auto& e : sl.kept)
      if (e.get() != slot && e->used != sl.call && (!oldest || e->used < oldest->used)) oldest = e.get();
    if (!oldest) return into_ws({});
    std::erase_if(sl.kept, [&](const std::unique_ptr<Slice::Kept>& e) { return e.get() == oldest; });
  }
  if (!slot) slot = sl.kept.emplace_back(std::make_unique<Slice::Kept>()).get();
  const Prepared p = prepare(op, rows, cols, bf16, slot->ws, true);
  slot->r = want;
  slot->used = sl.call;
  return p;
}

void GemmEngine::ensure_slices(int nt) {
  while (m_slices.size() < static_cast<std::size_t>(nt))
    m_slices.push_back(std::make_unique<Slice>(m_ctx.engine()));
  make_room(static_cast<std::size_t>(nt));  // the caller's plan lookups then clear nothing
}

template <class Work, class Finish>
void GemmEngine::on_slices(int nt, Work&& work, Finish&& finish) {
  if (nt == 1) {
    // On the calling thread, with one thread as the limit: a team of one is
    // no active parallel region, so oneDNN inside it would start a nested
    // team of its own (milliseconds a call).
    struct One {
      int saved = omp_get_max_threads();
      One() { omp_set_num_threads(1); }
      ~One() { omp_set_num_threads(saved); }
    } one;
    Slice& sl = *m_slices[0];
    work(0, sl);
    if constexpr (!std::is_same_v<std::decay_t<Finish>, std::nullptr_t>) finish(0, sl);
    return;
  }
  std::exception_ptr error;
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num();
    Slice& sl = *m_slices[static_cast<std::size_t>(t)];
    try {
      work(t, sl);
    } catch (...) {
#pragma omp critical(pl_gemm_slices)
      if (!error) error = std::current_exception();
    }
    if constexpr (!std::is_same_v<std::decay_t<Finish>, std::nullptr_t>) {
#pragma omp barrier
      if (!error) finish(t, sl);
    }
  }
  if (error) std::rethrow_exception(error);
}

GemmEngine::Plan* GemmEngine::run_sliced(const GemmArgs& g, bool bf16, std::int64_t ldc, bool alpha_pass,
                                         const GemmEncode* encode) {
  int nt = omp_get_max_threads();
  if (nt < 2) return nullptr;
  if (g.m < nt * kSliceMinRows) {
    // Too few rows to slice. A tiny product (the mlp head's weight
    // gradient, 10 x 128 x 128) then runs as one slice on the calling
    // thread: no fork, and no operand decoded on one core and read on the
    // other (7.5 -> 5.8 us; with rows to slice, 128 x 10 x 128 measured 6.8
    // against 9.1 us on one thread). Larger ones run whole.
    if (g.m * g.n * g.k > kTinyMacs) return nullptr;
    nt = 1;
  }
  if (!needs_decode(g.a.format, bf16) && !needs_decode(g.b.format, bf16) && !encode) return nullptr;
  // A long reduction with A stored transposed (k x m: the transformer's
  // weight gradients dy^T x, k = 2048 tokens) gives a thread no rows of its
  // own to decode, and every thread would decode all of B. With B stored
  // k x n too, run_ksplit took it (split by k). Otherwise, without an
  // encode to do in the slices, one decode of each operand over both
  // threads and one primitive cost less (FP8 on the bf16 path, 64 x 64 x
  // 2048: 173 -> 144 us, before run_ksplit). With a short k (the mlp's
  // batch of 128), or an encode, the slices measured faster (256 x 784 x
  // 128: 170 against 208 us; FP16 192 x 64 x 2048: 700 against 820 us).
  if (g.a.trans && needs_decode(g.a.format, bf16) && g.k >= 1024 && !encode) return nullptr;
  ensure_slices(nt);
  const std::int64_t b_rows = g.b.trans ? g.n : g.k, b_cols = g.b.trans ? g.k : g.n;
  const std::int64_t a_es = static_cast<std::int64_t>(storage_bytes(g.a.format));
  const std::int64_t lda_in = g.a.ld > 0 ? g.a.ld : (g.a.trans ? g.m : g.k);
  // One plan per thread, looked up here on the calling thread (plan_for is
  // not for concurrent use; no allocation once the shapes have been seen). A slice's decoded A is compact, so its leading
  // dimension is known before the decode; B's is b_cols when decoded, else
  // its own.
  const std::int64_t ldb = needs_decode(g.b.format, bf16) ? b_cols : (g.b.ld > 0 ? g.b.ld : b_cols);
  // A narrow A stored transposed (k x m, m <= 128: the weight gradients'
  // dy^T) is decoded whole by each thread, which then reads its columns: a
  // slice of columns is k short runs (2048 calls of 32-64 values in the
  // transformer), which cost more in calls than the whole matrix costs to
  // decode. Wider ones (qkv's 192) decode their slice.
  const bool a_whole = g.a.trans && needs_decode(g.a.format, bf16) && g.m <= 128;
  const bool c_own = scratch_c(encode, g);
  for (int t = 0; t < nt; ++t) {
    const std::int64_t m0 = g.m * t / nt, m1 = g.m * (t + 1) / nt;
    GemmArgs s = g;
    s.m = m1 - m0;
    const std::int64_t lda = a_whole ? g.m : needs_decode(g.a.format, bf16) ? (g.a.trans ? s.m : g.k) : lda_in;
    Key key = key_of(s, lda, ldb, ldc, bf16, alpha_pass ? 1.0f : g.alpha);
    key.has_bias = g.bias != nullptr && !alpha_pass;
    // Without a bias, the 1/scale is the primitive's run-time output scale
    // (no pass over C afterwards: mlp fp8 weight gradient 256 x 784 x 128,
    // no native bf16, 291 -> 262 us); with one, oneDNN's scale-then-add
    // post-op measured slower than the pass below (275 -> 283 us). On the
    // bf16 path a run-time scale moves oneDNN 2.6 from brgemm to gemm:jit,
    // which pays only where the pass over C would cost more than the
    // operands do (m n >= k (m + n)): transformer fp8, 2048 x 128 x 64
    // 250 -> 224 us, but 2048 x 64 x 192 294 -> 335 and 2048 x 64 x 128
    // 214 -> 226 with it; mlp 256 x 784 x 128 141 -> 128. The fp8 GEMMs'
    // sum a step with this rule against none and all: transformer 913
    // against 920 and 948 us, mlp 369 against 385 and 374.
    key.runtime_alpha = runtime_alpha_pays(g, bf16, alpha_pass, m_amx);
    key.slice = t;
    m_slices[static_cast<std::size_t>(t)]->plan = &plan_for(key);
  }
  on_slices(nt, [&](int t, Slice& sl) {
    ++sl.call;
    const std::int64_t m0 = g.m * t / nt, m1 = g.m * (t + 1) / nt, rows = m1 - m0;
    // This thread's rows of op(A): rows of A, or columns when A is stored
    // transposed (k x m).
    GemmOperand a = g.a;
    a.ld = lda_in;
    const void* a_data;
    if (a_whole) {
      const Prepared whole = prepare_kept(sl, a, g.k, g.m, bf16, sl.a, true);
      a_data = static_cast<const std::uint8_t*>(whole.data) + m0 * (bf16 ? 2 : 4);
    } else {
      a.data = static_cast<const std::uint8_t*>(g.a.data) + (g.a.trans ? m0 : m0 * lda_in) * a_es;
      a_data = prepare_kept(sl, a, g.a.trans ? g.k : rows, g.a.trans ? rows : g.k, bf16, sl.a, nt == 1).data;
    }
    const Prepared pb = prepare_kept(sl, g.b, b_rows, b_cols, bf16, sl.b, true);
    // C's rows; where C is scratch, the thread's own buffer instead, which
    // every product of a step reuses (still in cache) where C would be a
    // layer's own, cold one (ldc == n whenever there is an encode).
    float* c = c_own ? sl.partial.get<float>(static_cast<std::size_t>(rows * g.n)) : g.c + m0 * ldc;
    execute_on(*sl.plan, a_data, pb.data, c, g.bias, sl.stream, sl.scratch, &g.alpha);
    // This thread's rows finished as the unsliced path finishes all of C
    // (alpha and bias), and encoded, while in its cache (ldc == n then).
    finish_slice(alpha_pass, sl.plan->runtime_alpha, sl.plan->manual_bias, c, rows, g.n, ldc, g.alpha, g.bias);
    if (c_own) encode_from(*encode, c, m0 * g.n, rows * g.n);
    else if (encode) encode_rows(*encode, g.c, m0, rows, g.n);
  }, nullptr);
  Plan* first = m_slices[0]->plan;
  m_last_impl = &first->impl;
  return first;
}

GemmEngine::Plan* GemmEngine::run_ksplit(const GemmArgs& g, bool bf16, std::int64_t ldc, const GemmEncode* encode) {
  const int nt = omp_get_max_threads();
  if (nt < 2 || !g.a.trans || g.b.trans || g.k < kKsplitMinK) return nullptr;
  // FP32 operands on the f32 path measured the same either way (one
  // two-thread primitive: 1565 against 1570 us a step for the
  // transformer's five weight gradients); they stay whole.
  if (!bf16 && !needs_decode(g.a.format, false) && !needs_decode(g.b.format, false)) return nullptr;
  ensure_slices(nt);
  const std::int64_t lda_in = g.a.ld > 0 ? g.a.ld : g.m, ldb_in = g.b.ld > 0 ? g.b.ld : g.n;
  const std::int64_t a_es = static_cast<std::int64_t>(storage_bytes(g.a.format));
  const std::int64_t b_es = static_cast<std::int64_t>(storage_bytes(g.b.format));
  const std::int64_t lda = needs_decode(g.a.format, bf16) ? g.m : lda_in;
  const std::int64_t ldb = needs_decode(g.b.format, bf16) ? g.n : ldb_in;
  const bool c_own = scratch_c(encode, g);
  for (int t = 0; t < nt; ++t) {
    GemmArgs s = g;
    s.k = g.k * (t + 1) / nt - g.k * t / nt;
    s.beta = 0.0f;
    s.bias = nullptr;
    Key key = key_of(s, lda, ldb, g.n, bf16, 1.0f);
    key.slice = t;
    m_slices[static_cast<std::size_t>(t)]->plan = &plan_for(key);
  }
  on_slices(nt, [&](int t, Slice& sl) {
    ++sl.call;
    const std::int64_t k0 = g.k * t / nt, k1 = g.k * (t + 1) / nt;
    sl.part = sl.partial.get<float>(static_cast<std::size_t>(g.m * g.n));
    GemmOperand a = g.a, b = g.b;
    a.ld = lda_in;
    b.ld = ldb_in;
    a.data = static_cast<const std::uint8_t*>(g.a.data) + k0 * lda_in * a_es;
    b.data = static_cast<const std::uint8_t*>(g.b.data) + k0 * ldb_in * b_es;
    const Prepared pa = prepare_kept(sl, a, k1 - k0, g.m, bf16, sl.a, false);
    const Prepared pb = prepare_kept(sl, b, k1 - k0, g.n, bf16, sl.b, false);
    execute_on(*sl.plan, pa.data, pb.data, sl.part, nullptr, sl.stream, sl.scratch);
  }, [&](int t, Slice&) {
    // This thread's rows of C: the partial products added in thread order,
    // then C = alpha * sum (+ bias) (+ beta * C), then encoded.
    // Where C is scratch, the sums are finished and encoded where they are.
    const std::int64_t i0 = g.m * t / nt, i1 = g.m * (t + 1) / nt;
    for (std::int64_t i = i0; i < i1; ++i) {
      float* sum = m_slices[0]->part + i * g.n;
      for (int u = 1; u < nt; ++u) add_row(sum, m_slices[static_cast<std::size_t>(u)]->part + i * g.n, g.n);
      finish_row(c_own ? sum : g.c + i * ldc, sum, g.n, g.alpha, g.bias, g.beta);
    }
    if (c_own && i1 > i0) encode_from(*encode, m_slices[0]->part + i0 * g.n, i0 * g.n, (i1 - i0) * g.n);
    else if (encode && i1 > i0) encode_rows(*encode, g.c, i0, i1 - i0, g.n);
  });
  m_last_impl = &m_slices[0]->plan->impl;
  return m_slices[0]->plan;
}

GemmEngine::Grid GemmEngine::grid_for(const GemmArgs& g, bool bf16) const {
  const int nt = omp_get_max_threads();
  if (nt < 2 || g.beta != 0.0f) return {};
  // Columns: a forward product x W^T with fewer rows than columns and W to
  // decode (the mlp's fc1, 128 x 256 x 784 on 2 threads): each thread
  // decodes all of A and only its rows of W, which the optimizer step
  // wrote on that thread. Row slices would decode all of W on every thread
  // and have the next update write codes the other core has read. The
  // same holds for BF16 codes read as they are on the bf16 path: row
  // slices had both cores read all of W1's codes, and the update that
  // rewrites them then waited on the other core's copies (Zen 5, mlp
  // mixed-bf16 in bench_train --paired, four sittings against row slices:
  // 1.28-1.30x -> 1.36-1.39x our fp32 where the machine ran slow,
  // 1.37x -> 1.38-1.41x where it ran fast).
  constexpr std::int64_t kColsMin = 64;
  if (!g.a.trans && g.b.trans && g.m < g.n && g.n >= nt * kColsMin &&
      (needs_decode(g.b.format, bf16) || g.b.format == Format::BF16))
    return {1, nt};
  // Blocks: too few rows for run_sliced's row slices on this many threads
  // (batch 128 on 16 threads: 2 x 8 blocks of 64 x 32 for fc1). Every
  // thread decodes its rows of op(A) and its columns of op(B); the most
  // threads, then the least to decode per thread. Against one decode over
  // all threads and one 16-thread primitive (16-core Xeon, bench_train
  // --threads=16, two sittings): mlp fp8 0.96-1.02x -> 1.25-1.28x our
  // fp32, fp16 0.77x -> 1.00-1.08x, mixed-fp16 0.77-0.81x -> 1.04-1.10x.
  constexpr std::int64_t kRowsMin = 16, kColsMinBlock = 32;
  if (nt < 4 || g.m >= nt * kSliceMinRows || g.m * g.n * g.k <= kTinyMacs) return {};
  // Only with an operand to decode: a product that only encodes C (BF16
  // on the bf16 path) ran slower in blocks than as one primitive (Xeon, 16
  // threads: mixed-bf16 mlp 1.27x -> 1.16x our fp32).
  if (!needs_decode(g.a.format, bf16) && !needs_decode(g.b.format, bf16)) return {};
  Grid best;
  std::int64_t best_per = 0;  // rows of op(A) plus columns of op(B) a thread decodes
  for (int gr = 1; gr <= nt; ++gr) {
    const int gc = nt / gr;
    if (g.m < gr * kRowsMin || g.n < gc * kColsMinBlock || gr * gc < 2) continue;
    const std::int64_t per = (g.m + gr - 1) / gr + (g.n + gc - 1) / gc;
    if (gr * gc > best.rows * best.cols || (gr * gc == best.rows * best.cols && per < best_per)) {
      best = {gr, gc};
      best_per = per;
    }
  }
  return best;
}

GemmEngine::Plan* GemmEngine::run_grid(const GemmArgs& g, bool bf16, std::int64_t ldc, bool alpha_pass,
                                       const GemmEncode* encode) {
  const Grid grid = grid_for(g, bf16);
  if (grid.rows * grid.cols < 2) return nullptr;
  const int nt = grid.rows * grid.cols;
  ensure_slices(nt);
  const std::int64_t lda_in = g.a.ld > 0 ? g.a.ld : (g.a.trans ? g.m : g.k);
  const std::int64_t ldb_in = g.b.ld > 0 ? g.b.ld : (g.b.trans ? g.k : g.n);
  const auto a_es = static_cast<std::int64_t>(storage_bytes(g.a.format));
  const auto b_es = static_cast<std::int64_t>(storage_bytes(g.b.format));
  const bool dec_a = needs_decode(g.a.format, bf16), dec_b = needs_decode(g.b.format, bf16);
  const bool c_own = scratch_c(encode, g);
  // Thread t's block: rows [m0, m1) and columns [n0, n1) of C.
  auto block = [&](int t, std::int64_t& m0, std::int64_t& m1, std::int64_t& n0, std::int64_t& n1) {
    const int r = t / grid.cols, c = t % grid.cols;
    m0 = g.m * r / grid.rows;
    m1 = g.m * (r + 1) / grid.rows;
    n0 = g.n * c / grid.cols;
    n1 = g.n * (c + 1) / grid.cols;
  };
  for (int t = 0; t < nt; ++t) {
    std::int64_t m0, m1, n0, n1;
    block(t, m0, m1, n0, n1);
    GemmArgs s = g;
    s.m = m1 - m0;
    s.n = n1 - n0;
    // Decoded operands are compact; a block's product is dense (ldc = its
    // columns): oneDNN 2.6's brgemm takes no strided destination and falls
    // back to gemm:jit (mlp fc1, AVX-512: FP16 263 -> 285 us, FP8 on the
    // bf16 path 136 -> 147).
    const std::int64_t lda = dec_a ? (g.a.trans ? s.m : g.k) : lda_in;
    const std::int64_t ldb = dec_b ? (g.b.trans ? g.k : s.n) : ldb_in;
    Key key = key_of(s, lda, ldb, s.n, bf16, alpha_pass ? 1.0f : g.alpha);
    key.has_bias = g.bias != nullptr && !alpha_pass;
    key.runtime_alpha = runtime_alpha_pays(g, bf16, alpha_pass, m_amx);  // run_sliced's rule
    key.slice = t;
    m_slices[static_cast<std::size_t>(t)]->plan = &plan_for(key);
  }
  on_slices(nt, [&](int t, Slice& sl) {
    ++sl.call;
    std::int64_t m0, m1, n0, n1;
    block(t, m0, m1, n0, n1);
    const std::int64_t rows = m1 - m0, cols = n1 - n0;
    GemmOperand a = g.a, b = g.b;
    a.ld = lda_in;
    b.ld = ldb_in;
    // op(A)'s rows m0.. are stored rows, or columns when A is stored k x m;
    // op(B)'s columns n0.. are stored rows when B is stored n x k.
    a.data = static_cast<const std::uint8_t*>(g.a.data) + (g.a.trans ? m0 : m0 * lda_in) * a_es;
    b.data = static_cast<const std::uint8_t*>(g.b.data) + (g.b.trans ? n0 * ldb_in : n0) * b_es;
    const Prepared pa =
        prepare_kept(sl, a, g.a.trans ? g.k : rows, g.a.trans ? rows : g.k, bf16, sl.a, grid.rows == 1);
    const Prepared pb =
        prepare_kept(sl, b, g.b.trans ? cols : g.k, g.b.trans ? g.k : cols, bf16, sl.b, grid.cols == 1);
    float* part = sl.partial.get<float>(static_cast<std::size_t>(rows * cols));
    const float* bias = g.bias ? g.bias + n0 : nullptr;
    execute_on(*sl.plan, pa.data, pb.data, part, bias, sl.stream, sl.scratch, &g.alpha);
    finish_slice(alpha_pass, sl.plan->runtime_alpha, sl.plan->manual_bias, part, rows, cols, cols, g.alpha, bias);
    // Its block of C, each row encoded while in cache; where C is scratch,
    // encoded from the block alone (mlp fc1, capped AVX2: 277 -> 270 us).
    for (std::int64_t i = 0; i < rows; ++i) {
      if (c_own) {
        encode_from(*encode, part + i * cols, (m0 + i) * g.n + n0, cols);
        continue;
      }
      std::memcpy(g.c + (m0 + i) * ldc + n0, part + i * cols, static_cast<std::size_t>(cols) * sizeof(float));
      if (encode) encode_span(*encode, g.c, (m0 + i) * g.n + n0, cols);
    }
  }, nullptr);
  m_last_impl = &m_slices[0]->plan->impl;
  return m_slices[0]->plan;
}

std::size_t GemmEngine::kept_copies() const {
  std::size_t n = 0;
  for (const auto& sl : m_slices)
    for (const auto& e : sl->kept) n += e->r.tag != 0 ? 1 : 0;
  return n;
}

void GemmEngine::run(const GemmArgs& g, const GemmEncode* encode) {
  if (!product(g, encode) && encode && g.m > 0 && g.n > 0) encode_all(*encode, g.c, g.m, g.n);
  // After a tag's last use every thread's copies under it are free, on
  // threads this product ran on or not (a tiny one runs on one).
  for (const GemmOperand* op : {&g.a, &g.b})
    if (op->keep && op->keep_last)
      for (auto& sl : m_slices)
        for (auto& e : sl->kept)
          if (e->r.tag == op->keep) e->r.tag = 0;
}

bool GemmEngine::product(const GemmArgs& g, const GemmEncode* encode) {
  if (g.m <= 0 || g.n <= 0 || g.batch[0] <= 0 || g.batch[1] <= 0) return false;
  if (g.batched()) {
    run_batched(g);
    return false;
  }
  const std::int64_t ldc = g.ldc > 0 ? g.ldc : g.n;
  if (g.accumulate != Format::FP32 && g.k > 0) {
    run_lowp(g);
    return false;
  }
  m_last_impl = nullptr;
  if (g.k <= 0) {
    // Empty sum: C = beta * C + bias (oneDNN rejects K = 0).
    for (std::int64_t i = 0; i < g.m; ++i)
      for (std::int64_t j = 0; j < g.n; ++j) {
        float& c = g.c[i * ldc + j];
        c = (g.beta != 0.0f ? g.beta * c : 0.0f) + (g.bias ? g.bias[j] : 0.0f);
      }
    return false;
  }

  const bool bf16 = m_native_bf16 && is_bf16_exact(g.a.format) && is_bf16_exact(g.b.format);
  // alpha != 1 with beta == 0 (the FP8 layers' 1/scale, which changes as
  // the delayed scaling moves): the primitive computes A*B alone and one
  // pass applies c = alpha * c + bias, so a new alpha creates no primitive.
  // Same arithmetic as oneDNN's output scale: alpha times the f32 result.
  // (run_sliced gives alpha to the primitive at run time when there is no
  // bias: the same bits on the bf16 path; oneDNN's f32 gemm:jit scales
  // each k block's product as it adds it, a difference in the last bits.)
  const bool alpha_pass = g.alpha != 1.0f && g.beta == 0.0f;
  // Encoding in the slices needs C's rows contiguous.
  const GemmEncode* slice_encode = encode && ldc == g.n ? encode : nullptr;
  if (run_ksplit(g, bf16, ldc, slice_encode)) return slice_encode != nullptr;
  if (g.beta != 0.0f && g.beta != 1.0f) scale_block(g.c, g.m, g.n, ldc, g.beta);
  // The slices finish (and encode) their own rows or columns.
  if (run_grid(g, bf16, ldc, alpha_pass, slice_encode)) return slice_encode != nullptr;
  if (run_sliced(g, bf16, ldc, alpha_pass, slice_encode)) return slice_encode != nullptr;
  const std::int64_t a_rows = g.a.trans ? g.k : g.m, a_cols = g.a.trans ? g.m : g.k;
  const std::int64_t b_rows = g.b.trans ? g.n : g.k, b_cols = g.b.trans ? g.k : g.n;
  const Prepared pa = prepare(g.a, a_rows, a_cols, bf16, m_a_ws);
  const Prepared pb = prepare(g.b, b_rows, b_cols, bf16, m_b_ws);
  Key key = key_of(g, pa.ld, pb.ld, ldc, bf16, alpha_pass ? 1.0f : g.alpha);
  key.has_bias = g.bias != nullptr && !alpha_pass;
  Plan* p = &plan_for(key);
  execute(*p, pa.data, pb.data, g.c, g.bias);
  m_last_impl = &p->impl;
  if (alpha_pass) scale_and_bias(g.c, g.m, g.n, ldc, g.alpha, g.bias);
  if (p->manual_bias) add_bias_rows(g.c, g.m, g.n, ldc, g.bias);
  return false;
}

void GemmEngine::run_batched(const GemmArgs& g) {
  const std::int64_t ldc = g.ldc > 0 ? g.ldc : g.n;
  const std::int64_t a_rows = g.a.trans ? g.k : g.m, a_cols = g.a.trans ? g.m : g.k;
  const std::int64_t b_rows = g.b.trans ? g.n : g.k, b_cols = g.b.trans ? g.k : g.n;
  const std::int64_t lda = g.a.ld > 0 ? g.a.ld : a_cols, ldb = g.b.ld > 0 ? g.b.ld : b_cols;
  auto c_at = [&](std::int64_t i, std::int64_t j) { return g.c + i * g.c_batch_stride[0] + j * g.c_batch_stride[1]; };
  if (g.accumulate != Format::FP32 || g.k <= 0) {
    // The own rounding kernel (and the empty sum) one product at a time.
    auto at = [](const GemmOperand& op, std::int64_t i, std::int64_t j) {
      GemmOperand o = op;
      o.data = static_cast<const std::uint8_t*>(op.data) +
               (i * op.batch_stride[0] + j * op.batch_stride[1]) * static_cast<std::int64_t>(storage_bytes(op.format));
      return o;
    };
    for (std::int64_t i = 0; i < g.batch[0]; ++i)
      for (std::int64_t j = 0; j < g.batch[1]; ++j) {
        GemmArgs s = g;
        s.batch[0] = s.batch[1] = 1;
        s.a = at(g.a, i, j);
        s.b = at(g.b, i, j);
        s.c = c_at(i, j);
        run(s);
      }
    return;
  }
  m_last_impl = nullptr;
  if (small_gemm_fits(g.m, g.n, g.k, g.a.format, g.b.format)) {
    // Products this small cost oneDNN more in per-product overhead than in
    // arithmetic: the own kernel, which decodes each product's operands.
    SmallBatch s;
    s.m = g.m;
    s.n = g.n;
    s.k = g.k;
    s.batch0 = g.batch[0];
    s.batch1 = g.batch[1];
    s.a = g.a.data;
    s.b = g.b.data;
    s.a_format = g.a.format;
    s.b_format = g.b.format;
    s.c = g.c;
    s.trans_a = g.a.trans;
    s.trans_b = g.b.trans;
    s.lda = lda;
    s.ldb = ldb;
    s.ldc = ldc;
    for (int d = 0; d < 2; ++d) {
      s.sa[d] = g.a.batch_stride[d];
      s.sb[d] = g.b.batch_stride[d];
      s.sc[d] = g.c_batch_stride[d];
    }
    s.alpha = g.alpha;
    s.beta = g.beta;
    s.bias = g.bias;
    s.native_bf16 = m_native_bf16;
    gemm_small_batched(s);
    return;
  }
  const bool bf16 = m_native_bf16 && is_bf16_exact(g.a.format) && is_bf16_exact(g.b.format);
  const void* a = prepare_span(g.a, g.batch[0], g.batch[1], a_rows, a_cols, lda, bf16, m_a_ws);
  const void* b = prepare_span(g.b, g.batch[0], g.batch[1], b_rows, b_cols, ldb, bf16, m_b_ws);
  // alpha is in the key (attention's 1/sqrt(d) is a constant); the sum
  // post-op adds C when beta != 0 and the bias is added after, per product.
  const Key key = key_of(g, lda, ldb, ldc, bf16, g.alpha);
  Plan& p = plan_for(key);
  if (g.beta != 0.0f && g.beta != 1.0f)
    for (std::int64_t i = 0; i < g.batch[0]; ++i)
      for (std::int64_t j = 0; j < g.batch[1]; ++j) scale_block(c_at(i, j), g.m, g.n, ldc, g.beta);
  execute(p, a, b, g.c, nullptr);
  if (g.bias)
    for (std::int64_t i = 0; i < g.batch[0]; ++i)
      for (std::int64_t j = 0; j < g.batch[1]; ++j) add_bias_rows(c_at(i, j), g.m, g.n, ldc, g.bias);
  m_last_impl = &p.impl;
}

void GemmEngine::run_lowp(const GemmArgs& g) {
  m_last_impl = nullptr;
  const std::int64_t ldc = g.ldc > 0 ? g.ldc : g.n;
  const std::int64_t a_rows = g.a.trans ? g.k : g.m, a_cols = g.a.trans ? g.m : g.k;
  const std::int64_t b_rows = g.b.trans ? g.n : g.k, b_cols = g.b.trans ? g.k : g.n;
  // Both operands decoded to f32 (exact; TF32 rounded). The kernel reads A
  // through strides and needs B as a contiguous k x n row-major matrix.
  const Prepared pa = prepare(g.a, a_rows, a_cols, false, m_a_ws);
  const Prepared pb = prepare(g.b, b_rows, b_cols, false, m_b_ws);
  const float* b = static_cast<const float*>(pb.data);
  if (g.b.trans || pb.ld != g.n) {
    float* bt = m_bt_ws.get<float>(static_cast<std::size_t>(g.k * g.n));
    const float* src = b;
    if (g.b.trans) {
      for (std::int64_t p = 0; p < g.k; ++p)
        for (std::int64_t j = 0; j < g.n; ++j) bt[p * g.n + j] = src[j * pb.ld + p];
    } else {
      for (std::int64_t p = 0; p < g.k; ++p)
        std::memcpy(bt + p * g.n, src + p * pb.ld, static_cast<std::size_t>(g.n) * sizeof(float));
    }
    b = bt;
  }
  float* acc = m_acc_ws.get<float>(static_cast<std::size_t>(omp_get_max_threads()) *
                                   static_cast<std::size_t>(g.n));
  gemm_lowp_accumulate(g.accumulate, g.m, g.n, g.k, static_cast<const float*>(pa.data), g.a.trans,
                       pa.ld, b, g.c, ldc, g.alpha, g.beta, g.bias, acc);
}

}  // namespace engine::cpu
