// Sgd: torch.optim.SGD's update on float spans, blockwise so state rounding stays in cache.
#include "optim/sgd.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "optim/parallel.h"

namespace engine {
namespace {

void require(bool ok, const char* field, const std::string& problem, double value) {
  if (!ok) throw std::invalid_argument(std::string("sgd.") + field + ": " + problem + ", got " + std::to_string(value));
}

}  // namespace

Sgd::Sgd(const SgdOptions& o, Format state_format) : Optimizer(state_format), m_opt(o) {
  require(o.momentum >= 0.0 && std::isfinite(o.momentum), "momentum", "must be >= 0", o.momentum);
  require(o.dampening >= 0.0 && o.dampening <= 1.0, "dampening", "must be in [0, 1]", o.dampening);
  require(o.weight_decay >= 0.0 && std::isfinite(o.weight_decay), "weight_decay", "must be >= 0", o.weight_decay);
  if (o.nesterov && (o.momentum <= 0.0 || o.dampening != 0.0)) {
    throw std::invalid_argument("sgd.nesterov: needs momentum > 0 and dampening = 0");
  }
}

void Sgd::update(std::span<const ParamSlot> slots, double lr_d, std::int64_t t) {
  // Scalars in float, as PyTorch applies Python-float hyperparameters to a
  // float32 tensor.
  const float lr = static_cast<float>(lr_d);
  const float momentum = static_cast<float>(m_opt.momentum);
  const float keep = static_cast<float>(1.0 - m_opt.dampening);
  const bool nesterov = m_opt.nesterov;
  const bool first = t == 1;

  for (std::size_t s = 0; s < slots.size(); ++s) {
    const ParamSlot& slot = slots[s];
    float* __restrict p = slot.value;
    const float* __restrict g = slot.grad;
    const float wd = slot.decay ? static_cast<float>(m_opt.weight_decay) : 0.0f;

    if (m_opt.momentum == 0.0) {
      optim_detail::for_blocks(slot.n, [&](std::size_t i0, std::size_t i1) {
#pragma omp simd
        for (std::size_t i = i0; i < i1; ++i) p[i] -= lr * (g[i] + wd * p[i]);
      });
      continue;
    }

    float* __restrict buf = state_data(s, 0);
    optim_detail::for_blocks(slot.n, [&](std::size_t i0, std::size_t i1) {
      if (first) {
#pragma omp simd
        for (std::size_t i = i0; i < i1; ++i) buf[i] = g[i] + wd * p[i];
      } else {
#pragma omp simd
        for (std::size_t i = i0; i < i1; ++i) buf[i] = momentum * buf[i] + keep * (g[i] + wd * p[i]);
      }
      round_state(buf + i0, i1 - i0);
      if (nesterov) {
#pragma omp simd
        for (std::size_t i = i0; i < i1; ++i) p[i] -= lr * ((g[i] + wd * p[i]) + momentum * buf[i]);
      } else {
#pragma omp simd
        for (std::size_t i = i0; i < i1; ++i) p[i] -= lr * buf[i];
      }
    });
  }
}

}  // namespace engine
