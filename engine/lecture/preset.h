// Lecture presets (README.md "Lessons"): a run config with a title, an
// explanation, the charts to watch, the runs to compare and the claims its
// output must satisfy. Loaded from resources/presets/*.json (built into the
// program) or from any file.
#pragma once

#include <optional>
#include <string>
#include <vector>

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
};

struct PresetRun {
  std::string name;  // the `run` column; the recipe unless the preset names it
  RunConfig config;
};

struct Preset {
  std::string name;         // file stem: "why-loss-scaling"
  std::string title;
  std::string explanation;  // what to watch on which chart, and why it happens
  std::vector<std::string> watch;  // "loss", "loss_scale", "memory", "accuracy", "gradients[:layer]"
  std::vector<PresetRun> runs;     // same seed, data and initial weights
  std::vector<Claim> expect;
  // The scaled-down version the test suite runs (quick: run settings laid
  // over every run, e.g. {"steps": 300}); quick_note says why the claims
  // survive it. Empty: the test runs the preset at full length.
  std::string quick_json;
  std::string quick_note;
};

// The metrics a claim may use.
const std::vector<std::string>& claim_metrics();
// The chart names `watch` may use (a "gradients:<layer>" entry names a layer).
const std::vector<std::string>& watch_charts();

// Parses a preset. Every key that is not a preset key (title, explanation,
// watch, recipes, runs, expect, quick, quick_note) is a run setting, as in
// --config. Throws std::runtime_error with one line naming `origin` and the
// field: "why.json: 'expect[1].metric': unknown metric 'loss' (...)".
Preset parse_preset(const std::string& json_text, const std::string& origin, const std::string& name);
Preset load_preset(const std::string& path);

// The presets built into the program (resources/presets), sorted by name.
const std::vector<Preset>& builtin_presets();
// A built-in preset by name, or a preset file by path (a name containing
// '/' or ending in .json). Throws std::runtime_error naming what was asked
// for when there is none, listing the built-in names.
Preset find_preset(const std::string& name_or_file);

// The preset with its quick settings laid over every run.
Preset quick_version(const Preset& p);

}  // namespace engine
