// The pieces of the CPU backend's casts (casts.cpp) that its other ops
// reuse: the optimizer's encodes and the per-channel sums.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "backend/cpu/kernels.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/row_kernels.h"
#include "backend/cpu/workspace.h"
#include "numeric/cast.h"
#include "numeric/format.h"

namespace engine::cpu {

// Formats stored as f32 values.
inline bool f32_container(Format f) { return f == Format::FP32 || f == Format::TF32; }

// CpuBackend::convert over one range on the calling thread.
void convert_range(Format from, const void* src, Format to, void* dst, std::int64_t n, const CastOptions& opt);

// scale_amax_encode of x[b, b + len) (len <= kScaledChunk) into q's codes
// at the same index: their amax as a bit pattern.
std::uint32_t scale_amax_encode_chunk(const float* x, float scale, Format f, void* q, std::int64_t b,
                                      std::int64_t len, const CastOptions& opt);

// db = the channel sums of an n x c x hw (NCHW) tensor x: blocks of
// channels, one a thread, each summing its planes image by image (memory
// order) with add_plane_sums, so a channel's adds are the same for any
// split. visit(at, len) -> bits then runs on each image's run of the
// block's planes [at, at + len) just summed; the results combine by max
// (the FP8 casts' amax bits).
template <class Visit>
std::uint32_t channel_blocks(const float* x, std::int64_t n, std::int64_t c, std::int64_t hw, float* db,
                             Workspace& ws, Visit&& visit) {
  const int nt = worth_parallel(n * c * hw) ? omp_get_max_threads() : 1;
  const std::int64_t per = (c + nt - 1) / nt;
  double* sums = ws.get<double>(static_cast<std::size_t>(c));
  std::uint32_t m = 0;
#pragma omp parallel for schedule(static) reduction(max : m) if (nt > 1)
  for (std::int64_t j0 = 0; j0 < c; j0 += per) {
    const std::int64_t j1 = std::min(c, j0 + per);
    for (std::int64_t j = j0; j < j1; ++j) sums[j] = 0.0;
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t at = (i * c + j0) * hw;
      add_plane_sums(x + at, hw, j1 - j0, sums + j0);
      m = std::max(m, visit(at, (j1 - j0) * hw));
    }
  }
  for (std::int64_t j = 0; j < c; ++j) db[j] = static_cast<float>(sums[j]);
  return m;
}

}  // namespace engine::cpu
