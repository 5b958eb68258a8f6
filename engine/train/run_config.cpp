// RunConfig: JSON parsing with strict keys, CLI values, validation.
#include "train/run_config.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

#include "amp/recipe.h"
#include "numeric/format.h"
#include "train/model_defaults.h"

namespace engine {

using nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& origin, const std::string& what) {
  throw std::runtime_error(origin + ": " + what);
}

std::int64_t parse_int(const std::string& origin, const std::string& key, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE)
    fail(origin, "'" + key + "' must be an integer (got '" + v + "')");
  return x;
}

double parse_double(const std::string& origin, const std::string& key, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(x))
    fail(origin, "'" + key + "' must be a finite number (got '" + v + "')");
  return x;
}

ScalingMode parse_mode(const std::string& origin, const std::string& key, const std::string& v) {
  if (v == "none") return ScalingMode::None;
  if (v == "static") return ScalingMode::Static;
  if (v == "dynamic") return ScalingMode::Dynamic;
  fail(origin, "'" + key + "' must be none, static or dynamic (got '" + v + "')");
}

Format parse_fmt(const std::string& origin, const std::string& key, const std::string& v) {
  auto f = parse_format(v);
  if (!f)
    fail(origin, "'" + key + "' is not a format: '" + v +
                     "' (fp32, tf32, bf16, fp16, e5m2, e4m3, mxfp8, mxfp8-e5m2, mxfp6, mxfp6-e3m2, mxfp4, nvfp4)");
  return *f;
}

std::string scalar_string(const std::string& origin, const std::string& key, const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer() || v.is_number_unsigned()) return std::to_string(v.get<long long>());
  if (v.is_number_float()) {
    std::ostringstream s;
    s.precision(17);
    s << v.get<double>();
    return s.str();
  }
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  fail(origin, "'" + key + "' must be a string or a number");
}

void parse_layers(RunConfig& c, const json& j, const std::string& origin) {
  if (!j.is_object()) fail(origin, "'layers' must be an object of layer name -> precision");
  for (const auto& [name, spec] : j.items()) {
    const std::string base = "layers." + name;
    // "kind:<kind>" addresses every leaf of that kind (amp/recipe.h); an
    // unknown kind would silently match nothing.
    if (!valid_override_key(name)) {
      std::string kinds;
      for (const auto& k : leaf_kinds()) kinds += (kinds.empty() ? "" : ", ") + k;
      fail(origin, "unknown layer kind in '" + base + "' (expected kind: followed by one of " + kinds + ")");
    }
    LayerPrecision p;
    if (spec.is_string()) {
      const Format f = parse_fmt(origin, base, spec.get<std::string>());
      // A block format is a GEMM's compute and grad format; outputs stay FP32.
      p = {f, is_block_format(f) ? Format::FP32 : f, Format::FP32, f};
    } else if (spec.is_object()) {
      bool have_grad = false;
      for (const auto& [k, v] : spec.items()) {
        const std::string key = base + "." + k;
        if (!v.is_string()) fail(origin, "'" + key + "' must be a format name");
        const Format f = parse_fmt(origin, key, v.get<std::string>());
        if (k == "compute") p.compute = f;
        else if (k == "storage") p.storage = f;
        else if (k == "accumulate") p.accumulate = f;
        else if (k == "grad") { p.grad = f; have_grad = true; }
        else fail(origin, "unknown key '" + key + "' (expected compute, storage, accumulate, grad)");
      }
      if (!have_grad) p.grad = p.compute == Format::E4M3 ? Format::E5M2 : p.compute;
    } else {
      fail(origin, "'" + base + "' must be a format name or an object");
    }
    c.layers[name] = p;
  }
}

}  // namespace

bool parse_spike(const std::string& text, std::int64_t& step, std::string& layer, float& value) {
  const auto a = text.find(':');
  const auto b = text.rfind(':');
  if (a == std::string::npos || b == a) return false;
  try {
    std::size_t used = 0;
    step = std::stoll(text.substr(0, a), &used);
    if (used != a || step < 1) return false;
    layer = text.substr(a + 1, b - a - 1);
    const std::string v = text.substr(b + 1);
    value = std::stof(v, &used);
    if (used != v.size() || !std::isfinite(value)) return false;
  } catch (const std::exception&) {
    return false;
  }
  return !layer.empty();
}

