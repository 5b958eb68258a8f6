// Small batched products of BF16 operands on the AVX512-BF16 dot product
// (VDPBF16PS): attention's per-head products (16 x 16 x 16 at the default
// transformer, 64 x 64 x 32 and 64 x 32 x 64 at the gpt's baby shape) when
// the CPU has native bf16. Two bf16 multiply-adds per f32
// lane and instruction, twice the f32 FMA's work, as oneDNN's bf16 kernels
// run the large GEMMs on such a CPU.
//
// op(B) is packed as pair rows: lane j of pair row q holds B(2q, j) in its
// low half and B(2q + 1, j) in its high half. Stored transposed (q k^T:
// B(p, j) = K(j, p)) a pair is one 32-bit word of K's row j, gathered; stored
// plainly, two rows interleave. A's pair (A(i, 2q), A(i, 2q + 1)) is one word
// of its row, broadcast; stored transposed, A is packed into words first.
// Each output is the sum over pairs of VDPBF16PS's two products (round to
// nearest even, bf16 denormals read as zero, as the instruction defines;
// within the f32 summation bound the conformance suite allows), then
// c = alpha * s (+ beta * c_old) (+ bias[j]) as the f32 kernel.
//
// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512bf16; called only
// where the backend found native bf16 (cpu_backend.cpp).
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/gemm.h"

namespace engine::cpu {

namespace {

constexpr std::int64_t kMaxPairs = kSmallGemmMaxK / 2;
// A's pairs read in place as 32-bit words of its 16-bit codes.
typedef std::uint32_t code_pair __attribute__((may_alias));

inline __m512 dot(__m512 acc, std::uint32_t a_pair, __m512i b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(a_pair))),
                          reinterpret_cast<__m512bh>(b));
}

// R rows of C, NT tiles of 16 columns each, from A's pair words (row r's
// pair q at a[r * a_row + q * a_pair]) and the packed pair rows of B (tile
// t's pair row q at bv[t * kMaxPairs + q]). Every output is the same chain
// of dot products over q whatever R and NT are: the tiling changes which
// outputs share a loop, never an output's bits.
template <int R, int NT>
inline void rows_block(const code_pair* a, std::int64_t a_row, std::int64_t a_pair, const __m512i* bv,
                       std::int64_t pairs, float* c, std::int64_t ldc, const __mmask16* nm, const SmallBatch& s) {
  __m512 acc[R][NT];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  for (std::int64_t q = 0; q < pairs; ++q) {
    __m512i b[NT];
    for (int t = 0; t < NT; ++t) b[t] = bv[t * kMaxPairs + q];
    for (int r = 0; r < R; ++r) {
      const std::uint32_t w = a[r * a_row + q * a_pair];
      for (int t = 0; t < NT; ++t) acc[r][t] = dot(acc[r][t], w, b[t]);
    }
  }
  const __m512 alpha = _mm512_set1_ps(s.alpha), beta = _mm512_set1_ps(s.beta);
  for (int t = 0; t < NT; ++t) {
    const __m512 bias = s.bias ? _mm512_maskz_loadu_ps(nm[t], s.bias + 16 * t) : _mm512_setzero_ps();
    for (int r = 0; r < R; ++r) {
      float* ci = c + r * ldc + 16 * t;
      __m512 v = _mm512_mul_ps(alpha, acc[r][t]);
      if (s.beta == 1.0f) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(nm[t], ci));
      else if (s.beta != 0.0f) v = _mm512_add_ps(v, _mm512_mul_ps(beta, _mm512_maskz_loadu_ps(nm[t], ci)));
      if (s.bias) v = _mm512_add_ps(v, bias);
      _mm512_mask_storeu_ps(ci, nm[t], v);
    }
  }
}

// Every row of C: R rows at a time (R x NT accumulators within the 32
// vector registers), then the rest one by one.
template <int R, int NT>
inline void all_rows(const code_pair* aw, std::int64_t a_row, std::int64_t a_pair, const __m512i* bv,
                     std::int64_t pairs, float* c, const __mmask16* nm, const SmallBatch& s) {
  std::int64_t i = 0;
  for (; i + R <= s.m; i += R) rows_block<R, NT>(aw + i * a_row, a_row, a_pair, bv, pairs, c + i * s.ldc, s.ldc, nm, s);
  for (; i < s.m; ++i) rows_block<1, NT>(aw + i * a_row, a_row, a_pair, bv, pairs, c + i * s.ldc, s.ldc, nm, s);
}

