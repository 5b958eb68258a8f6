// Adam/AdamW: PyTorch's single-tensor update, one backend call per parameter.
#include "optim/adam.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "backend/backend.h"
#include "backend/fused.h"

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

void Adam::update(Backend& be, std::span<const ParamSlot> slots, double lr, std::int64_t t) {
  // Bias corrections in double (PyTorch computes them as Python floats), then
  // every scalar is applied in float, as on a float32 tensor.
  const double bc1 = 1.0 - std::pow(m_opt.beta1, static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(m_opt.beta2, static_cast<double>(t));
  AdamUpdate u;
  u.step_size = static_cast<float>(lr / bc1);
  u.bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  u.one_minus_beta1 = static_cast<float>(1.0 - m_opt.beta1);
  u.beta2 = static_cast<float>(m_opt.beta2);
  u.one_minus_beta2 = static_cast<float>(1.0 - m_opt.beta2);
  u.eps = static_cast<float>(m_opt.eps);
  u.state_format = state_format();
  for (std::size_t s = 0; s < slots.size(); ++s) {
    const ParamSlot& slot = slots[s];
    const double wd = slot.decay ? m_opt.weight_decay : 0.0;
    // Adam: L2 into the gradient. AdamW: p *= 1 - lr * wd (that factor in double, as in PyTorch).
    u.l2 = m_decoupled ? 0.0f : static_cast<float>(wd);
    u.shrink = m_decoupled ? static_cast<float>(1.0 - lr * wd) : 1.0f;
    u.value = slot.value;
    u.grad = slot.grad;
    u.exp_avg = state_data(s, 0);
    u.exp_avg_sq = state_data(s, 1);
    u.n = static_cast<std::int64_t>(slot.n);
    if (slot.encode && slot.value_in_codes && u.n > 0)
      be.convert(slot.encode->format, slot.encode->codes, Format::FP32, u.value, u.n, {});
    be.adam_update(u);
    if (slot.encode) fused::encode_updated(be, u.value, u.n, *slot.encode);
  }
}

}  // namespace engine