void set_config_value(RunConfig& c, const std::string& key_in, const std::string& v,
                      const std::string& origin) {
  std::string key = key_in;
  for (char& ch : key)
    if (ch == '-') ch = '_';
  auto I = [&] { return parse_int(origin, key, v); };
  auto D = [&] { return parse_double(origin, key, v); };
  if (key == "recipe") c.recipe = v;
  else if (key == "model") c.model = v;
  else if (key == "dataset") c.dataset = v;
  else if (key == "epochs") c.epochs = I();
  else if (key == "steps") c.steps = I();
  else if (key == "batch") c.batch = I();
  else if (key == "optimizer") c.optimizer = v;
  else if (key == "lr") c.lr = D();
  else if (key == "momentum") c.momentum = D();
  else if (key == "weight_decay") c.weight_decay = D();
  else if (key == "schedule") c.schedule = v;
  else if (key == "warmup") c.warmup = I();
  else if (key == "clip") c.clip = D();
  else if (key == "seed") {
    const std::int64_t s = I();
    if (s < 0) fail(origin, "'seed' must be >= 0 (got " + v + ")");
    c.seed = static_cast<std::uint64_t>(s);
  } else if (key == "backend") c.backend = v;
  else if (key == "threads") c.threads = I();
  else if (key == "eval_every") c.eval_every = I();
  else if (key == "eval_batches") c.eval_batches = I();
  else if (key == "stats_every") c.stats_every = I();
  else if (key == "layers" || key == "depth") c.depth = I();
  else if (key == "width") c.width = I();
  else if (key == "heads") c.heads = I();
  else if (key == "context") c.context = I();
  else if (key == "qk_norm") {
    if (v == "true" || v == "1" || v == "on") c.qk_norm = true;
    else if (v == "false" || v == "0" || v == "off") c.qk_norm = false;
    else fail(origin, "'qk_norm' must be true or false (got '" + v + "')");
  } else if (key == "z_loss") c.z_loss = D();
  else if (key == "widths" || key == "channels") {
    std::vector<std::int64_t>& list = key == "widths" ? c.widths : c.channels;
    list.clear();
    std::stringstream ss(v);
    std::string item;
    while (std::getline(ss, item, ',')) list.push_back(parse_int(origin, key, item));
    if (list.empty()) fail(origin, "'" + key + "' must be a comma-separated list of integers (got '" + v + "')");
  } else if (key == "size") {
    apply_size(c, v, {}, origin);
  } else if (key == "loss_scale" || key == "loss_scale_mode") {
    c.loss_scale.mode = parse_mode(origin, key, v);
    c.loss_scale_set = true;
  } else if (key == "loss_scale_init" || key == "init_scale") {
    c.loss_scale.init_scale = D();
    c.loss_scale_set = true;
  } else if (key == "growth_factor") {
    c.loss_scale.growth_factor = D();
    c.loss_scale_set = true;
  } else if (key == "backoff_factor") {
    c.loss_scale.backoff_factor = D();
    c.loss_scale_set = true;
  } else if (key == "growth_interval") {
    c.loss_scale.growth_interval = I();
    c.loss_scale_set = true;
  } else if (key == "master_weights") {
    if (v == "true" || v == "1" || v == "on") c.master_weights = 1;
    else if (v == "false" || v == "0" || v == "off") c.master_weights = 0;
    else if (v == "recipe") c.master_weights = -1;
    else fail(origin, "'master_weights' must be true, false or recipe (got '" + v + "')");
  } else if (key == "weight_rounding") {
    c.weight_rounding = v;
  } else if (key == "fp8_scaling") {
    c.fp8_scaling = v;
  } else if (key == "grad_rounding") {
    c.grad_rounding = v;
  } else if (key == "spike") {
    c.spike = v;
  } else if (key == "keep_initial") {
    c.keep_initial = v == "true" ? "on" : v == "false" ? "off" : v;
  } else {
    fail(origin, "unknown key '" + key_in + "'");
  }
}

