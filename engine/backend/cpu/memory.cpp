// The CPU backend's memory ops (allocation, transfers, fills) and its layout
// copies (repeat_rows, patchify).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "backend/cpu/cpu_backend.h"

#include "backend/host_memory.h"
#include "backend/cpu/parallel.h"

namespace engine {

void* CpuBackend::allocate(std::size_t bytes) { return host_aligned_allocate(bytes); }

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

// The copies below run over the threads above the size threshold: on one
// thread they write memory the other cores' GEMMs last wrote (transformer,
// 16-core Xeon: repeat_rows 115 us and patchify 87 us a step serial).
void CpuBackend::repeat_rows(const float* src, float* dst, std::int64_t B, std::int64_t T, std::int64_t C) {
#pragma omp parallel for schedule(static) if (cpu::worth_parallel(B * T * C))
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      std::memcpy(dst + (b * T + t) * C, src + b * C, static_cast<std::size_t>(C) * sizeof(float));
}

// The row a token id names, or -1 for none (out of range, not an integer).
static std::int64_t embedding_row(float id, std::int64_t vocab) {
  if (!(id >= 0.0f) || id >= static_cast<float>(vocab)) return -1;
  const auto v = static_cast<std::int64_t>(id);
  return static_cast<float>(v) == id ? v : -1;
}

void CpuBackend::embedding(Pass pass, const float* ids, const float* src, float* dst, std::int64_t n,
                           std::int64_t vocab, std::int64_t dim) {
  if (pass == Pass::Forward) {
#pragma omp parallel for schedule(static) if (cpu::worth_parallel(n * dim))
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t v = embedding_row(ids[i], vocab);
      if (v < 0) std::fill(dst + i * dim, dst + (i + 1) * dim, 0.0f);
      else std::memcpy(dst + i * dim, src + v * dim, static_cast<std::size_t>(dim) * sizeof(float));
    }
    return;
  }
  std::fill(dst, dst + vocab * dim, 0.0f);
  // Each thread owns a band of columns and walks every token in order:
  // every sum runs in increasing i whatever the thread count.
  constexpr std::int64_t kBand = 16;
  const std::int64_t bands = (dim + kBand - 1) / kBand;
#pragma omp parallel for schedule(static) if (bands > 1 && cpu::worth_parallel(n * dim))
  for (std::int64_t band = 0; band < bands; ++band) {
    const std::int64_t c0 = band * kBand, c1 = std::min(dim, c0 + kBand);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t v = embedding_row(ids[i], vocab);
      if (v < 0) continue;
      for (std::int64_t c = c0; c < c1; ++c) dst[v * dim + c] += src[i * dim + c];
    }
  }
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

}  // namespace engine
