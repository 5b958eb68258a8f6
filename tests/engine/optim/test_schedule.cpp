// Learning-rate schedules at their boundaries: step 0, end of warm-up, middle, last step, beyond.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "optim/schedule.h"

namespace {

TEST(Schedule, ConstantIsConstant) {
  const engine::LrSchedule s{engine::ScheduleKind::Constant, 0.05, 0, 0, 0.0};
  EXPECT_EQ(engine::learning_rate(s, 0), 0.05);
  EXPECT_EQ(engine::learning_rate(s, 123456), 0.05);
}

TEST(Schedule, LinearWarmupReachesBaseOnItsLastStep) {
  const engine::LrSchedule s{engine::ScheduleKind::Cosine, 0.1, 10, 110, 0.001};
  EXPECT_DOUBLE_EQ(engine::learning_rate(s, 0), 0.1 * 1 / 10);  // step 0: (0+1)/warmup, never 0
  EXPECT_DOUBLE_EQ(engine::learning_rate(s, 4), 0.1 * 5 / 10);
  EXPECT_DOUBLE_EQ(engine::learning_rate(s, 9), 0.1);           // end of warm-up
  EXPECT_DOUBLE_EQ(engine::learning_rate(s, 10), 0.1);          // cosine starts at base
  EXPECT_DOUBLE_EQ(engine::learning_rate(s, -5), 0.1 / 10);     // negative counts as 0
  // Constant with warm-up uses the same ramp.
  const engine::LrSchedule c{engine::ScheduleKind::Constant, 0.1, 4, 0, 0.0};
  EXPECT_DOUBLE_EQ(engine::learning_rate(c, 0), 0.025);
  EXPECT_DOUBLE_EQ(engine::learning_rate(c, 3), 0.1);
  EXPECT_DOUBLE_EQ(engine::learning_rate(c, 4), 0.1);
}

TEST(Schedule, CosineDecaysToMinOnTheLastStep) {
  const engine::LrSchedule s{engine::ScheduleKind::Cosine, 0.1, 10, 111, 0.001};
  // Steps 10..110: u = (step - 10) / 100.
  EXPECT_DOUBLE_EQ(engine::learning_rate(s, 60), 0.001 + (0.1 - 0.001) * 0.5);  // u = 1/2
  const double u = 0.25;
  EXPECT_NEAR(engine::learning_rate(s, 35), 0.001 + (0.1 - 0.001) * 0.5 * (1 + std::cos(std::numbers::pi * u)),
              1e-15);
  EXPECT_EQ(engine::learning_rate(s, 110), 0.001);  // last step: exactly min
  EXPECT_EQ(engine::learning_rate(s, 500), 0.001);  // beyond: stays at min
  // Monotone non-increasing after warm-up.
  for (std::int64_t t = 10; t < 110; ++t) {
    ASSERT_GE(engine::learning_rate(s, t), engine::learning_rate(s, t + 1)) << t;
  }
}

TEST(Schedule, CosineWithoutWarmupAndDegenerateLengths) {
  const engine::LrSchedule s{engine::ScheduleKind::Cosine, 1.0, 0, 3, 0.0};
  EXPECT_DOUBLE_EQ(engine::learning_rate(s, 0), 1.0);
  EXPECT_DOUBLE_EQ(engine::learning_rate(s, 1), 0.5);
  EXPECT_EQ(engine::learning_rate(s, 2), 0.0);
  const engine::LrSchedule one{engine::ScheduleKind::Cosine, 1.0, 0, 1, 0.2};
  EXPECT_EQ(engine::learning_rate(one, 0), 0.2);  // the only step is the last step
}

TEST(Schedule, NamesRoundTrip) {
  EXPECT_EQ(engine::parse_schedule_kind("cosine"), engine::ScheduleKind::Cosine);
  EXPECT_EQ(engine::parse_schedule_kind("constant"), engine::ScheduleKind::Constant);
  EXPECT_FALSE(engine::parse_schedule_kind("step").has_value());
  EXPECT_STREQ(engine::schedule_key(engine::ScheduleKind::Cosine), "cosine");
}

}  // namespace