// The 8 x 16 transpose of 16 rows' first 8 pair words: bv[q] lane j = word q
// of row j (row j at b + j * ldb), for a full n == 16. Three rounds of
// two-source permutes in registers instead of one gather per pair (the
// gathers were a fifth of attention's q k^T products).
inline void transpose_pairs16(const std::uint16_t* b, std::int64_t ldb, __m512i* bv) {
  __m512i z[8];
  for (int i = 0; i < 8; ++i)
    z[i] = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2 * i * ldb))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + (2 * i + 1) * ldb)), 1);
  // Round 1: four rows (two z) -> words 0-3 and 4-7 of those rows, word-major.
  const __m512i a_lo_idx = _mm512_set_epi32(27, 19, 11, 3, 26, 18, 10, 2, 25, 17, 9, 1, 24, 16, 8, 0);
  const __m512i a_hi_idx = _mm512_set_epi32(31, 23, 15, 7, 30, 22, 14, 6, 29, 21, 13, 5, 28, 20, 12, 4);
  __m512i lo[4], hi[4];
  for (int i = 0; i < 4; ++i) {
    lo[i] = _mm512_permutex2var_epi32(z[2 * i], a_lo_idx, z[2 * i + 1]);
    hi[i] = _mm512_permutex2var_epi32(z[2 * i], a_hi_idx, z[2 * i + 1]);
  }
  // Round 2: eight rows, two words each (words w, w + 1 of rows 0-7 or 8-15).
  const __m512i b0_idx = _mm512_set_epi32(23, 22, 21, 20, 7, 6, 5, 4, 19, 18, 17, 16, 3, 2, 1, 0);
  const __m512i b1_idx = _mm512_set_epi32(31, 30, 29, 28, 15, 14, 13, 12, 27, 26, 25, 24, 11, 10, 9, 8);
  // Round 3: sixteen rows of one word.
  const __m512i c0_idx = _mm512_set_epi32(23, 22, 21, 20, 19, 18, 17, 16, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i c1_idx = _mm512_set_epi32(31, 30, 29, 28, 27, 26, 25, 24, 15, 14, 13, 12, 11, 10, 9, 8);
  for (int h = 0; h < 2; ++h) {
    const __m512i* src = h ? hi : lo;  // words 0-3 or 4-7
    const __m512i r01 = _mm512_permutex2var_epi32(src[0], b0_idx, src[1]);  // words 0,1 of rows 0-7
    const __m512i r23 = _mm512_permutex2var_epi32(src[0], b1_idx, src[1]);  // words 2,3 of rows 0-7
    const __m512i s01 = _mm512_permutex2var_epi32(src[2], b0_idx, src[3]);  // words 0,1 of rows 8-15
    const __m512i s23 = _mm512_permutex2var_epi32(src[2], b1_idx, src[3]);  // words 2,3 of rows 8-15
    bv[4 * h + 0] = _mm512_permutex2var_epi32(r01, c0_idx, s01);
    bv[4 * h + 1] = _mm512_permutex2var_epi32(r01, c1_idx, s01);
    bv[4 * h + 2] = _mm512_permutex2var_epi32(r23, c0_idx, s23);
    bv[4 * h + 3] = _mm512_permutex2var_epi32(r23, c1_idx, s23);
  }
}

// Two stored rows of m (<= 16) bf16 values interleaved into words:
// word i = r0[i] | r1[i] << 16.
inline __m512i interleave(const std::uint16_t* r0, const std::uint16_t* r1, __mmask16 m) {
  const __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, r0));
  const __m512i hi = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, r1));
  return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
}

}  // namespace

bool small_bf16_fits(const SmallBatch& s) {
  return s.a_format == Format::BF16 && s.b_format == Format::BF16 && s.n > 0 && s.n <= 4 * 16 && s.k % 2 == 0 &&
         s.k > 0 &&
         s.m > 0 && s.k <= kSmallGemmMaxK && s.m <= kSmallGemmMaxM;
}

