// Gradient clipping by the global L2 norm over all tensors (torch.nn.utils.clip_grad_norm_).
#pragma once

#include <span>

#include "optim/param_slot.h"

namespace engine {

// sqrt(sum of g^2 over every element of every span), accumulated in double in
// a fixed blocking, so the result does not depend on the thread count. inf if
// any element is inf, NaN if any is NaN. Any thread; no allocation.
double global_grad_norm(std::span<const GradSpan> grads);

// clip_grad_norm_: total = global_grad_norm(grads); if total is finite and
// coef = max_norm / (total + 1e-6) < 1, every gradient is multiplied by coef
// (in float). Returns total (before clipping).
// Unlike PyTorch (which would multiply by max_norm / inf = 0, or by NaN), a
// non-finite total is returned as is and the gradients are left alone: under
// loss scaling that step is skipped anyway, and the overflow statistics still
// see the original values.
// Throws std::invalid_argument if max_norm is negative or NaN. Any thread
// (one caller per set of spans); no allocation.
double clip_grad_norm(std::span<const GradSpan> grads, double max_norm);

}  // namespace engine
