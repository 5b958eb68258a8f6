// samples.jsonl: a text run's continuations, one JSON object a line, the same in a run folder and an export.
#pragma once

#include <string>
#include <vector>

#include "records/metrics.h"

namespace engine {

// One line of samples.jsonl, '\n' included: {"prompt", "run", "run_id",
// "step", "text"}, UTF-8 (a byte sequence that is not UTF-8, which no
// vocabulary yields, is written as U+FFFD rather than refused). `run` is
// the run's name as the CSV files' `run` column has it.
std::string text_sample_line(const TextSample& t, const std::string& run);

}  // namespace engine
