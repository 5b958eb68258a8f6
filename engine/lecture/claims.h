// Checking a preset's claims against what its runs produced (the same data
// the CSV files hold).
#pragma once

#include <string>
#include <vector>

#include "lecture/preset.h"
#include "report/csv.h"
#include "solve/refine.h"

namespace engine {

struct ClaimResult {
  Claim claim;
  double value = 0.0;  // NaN when it could not be measured (then it fails)
  bool pass = false;
  // The claim requires a backend the runs did not train on: neither passed
  // nor failed; `reason` says why ("needs the cuda backend; this machine
  // ran cpu (no CUDA device)").
  bool skipped = false;
  std::string reason;
  std::string text;    // "PASS  final_loss fp16 / fp32 = 267 (>= 10)", "SKIP  ...: reason"
};

// The value of a claim over `runs` (matched by RunExport::name), as
// the README's lesson section describes it:
//   final_loss            summary final_loss; with vs: the ratio run / vs
//   val_loss              summary val_loss (the last evaluation's; NaN without one); with vs: the ratio
//   val_accuracy          summary val_accuracy in points; with vs: vs - run (the gap)
//   peak_memory           summary peak_memory_bytes; with vs: the ratio
//   overflow_steps, skipped_steps   summary columns
//   scale_backoffs, scale_growths   steps whose loss_scale is lower / higher than the step before
//   underflow             the last statistics step's underflow_unscaled of `layer` (or the largest)
//   attributed_overflows  overflow events with a layer, a tensor and count > 0
//   samples_per_second    the median of the steps' samples/s after the first two (their
//                         first-step allocations, plans and captures are not the steady
//                         speed); with vs: the ratio (the speed-up)
//   device_memory         the device's own peak (StepMetrics::device_used) where the
//                         backend reports one, else peak_memory (the recipe's accounting);
//                         with vs: the ratio
//   output_error, grad_error, grad_bias   the last statistics step's column for `layer`
//                         (or the largest); with vs: the ratio
// NaN when a run, layer or statistic is missing.
double claim_value(const Claim& c, const std::vector<RunExport>& runs);
// "final_loss fp16 / fp32", "val_accuracy gap fp32 - fp16", "underflow fp16 fc3", ...
std::string claim_label(const Claim& c);
// A claim that requires a backend (Claim::required_backend) is skipped
// when its runs trained on another one, or when there are no runs (a
// lesson not trained because the backend is missing). `backend_note`, when
// given, says what this machine has ("cpu (no CUDA device)") and replaces
// the runs' backend in the reason.
std::vector<ClaimResult> check_claims(const Preset& p, const std::vector<RunExport>& runs,
                                      const std::string& backend_note = "");
// A solver lesson's claims (solve_claim_value), printed the same way.
std::vector<ClaimResult> check_claims(const Preset& p, const std::vector<SolveRun>& runs);

}  // namespace engine
