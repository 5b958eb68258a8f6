// Test helper: PyTorch's SGD and Adam/AdamW written out in double, and a reproducible problem.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "optim/param_slot.h"

namespace test {

using Vec = std::vector<double>;

// A few parameter tensors with float values and per-step float gradients.
// Sizes include one of 70000 elements: the OpenMP path (>= 64k).
struct Problem {
  std::vector<std::vector<float>> params;
  std::vector<bool> decay;
  explicit Problem(std::vector<std::size_t> sizes = {7, 33, 70000}, double grad_scale = 1.0)
      : m_grad_scale(grad_scale) {
    for (std::size_t s = 0; s < sizes.size(); ++s) {
      std::vector<float> p(sizes[s]);
      for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<float>(std::cos(0.37 * i + 1.1 * s));
      params.push_back(p);
      decay.push_back(s != 1);  // slot 1 plays a bias: no weight decay
    }
  }
  // Gradient of slot s at step t (1-based): changes sign and size over steps.
  std::vector<float> grad(std::size_t s, int t) const {
    std::vector<float> g(params[s].size());
    for (std::size_t i = 0; i < g.size(); ++i) {
      g[i] = static_cast<float>(m_grad_scale * std::sin(0.71 * i + 1.3 * t + s) * (0.5 + 0.25 * t));
    }
    return g;
  }
  std::vector<std::vector<double>> params_double() const {
    std::vector<std::vector<double>> out;
    for (const auto& p : params) out.emplace_back(p.begin(), p.end());
    return out;
  }
  double m_grad_scale;
};

// torch.optim.SGD, in double.
struct RefSgd {
  RefSgd(double momentum_, double dampening_, double weight_decay_, bool nesterov_)
      : momentum(momentum_), dampening(dampening_), weight_decay(weight_decay_), nesterov(nesterov_) {}
  double momentum, dampening, weight_decay;
  bool nesterov;
  std::vector<Vec> buf;
  int t = 0;
  void step(std::vector<Vec>& p, const std::vector<std::vector<float>>& g, const std::vector<bool>& decay,
            double lr) {
    ++t;
    if (buf.empty()) buf.resize(p.size());
    for (std::size_t s = 0; s < p.size(); ++s) {
      const double wd = decay[s] ? weight_decay : 0.0;
      if (t == 1) buf[s].assign(p[s].size(), 0.0);
      for (std::size_t i = 0; i < p[s].size(); ++i) {
        double d = g[s][i] + wd * p[s][i];
        if (momentum != 0) {
          buf[s][i] = t == 1 ? d : momentum * buf[s][i] + (1 - dampening) * d;
          d = nesterov ? d + momentum * buf[s][i] : buf[s][i];
        }
        p[s][i] -= lr * d;
      }
    }
  }
};

// torch.optim.Adam (decoupled = false) and AdamW (decoupled = true), in double.
struct RefAdam {
  RefAdam(double beta1_, double beta2_, double eps_, double weight_decay_, bool decoupled_)
      : beta1(beta1_), beta2(beta2_), eps(eps_), weight_decay(weight_decay_), decoupled(decoupled_) {}
  double beta1, beta2, eps, weight_decay;
  bool decoupled;
  std::vector<Vec> m, v;
  int t = 0;
  void step(std::vector<Vec>& p, const std::vector<std::vector<float>>& g, const std::vector<bool>& decay,
            double lr) {
    ++t;
    if (m.empty()) {
      for (const auto& x : p) {
        m.emplace_back(x.size(), 0.0);
        v.emplace_back(x.size(), 0.0);
      }
    }
    const double bc1 = 1 - std::pow(beta1, t), bc2 = 1 - std::pow(beta2, t);
    for (std::size_t s = 0; s < p.size(); ++s) {
      const double wd = decay[s] ? weight_decay : 0.0;
      for (std::size_t i = 0; i < p[s].size(); ++i) {
        double gi = g[s][i];
        if (decoupled) {
          p[s][i] *= 1 - lr * wd;
        } else {
          gi += wd * p[s][i];
        }
        m[s][i] = beta1 * m[s][i] + (1 - beta1) * gi;
        v[s][i] = beta2 * v[s][i] + (1 - beta2) * gi * gi;
        const double denom = std::sqrt(v[s][i]) / std::sqrt(bc2) + eps;
        p[s][i] -= lr / bc1 * m[s][i] / denom;
      }
    }
  }
};

inline std::vector<engine::ParamSlot> slots_for(std::vector<std::vector<float>>& params,
                                                const std::vector<std::vector<float>>& grads,
                                                const std::vector<bool>& decay) {
  std::vector<engine::ParamSlot> out;
  for (std::size_t s = 0; s < params.size(); ++s) {
    out.push_back({params[s].data(), grads[s].data(), params[s].size(), decay[s]});
  }
  return out;
}

// Largest |a - b| / max(1, |b|) over every element.
inline double max_rel_error(const std::vector<std::vector<float>>& a, const std::vector<Vec>& b) {
  double worst = 0;
  for (std::size_t s = 0; s < a.size(); ++s) {
    for (std::size_t i = 0; i < a[s].size(); ++i) {
      const double e = std::abs(a[s][i] - b[s][i]) / std::max(1.0, std::abs(b[s][i]));
      if (std::isnan(e)) return e;
      worst = std::max(worst, e);
    }
  }
  return worst;
}

}  // namespace test
