// Subcommands of precision-lab-cli; each returns the process exit code
// (0 ok, 1 run failed or a claim failed, 2 bad input).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "report/csv.h"
#include "solve/refine.h"
#include "train/commands.h"
#include "train/comparison.h"

namespace cli {
int cmd_formats(int argc, char** argv);  // argv[0] == "formats"
// argv[0] == "run" or "compare"
int cmd_run(int argc, char** argv, bool compare);
// argv[0] == "lecture"
int cmd_lecture(int argc, char** argv);

// Trains `runs` side by side on one trainer with a progress line, prints a
// summary per run, writes the CSV files into `out` and returns them in
// `exports`. Exit code: 0, 1 when a run failed, 130 when interrupted.
// Replay: changes to apply at their steps, and the step each run stops at (0: none).
struct Replay {
  std::vector<engine::StampedChange> changes;
  std::vector<std::int64_t> stop_at;
};
int train_runs(const std::vector<engine::ComparisonRun>& runs, const std::string& out,
               std::vector<engine::RunExport>& exports, const Replay* replay = nullptr);
// argv[0] == "replay"
int cmd_replay(int argc, char** argv);
// argv[0] == "sample": text from a run folder's final weights
int cmd_sample(int argc, char** argv);
// argv[0] == "export-pytorch": a run as a PyTorch script
int cmd_export_pytorch(int argc, char** argv);
// argv[0] == "solve": Ax = b by a low-precision LU and iterative refinement
int cmd_solve(int argc, char** argv);

// The solver's output, shared by `solve` and the solver lessons of `lecture`
// (docs/solver.md "Commands" describes the columns).
// The table printed as the runs go: its header, then one line per run.
void print_solve_header();
void print_solve_row(const engine::SolveRun& r, bool forward_known);
std::string solve_iterations_csv(const std::vector<engine::SolveRun>& runs);
// cond: NaN for a matrix from a file (the column left empty).
std::string solve_summary_csv(const std::vector<engine::SolveRun>& runs, std::int64_t n, double cond);
// x_true empty: no x_exact column.
std::string solve_solution_csv(const std::vector<engine::SolveRun>& runs, std::int64_t n,
                               const std::vector<double>& x_true);
// Writes each {file name, text} into `out` (created) beside its final name,
// then renames them all, so a failed write leaves nothing half-written.
// 0, or the exit code after a one-line error "precision-lab-cli COMMAND: ...".
int write_solve_files(const std::string& command, const std::string& out,
                      const std::vector<std::pair<std::string, std::string>>& files);
}  // namespace cli