void small_product_bf16(const SmallBatch& s, std::int64_t t) {
  const std::int64_t bi = t / s.batch1, bj = t % s.batch1;
  const auto* a = static_cast<const std::uint16_t*>(s.a) + bi * s.sa[0] + bj * s.sa[1];
  const auto* b = static_cast<const std::uint16_t*>(s.b) + bi * s.sb[0] + bj * s.sb[1];
  float* c = s.c + bi * s.sc[0] + bj * s.sc[1];
  const std::int64_t m = s.m, n = s.n, pairs = s.k / 2;
  // Columns in tiles of 16 (the last one masked).
  const int tiles = static_cast<int>((n + 15) / 16);
  __mmask16 nm[4];
  for (int t = 0; t < tiles; ++t) {
    const std::int64_t w = n - 16 * t;
    nm[t] = static_cast<__mmask16>(w >= 16 ? 0xFFFFu : (1u << w) - 1u);
  }

  alignas(64) __m512i bv[4 * kMaxPairs];
  for (int t = 0; t < tiles; ++t) {
    __m512i* bt = bv + t * kMaxPairs;
    const std::int64_t j0 = 16 * t;
    if (s.trans_b) {
      // Row j of the stored n x k matrix holds column j of op(B); its word q
      // is the pair (B(2q, j), B(2q + 1, j)).
      const std::uint16_t* bj = b + j0 * s.ldb;
      const __m512i rows = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                              _mm512_set1_epi32(static_cast<int>(s.ldb * 2)));
      std::int64_t q = 0;
      if (nm[t] == 0xFFFFu)
        for (; q + 8 <= pairs; q += 8) transpose_pairs16(bj + 2 * q, s.ldb, bt + q);
      for (; q < pairs; ++q)
        bt[q] = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), nm[t], rows, bj + 2 * q, 1);
    } else {
      for (std::int64_t q = 0; q < pairs; ++q)
        bt[q] = interleave(b + 2 * q * s.ldb + j0, b + (2 * q + 1) * s.ldb + j0, nm[t]);
    }
  }

  // A's pair words: in place from its rows, or packed (q-major) from the
  // stored k x m matrix.
  alignas(64) std::uint32_t ap[kMaxPairs * kSmallGemmMaxM];
  const code_pair* aw;
  std::int64_t a_row, a_pair;
  if (!s.trans_a) {
    if (s.lda % 2 == 0 && (reinterpret_cast<std::uintptr_t>(a) & 3u) == 0) {
      aw = reinterpret_cast<const code_pair*>(a);
      a_row = s.lda / 2;
    } else {
      for (std::int64_t i = 0; i < m; ++i) std::memcpy(ap + i * pairs, a + i * s.lda, static_cast<std::size_t>(pairs) * 4);
      aw = ap;
      a_row = pairs;
    }
    a_pair = 1;
  } else {
    for (std::int64_t q = 0; q < pairs; ++q)
      for (std::int64_t i0 = 0; i0 < m; i0 += 16) {
        const std::int64_t w = m - i0 < 16 ? m - i0 : 16;
        const __mmask16 mm = static_cast<__mmask16>(w >= 16 ? 0xFFFFu : (1u << w) - 1u);
        const __m512i words = interleave(a + 2 * q * s.lda + i0, a + (2 * q + 1) * s.lda + i0, mm);
        _mm512_mask_storeu_epi32(ap + q * m + i0, mm, words);
      }
    aw = ap;
    a_row = 1;
    a_pair = m;
  }

  switch (tiles) {
    case 1: all_rows<8, 1>(aw, a_row, a_pair, bv, pairs, c, nm, s); break;
    case 2: all_rows<6, 2>(aw, a_row, a_pair, bv, pairs, c, nm, s); break;
    case 3: all_rows<4, 3>(aw, a_row, a_pair, bv, pairs, c, nm, s); break;
    default: all_rows<4, 4>(aw, a_row, a_pair, bv, pairs, c, nm, s); break;
  }
}

}  // namespace engine::cpu
