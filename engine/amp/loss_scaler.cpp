// LossScaler: a port of GradScaler's state machine and scale update rule.
#include "amp/loss_scaler.h"

#include <vector>

#include "backend/backend.h"
#include "tensor/tensor.h"

#include <cmath>
#include <cstring>

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

std::int64_t LossScaler::unscale(Backend& be, std::span<const GradSpan> grads, double* sum_squares) {
  if (m_state != State::Ready)
    throw ScalerStateError("unscale() has already been called since the last update()");
  // GradScaler: inv_scale = scale.double().reciprocal().float()
  Buffer results;  // sum of squares (double), then one count per gradient
  results.reserve(sizeof(double) * (1 + grads.size()));
  auto* sum = results.as<double>();
  auto* counts = reinterpret_cast<std::int64_t*>(sum + 1);
  std::vector<GradBuffer> views;
  views.reserve(grads.size());
  for (std::size_t k = 0; k < grads.size(); ++k) views.push_back({grads[k].data, grads[k].n, counts + k});
  be.unscale_grads(views.data(), views.size(), inverse_scale(), sum);
  std::vector<double> host(1 + grads.size());
  results.download(host.data(), host.size() * sizeof(double));
  std::int64_t bad = 0;
  for (std::size_t k = 0; k < grads.size(); ++k) {
    std::int64_t c;
    std::memcpy(&c, &host[1 + k], sizeof c);
    bad += c;
  }
  if (sum_squares) *sum_squares = host[0];
  m_found = bad;
  m_state = State::Unscaled;
  return bad;
}

void LossScaler::multiply_by_inverse(Backend& be, std::span<const GradSpan> grads, float scale) {
  const float inv = static_cast<float>(1.0 / static_cast<double>(scale));
  if (inv == 1.0f) return;
  for (const GradSpan& g : grads) be.scale(g.data, inv, g.n);
}

void LossScaler::record_nonfinite(std::int64_t count) {
  if (m_state != State::Ready)
    throw ScalerStateError("unscale() has already been called since the last update()");
  m_found = count;
  m_state = State::Unscaled;
}

bool LossScaler::should_step() {
  if (m_state == State::Ready)
    throw ScalerStateError("should_step() called before unscale(): gradients are still scaled");
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
