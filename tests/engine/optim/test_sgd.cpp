// SGD against torch.optim.SGD's rule in double: momentum, dampening, Nesterov, weight decay.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "engine/optim/reference.h"
#include "engine/support/test_backend.h"
#include "optim/sgd.h"

namespace {

struct SgdCase {
  double momentum, dampening, weight_decay;
  bool nesterov;
};

class SgdMatchesPyTorch : public ::testing::TestWithParam<SgdCase> {};

// Six steps with a changing learning rate; every element of every slot
// (including the 70000-element one on the OpenMP path) within 1e-5 relative.
TEST_P(SgdMatchesPyTorch, OverSixSteps) {
  const SgdCase c = GetParam();
  test::Problem prob;
  auto ref_p = prob.params_double();
  test::RefSgd ref{c.momentum, c.dampening, c.weight_decay, c.nesterov};
  engine::Sgd sgd({c.momentum, c.dampening, c.weight_decay, c.nesterov});
  for (int t = 1; t <= 6; ++t) {
    std::vector<std::vector<float>> g;
    for (std::size_t s = 0; s < prob.params.size(); ++s) g.push_back(prob.grad(s, t));
    const double lr = 0.1 * (1.0 - 0.1 * t);
    ref.step(ref_p, g, prob.decay, lr);
    const auto slots = test::slots_for(prob.params, g, prob.decay);
    sgd.step(test::cpu_backend(), slots, lr);
    ASSERT_LT(test::max_rel_error(prob.params, ref_p), 1e-5) << "step " << t;
  }
  EXPECT_EQ(sgd.step_count(), 6);
  const std::size_t n = 7 + 33 + 70000;
  EXPECT_EQ(sgd.state_bytes(), c.momentum != 0 ? n * 4 : 0u);
  if (c.momentum != 0) {  // the momentum buffer itself matches too
    for (std::size_t i = 0; i < 33; ++i) EXPECT_NEAR(sgd.state(1, 0)[i], ref.buf[1][i], 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, SgdMatchesPyTorch,
                         ::testing::Values(SgdCase{0.0, 0.0, 0.0, false},   // plain SGD
                                           SgdCase{0.0, 0.0, 0.1, false},   // weight decay only
                                           SgdCase{0.9, 0.0, 0.0, false},   // momentum
                                           SgdCase{0.9, 0.3, 0.0, false},   // dampening
                                           SgdCase{0.9, 0.0, 0.0, true},    // Nesterov
                                           SgdCase{0.9, 0.0, 0.05, false},  // momentum + decay
                                           SgdCase{0.8, 0.0, 0.05, true}));

// The test can tell rules apart: a zero-initialised buffer (dampening on the
// first step) or plain momentum instead of Nesterov is far outside 1e-5.
TEST(Sgd, ReferenceComparisonDetectsWrongRules) {
  test::Problem prob({50});
  auto ref_p = prob.params_double();
  test::RefSgd nesterov_ref{0.9, 0.0, 0.0, true};
  engine::Sgd plain({0.9, 0.0, 0.0, false});
  for (int t = 1; t <= 3; ++t) {
    std::vector<std::vector<float>> g{prob.grad(0, t)};
    nesterov_ref.step(ref_p, g, prob.decay, 0.1);
    plain.step(test::cpu_backend(), test::slots_for(prob.params, g, prob.decay), 0.1);
  }
  EXPECT_GT(test::max_rel_error(prob.params, ref_p), 1e-3);

  // First step: PyTorch copies the gradient into the buffer (no dampening).
  test::Problem one({10});
  engine::Sgd damp({0.9, 0.5, 0.0, false});
  const auto g = one.grad(0, 1);
  const std::vector<std::vector<float>> gs{g};
  const auto p0 = one.params[0];
  damp.step(test::cpu_backend(), test::slots_for(one.params, gs, one.decay), 1.0);
  for (std::size_t i = 0; i < 10; ++i) {
    EXPECT_FLOAT_EQ(damp.state(0, 0)[i], g[i]);
    EXPECT_FLOAT_EQ(one.params[0][i], p0[i] - g[i]);
  }
}

TEST(Sgd, RejectsWhatPyTorchRejectsNamingTheField) {
  auto message = [](engine::SgdOptions o) -> std::string {
    try {
      engine::Sgd s(o);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(message({-0.1, 0, 0, false}).rfind("sgd.momentum:", 0), 0u);
  EXPECT_EQ(message({0.9, 0, -1, false}).rfind("sgd.weight_decay:", 0), 0u);
  EXPECT_EQ(message({0.0, 0, 0, true}).rfind("sgd.nesterov:", 0), 0u);
  EXPECT_EQ(message({0.9, 0.1, 0, true}).rfind("sgd.nesterov:", 0), 0u);
  EXPECT_EQ(message({0.9, 0, 0, true}), "");
}

TEST(Optimizer, LayoutChangeNeedsResetAndFactoryBuildsEachKind) {
  std::vector<float> p(4, 1.0f), g(4, 0.5f), p2(5, 1.0f), g2(5, 0.5f);
  engine::OptimizerConfig cfg;
  cfg.kind = engine::OptimizerKind::SGD;
  cfg.sgd.momentum = 0.9;
  auto opt = engine::make_optimizer(cfg);
  EXPECT_STREQ(opt->name(), "sgd");
  const std::vector<engine::ParamSlot> a{{p.data(), g.data(), 4}};
  const std::vector<engine::ParamSlot> b{{p2.data(), g2.data(), 5}};
  opt->step(test::cpu_backend(), a, 0.1);
  EXPECT_THROW(opt->step(test::cpu_backend(), b, 0.1), std::invalid_argument);
  EXPECT_THROW(opt->step(test::cpu_backend(), a, -1.0), std::invalid_argument);
  opt->reset();
  EXPECT_EQ(opt->step_count(), 0);
  EXPECT_EQ(opt->state_bytes(), 0u);
  opt->step(test::cpu_backend(), b, 0.1);
  EXPECT_EQ(opt->state_bytes(), 5u * 4u);
  EXPECT_EQ(opt->state_bytes_for(1000), 4000u);

  cfg.kind = engine::OptimizerKind::Adam;
  EXPECT_STREQ(engine::make_optimizer(cfg)->name(), "adam");
  cfg.kind = engine::OptimizerKind::AdamW;
  EXPECT_STREQ(engine::make_optimizer(cfg)->name(), "adamw");
  EXPECT_EQ(engine::parse_optimizer_kind("adamw"), engine::OptimizerKind::AdamW);
  EXPECT_EQ(engine::parse_optimizer_kind("sgd"), engine::OptimizerKind::SGD);
  EXPECT_FALSE(engine::parse_optimizer_kind("rmsprop").has_value());
  EXPECT_STREQ(engine::optimizer_key(engine::OptimizerKind::Adam), "adam");
}

}  // namespace
