// learning_rate(): constant and warm-up + cosine schedules.
#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace engine {

std::optional<ScheduleKind> parse_schedule_kind(std::string_view s) {
  if (s == "constant") return ScheduleKind::Constant;
  if (s == "cosine") return ScheduleKind::Cosine;
  return std::nullopt;
}

const char* schedule_key(ScheduleKind k) { return k == ScheduleKind::Cosine ? "cosine" : "constant"; }

double learning_rate(const LrSchedule& s, std::int64_t step) {
  step = std::max<std::int64_t>(step, 0);
  if (step < s.warmup_steps) {
    return s.base_lr * static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps);
  }
  if (s.kind == ScheduleKind::Constant) return s.base_lr;
  const std::int64_t warmup = std::max<std::int64_t>(s.warmup_steps, 0);
  const std::int64_t span = s.total_steps - 1 - warmup;
  if (span <= 0) return s.min_lr;
  const double u = std::min(1.0, static_cast<double>(step - warmup) / static_cast<double>(span));
  if (u >= 1.0) return s.min_lr;  // exact, whatever cos(pi) rounds to
  return s.min_lr + (s.base_lr - s.min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * u));
}

}  // namespace engine
