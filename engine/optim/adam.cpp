// Adam/AdamW: PyTorch's single-tensor update on float spans, blockwise for state rounding.
#include "optim/adam.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "optim/parallel.h"

namespace engine {

Adam::Adam(const AdamOptions& o, bool decoupled, Format state_format)
    : Optimizer(state_format), m_opt(o), m_decoupled(decoupled) {
  const char* prefix = decoupled ? "adamw." : "adam.";
  auto require = [&](bool ok, const char* field, const char* problem, double v) {
    if (!ok) {
      throw std::invalid_argument(std::string(prefix) + field + ": " + problem + ", got " + std::to_string(v));
    }
  };
  require(o.beta1 >= 0.0 && o.beta1 < 1.0, "beta1", "must be in [0, 1)", o.beta1);
  require(o.beta2 >= 0.0 && o.beta2 < 1.0, "beta2", "must be in [0, 1)", o.beta2);
  require(o.eps >= 0.0 && std::isfinite(o.eps), "eps", "must be >= 0", o.eps);
  require(o.weight_decay >= 0.0 && std::isfinite(o.weight_decay), "weight_decay", "must be >= 0", o.weight_decay);
}

void Adam::update(std::span<const ParamSlot> slots, double lr, std::int64_t t) {
  // Bias corrections in double (PyTorch computes them as Python floats), then
  // every scalar is applied in float, as on a float32 tensor.
  const double bc1 = 1.0 - std::pow(m_opt.beta1, static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(m_opt.beta2, static_cast<double>(t));
  const float step_size = static_cast<float>(lr / bc1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const float one_minus_b1 = static_cast<float>(1.0 - m_opt.beta1);
  const float beta2 = static_cast<float>(m_opt.beta2);
  const float one_minus_b2 = static_cast<float>(1.0 - m_opt.beta2);
  const float eps = static_cast<float>(m_opt.eps);

  for (std::size_t s = 0; s < slots.size(); ++s) {
    const ParamSlot& slot = slots[s];
    float* __restrict p = slot.value;
    const float* __restrict g = slot.grad;
    float* __restrict m = state_data(s, 0);
    float* __restrict v = state_data(s, 1);
    const double wd = slot.decay ? m_opt.weight_decay : 0.0;
    // Adam: L2 into the gradient. AdamW: p *= 1 - lr * wd (that factor in double, as in PyTorch).
    const float l2 = m_decoupled ? 0.0f : static_cast<float>(wd);
    const float shrink = m_decoupled ? static_cast<float>(1.0 - lr * wd) : 1.0f;

    optim_detail::for_blocks(slot.n, [&](std::size_t i0, std::size_t i1) {
#pragma omp simd
      for (std::size_t i = i0; i < i1; ++i) {
        const float gi = g[i] + l2 * p[i];
        m[i] += one_minus_b1 * (gi - m[i]);
        v[i] = beta2 * v[i] + one_minus_b2 * gi * gi;
      }
      round_state(m + i0, i1 - i0);
      round_state(v + i0, i1 - i0);
#pragma omp simd
      for (std::size_t i = i0; i < i1; ++i) {
        const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
        p[i] = p[i] * shrink - step_size * (m[i] / denom);
      }
    });
  }
}

}  // namespace engine
