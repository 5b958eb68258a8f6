// Global-norm gradient clipping: the norm from the backend, the scale in float.
#include "optim/clip.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "tensor/tensor.h"

namespace engine {

double global_grad_norm(Backend& be, std::span<const GradBuffer> grads) {
  std::vector<GradBuffer> views;
  views.reserve(grads.size());
  for (const GradBuffer& g : grads) views.push_back({g.data, g.n, nullptr});
  Buffer sum;
  sum.reserve(sizeof(double));
  be.unscale_grads(views.data(), views.size(), 1.0f, sum.as<double>());
  double total = 0.0;
  sum.download(&total, sizeof total);
  return std::sqrt(total);
}

double clip_grad_norm(Backend& be, std::span<const GradBuffer> grads, double total, double max_norm) {
  if (!(max_norm >= 0.0)) {
    throw std::invalid_argument("clip_grad_norm: max_norm must be >= 0, got " + std::to_string(max_norm));
  }
  if (!std::isfinite(total)) return total;
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0) {
    const float c = static_cast<float>(coef);
    for (const GradBuffer& g : grads) be.scale(g.data, c, g.n);
  }
  return total;
}

}  // namespace engine
