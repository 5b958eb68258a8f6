// Finite-difference gradient checks for layers and models (FP32), shared by the nn tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "nn/layer.h"
#include "nn/model.h"
#include "tensor/tensor.h"

namespace test {

using engine::Backend;
using engine::Context;
using engine::Format;
using engine::Layer;
using engine::Parameter;
using engine::Shape;
using engine::Tensor;

// One CPU backend for the whole test program (oneDNN set-up is not free).
// One thread: these tests check layer logic, and a single thread keeps them
// fast on a loaded machine (OpenMP teams spin when a core is taken).
inline Backend& backend() {
  static std::unique_ptr<Backend> be = engine::make_cpu_backend(1);
  return *be;
}

inline std::vector<float> uniform_values(std::int64_t n, std::mt19937_64& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

// Values with |x| in [lo, hi] and a random sign: kept away from a kink at 0
// (ReLU) by more than the finite-difference step.
inline std::vector<float> away_from_zero(std::int64_t n, std::mt19937_64& rng, float lo, float hi) {
  std::vector<float> v = uniform_values(n, rng, lo, hi);
  std::bernoulli_distribution sign(0.5);
  for (auto& x : v)
    if (sign(rng)) x = -x;
  return v;
}

inline Tensor random_tensor(const Shape& s, std::mt19937_64& rng, float lo = -1.0f, float hi = 1.0f) {
  return Tensor::from_values(s, Format::FP32, uniform_values(engine::shape_numel(s), rng, lo, hi));
}

// Fills every parameter's (FP32) weight with U(-scale, scale).
inline void randomize(std::vector<Parameter*> params, std::mt19937_64& rng, float scale = 0.5f) {
  for (Parameter* p : params) {
    auto v = uniform_values(p->numel(), rng, -scale, scale);
    p->weight.from_f32(v.data(), p->numel());
  }
}

// sum(y * R) in double: the probe loss whose gradient w.r.t. y is R.
inline double probe(const Tensor& y, const std::vector<float>& r) {
  const std::vector<float> v = y.to_f32();
  double s = 0.0;
  for (std::size_t i = 0; i < v.size(); ++i) s += static_cast<double>(v[i]) * r[i];
  return s;
}

struct GradCheckOptions {
  float step = 1e-2f;          // central-difference step
  double tolerance = 1e-2;     // ||analytic - numeric|| / max(||analytic||, ||numeric||)
  double max_tolerance = 3e-2; // max |analytic - numeric| / max |numeric|
  std::int64_t samples = 40;   // elements checked per tensor (all when fewer)
  std::uint64_t seed = 7;
  // Below this L2 norm both gradients count as zero (a parameter the loss
  // does not depend on: f32 noise on both sides).
  double zero_norm = 1e-6;
};

// Compares analytic against numeric on the sampled elements.
inline void expect_close(const std::string& what, const std::vector<double>& analytic,
                         const std::vector<double>& numeric, const GradCheckOptions& opt) {
  double diff2 = 0, a2 = 0, n2 = 0, max_diff = 0, max_n = 0;
  for (std::size_t i = 0; i < analytic.size(); ++i) {
    const double d = analytic[i] - numeric[i];
    diff2 += d * d;
    a2 += analytic[i] * analytic[i];
    n2 += numeric[i] * numeric[i];
    max_diff = std::max(max_diff, std::abs(d));
    max_n = std::max(max_n, std::abs(numeric[i]));
  }
  const double scale = std::max({std::sqrt(a2), std::sqrt(n2), 1e-12});
  // A gradient that is zero everywhere must be zero analytically too.
  if (std::sqrt(n2) < opt.zero_norm && std::sqrt(a2) < opt.zero_norm) return;
  EXPECT_LT(std::sqrt(diff2) / scale, opt.tolerance) << what << ": relative L2 error of the gradient";
  EXPECT_LT(max_diff / std::max(max_n, 1e-12), opt.max_tolerance) << what << ": largest element error";
}

inline std::vector<std::int64_t> sample_indices(std::int64_t n, std::int64_t k, std::mt19937_64& rng) {
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) idx[static_cast<std::size_t>(i)] = i;
  if (n > k) {
    std::shuffle(idx.begin(), idx.end(), rng);
    idx.resize(static_cast<std::size_t>(k));
  }
  return idx;
}

// Central differences of `loss` w.r.t. values[i] for the sampled i.
template <class LossFn>
void numeric_gradient(float* values, const std::vector<std::int64_t>& idx, float h, LossFn&& loss,
                      std::vector<double>& out) {
  out.clear();
  for (std::int64_t i : idx) {
    const float orig = values[i];
    values[i] = orig + h;
    const double lp = loss();
    values[i] = orig - h;
    const double lm = loss();
    values[i] = orig;
    // The step actually taken (orig +- h rounded to f32), not the nominal one.
    out.push_back((lp - lm) / (static_cast<double>(orig + h) - static_cast<double>(orig - h)));
  }
}

// Checks dx (when check_dx) and every parameter gradient of `layer` at x.
inline void expect_layer_gradients(Layer& layer, Tensor x, const GradCheckOptions& opt = {},
                                   bool check_dx = true) {
  Backend& be = backend();
  std::mt19937_64 rng(opt.seed);
  auto ctx = layer.make_context();
  Tensor y;
  layer.forward(be, x, y, *ctx);
  const std::vector<float> r = uniform_values(y.numel(), rng);
  Tensor dy = Tensor::from_values(y.shape(), Format::FP32, r);
  Tensor dx;
  layer.backward(be, dy, check_dx ? &dx : nullptr, *ctx);
  if (check_dx) {
    ASSERT_EQ(dx.shape(), x.shape()) << layer.name() << ": dx shape";
  }
  // Copy the analytic gradients before the probes overwrite anything.
  std::vector<std::vector<float>> grads;
  for (Parameter* p : layer.parameters()) grads.push_back(p->grad.to_f32());
  const std::vector<float> dxv = check_dx ? dx.to_f32() : std::vector<float>{};

  auto loss = [&] {
    Tensor yy;
    auto c = layer.make_context();
    layer.forward(be, x, yy, *c);
    return probe(yy, r);
  };
  std::vector<double> num, ana;
  if (check_dx) {
    auto idx = sample_indices(x.numel(), opt.samples, rng);
    numeric_gradient(x.f32(), idx, opt.step, loss, num);
    ana.clear();
    for (auto i : idx) ana.push_back(dxv[static_cast<std::size_t>(i)]);
    expect_close(layer.name() + " dx", ana, num, opt);
  }
  std::size_t k = 0;
  for (Parameter* p : layer.parameters()) {
    auto idx = sample_indices(p->numel(), opt.samples, rng);
    numeric_gradient(p->weight.f32(), idx, opt.step, loss, num);
    ana.clear();
    for (auto i : idx) ana.push_back(grads[k][static_cast<std::size_t>(i)]);
    expect_close(p->name, ana, num, opt);
    ++k;
  }
}

// Checks every parameter gradient of a whole model at input x.
inline void expect_model_gradients(engine::Model& model, const Tensor& x, const GradCheckOptions& opt = {}) {
  Backend& be = backend();
  std::mt19937_64 rng(opt.seed);
  const Tensor& out = model.forward(be, x);
  const std::vector<float> r = uniform_values(out.numel(), rng);
  Tensor dlogits = Tensor::from_values(out.shape(), Format::FP32, r);
  model.backward(be, dlogits);
  std::vector<std::vector<float>> grads;
  for (Parameter* p : model.parameters()) grads.push_back(p->grad.to_f32());
  auto loss = [&] { return probe(model.forward(be, x), r); };
  std::vector<double> num, ana;
  std::size_t k = 0;
  for (Parameter* p : model.parameters()) {
    auto idx = sample_indices(p->numel(), opt.samples, rng);
    numeric_gradient(p->weight.f32(), idx, opt.step, loss, num);
    ana.clear();
    for (auto i : idx) ana.push_back(grads[k][static_cast<std::size_t>(i)]);
    expect_close(model.name() + " " + p->name, ana, num, opt);
    ++k;
  }
}

}  // namespace test
