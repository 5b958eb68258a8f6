// Lecture presets: parsing and validation (one-line errors naming the field), the built-in set.
#include "lecture/preset.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

#include "amp/recipe.h"
#include "train/comparison.h"

namespace engine {

// Generated from resources/presets/*.json (lecture/sources.cmake): file
// stem and text of every built-in preset.
const std::vector<std::pair<std::string, std::string>>& builtin_preset_sources();

using nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& origin, const std::string& field, const std::string& what) {
  throw std::runtime_error(origin + ": '" + field + "' " + what);
}

std::string string_of(const json& v, const std::string& origin, const std::string& field) {
  if (!v.is_string()) fail(origin, field, "must be a string");
  return v.get<std::string>();
}

const std::set<std::string>& preset_keys() {
  static const std::set<std::string> keys = {"title", "explanation", "watch", "recipes",
                                             "runs",  "expect",      "quick", "quick_note"};
  return keys;
}

Claim parse_claim(const json& c, const std::string& origin, const std::string& field,
                  const std::vector<PresetRun>& runs) {
  if (!c.is_object()) fail(origin, field, "must be an object {metric, run, vs?, layer?, min?, max?}");
  Claim out;
  auto run_named = [&](const std::string& key, const std::string& name) {
    for (const PresetRun& r : runs)
      if (r.name == name) return;
    std::string names;
    for (const PresetRun& r : runs) names += (names.empty() ? "" : ", ") + r.name;
    fail(origin, field + "." + key, "names no run of the preset: '" + name + "' (runs: " + names + ")");
  };
  for (const auto& [k, v] : c.items()) {
    const std::string f = field + "." + k;
    if (k == "metric") out.metric = string_of(v, origin, f);
    else if (k == "run") out.run = string_of(v, origin, f);
    else if (k == "vs") out.vs = string_of(v, origin, f);
    else if (k == "layer") out.layer = string_of(v, origin, f);
    else if (k == "min" || k == "max") {
      if (!v.is_number()) fail(origin, f, "must be a number");
      (k == "min" ? out.min : out.max) = v.get<double>();
    } else {
      fail(origin, f, "is not a claim key (metric, run, vs, layer, min, max)");
    }
  }
  const auto& metrics = claim_metrics();
  if (std::find(metrics.begin(), metrics.end(), out.metric) == metrics.end()) {
    std::string list;
    for (const auto& m : metrics) list += (list.empty() ? "" : ", ") + m;
    fail(origin, field + ".metric", "is not a metric: '" + out.metric + "' (expected one of " + list + ")");
  }
  if (out.run.empty()) fail(origin, field + ".run", "is missing");
  run_named("run", out.run);
  if (!out.vs.empty()) run_named("vs", out.vs);
  if (!out.min && !out.max) fail(origin, field, "needs min or max");
  if (out.min && out.max && *out.min > *out.max) fail(origin, field, "has min above max");
  return out;
}

}  // namespace

const std::vector<std::string>& claim_metrics() {
  static const std::vector<std::string> m = {
      "final_loss",     "val_loss",      "val_accuracy",  "peak_memory", "overflow_steps",       "skipped_steps", "scale_backoffs",
      "scale_growths",  "underflow",     "output_error", "grad_error",  "grad_bias",          "attributed_overflows"};
  return m;
}

const std::vector<std::string>& watch_charts() {
  static const std::vector<std::string> w = {"loss", "loss_scale", "memory", "accuracy", "gradients"};
  return w;
}

