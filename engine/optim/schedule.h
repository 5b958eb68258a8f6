// Learning-rate schedules: constant and cosine with linear warm-up, pure functions of the step.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace engine {

enum class ScheduleKind : std::uint8_t { Constant, Cosine };
// "constant", "cosine"
std::optional<ScheduleKind> parse_schedule_kind(std::string_view s);
const char* schedule_key(ScheduleKind k);

struct LrSchedule {
  ScheduleKind kind = ScheduleKind::Constant;
  double base_lr = 0.01;
  std::int64_t warmup_steps = 0;  // both kinds: linear warm-up first
  std::int64_t total_steps = 0;   // cosine: the run's length in steps
  double min_lr = 0.0;            // cosine: lr of the last step
};

// Learning rate of step `step` (0-based):
//   step < warmup:           base * (step + 1) / warmup   (step warmup-1 reaches base)
//   constant, after warm-up: base
//   cosine, after warm-up:   min + (base - min) * (1 + cos(pi * u)) / 2,
//                            u = (step - warmup) / (total - 1 - warmup), clamped to [0, 1]
//   so step `warmup` has base and the last step (total - 1) has exactly min;
//   later steps stay at min. With no step between (total - 1 <= warmup) the
//   steps after warm-up get min. Negative steps count as 0. Any thread.
double learning_rate(const LrSchedule& schedule, std::int64_t step);

}  // namespace engine