void validate(const RunConfig& c, const std::string& origin) {
  auto range = [&](const char* key, bool ok, const std::string& what) {
    if (!ok) fail(origin, std::string("'") + key + "' " + what);
  };
  try {
    (void)make_recipe(c.recipe);
  } catch (const std::invalid_argument& e) {
    fail(origin, "'recipe': " + std::string(e.what()));
  }
  range("model", c.model == "mlp" || c.model == "cnn" || c.model == "transformer" || c.model == "gpt",
        "must be mlp, cnn, transformer or gpt (got '" + c.model + "')");
  {
    // The transformer's shape, or the gpt's defaults for the other models
    // (as before the transformer had a shape to set).
    const bool vit = c.model == "transformer";
    const std::int64_t depth = c.depth.value_or(vit ? kTransformerDepth : kGptDepth);
    const std::int64_t width = c.width.value_or(vit ? kTransformerWidth : kGptWidth);
    const std::int64_t heads = c.heads.value_or(vit ? kTransformerHeads : kGptHeads);
    range(vit ? "depth" : "layers", depth >= 1 && depth <= 64, "must be in 1..64 (got " + std::to_string(depth) + ")");
    range("width", width >= 1 && width <= 8192, "must be in 1..8192 (got " + std::to_string(width) + ")");
    range("heads", heads >= 1 && heads <= width && width % heads == 0,
          "must divide width " + std::to_string(width) + " (got " + std::to_string(heads) + ")");
  }
  range("context", c.context >= 1 && c.context <= 4096,
        "must be in 1..4096 (got " + std::to_string(c.context) + ")");
  range("z_loss", std::isfinite(c.z_loss) && c.z_loss >= 0.0 && c.z_loss <= 1.0, "must be in [0, 1]");
  range("dataset", !c.dataset.empty(), "must not be empty");
  range("epochs", c.epochs >= 1 && c.epochs <= 100000, "must be in 1..100000 (got " + std::to_string(c.epochs) + ")");
  range("steps", c.steps >= 0 && c.steps <= 100000000, "must be in 0..100000000 (got " + std::to_string(c.steps) + ")");
  range("batch", c.batch >= 1 && c.batch <= 65536, "must be in 1..65536 (got " + std::to_string(c.batch) + ")");
  range("optimizer", c.optimizer == "sgd" || c.optimizer == "adam" || c.optimizer == "adamw",
        "must be sgd, adam or adamw (got '" + c.optimizer + "')");
  range("lr", c.lr > 0.0 && c.lr <= 10.0, "must be in (0, 10]");
  range("momentum", c.momentum >= 0.0 && c.momentum < 1.0, "must be in [0, 1)");
  range("weight_decay", c.weight_decay >= 0.0 && c.weight_decay < 1.0, "must be in [0, 1)");
  range("schedule", c.schedule == "constant" || c.schedule == "cosine",
        "must be constant or cosine (got '" + c.schedule + "')");
  range("warmup", c.warmup >= 0, "must be >= 0");
  range("clip", c.clip >= 0.0, "must be >= 0 (0 turns clipping off)");
  range("backend", c.backend == "auto" || c.backend == "cpu" || c.backend == "cuda" || c.backend == "guarded",
        "must be auto, cpu or cuda (got '" + c.backend + "')");
  range("threads", c.threads >= 0 && c.threads <= 1024, "must be in 0..1024");
  range("eval_every", c.eval_every >= 0, "must be >= 0");
  range("eval_batches", c.eval_batches >= 0, "must be >= 0 (0: the whole validation split)");
  range("stats_every", c.stats_every >= 0, "must be >= 0");
  range("weight_rounding", c.weight_rounding == "nearest" || c.weight_rounding == "stochastic",
        "must be nearest or stochastic (got '" + c.weight_rounding + "')");
  if (!c.spike.empty()) {
    std::int64_t step = 0;
    std::string layer;
    float value = 0.0f;
    range("spike", parse_spike(c.spike, step, layer, value),
          "must be STEP:LAYER:VALUE with STEP >= 1 and a finite VALUE (got '" + c.spike + "')");
  }
  range("grad_rounding", c.grad_rounding == "recipe" || c.grad_rounding == "nearest" || c.grad_rounding == "stochastic",
        "must be recipe, nearest or stochastic (got '" + c.grad_rounding + "')");
  range("fp8_scaling", c.fp8_scaling == "delayed" || c.fp8_scaling == "none",
        "must be delayed or none (got '" + c.fp8_scaling + "')");
  range("keep_initial", c.keep_initial == "auto" || c.keep_initial == "on" || c.keep_initial == "off",
        "must be auto, on or off (got '" + c.keep_initial + "')");
  range("master_weights", c.master_weights >= -1 && c.master_weights <= 1, "must be true, false or recipe");
  for (const auto& r : c.compare) {
    try {
      (void)make_recipe(r);
    } catch (const std::invalid_argument& e) {
      fail(origin, "'compare': " + std::string(e.what()));
    }
  }
  for (auto w : c.widths)
    range("widths", w >= 1 && w <= 65536, "entries must be in 1..65536 (got " + std::to_string(w) + ")");
  // Each conv stage halves the image (maxpool 2): four stages take a 28x28
  // image to 1x1 and more leave nothing; build_cnn checks the data's sides.
  range("channels", c.channels.size() <= 4, "must list 1 to 4 conv stages (got " + std::to_string(c.channels.size()) + ")");
  for (auto w : c.channels)
    range("channels", w >= 1 && w <= 4096, "entries must be in 1..4096 (got " + std::to_string(w) + ")");
  try {
    validate(c.loss_scale);
  } catch (const std::invalid_argument& e) {
    fail(origin, e.what());
  }
}