Preset parse_preset(const std::string& text, const std::string& origin, const std::string& name) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number beyond double (1e999)
    std::string msg = e.what();
    std::replace(msg.begin(), msg.end(), '\n', ' ');
    throw std::runtime_error(origin + ": not valid JSON: " + msg);
  }
  if (!j.is_object()) throw std::runtime_error(origin + ": a preset must be a JSON object");
  Preset p;
  p.name = name;
  // The run settings: every key that is not the preset's own.
  json settings = json::object();
  for (const auto& [k, v] : j.items())
    if (!preset_keys().count(k)) settings[k] = v;
  const RunConfig base = parse_run_config(settings.dump(), origin);

  if (!j.contains("title")) throw std::runtime_error(origin + ": 'title' is missing");
  p.title = string_of(j["title"], origin, "title");
  if (!j.contains("explanation")) throw std::runtime_error(origin + ": 'explanation' is missing");
  p.explanation = string_of(j["explanation"], origin, "explanation");
  if (p.title.empty()) fail(origin, "title", "is empty");
  if (p.explanation.size() < 40) fail(origin, "explanation", "is too short to explain anything");

  if (j.contains("watch")) {
    if (!j["watch"].is_array()) fail(origin, "watch", "must be an array of chart names");
    for (std::size_t i = 0; i < j["watch"].size(); ++i) {
      const std::string f = "watch[" + std::to_string(i) + "]";
      const std::string w = string_of(j["watch"][i], origin, f);
      const std::string chart = w.substr(0, w.find(':'));
      const auto& charts = watch_charts();
      if (std::find(charts.begin(), charts.end(), chart) == charts.end() || (w.find(':') != std::string::npos && chart != "gradients"))
        fail(origin, f, "is not a chart: '" + w + "' (loss, loss_scale, memory, accuracy, gradients[:layer])");
      p.watch.push_back(w);
    }
  }

  if (j.contains("recipes")) {
    if (!j["recipes"].is_array() || j["recipes"].empty()) fail(origin, "recipes", "must be a non-empty array of recipe names");
    std::vector<std::string> recipes;
    for (std::size_t i = 0; i < j["recipes"].size(); ++i) {
      const std::string f = "recipes[" + std::to_string(i) + "]";
      recipes.push_back(string_of(j["recipes"][i], origin, f));
      try {
        (void)make_recipe(recipes.back());
      } catch (const std::invalid_argument& e) {
        fail(origin, f, e.what());
      }
    }
    for (ComparisonRun& r : comparison_runs(base, recipes)) p.runs.push_back({r.name, r.config});
  }
  if (j.contains("runs")) {
    if (!j["runs"].is_array()) fail(origin, "runs", "must be an array of {name, run settings...}");
    for (std::size_t i = 0; i < j["runs"].size(); ++i) {
      const std::string f = "runs[" + std::to_string(i) + "]";
      const json& r = j["runs"][i];
      if (!r.is_object()) fail(origin, f, "must be an object");
      if (!r.contains("name")) fail(origin, f + ".name", "is missing");
      PresetRun run;
      run.name = string_of(r["name"], origin, f + ".name");
      json over = r;
      over.erase("name");
      run.config = parse_run_config_over(base, over.dump(), origin, f + ".");
      // A run that names no loss-scaler setting of its own gets the
      // comparison rule: the preset's scaler settings reach it only when
      // its recipe scales the loss.
      bool own_scaling = false;
      for (const char* k : {"loss_scale", "loss_scale_mode", "loss_scale_init", "init_scale", "growth_factor",
                            "backoff_factor", "growth_interval"})
        own_scaling = own_scaling || over.contains(k);
      if (!own_scaling) {
        const ComparisonRun rule = comparison_runs(run.config, {run.config.recipe}).front();
        run.config.loss_scale = rule.config.loss_scale;
        run.config.loss_scale_set = rule.config.loss_scale_set;
      }
      p.runs.push_back(std::move(run));
    }
  }
  if (p.runs.empty()) throw std::runtime_error(origin + ": a preset needs 'recipes' or 'runs'");
  {
    std::set<std::string> names;
    for (const PresetRun& r : p.runs)
      if (!names.insert(r.name).second) throw std::runtime_error(origin + ": two runs are named '" + r.name + "'");
    std::vector<std::string> all;
    for (const PresetRun& r : p.runs) all.push_back(r.config.recipe);
    for (PresetRun& r : p.runs) r.config.compare = all;
  }

  if (!j.contains("expect") || !j["expect"].is_array() || j["expect"].empty())
    throw std::runtime_error(origin + ": 'expect' must be a non-empty array of claims: a preset proves its point");
  for (std::size_t i = 0; i < j["expect"].size(); ++i)
    p.expect.push_back(parse_claim(j["expect"][i], origin, "expect[" + std::to_string(i) + "]", p.runs));

  if (j.contains("quick")) {
    if (!j["quick"].is_object()) fail(origin, "quick", "must be an object of run settings");
    p.quick_json = j["quick"].dump();
    // Checked now: the quick settings must apply to every run.
    for (const PresetRun& r : p.runs) (void)parse_run_config_over(r.config, p.quick_json, origin, "quick.");
    if (!j.contains("quick_note")) fail(origin, "quick_note", "must say why the claims survive the quick settings");
    p.quick_note = string_of(j["quick_note"], origin, "quick_note");
  }
  return p;
}

Preset load_preset(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open preset file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_preset(ss.str(), path, std::filesystem::path(path).stem().string());
}

const std::vector<Preset>& builtin_presets() {
  static const std::vector<Preset> presets = [] {
    std::vector<Preset> out;
    for (const auto& [name, text] : builtin_preset_sources())
      out.push_back(parse_preset(text, "resources/presets/" + name + ".json", name));
    std::sort(out.begin(), out.end(), [](const Preset& a, const Preset& b) { return a.name < b.name; });
    return out;
  }();
  return presets;
}

Preset find_preset(const std::string& what) {
  const bool file = what.find('/') != std::string::npos ||
                    (what.size() > 5 && what.compare(what.size() - 5, 5, ".json") == 0);
  if (file) return load_preset(what);
  for (const Preset& p : builtin_presets())
    if (p.name == what) return p;
  std::string names;
  for (const Preset& p : builtin_presets()) names += (names.empty() ? "" : ", ") + p.name;
  throw std::runtime_error("no preset named '" + what + "' (built in: " + names + "; or give a .json file)");
}

Preset quick_version(const Preset& p) {
  Preset q = p;
  if (q.quick_json.empty()) return q;
  for (PresetRun& r : q.runs) r.config = parse_run_config_over(r.config, q.quick_json, p.name, "quick.");
  return q;
}

}  // namespace engine
