// LossScaler: a port of GradScaler's state machine and scale update rule.
#include "amp/loss_scaler.h"

#include <cmath>

#include "amp/grad_set.h"
#include "backend/backend.h"
#include "backend/fused.h"

namespace engine {

const char* scaling_mode_key(ScalingMode m) {
  switch (m) {
    case ScalingMode::None: return "none";
    case ScalingMode::Static: return "static";
    case ScalingMode::Dynamic: return "dynamic";
  }
  return "?";
}

void validate(const LossScalerConfig& c) {
  auto bad = [](const char* field, const std::string& why) {
    throw std::invalid_argument(std::string("loss_scale.") + field + " " + why);
  };
  if (!(c.init_scale > 0.0) || !std::isfinite(c.init_scale) || c.init_scale > 3.4e38)
    bad("init", "must be a positive finite number (got " + std::to_string(c.init_scale) + ")");
  if (!(c.growth_factor > 1.0) || !std::isfinite(c.growth_factor))
    bad("growth_factor", "must be > 1 (got " + std::to_string(c.growth_factor) + ")");
  if (!(c.backoff_factor > 0.0 && c.backoff_factor < 1.0))
    bad("backoff_factor", "must be in (0, 1) (got " + std::to_string(c.backoff_factor) + ")");
  if (c.growth_interval < 1)
    bad("growth_interval", "must be >= 1 (got " + std::to_string(c.growth_interval) + ")");
}

LossScaler::LossScaler(const LossScalerConfig& c) : m_config(c), m_scale(static_cast<float>(c.init_scale)) {
  validate(c);
}

void LossScaler::set_config(const LossScalerConfig& c, bool reset_scale) {
  validate(c);
  const bool mode_changed = c.mode != m_config.mode;
  m_config = c;
  if (mode_changed || reset_scale) {
    m_scale = static_cast<float>(c.init_scale);
    m_growth_tracker = 0;
  }
}

void LossScaler::unscale(Backend& be, const GradSet& grads) {
  if (m_state != State::Ready)
    throw ScalerStateError("unscale() has already been called since the last update()");
  // GradScaler: inv_scale = scale.double().reciprocal().float()
  fused::unscale_grads_coded(be, grads.views().data(), grads.codes().data(), grads.size(), inverse_scale(),
                             grads.sum_squares());
  m_state = State::Unscaled;
}

void LossScaler::unscale_again(Backend& be, GradSet& grads) const {
  if (m_state == State::Ready)
    throw ScalerStateError("unscale_again() called before unscale(): there is nothing to repeat");
  grads.decode(be);
  const float inv = inverse_scale();
  if (inv == 1.0f) return;
  for (const GradBuffer& g : grads.views()) be.scale(g.data, inv, g.n);
}

void LossScaler::record_nonfinite(std::int64_t count) {
  if (m_state == State::Ready)
    throw ScalerStateError("record_nonfinite() called before unscale(): no count has been taken");
  if (m_state != State::Unscaled)
    throw ScalerStateError("record_nonfinite() already called for this unscale()");
  m_found = count;
  m_state = State::Counted;
}

void LossScaler::record_device_unscale(std::int64_t count) {
  if (m_state != State::Ready)
    throw ScalerStateError("record_device_unscale() called before update() ended the last step");
  m_found = count;
  m_state = State::Counted;
}

bool LossScaler::should_step() {
  if (m_state == State::Ready)
    throw ScalerStateError("should_step() called before unscale(): gradients are still scaled");
  if (m_state == State::Unscaled)
    throw ScalerStateError("should_step() called before record_nonfinite(): unscale()'s count has not been read");
  if (m_state == State::Stepped)
    throw ScalerStateError("should_step() already called since the last update()");
  m_state = State::Stepped;
  return m_config.mode == ScalingMode::None || m_found == 0;
}

void LossScaler::update() {
  if (m_state != State::Stepped)
    throw ScalerStateError("update() must follow unscale() and should_step() in the same step");
  m_state = State::Ready;
  if (m_config.mode != ScalingMode::Dynamic) {
    m_found = 0;
    return;
  }
  // torch._amp_update_scale_
  if (m_found > 0) {
    m_scale = static_cast<float>(static_cast<double>(m_scale) * m_config.backoff_factor);
    m_growth_tracker = 0;
  } else {
    const std::int64_t successful = m_growth_tracker + 1;
    if (successful == m_config.growth_interval) {
      const float grown = static_cast<float>(static_cast<double>(m_scale) * m_config.growth_factor);
      if (std::isfinite(grown)) m_scale = grown;
      m_growth_tracker = 0;
    } else {
      m_growth_tracker = successful;
    }
  }
  m_found = 0;
}

}  // namespace engine
