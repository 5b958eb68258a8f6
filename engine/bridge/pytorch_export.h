// export-pytorch: a run folder's run as a readable PyTorch script (train.py) with its data, weights and batches.
//
// The script rebuilds the run's model with the run's initial weights
// (DIR/initial-<run_id>/, journal/initial_state.h), feeds the same batches in
// the same order and applies the recipe in PyTorch's terms (autocast dtype,
// GradScaler settings, layers kept in FP32, master weights, the optimizer,
// schedule, warm-up and clipping). What PyTorch cannot express is listed at
// the top of the script and returned here, never dropped in silence.
// docs/pytorch.md is the reference (file formats, the translation table,
// tolerances).
#pragma once

#include <string>
#include <vector>

#include "train/commands.h"
#include "train/run_config.h"

namespace engine {

struct PytorchExport {
  std::string dir;                        // the folder written: train.py, initial/, batches.txt, data/
  std::string script;                     // dir + "/train.py"
  std::string run_name;                   // the run's name in its folder
  std::vector<std::string> untranslated;  // what PyTorch cannot express, one line each
};

// What the run `run_id` (0-based) of `config` (with the live `changes` its
// folder recorded, any run's; only run_id's count) does that the exported
// script cannot express, one line each, without writing anything (the
// app's dialog shows it). Throws std::runtime_error (one line) when the
// recipe cannot be expressed at all: FP8 or block-scaled GEMMs as the
// recipe's point (fp8, mxfp8, mxfp4, nvfp4), or weights kept in such a
// format without a master copy.
std::vector<std::string> untranslated_parts(const RunConfig& config, const std::vector<StampedChange>& changes,
                                            int run_id);

// Writes `out_dir` (created; an existing folder must be empty or hold an
// earlier export) from run `run_id` of the run folder `run_dir`: everything
// goes into a temporary folder beside it that is renamed into place, so a
// failure leaves nothing half-written. Throws std::runtime_error with one
// line naming the file or field at fault: a folder that is no run folder,
// a run it does not hold, missing initial weights or batch order, weights
// that do not fit the model, a data set that does not load, a recipe that
// cannot be expressed. Any thread (it loads the data set and reads files;
// no backend).
PytorchExport export_pytorch(const std::string& run_dir, const std::string& out_dir, int run_id = 0);

}  // namespace engine
