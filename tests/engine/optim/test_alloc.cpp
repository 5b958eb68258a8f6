// The per-step optimizer calls allocate nothing after the first step (counted by a global operator new).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "engine/optim/reference.h"
#include "engine/support/test_backend.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/sgd.h"

namespace {
std::atomic<long> g_news{0};
}

// Replaces the global allocation functions of this test executable. GCC
// cannot see that these free() calls pair with the malloc() above.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

TEST(Allocation, StepsAfterTheFirstAllocateNothing) {
  test::Problem prob({10, 70000, 300000});
  std::vector<std::vector<float>> g;
  for (std::size_t s = 0; s < prob.params.size(); ++s) g.push_back(prob.grad(s, 1));
  const auto slots = test::slots_for(prob.params, g, prob.decay);
  std::vector<engine::GradBuffer> grads;
  for (auto& x : g) grads.push_back({x.data(), static_cast<std::int64_t>(x.size()), nullptr});

  engine::Sgd sgd({0.9, 0.0, 1e-4, true}, engine::Format::BF16);
  engine::Adam adamw({}, true, engine::Format::FP16);
  engine::Adam adam({}, false);
  sgd.step(test::cpu_backend(), slots, 0.01);  // first steps allocate the state
  adamw.step(test::cpu_backend(), slots, 0.01);
  adam.step(test::cpu_backend(), slots, 0.01);
  engine::clip_grad_norm(test::cpu_backend(), grads, 2.0, 1.0);

  const long before = g_news.load();
  for (int t = 0; t < 3; ++t) {
    sgd.step(test::cpu_backend(), slots, 0.01);
    adamw.step(test::cpu_backend(), slots, 0.01);
    adam.step(test::cpu_backend(), slots, 0.01);
    engine::clip_grad_norm(test::cpu_backend(), grads, 2.0, 0.5);
  }
  EXPECT_EQ(g_news.load() - before, 0);
}

}  // namespace
