// Adam and AdamW against torch.optim's rules in double: bias correction, eps placement, L2 vs decoupled decay.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "engine/optim/reference.h"
#include "engine/support/test_backend.h"
#include "optim/adam.h"

namespace {

struct AdamCase {
  double beta1, beta2, eps, weight_decay;
  bool decoupled;
  double grad_scale;
};

class AdamMatchesPyTorch : public ::testing::TestWithParam<AdamCase> {};

TEST_P(AdamMatchesPyTorch, OverSixSteps) {
  const AdamCase c = GetParam();
  test::Problem prob({7, 33, 70000}, c.grad_scale);
  auto ref_p = prob.params_double();
  test::RefAdam ref{c.beta1, c.beta2, c.eps, c.weight_decay, c.decoupled};
  engine::Adam adam({c.beta1, c.beta2, c.eps, c.weight_decay}, c.decoupled);
  for (int t = 1; t <= 6; ++t) {
    std::vector<std::vector<float>> g;
    for (std::size_t s = 0; s < prob.params.size(); ++s) g.push_back(prob.grad(s, t));
    const double lr = 0.01 * t;  // e.g. during warm-up
    ref.step(ref_p, g, prob.decay, lr);
    adam.step(test::cpu_backend(), test::slots_for(prob.params, g, prob.decay), lr);
    ASSERT_LT(test::max_rel_error(prob.params, ref_p), 1e-5) << "step " << t;
  }
  EXPECT_EQ(adam.state_bytes(), (7u + 33u + 70000u) * 2u * 4u);
  for (std::size_t i = 0; i < 33; ++i) {
    EXPECT_NEAR(adam.state(1, 0)[i], ref.m[1][i], 1e-6 * c.grad_scale + 1e-12);
    EXPECT_NEAR(adam.state(1, 1)[i], ref.v[1][i], 1e-6 * c.grad_scale * c.grad_scale + 1e-15);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AdamMatchesPyTorch,
    ::testing::Values(AdamCase{0.9, 0.999, 1e-8, 0.0, false, 1.0},    // Adam defaults
                      AdamCase{0.9, 0.999, 1e-8, 0.1, false, 1.0},    // Adam, L2 in the gradient
                      AdamCase{0.9, 0.999, 1e-8, 0.1, true, 1.0},     // AdamW, decoupled
                      AdamCase{0.8, 0.95, 1e-8, 0.01, true, 1.0},     // other betas
                      // eps comparable to sqrt(v): its place (outside the
                      // sqrt, after bias correction) decides the step size.
                      AdamCase{0.9, 0.999, 1e-3, 0.0, false, 1e-3}));

TEST(Adam, AdamAndAdamWDifferOnlyThroughWeightDecay) {
  auto run = [](bool decoupled, double wd) {
    test::Problem prob({64});
    engine::Adam opt({0.9, 0.999, 1e-8, wd}, decoupled);
    for (int t = 1; t <= 4; ++t) {
      const std::vector<std::vector<float>> g{prob.grad(0, t)};
      opt.step(test::cpu_backend(), test::slots_for(prob.params, g, prob.decay), 0.05);
    }
    return prob.params[0];
  };
  EXPECT_EQ(run(false, 0.0), run(true, 0.0));  // bit for bit without decay
  const auto adam = run(false, 0.5), adamw = run(true, 0.5);
  double diff = 0;
  for (std::size_t i = 0; i < adam.size(); ++i) diff = std::max(diff, double(std::abs(adam[i] - adamw[i])));
  EXPECT_GT(diff, 1e-3);

  // And the reference agrees with which is which: Adam's result is far from
  // the AdamW reference (the comparison can fail).
  test::Problem prob({64});
  auto ref_p = prob.params_double();
  test::RefAdam ref{0.9, 0.999, 1e-8, 0.5, true};
  for (int t = 1; t <= 4; ++t) {
    const std::vector<std::vector<float>> g{prob.grad(0, t)};
    ref.step(ref_p, g, prob.decay, 0.05);
  }
  const std::vector<std::vector<float>> adam_params{adam}, adamw_params{adamw};
  EXPECT_LT(test::max_rel_error(adamw_params, ref_p), 1e-5);
  EXPECT_GT(test::max_rel_error(adam_params, ref_p), 1e-3);
}

TEST(Adam, FirstStepMovesEveryWeightByAboutLr) {
  // Bias correction: after one step m/(1-b1) = g and sqrt(v/(1-b2)) = |g|,
  // so the step is lr * sign(g) (up to eps).
  test::Problem prob({100});
  const auto p0 = prob.params[0];
  const auto g = prob.grad(0, 1);
  engine::Adam adam({}, false);
  const std::vector<std::vector<float>> gs{g};
  adam.step(test::cpu_backend(), test::slots_for(prob.params, gs, prob.decay), 0.01);
  for (std::size_t i = 0; i < 100; ++i) {
    if (std::abs(g[i]) < 1e-3f) continue;
    EXPECT_NEAR(prob.params[0][i] - p0[i], g[i] > 0 ? -0.01 : 0.01, 1e-6) << i;
  }
}

TEST(Adam, RejectsOutOfRangeHyperparametersNamingTheField) {
  auto message = [](engine::AdamOptions o, bool w) -> std::string {
    try {
      engine::Adam a(o, w);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(message({1.0, 0.999, 1e-8, 0}, false).rfind("adam.beta1:", 0), 0u);
  EXPECT_EQ(message({0.9, -0.1, 1e-8, 0}, false).rfind("adam.beta2:", 0), 0u);
  EXPECT_EQ(message({0.9, 0.999, -1, 0}, true).rfind("adamw.eps:", 0), 0u);
  EXPECT_EQ(message({0.9, 0.999, 1e-8, -0.1}, true).rfind("adamw.weight_decay:", 0), 0u);
  EXPECT_EQ(message({}, true), "");
}

}  // namespace
