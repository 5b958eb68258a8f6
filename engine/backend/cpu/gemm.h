// GemmEngine: Backend::gemm on the CPU. oneDNN matmul with cached
// primitives for FP32 accumulation; the own rounding kernel (gemm_lowp.cpp)
// for FP16/BF16 accumulation.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/fused.h"
#include "backend/cpu/dnnl_context.h"
#include "backend/cpu/workspace.h"

namespace engine::cpu {

// C = alpha * op(A) op(B) + beta * C (+ bias) with every partial sum of the
// dot products rounded to `accumulate` (FP16 or BF16) after each addition,
// k-sequentially: for each (i, j), s_0 = 0 and
//   s_{p+1} = round(s_p + a(i, p) * b(p, j))        (all in FP32, then rounded)
// where the product and the sum are FP32 operations (the product of two
// FP16/BF16/FP8 values is exact in FP32) and round() is
// engine::quantize(accumulate, .). Then, in FP32:
//   c = alpha * s_k;  c += beta * c_old (beta != 0);  c += bias[j].
// a(i, p) = a[i * lda + p], or a[p * lda + i] when trans_a (A stored k x m);
// b: k x n row-major, contiguous. acc: omp_get_max_threads() x n floats of
// scratch (one accumulator row per thread). The backend's calling thread.
void gemm_lowp_accumulate(Format accumulate, std::int64_t m, std::int64_t n, std::int64_t k,
                          const float* a, bool trans_a, std::int64_t lda, const float* b,
                          float* c, std::int64_t ldc, float alpha, float beta, const float* bias,
                          float* acc);

// Batched products small enough that oneDNN's per-product overhead
// dominates (gemm_small.cpp): operands read in their own formats (FP32,
// TF32, BF16, FP16, E4M3, E5M2) through their strides, FP32 accumulation.
inline constexpr std::int64_t kSmallGemmMaxM = 64, kSmallGemmMaxN = 64, kSmallGemmMaxK = 64;
bool small_gemm_fits(std::int64_t m, std::int64_t n, std::int64_t k, Format a, Format b);
struct SmallBatch {
  std::int64_t m = 0, n = 0, k = 0, batch0 = 1, batch1 = 1;
  const void* a = nullptr;  // element strides below are in elements of the operand's format
  const void* b = nullptr;
  Format a_format = Format::FP32, b_format = Format::FP32;
  float* c = nullptr;
  bool trans_a = false, trans_b = false;
  std::int64_t lda = 0, ldb = 0, ldc = 0;
  std::int64_t sa[2] = {0, 0}, sb[2] = {0, 0}, sc[2] = {0, 0};
  float alpha = 1.0f, beta = 0.0f;
  const float* bias = nullptr;
  bool native_bf16 = false;  // the CPU has the AVX512-BF16 dot product
};
void gemm_small_batched(const SmallBatch& s);
// Product t of the batch alone, on the calling thread, with the bits
// gemm_small_batched gives it (the AVX512-BF16 kernel where it fits and the
// CPU has it, else the f32 kernel on exactly decoded operands).
void small_product_at(const SmallBatch& s, std::int64_t t);
// BF16 x BF16 products with n <= 64 and k even, on the AVX512-BF16 dot
// product (gemm_small_bf16.cpp): where the CPU has it, product t of the
// batch (gemm_small_batched splits the products over the threads).
bool small_bf16_fits(const SmallBatch& s);
void small_product_bf16(const SmallBatch& s, std::int64_t t);

// n stored values of format f as the f32 GEMM paths read them: decoded
// exactly, TF32 rounded (RNE) to its grid.
void decode_operand(Format f, const void* src, float* dst, std::size_t n);

// A stored matrix as the matmul reads it: data and leading dimension.
struct Prepared {
  const void* data;
  std::int64_t ld;
};

class GemmEngine {
 public:
  GemmEngine(DnnlContext& ctx, bool native_bf16);
  ~GemmEngine();
  GemmEngine(const GemmEngine&) = delete;
  GemmEngine& operator=(const GemmEngine&) = delete;

