// Gradient clipping by the global L2 norm over all tensors (torch.nn.utils.clip_grad_norm_).
#pragma once

#include <span>

#include "backend/backend.h"

namespace engine {

// sqrt(sum of g^2 over every element of every gradient (backend memory;
// their non-finite slots are not written), accumulated in double (the loss
// scaler's fused pass with scale 1). inf if any element is inf, NaN if any
// is NaN. A read: the training step gets the
// norm from its one read instead (unscale_grads).
double global_grad_norm(Backend& be, std::span<const GradBuffer> grads);

// clip_grad_norm_ given the global norm `total` (before clipping): if total
// is finite and coef = max_norm / (total + 1e-6) < 1, every gradient is
// multiplied by coef (in float, by the backend). Returns total.
// Unlike PyTorch (which would multiply by max_norm / inf = 0, or by NaN), a
// non-finite total leaves the gradients alone: under loss scaling that step
// is skipped anyway, and the overflow statistics still see the original
// values. Throws std::invalid_argument if max_norm is negative or NaN.
double clip_grad_norm(Backend& be, std::span<const GradBuffer> grads, double total, double max_norm);

}  // namespace engine
