// Lecture presets: parsing and validation (one-line errors naming the field), the built-in set.
#include "lecture/preset.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
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
  static const std::set<std::string> keys = {"kind", "title",  "explanation", "watch",     "recipes",
                                             "runs", "expect", "quick",       "quick_note"};
  return keys;
}

// `runs`: the names a claim may use; `metrics`: the kind's metric list;
// `layers`: whether the claim may name a layer (training lessons only).
Claim parse_claim(const json& c, const std::string& origin, const std::string& field,
                  const std::vector<std::string>& runs, const std::vector<std::string>& metrics, bool layers) {
  if (!c.is_object())
    fail(origin, field, layers ? "must be an object {metric, run, vs?, layer?, min?, max?, requires?}"
                               : "must be an object {metric, run, vs?, min?, max?}");
  Claim out;
  auto run_named = [&](const std::string& key, const std::string& name) {
    for (const std::string& r : runs)
      if (r == name) return;
    std::string names;
    for (const std::string& r : runs) names += (names.empty() ? "" : ", ") + r;
    fail(origin, field + "." + key, "names no run of the preset: '" + name + "' (runs: " + names + ")");
  };
  for (const auto& [k, v] : c.items()) {
    const std::string f = field + "." + k;
    if (k == "metric") out.metric = string_of(v, origin, f);
    else if (k == "run") out.run = string_of(v, origin, f);
    else if (k == "vs") out.vs = string_of(v, origin, f);
    else if (k == "layer" && layers) out.layer = string_of(v, origin, f);
    else if (k == "requires" && layers) {
      out.required_backend = string_of(v, origin, f);
      if (out.required_backend != "cuda" && out.required_backend != "cpu")
        fail(origin, f, "must be cuda or cpu (got '" + out.required_backend + "')");
    }
    else if (k == "min" || k == "max") {
      if (!v.is_number()) fail(origin, f, "must be a number");
      (k == "min" ? out.min : out.max) = v.get<double>();
    } else {
      fail(origin, f, layers ? "is not a claim key (metric, run, vs, layer, min, max, requires)"
                             : "is not a claim key of a solver lesson (metric, run, vs, min, max)");
    }
  }
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

// A whole number of a JSON value in [lo, hi].
std::uint64_t whole_of(const json& v, const std::string& origin, const std::string& field, std::uint64_t lo,
                       std::uint64_t hi) {
  const std::string range = std::to_string(lo) + ".." + std::to_string(hi);
  if (!v.is_number_integer()) fail(origin, field, "must be a whole number in " + range);
  const bool negative = !v.is_number_unsigned() && v.get<std::int64_t>() < 0;
  const std::uint64_t u = negative ? 0 : v.get<std::uint64_t>();
  if (negative || u < lo || u > hi) fail(origin, field, "must be a whole number in " + range + " (got " + v.dump() + ")");
  return u;
}

double number_of(const json& v, const std::string& origin, const std::string& field) {
  if (!v.is_number() || !std::isfinite(v.get<double>())) fail(origin, field, "must be a finite number");
  return v.get<double>();
}

bool is_problem_key(const std::string& k) { return k == "n" || k == "cond" || k == "seed" || k == "matrix_scale"; }

// The system's settings in `over` (only its keys) laid over `base`; fields
// named prefix + key ("quick.n").
SolveProblem solve_problem_over(SolveProblem base, const json& over, const std::string& origin,
                                const std::string& prefix) {
  for (const auto& [k, v] : over.items()) {
    const std::string f = prefix + k;
    if (k == "n") base.n = static_cast<std::int64_t>(whole_of(v, origin, f, 1, static_cast<std::uint64_t>(kMaxSolveN)));
    else if (k == "seed") base.seed = whole_of(v, origin, f, 0, UINT64_MAX);
    else if (k == "cond") {
      base.cond = number_of(v, origin, f);
      if (base.cond < 1.0) fail(origin, f, "must be >= 1 (a 2-norm condition number)");
    } else if (k == "matrix_scale") {
      base.matrix_scale = number_of(v, origin, f);
      if (!(base.matrix_scale > 0.0)) fail(origin, f, "must be > 0");
    } else {
      fail(origin, f, "is not a setting of the system (n, cond, seed, matrix_scale)");
    }
  }
  return base;
}

Arith arith_of(const json& v, const std::string& origin, const std::string& field, bool fp80) {
  const std::string s = string_of(v, origin, field);
  if (s == "fp32") return Arith::FP32;
  if (s == "fp64") return Arith::FP64;
  if (s == "fp80" && fp80) return Arith::FP80;
  fail(origin, field, std::string("must be ") + (fp80 ? "fp32, fp64 or fp80" : "fp32 or fp64") + " (got '" + s + "')");
}

SolveRun parse_solve_run(const json& r, const std::string& origin, const std::string& f, int max_iter) {
  if (!r.is_object()) fail(origin, f, "must be an object {name, factor, method?, storage?, ...}");
  if (!r.contains("name")) fail(origin, f + ".name", "is missing");
  if (!r.contains("factor")) fail(origin, f + ".factor", "is missing");
  SolveRun run;
  RefineConfig& c = run.config;
  c.max_iter = max_iter;
  c.lu.accumulate = Format::FP32;
  std::string accumulate = "fp32";
  bool tc = false;
  for (const auto& [k, v] : r.items()) {
    const std::string fk = f + "." + k;
    if (k == "name") {
      run.name = string_of(v, origin, fk);
      if (run.name.empty()) fail(origin, fk, "is empty");
    } else if (k == "factor") {
      const std::string s = string_of(v, origin, fk);
      const auto sf = parse_factor_format(s);
      if (!sf) fail(origin, fk, "is not a factor format: '" + s + "' (fp64 fp32 tf32 bf16 fp16 fp8-e4m3 fp8-e5m2; "
                                "mxfp8 mxfp6 mxfp4 nvfp4 with storage fp32)");
      c.lu.factor = *sf;
    } else if (k == "method") {
      const std::string s = string_of(v, origin, fk);
      if (s == "lu-ir") c.method = Method::LuIr;
      else if (s == "gmres-ir") c.method = Method::GmresIr;
      else fail(origin, fk, "must be lu-ir or gmres-ir (got '" + s + "')");
    } else if (k == "storage") {
      const std::string s = string_of(v, origin, fk);
      if (s == "fp32") tc = true;
      else if (s != "factor") fail(origin, fk, "must be factor or fp32 (got '" + s + "')");
    } else if (k == "accumulate") {
      accumulate = string_of(v, origin, fk);
      if (accumulate != "fp32" && accumulate != "factor")
        fail(origin, fk, "must be fp32 or factor (got '" + accumulate + "')");
    } else if (k == "residual") c.residual = arith_of(v, origin, fk, true);
    else if (k == "working") c.working = arith_of(v, origin, fk, false);
    else if (k == "scale") {
      if (!v.is_boolean()) fail(origin, fk, "must be true or false");
      c.lu.scale = v.get<bool>();
    } else if (k == "max_iter") c.max_iter = static_cast<int>(whole_of(v, origin, fk, 0, 10000));
    else if (k == "tol") {
      c.tol = number_of(v, origin, fk);
      if (c.tol < 0.0) fail(origin, fk, "must be >= 0");
    } else {
      fail(origin, fk, "is not a run setting of a solver lesson (name, factor, method, storage, accumulate, residual, "
                       "working, scale, max_iter, tol)");
    }
  }
  if (tc) c.lu.storage = LuConfig::Storage::FP32;
  if (accumulate == "factor" && !c.lu.factor.fp64) c.lu.accumulate = c.lu.factor.format;
  const std::string problem = refine_config_problem(c);
  if (!problem.empty()) fail(origin, f, problem);
  return run;
}

void read_title(const json& j, const std::string& origin, Preset& p) {
  if (!j.contains("title")) throw std::runtime_error(origin + ": 'title' is missing");
  p.title = string_of(j["title"], origin, "title");
  if (!j.contains("explanation")) throw std::runtime_error(origin + ": 'explanation' is missing");
  p.explanation = string_of(j["explanation"], origin, "explanation");
  if (p.title.empty()) fail(origin, "title", "is empty");
  if (p.explanation.size() < 40) fail(origin, "explanation", "is too short to explain anything");
}

// A solver lesson ("kind": "solve").
Preset parse_solve_preset(const json& j, const std::string& origin, const std::string& name) {
  static const std::set<std::string> keys = {"kind",     "title", "explanation", "n",     "cond",      "seed",
                                             "matrix_scale", "max_iter", "runs", "expect", "quick", "quick_note"};
  for (const auto& [k, v] : j.items())
    if (!keys.count(k))
      fail(origin, k, "is not a key of a solver lesson (title, explanation, n, cond, seed, matrix_scale, max_iter, "
                      "runs, expect, quick, quick_note)");
  Preset p;
  p.kind = PresetKind::Solve;
  p.name = name;
  read_title(j, origin, p);
  json system = json::object();
  for (const auto& [k, v] : j.items())
    if (is_problem_key(k)) system[k] = v;
  p.problem = solve_problem_over(SolveProblem{}, system, origin, "");
  const int max_iter = j.contains("max_iter") ? static_cast<int>(whole_of(j["max_iter"], origin, "max_iter", 0, 10000)) : 30;

  if (!j.contains("runs") || !j["runs"].is_array() || j["runs"].empty())
    fail(origin, "runs", "must be a non-empty array of {name, factor, method?, ...}");
  std::vector<std::string> names;
  for (std::size_t i = 0; i < j["runs"].size(); ++i) {
    const std::string f = "runs[" + std::to_string(i) + "]";
    p.solve_runs.push_back(parse_solve_run(j["runs"][i], origin, f, max_iter));
    const std::string& n = p.solve_runs.back().name;
    if (std::find(names.begin(), names.end(), n) != names.end())
      throw std::runtime_error(origin + ": two runs are named '" + n + "'");
    names.push_back(n);
  }

  if (!j.contains("expect") || !j["expect"].is_array() || j["expect"].empty())
    throw std::runtime_error(origin + ": 'expect' must be a non-empty array of claims: a preset proves its point");
  for (std::size_t i = 0; i < j["expect"].size(); ++i)
    p.expect.push_back(
        parse_claim(j["expect"][i], origin, "expect[" + std::to_string(i) + "]", names, solve_claim_metrics(), false));

  if (j.contains("quick")) {
    if (!j["quick"].is_object()) fail(origin, "quick", "must be an object of the system's settings (n, cond, seed, matrix_scale)");
    (void)solve_problem_over(p.problem, j["quick"], origin, "quick.");
    p.quick_json = j["quick"].dump();
    if (!j.contains("quick_note")) fail(origin, "quick_note", "must say why the claims survive the quick settings");
    p.quick_note = string_of(j["quick_note"], origin, "quick_note");
  }
  return p;
}

}  // namespace