bool keeps_initial_state(const RunConfig& c, std::int64_t total_steps) {
  if (c.keep_initial == "on") return true;
  if (c.keep_initial == "off") return false;
  return total_steps > 0 && total_steps <= kKeepInitialAutoSamples / std::max<std::int64_t>(c.batch, 1);
}

RunConfig parse_run_config(const std::string& text, const std::string& origin) {
  return parse_run_config_over(RunConfig{}, text, origin);
}

RunConfig parse_run_config_over(const RunConfig& base, const std::string& text, const std::string& origin_in,
                                const std::string& field) {
  // Errors name the field with its prefix: "file.json: 'runs[1].lr' ...".
  const std::string origin = origin_in;
  auto named = [&](const std::string& msg) {
    if (field.empty()) return msg;
    const std::string head = origin + ": ";
    std::string rest = msg.rfind(head, 0) == 0 ? msg.substr(head.size()) : msg;
    if (auto q = rest.find('\''); q != std::string::npos) rest.insert(q + 1, field);
    return head + rest;
  };
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number beyond double (1e999)
    // nlohmann's message names the byte offset; keep it on one line.
    std::string msg = e.what();
    for (char& ch : msg)
      if (ch == '\n') ch = ' ';
    fail(origin, "not valid JSON: " + msg);
  }
  if (!j.is_object()) fail(origin, field.empty() ? "the config must be a JSON object" : "'" + field + "' must be a JSON object");
  RunConfig c = base;
  std::string size;
  try {
    for (const auto& [key, v] : j.items()) {
      if (key == "layers" && !v.is_number()) {
        parse_layers(c, v, origin);
      } else if (key == "loss_scale" && v.is_object()) {
        for (const auto& [k, sv] : v.items()) {
          const std::string full = "loss_scale." + k;
          if (k == "mode" ? !sv.is_string() : !sv.is_number())
            fail(origin, "'" + full + "' must be " + (k == "mode" ? "a string" : "a number") + " (got " + sv.dump() + ")");
          const std::string s = scalar_string(origin, full, sv);
          if (k == "mode") set_config_value(c, "loss_scale", s, origin);
          else if (k == "init") set_config_value(c, "loss_scale_init", s, origin);
          else if (k == "growth_factor" || k == "backoff_factor" || k == "growth_interval")
            set_config_value(c, k, s, origin);
          else fail(origin, "unknown key '" + full + "'");
        }
      } else if (key == "qk_norm" && v.is_boolean()) {
        c.qk_norm = v.get<bool>();
      } else if ((key == "widths" || key == "channels") && v.is_array()) {
        std::vector<std::int64_t>& list = key == "widths" ? c.widths : c.channels;
        list.clear();
        for (const auto& w : v) {
          if (!w.is_number_integer()) fail(origin, "'" + key + "' must be an array of integers");
          list.push_back(w.get<std::int64_t>());
        }
        if (key == "channels" && list.empty()) fail(origin, "'channels' must list 1 to 4 conv stages (got 0)");
      } else if (key == "size") {
        // Applied after the other keys, once the model is known; the
        // fields the object names override the size.
        if (!v.is_string()) fail(origin, "'size' must be a string (got " + v.dump() + ")");
        size = v.get<std::string>();
      } else if (key == "compare" && v.is_array()) {
        c.compare.clear();
        for (const auto& r : v) {
          if (!r.is_string()) fail(origin, "'compare' must be an array of recipe names");
          c.compare.push_back(r.get<std::string>());
        }
      } else if (key == "out") {
        // Accepted for convenience (config.json written by a run names it); ignored here.
      } else {
        // JSON has types: a number must be a number ("lr": "0.1" is a
        // mistake, not a value), a name a string.
        static const char* numeric[] = {"epochs", "steps", "batch", "lr", "momentum", "weight_decay", "warmup",
                                        "clip", "seed", "threads", "eval_every", "eval_batches", "stats_every", "loss_scale_init",
                                        "init_scale", "growth_factor", "backoff_factor", "growth_interval",
                                        "layers", "depth", "width", "heads", "context", "z_loss"};
        bool is_numeric = false;
        for (const char* k : numeric) is_numeric = is_numeric || key == k;
        if (is_numeric && !v.is_number())
          fail(origin, "'" + key + "' must be a number (got " + (v.is_string() ? "the string " : "") + v.dump() + ")");
        static const char* textual[] = {"recipe",   "model",   "dataset",         "optimizer",      "schedule",
                                        "backend",  "weight_rounding", "fp8_scaling", "grad_rounding", "spike", "loss_scale",
                                        "loss_scale_mode", "keep_initial"};
        bool is_text = false;
        for (const char* k : textual) is_text = is_text || key == k;
        if (is_text && !v.is_string())
          fail(origin, "'" + key + "' must be a string (got " + v.dump() + ")");
        set_config_value(c, key, scalar_string(origin, key, v), origin);
      }
    }
    if (!size.empty()) {
      std::set<std::string> named;
      for (const auto& [key, v] : j.items())
        if (key != "layers" || v.is_number()) named.insert(key);  // "layers" as an object: precisions
      apply_size(c, size, named, origin);
    }
    validate(c, origin);
  } catch (const std::runtime_error& e) {
    if (field.empty()) throw;
    throw std::runtime_error(named(e.what()));
  }
  return c;
}

