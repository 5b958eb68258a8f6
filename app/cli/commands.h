// Subcommands of precision-lab-cli; each returns the process exit code
// (0 ok, 1 run failed or a claim failed, 2 bad input).
#pragma once

#include <string>
#include <vector>

#include "report/csv.h"
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
}  // namespace cli