const std::vector<std::string>& claim_metrics() {
  static const std::vector<std::string> m = {
      "final_loss",     "val_loss",      "val_accuracy",  "peak_memory", "overflow_steps",       "skipped_steps", "scale_backoffs",
      "scale_growths",  "underflow",     "output_error", "grad_error",  "grad_bias",          "attributed_overflows",
      "samples_per_second", "device_memory"};
  return m;
}

const std::vector<std::string>& solve_claim_metrics() {
  static const std::vector<std::string> m = {"converged",      "iterations",       "gmres_iterations",
                                             "backward_error", "forward_error",    "scale"};
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
  if (j.contains("kind")) {
    const std::string kind = string_of(j["kind"], origin, "kind");
    if (kind == "solve") return parse_solve_preset(j, origin, name);
    if (kind != "train") fail(origin, "kind", "must be \"train\" or \"solve\" (got '" + kind + "')");
  }
  Preset p;
  p.name = name;
  // The run settings: every key that is not the preset's own.
  json settings = json::object();
  for (const auto& [k, v] : j.items())
    if (!preset_keys().count(k)) settings[k] = v;
  const RunConfig base = parse_run_config(settings.dump(), origin);

  read_title(j, origin, p);

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
  std::vector<std::string> run_names;
  for (const PresetRun& r : p.runs) run_names.push_back(r.name);
  for (std::size_t i = 0; i < j["expect"].size(); ++i)
    p.expect.push_back(
        parse_claim(j["expect"][i], origin, "expect[" + std::to_string(i) + "]", run_names, claim_metrics(), true));

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

std::string required_backend(const Preset& p) {
  if (p.expect.empty()) return "";
  const std::string first = p.expect.front().required_backend;
  for (const Claim& c : p.expect)
    if (c.required_backend != first) return "";
  return first;
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
  if (q.kind == PresetKind::Solve) {
    q.problem = solve_problem_over(q.problem, json::parse(q.quick_json), p.name, "quick");
    return q;
  }
  for (PresetRun& r : q.runs) r.config = parse_run_config_over(r.config, q.quick_json, p.name, "quick.");
  return q;
}

}  // namespace engine
