// Optimizer base: state allocation and layout checks, state rounding, the factory.
#include "optim/optimizer.h"

#include <stdexcept>
#include <string>

#include "backend/backend.h"
#include "numeric/cast.h"
#include "optim/adam.h"
#include "optim/sgd.h"

namespace engine {

Optimizer::Optimizer(Format state_format) : m_format(state_format) {}

void Optimizer::step(Backend& be, std::span<const ParamSlot> slots, double lr) {
  if (!(lr >= 0.0)) {
    throw std::invalid_argument(std::string(name()) + ": learning rate must be >= 0, got " + std::to_string(lr));
  }
  const std::size_t buffers = state_buffers();
  if (m_step == 0 && m_sizes.empty()) {
    m_sizes.reserve(slots.size());
    for (const ParamSlot& s : slots) m_sizes.push_back(s.n);
    m_state.resize(slots.size() * buffers);
    for (std::size_t i = 0; i < slots.size(); ++i) {
      for (std::size_t b = 0; b < buffers; ++b)
        m_state[i * buffers + b] = Tensor({static_cast<std::int64_t>(slots[i].n)}, Format::FP32);
    }
  } else {
    if (slots.size() != m_sizes.size()) {
      throw std::invalid_argument(std::string(name()) + ": step with " + std::to_string(slots.size()) +
                                  " parameter slots, state has " + std::to_string(m_sizes.size()) +
                                  "; call reset() after changing the model");
    }
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (slots[i].n != m_sizes[i]) {
        throw std::invalid_argument(std::string(name()) + ": slot " + std::to_string(i) + " has " +
                                    std::to_string(slots[i].n) + " elements, state has " +
                                    std::to_string(m_sizes[i]) + "; call reset() after changing the model");
      }
    }
  }
  ++m_step;
  update(be, slots, lr, m_step);
}

void Optimizer::reset() {
  m_step = 0;
  m_sizes.clear();
  m_state.clear();
}

void Optimizer::set_state_format(Format f) {
  m_format = f;
  if (f == Format::FP32) return;
  for (Tensor& s : m_state) {
    if (Backend* be = s.backend()) be->quantize(f, s.f32(), s.numel(), false);
    else quantize_inplace(f, s.f32(), static_cast<std::size_t>(s.numel()));
  }
}

std::size_t Optimizer::state_bytes() const {
  std::size_t n = 0;
  for (const Tensor& s : m_state) n += static_cast<std::size_t>(s.numel());
  return n * storage_bytes(m_format);
}

std::vector<float> Optimizer::state(std::size_t slot, std::size_t buffer) const {
  const std::size_t i = slot * state_buffers() + buffer;
  if (buffer >= state_buffers() || i >= m_state.size()) return {};
  return m_state[i].to_f32();
}

std::optional<OptimizerKind> parse_optimizer_kind(std::string_view s) {
  if (s == "sgd") return OptimizerKind::SGD;
  if (s == "adam") return OptimizerKind::Adam;
  if (s == "adamw") return OptimizerKind::AdamW;
  return std::nullopt;
}

const char* optimizer_key(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::SGD: return "sgd";
    case OptimizerKind::Adam: return "adam";
    case OptimizerKind::AdamW: return "adamw";
  }
  return "sgd";
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config) {
  switch (config.kind) {
    case OptimizerKind::SGD: return std::make_unique<Sgd>(config.sgd, config.state_format);
    case OptimizerKind::Adam: return std::make_unique<Adam>(config.adam, false, config.state_format);
    case OptimizerKind::AdamW: return std::make_unique<Adam>(config.adam, true, config.state_format);
  }
  throw std::invalid_argument("optimizer: unknown kind");
}

}  // namespace engine
