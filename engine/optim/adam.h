// Adam and AdamW: torch.optim.Adam / AdamW's update rule (amsgrad off).
#pragma once

#include "optim/optimizer.h"

namespace engine {

// Per element at step t (from 1), PyTorch's order:
//   Adam (L2):        g = g + weight_decay * p
//   AdamW (decoupled): p = p * (1 - lr * weight_decay)
//   m = m + (1 - beta1) * (g - m)        (exp_avg.lerp_(g, 1 - beta1))
//   v = beta2 * v + (1 - beta2) * g * g
//   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// eps is added outside the square root, after bias correction, as PyTorch
// does. m and v are rounded to the state format before p uses them.
// Slots with decay=false get no weight decay of either kind.
class Adam final : public Optimizer {
 public:
  // decoupled = true is AdamW. Throws std::invalid_argument naming the field
  // (adam.beta1, ...) for values PyTorch rejects.
  Adam(const AdamOptions& options, bool decoupled, Format state_format = Format::FP32);
  const char* name() const override { return m_decoupled ? "adamw" : "adam"; }
  std::size_t state_buffers() const override { return 2; }  // 0: exp_avg (m), 1: exp_avg_sq (v)
  const AdamOptions& options() const { return m_opt; }
  bool decoupled() const { return m_decoupled; }

 protected:
  void update(Backend& be, std::span<const ParamSlot> slots, double lr, std::int64_t t) override;

 private:
  AdamOptions m_opt;
  bool m_decoupled;
};

}  // namespace engine