  // The backend's calling thread. With `encode`, C (rows contiguous) is
  // also encoded to its codes: by each thread right after its rows where
  // the GEMM runs sliced, else after the whole product; the same bits.
  void run(const GemmArgs& args, const GemmEncode* encode = nullptr);
  // oneDNN implementation of the last call ("" after the own kernel).
  std::string last_impl() const { return m_last_impl ? *m_last_impl : std::string(); }
  // Decoded operands kept under a tag (prepare_kept), over all threads.
  std::size_t kept_copies() const;

 private:
  // Everything the primitive depends on. oneDNN's fast kernels (brgemm)
  // take only compile-time output scales (runtime scales fall back to the
  // slower gemm:jit), so alpha is in the key -- but only when beta != 0:
  // with beta == 0 alpha (and the bias) are applied in one pass after the
  // matmul and the key holds alpha = 1. beta is handled outside the
  // primitive (C is prescaled when beta is not 0 or 1), so only beta != 0
  // matters.
  struct Key {
    std::int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
    std::uint32_t alpha_bits = 0;
    bool trans_a = false, trans_b = false, bf16 = false, has_bias = false, has_beta = false;
    bool runtime_alpha = false;  // output scale given at execution (the FP8 layers' 1/scale)
    // Batched calls: the batch dimensions and the operands' batch strides.
    std::int64_t batch0 = 1, batch1 = 1, sa0 = 0, sa1 = 0, sb0 = 0, sb1 = 0, sc0 = 0, sc1 = 0;
    // >= 0: the primitive of one thread's slice (run_sliced, run_ksplit, run_grid), created
    // for one thread; -1: a primitive that uses all the threads.
    int slice = -1;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const;
  };
  struct Plan;
  Plan& plan_for(const Key& key);
  // Clears the plan cache when `plans` more would pass kMaxPlans.
  static constexpr std::size_t kMaxPlans = 512;
  void make_room(std::size_t plans);
  // The key of g's primitive (its batch dimensions included when batched);
  // has_bias is the caller's.
  static Key key_of(const GemmArgs& g, std::int64_t lda, std::int64_t ldb, std::int64_t ldc, bool bf16,
                    float alpha);
  // Binds the operands (and the bias when the plan takes one) and runs it.
  void execute(Plan& p, const void* a, const void* b, float* c, const float* bias);
  // Runs `p` on a thread's own stream and scratchpad (inside on_slices);
  // alpha: its run-time output scale, where the plan takes one.
  void execute_on(Plan& p, const void* a, const void* b, float* c, const float* bias, const dnnl::stream& s,
                  Workspace& scratch, const float* alpha = nullptr);
  // A GEMM whose operands need decoding, split by rows of C over the
  // threads: each thread decodes its rows of A and all of B into its own
  // buffers and runs a one-thread primitive on them. On the machines this
  // was measured on, writing a buffer the other core has read (a decode
  // into the shared workspace that the previous GEMM read on both cores)
  // ran at 6-13 GB/s against 100 GB/s for a buffer only this core touches.
  // Returns the first slice's plan (its epilogue flags are every slice's),
  // or null when the GEMM does not qualify (then the caller runs it whole).
  // With `encode`, a GEMM is sliced even when its operands need no decode,
  // and each thread finishes its rows (alpha, bias) and encodes them while
  // they are in its cache; the caller then does neither.
  // A tiny product with too few rows for the threads runs as one slice on
  // the calling thread.
  Plan* run_sliced(const GemmArgs& g, bool bf16, std::int64_t ldc, bool alpha_pass, const GemmEncode* encode);
  // A long reduction with both operands stored k-major (A transposed:
  // the weight gradients dy^T x, k = 2048 tokens in the transformer), on
  // the bf16 path or with operands to decode, split by k over the threads:
  // each thread decodes its own tokens' rows of A and B (the rows it wrote
  // in the forward and backward passes), runs a one-thread primitive into
  // its own m x n partial product, and after a barrier finishes its rows of
  // C from the partials added in thread order (alpha, bias, beta, encode).
  // Transformer, a step's five weight gradients: FP8 on the bf16 path
  // 1041 -> 964 us, BF16 1018 -> 882 us, FP8 decoded to f32 (no native
  // bf16) 2081 -> 1597 us. Returns null when the GEMM does not qualify.
  Plan* run_ksplit(const GemmArgs& g, bool bf16, std::int64_t ldc, const GemmEncode* encode);
  // A GEMM split into a grid of blocks of C, one per thread: each thread
  // decodes (where needed) its rows of op(A) and its columns of op(B) into
  // its own buffers, runs a one-thread primitive into its own dense block,
  // finishes it (alpha, bias) and copies it into C, encoding each row.
  // grid_for picks the grid: a column split for a forward product x W^T
  // with fewer rows than columns and W to decode, or blocks where C has
  // too few rows for run_sliced on this many threads. {0, 0}: none; then
  // run_grid returns null.
  struct Grid {
    int rows = 0, cols = 0;
  };
  Grid grid_for(const GemmArgs& g, bool bf16) const;
  Plan* run_grid(const GemmArgs& g, bool bf16, std::int64_t ldc, bool alpha_pass, const GemmEncode* encode);
  // run_sliced's rows per thread: below this a one-thread primitive loses
  // more than the private decode saves.
  static constexpr std::int64_t kSliceMinRows = 32;
  // run_sliced's, run_ksplit's and run_grid's threads: at least nt slices,
  // and room in the plan cache for nt lookups. on_slices runs work(t, slice) on nt
  // threads, then (finish not null) a barrier and finish(t, slice) unless a
  // thread threw; the first exception is rethrown after the region.
  void ensure_slices(int nt);
  template <class Work, class Finish>
  void on_slices(int nt, Work&& work, Finish&& finish);
  static constexpr std::int64_t kKsplitMinK = 1024;
  static constexpr std::int64_t kTinyMacs = std::int64_t{1} << 18;
  // run's product: true when it also encoded C (the sliced path).
  bool product(const GemmArgs& args, const GemmEncode* encode);
  void run_lowp(const GemmArgs& args);
  // GemmArgs::batch > 1: one oneDNN batched matmul over 4-D strided
  // operands (FP32 accumulation), else the products one by one.
  void run_batched(const GemmArgs& args);

