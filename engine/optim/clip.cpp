// Global-norm gradient clipping: deterministic double accumulation, scale in float.
#include "optim/clip.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "optim/parallel.h"

namespace engine {
namespace {

// Sum of squares of one span. Squares of floats are exact in double and
// cannot overflow it (max 1.2e77), so the only error is the double additions:
// relative ~1e-16 per term, far below float resolution.
double sum_squares(const float* x, std::size_t n) {
  constexpr std::size_t kMaxParts = 256;
  // The blocking depends on n only (never on the thread count): the same
  // gradients give the same bits on any machine.
  const std::size_t part = std::max(optim_detail::kParallelMin, (n + kMaxParts - 1) / kMaxParts);
  const std::size_t parts = (n + part - 1) / part;
  double partial[kMaxParts];
  auto one = [&](std::size_t k) {
    const std::size_t i0 = k * part, i1 = std::min(n, i0 + part);
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (std::size_t i = i0; i < i1; ++i) s += double(x[i]) * double(x[i]);
    partial[k] = s;
  };
  if (parts > 1) {
#pragma omp parallel for schedule(static)
    for (std::size_t k = 0; k < parts; ++k) one(k);
  } else if (parts == 1) {
    one(0);
  }
  double total = 0.0;
  for (std::size_t k = 0; k < parts; ++k) total += partial[k];
  return total;
}

}  // namespace

double global_grad_norm(std::span<const GradSpan> grads) {
  double total = 0.0;
  for (const GradSpan& g : grads) total += sum_squares(g.data, g.n);
  return std::sqrt(total);
}

double clip_grad_norm(std::span<const GradSpan> grads, double max_norm) {
  if (!(max_norm >= 0.0)) {
    throw std::invalid_argument("clip_grad_norm: max_norm must be >= 0, got " + std::to_string(max_norm));
  }
  const double total = global_grad_norm(grads);
  if (!std::isfinite(total)) return total;
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0) {
    const float c = static_cast<float>(coef);
    for (const GradSpan& g : grads) {
      float* __restrict x = g.data;
      optim_detail::for_blocks(g.n, [&](std::size_t i0, std::size_t i1) {
#pragma omp simd
        for (std::size_t i = i0; i < i1; ++i) x[i] *= c;
      });
    }
  }
  return total;
}

}  // namespace engine
