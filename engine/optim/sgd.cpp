// Sgd: torch.optim.SGD's update, one backend call per parameter.
#include "optim/sgd.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "backend/backend.h"
#include "backend/fused.h"

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

void Sgd::update(Backend& be, std::span<const ParamSlot> slots, double lr, std::int64_t t) {
  // Scalars in float, as PyTorch applies Python-float hyperparameters to a
  // float32 tensor.
  SgdUpdate u;
  u.lr = static_cast<float>(lr);
  u.momentum = static_cast<float>(m_opt.momentum);
  u.keep = static_cast<float>(1.0 - m_opt.dampening);
  u.nesterov = m_opt.nesterov;
  u.first = t == 1;
  u.state_format = state_format();
  for (std::size_t s = 0; s < slots.size(); ++s) {
    const ParamSlot& slot = slots[s];
    u.value = slot.value;
    u.grad = slot.grad;
    u.n = static_cast<std::int64_t>(slot.n);
    u.weight_decay = slot.decay ? static_cast<float>(m_opt.weight_decay) : 0.0f;
    u.momentum_buf = m_opt.momentum == 0.0 ? nullptr : state_data(s, 0);
    if (slot.encode && slot.value_in_codes) fused::sgd_update_coded(be, u, *slot.encode);
    else if (slot.encode) fused::sgd_update_encode(be, u, *slot.encode);
    else be.sgd_update(u);
  }
}

}  // namespace engine