  DnnlContext& m_ctx;
  bool m_native_bf16;
  bool m_amx;  // oneDNN runs AMX: bf16 products keep their scale out of the primitive
  std::unordered_map<Key, std::unique_ptr<Plan>, KeyHash> m_plans;
  // Decoded operands, B transposed for the own kernel, its per-thread row
  // accumulators, and oneDNN's scratchpad (user-managed, shared by plans).
  Workspace m_a_ws, m_b_ws, m_bt_ws, m_acc_ws, m_scratch;
  // run_sliced's, run_ksplit's and run_grid's per-thread buffers,
  // scratchpads and streams.
  struct Slice;
  // A slice's decode of `rows` x `cols` of op (stored; decoded compact, as
  // prepare() gives it): where op carries a GemmOperand::keep tag, the
  // thread keeps its decoded copy (Slice::kept) for the tag's next use and
  // finds it there then (the mlp's fc1 decodes all of x on each thread for
  // its forward and its weight gradient), else it decodes into `ws`. whole:
  // the region is the whole operand (every thread decodes it); a thread's
  // own part is kept only for a keep_next use.
  Prepared prepare_kept(Slice& sl, const GemmOperand& op, std::int64_t rows, std::int64_t cols, bool bf16,
                        Workspace& ws, bool whole);
  // A thread's kept copies stay within this many bytes (older ones are
  // dropped first); a larger decode is not kept.
  static constexpr std::size_t kKeptMaxBytes = std::size_t{8} << 20;
  std::vector<std::unique_ptr<Slice>> m_slices;
  const std::string* m_last_impl = nullptr;
};

}  // namespace engine::cpu
