// CSV export of runs (docs/numerics.md "The files a run writes"): steps, evals, events, gradient statistics, summary, config.
#pragma once

#include <string>
#include <vector>

#include "records/metrics.h"
#include "train/run_config.h"

namespace engine {

// One run's data as exported. The GUI fills these from its model; the CLI
// from the trainer's runs.
struct RunExport {
  int run_id = 0;
  std::string name;    // the `run` column: the recipe, or the name the app or a preset gave
  std::string recipe;
  RunConfig config;
  RunHistory history;  // grads.csv from history.grads (histograms are not exported)
  RunSummary summary;
};

// Writes steps.csv, evals.csv, events.csv, grads.csv, summary.csv and
// config.json into `dir` (created if missing). Every file starts with the
// columns run_id, run, recipe. grads.csv has one row per GradStats: step,
// layer, format, zeros, total, the fractions underflow/subnormal/
// overflow_unscaled and _scaled, shadow, output_error, grad_error, grad_bias, and the
// histogram of log2|g| (log2_lo, then the counts separated by spaces) so a
// reopened run draws it again (header only when no run has any). events.csv has kind, layer, tensor,
// count and value (the new loss scale of a scale_change). steps.csv has
// mem_emulation beside the categories of mem_total (it is not part of it).
// evals.csv and summary.csv have val_bits_per_token and val_perplexity,
// derived from val_loss for a text run (per_token) and empty otherwise.
// When a run wrote text (history.texts), samples.jsonl too, as a run folder
// has it (report/text_samples.h), its run_id the export's.
// RFC 4180, UTF-8, '.' decimal point whatever the
// locale, floats with enough digits to round-trip (%.9g for float values,
// %.17g for doubles). Each file is written to a temporary file in `dir` and
// renamed, so a failed export never leaves a half file. Throws
// std::runtime_error naming the file on failure. Any thread.
void export_runs(const std::string& dir, const std::vector<RunExport>& runs);

// The files and their rows, one way for the export and the run journal:
// one column table per file writes the header and the rows and reads rows
// back (csv_read).
enum class CsvFile { Steps, Evals, Events, Grads, Summary };
const std::string& csv_header(CsvFile f);  // with its CRLF
const char* csv_file_name(CsvFile f);      // "steps.csv", ...
struct CsvRun {
  int run_id = 0;
  std::string name, recipe;
};
std::string csv_row(const CsvRun& r, const StepMetrics& m);
std::string csv_row(const CsvRun& r, const EvalMetrics& e);
std::string csv_row(const CsvRun& r, const Event& e);
std::string csv_row(const CsvRun& r, const GradStats& g);
std::string csv_row(const CsvRun& r, const RunSummary& s);
// "0 3 12 ...": grads.csv's histogram column (counts of log2|g| bins from log2_lo).
std::string histogram_text(const std::vector<std::int64_t>& counts);
// "fp16/fp16/fp32/fp16": compute/storage/accumulate/grad (events.csv's tensor of a precision change).
std::string precision_text(const LayerPrecision& p);
// Writes `content` to dir/name through a temporary file and a rename.
void write_file_atomically(const std::string& dir, const std::string& name, const std::string& content);

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

// One row of a table, read by column name. Every failure throws
// std::runtime_error naming `origin` and the line: a missing column, a
// short row, a field that is not the number the column holds.
struct CsvRow {
  const CsvTable& table;
  std::string origin;
  std::size_t row = 0;
  const std::string& at(const char* name) const;
  double d(const char* name) const;
  std::int64_t i(const char* name) const;  // an integral number
  bool b(const char* name) const { return i(name) != 0; }
  [[noreturn]] void fail(const std::string& what) const;
};
// A row read back into its record by the same column table that wrote it
// (run_id is left to the caller, which checks it against its runs; a
// summary's recipe comes from the lead column).
void csv_read(const CsvRow& row, StepMetrics& m);
void csv_read(const CsvRow& row, EvalMetrics& e);
void csv_read(const CsvRow& row, Event& e);
void csv_read(const CsvRow& row, GradStats& g);
void csv_read(const CsvRow& row, RunSummary& s);
CsvTable read_csv(const std::string& path);
// Same, from text; `origin` names it in errors.
CsvTable parse_csv(const std::string& text, const std::string& origin);

}  // namespace engine
