// Lecture presets (README.md "Lessons"): a run config with a title, an
// explanation, the charts to watch, the runs to compare and the claims its
// output must satisfy. Loaded from resources/presets/*.json (built into the
// program) or from any file. Two kinds: training lessons (runs of the
// trainer) and solver lessons ("kind": "solve": one linear system solved by
// several factor formats and methods, docs/solver.md "Solver lessons").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "solve/refine.h"
#include "train/run_config.h"

namespace engine {

// One promise of a preset: `metric` of run `run` (compared to run `vs`
// when given), within [min, max]. See claim_value() for each metric.
struct Claim {
  std::string metric;
  std::string run;
  std::string vs;     // "" when the claim is not a comparison
  std::string layer;  // "" for the largest over layers (underflow, output_error, grad_error)
  std::optional<double> min, max;
  // JSON "requires": the backend the claim holds on ("cuda": a speed or
  // memory ratio a CPU does not show). On runs of another backend the claim
  // is skipped with the reason, neither passed nor failed. "" for any.
  std::string required_backend;
};

struct PresetRun {
  std::string name;  // the `run` column; the recipe unless the preset names it
  RunConfig config;
};

enum class PresetKind : std::uint8_t { Train, Solve };

// A solver lesson's system: A random of size n and 2-norm condition number
// cond from seed (random_matrix), every entry multiplied by matrix_scale
// (entries beyond FP16's range for a scaling lesson), b = A x for the
// random x of seed + 1 (as `precision-lab-cli solve` draws it), so forward
// errors are known.
struct SolveProblem {
  std::int64_t n = 256;
  double cond = 100.0;
  std::uint64_t seed = 0;
  double matrix_scale = 1.0;
};

struct Preset {
  PresetKind kind = PresetKind::Train;
  std::string name;         // file stem: "why-loss-scaling"
  std::string title;
  std::string explanation;  // what to watch on which chart, and why it happens
  std::vector<std::string> watch;  // "loss", "loss_scale", "memory", "accuracy", "gradients[:layer]"
  std::vector<PresetRun> runs;     // same seed, data and initial weights (training lessons; empty for solver ones)
  // Solver lessons: the system and the runs (results empty until run).
  SolveProblem problem;
  std::vector<SolveRun> solve_runs;
  std::vector<Claim> expect;
  // The scaled-down version the test suite runs (quick: run settings laid
  // over every run, e.g. {"steps": 300}; for a solver lesson the system's
  // settings, e.g. {"n": 128}); quick_note says why the claims survive it.
  // Empty: the test runs the preset at full length.
  std::string quick_json;
  std::string quick_note;
};

// The backend every claim of `p` requires, when they all require the same
// one ("cuda"), else "": a lesson whose every claim needs a backend this
// machine lacks has nothing to show by training here.
std::string required_backend(const Preset& p);

// The metrics a claim may use: training lessons', and solver lessons'.
const std::vector<std::string>& claim_metrics();
const std::vector<std::string>& solve_claim_metrics();
// The chart names `watch` may use (a "gradients:<layer>" entry names a layer).
const std::vector<std::string>& watch_charts();

// Parses a preset. Every key that is not a preset key (kind, title,
// explanation, watch, recipes, runs, expect, quick, quick_note) is a run
// setting, as in --config. A solver lesson ("kind": "solve") has the keys
// kind, title, explanation, n, cond, seed, matrix_scale, max_iter, runs,
// expect, quick, quick_note, and each run name, factor, method, storage,
// accumulate, residual, working, scale, max_iter, tol (as the solve
// command's options; docs/solver.md "Solver lessons"). Throws std::runtime_error with one line naming `origin` and the
// field: "why.json: 'expect[1].metric': unknown metric 'loss' (...)".
Preset parse_preset(const std::string& json_text, const std::string& origin, const std::string& name);
Preset load_preset(const std::string& path);

// The presets built into the program (resources/presets), sorted by name.
const std::vector<Preset>& builtin_presets();
// A built-in preset by name, or a preset file by path (a name containing
// '/' or ending in .json). Throws std::runtime_error naming what was asked
// for when there is none, listing the built-in names.
Preset find_preset(const std::string& name_or_file);

// The preset with its quick settings laid over every run (over the system,
// for a solver lesson).
Preset quick_version(const Preset& p);

}  // namespace engine
