// SGD with momentum, dampening, Nesterov and weight decay: torch.optim.SGD's update rule.
#pragma once

#include "optim/optimizer.h"

namespace engine {

// Per element, with g the gradient and p the parameter (PyTorch's order):
//   g = g + weight_decay * p                       (if weight_decay != 0 and the slot decays)
//   if momentum != 0:
//     buf = g                                      (first step: a copy, not momentum * 0)
//     buf = momentum * buf + (1 - dampening) * g   (later steps)
//     g   = nesterov ? g + momentum * buf : buf
//   p = p - lr * g
// buf is rounded to the state format before it is used.
class Sgd final : public Optimizer {
 public:
  // Throws std::invalid_argument naming the field for values PyTorch rejects.
  explicit Sgd(const SgdOptions& options, Format state_format = Format::FP32);
  const char* name() const override { return "sgd"; }
  std::size_t state_buffers() const override { return m_opt.momentum != 0.0 ? 1 : 0; }
  const SgdOptions& options() const { return m_opt; }

 protected:
  void update(Backend& be, std::span<const ParamSlot> slots, double lr, std::int64_t t) override;

 private:
  SgdOptions m_opt;
};

}  // namespace engine
