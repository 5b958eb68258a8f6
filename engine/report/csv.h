// CSV export of runs (DESIGN.md "--out DIR"): steps, evals, events, gradient statistics, summary, config.
#pragma once

#include <string>
#include <vector>

#include "train/metrics.h"
#include "train/run_config.h"

namespace engine {

// One run's data as exported. The GUI fills these from its model; the CLI
// from the trainer's runs.
struct RunExport {
  int run_id = 0;
  std::string recipe;
  RunConfig config;
  std::vector<StepMetrics> steps;
  std::vector<EvalMetrics> evals;
  std::vector<Event> events;
  std::vector<GradStats> grad_stats;  // grads.csv (histograms are not exported)
  RunSummary summary;
};

// Writes steps.csv, evals.csv, events.csv, grads.csv, summary.csv and
// config.json into `dir` (created if missing). grads.csv has one row per
// GradStats: run_id, recipe, step, layer, format, zeros, total, then the
// fractions underflow/subnormal/overflow_unscaled and _scaled (header only
// when no run has any). RFC 4180, UTF-8, '.' decimal point whatever the
// locale, floats with enough digits to round-trip (%.9g for float values,
// %.17g for doubles). Each file is written to a temporary file in `dir` and
// renamed, so a failed export never leaves a half file. Throws
// std::runtime_error naming the file on failure. Any thread.
void export_runs(const std::string& dir, const std::vector<RunExport>& runs);

// RFC 4180 field quoting (quotes when the field holds , " CR or LF).
std::string csv_field(const std::string& s);
// Shortest round-trip decimal form of a double ("nan", "inf", "-inf" for
// non-finite values), locale-independent.
std::string csv_number(double v);

// Reads a CSV file back (tests and tools): header + rows of fields.
struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  int column(const std::string& name) const;  // -1 if absent
};
CsvTable read_csv(const std::string& path);

}  // namespace engine