RunConfig load_run_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open config file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_run_config(ss.str(), path);
}

std::string to_json(const RunConfig& c) {
  json j;
  j["recipe"] = c.recipe;
  j["model"] = c.model;
  j["dataset"] = c.dataset;
  j["epochs"] = c.epochs;
  j["steps"] = c.steps;
  j["batch"] = c.batch;
  j["optimizer"] = c.optimizer;
  j["lr"] = c.lr;
  j["momentum"] = c.momentum;
  j["weight_decay"] = c.weight_decay;
  j["schedule"] = c.schedule;
  j["warmup"] = c.warmup;
  j["clip"] = c.clip;
  j["seed"] = c.seed;
  j["backend"] = c.backend;
  j["threads"] = c.threads;
  j["eval_every"] = c.eval_every;
  if (c.eval_batches > 0) j["eval_batches"] = c.eval_batches;
  j["stats_every"] = c.stats_every;
  if (!c.widths.empty()) j["widths"] = c.widths;
  if (!c.channels.empty() && c.channels != default_shape("cnn").channels) j["channels"] = c.channels;
  if (c.model == "transformer") {
    // Only what differs from the transformer's default, so a default-sized
    // transformer's config.json stays as it was.
    const ModelShape s = model_shape(c);
    if (s.depth != kTransformerDepth) j["depth"] = s.depth;
    if (s.width != kTransformerWidth) j["width"] = s.width;
    if (s.heads != kTransformerHeads) j["heads"] = s.heads;
  }
  if (c.model == "gpt") {
    const ModelShape s = model_shape(c);
    j["depth"] = s.depth;
    j["width"] = s.width;
    j["heads"] = s.heads;
    j["context"] = c.context;
    j["qk_norm"] = c.qk_norm;
    j["z_loss"] = c.z_loss;
  }
  if (c.master_weights >= 0) j["master_weights"] = c.master_weights == 1;
  if (c.weight_rounding != "nearest") j["weight_rounding"] = c.weight_rounding;
  if (c.fp8_scaling != "delayed") j["fp8_scaling"] = c.fp8_scaling;
  if (c.grad_rounding != "recipe") j["grad_rounding"] = c.grad_rounding;
  if (!c.spike.empty()) j["spike"] = c.spike;
  if (c.keep_initial != "auto") j["keep_initial"] = c.keep_initial;
  if (!c.compare.empty()) j["compare"] = c.compare;
  if (c.loss_scale_set) {
    j["loss_scale"] = {{"mode", scaling_mode_key(c.loss_scale.mode)},
                       {"init", c.loss_scale.init_scale},
                       {"growth_factor", c.loss_scale.growth_factor},
                       {"backoff_factor", c.loss_scale.backoff_factor},
                       {"growth_interval", c.loss_scale.growth_interval}};
  }
  if (!c.layers.empty()) {
    json l = json::object();
    for (const auto& [name, p] : c.layers)
      l[name] = {{"compute", format_key(p.compute)}, {"storage", format_key(p.storage)},
                 {"accumulate", format_key(p.accumulate)}, {"grad", format_key(p.grad)}};
    j["layers"] = l;
  }
  return j.dump(2) + "\n";
}

}  // namespace engine
