// Live changes as JSON lines, and how each one reaches a run.
#include "train/commands.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "numeric/format.h"
#include "train/run.h"

namespace engine {

using nlohmann::json;

const char* fault_target_name(FaultTarget t) {
  switch (t) {
    case FaultTarget::Weights: return "weights";
    case FaultTarget::Activations: return "activations";
    case FaultTarget::Gradients: return "gradients";
    case FaultTarget::Loss: return "loss";
  }
  return "?";
}

void apply_live_change(Run& run, const LiveChange& c) {
  switch (c.kind) {
    case LiveChange::Kind::LayerPrecision: run.set_layer_precision(c.layer, c.precision); break;
    case LiveChange::Kind::LossScaler: run.set_loss_scaler(c.scaler); break;
    case LiveChange::Kind::Inspect: run.request_inspection(); break;
    case LiveChange::Kind::InjectFault: run.inject_fault(c.fault, c.layer, c.fault_inf); break;
  }
}

std::string live_change_json(int run_id, std::int64_t after_step, const LiveChange& c) {
  json j;
  j["run"] = run_id;
  j["after_step"] = after_step;
  switch (c.kind) {
    case LiveChange::Kind::LayerPrecision:
      j["set_layer_precision"] = {{"layer", c.layer},
                                  {"compute", format_key(c.precision.compute)},
                                  {"storage", format_key(c.precision.storage)},
                                  {"accumulate", format_key(c.precision.accumulate)},
                                  {"grad", format_key(c.precision.grad)}};
      break;
    case LiveChange::Kind::LossScaler:
      j["set_loss_scaler"] = {{"mode", scaling_mode_key(c.scaler.mode)},
                              {"init", c.scaler.init_scale},
                              {"growth_factor", c.scaler.growth_factor},
                              {"backoff_factor", c.scaler.backoff_factor},
                              {"growth_interval", c.scaler.growth_interval}};
      break;
    case LiveChange::Kind::Inspect: j["inspect"] = true; break;
    case LiveChange::Kind::InjectFault:
      j["inject_fault"] = {{"target", fault_target_name(c.fault)}, {"layer", c.layer}, {"value", c.fault_inf ? "inf" : "nan"}};
      break;
  }
  return j.dump();
}

namespace {

[[noreturn]] void fail(const std::string& origin, const std::string& what) { throw std::runtime_error(origin + ": " + what); }

const json& member(const json& o, const char* key, const std::string& origin, const std::string& where) {
  if (!o.is_object() || !o.contains(key)) fail(origin, "'" + where + "." + key + "' is missing");
  return o[key];
}

std::string text(const json& o, const char* key, const std::string& origin, const std::string& where) {
  const json& v = member(o, key, origin, where);
  if (!v.is_string()) fail(origin, "'" + where + "." + key + "' must be a string");
  return v.get<std::string>();
}

double number(const json& o, const char* key, const std::string& origin, const std::string& where) {
  const json& v = member(o, key, origin, where);
  if (!v.is_number()) fail(origin, "'" + where + "." + key + "' must be a number");
  return v.get<double>();
}

Format format_of(const json& o, const char* key, const std::string& origin, const std::string& where) {
  const std::string s = text(o, key, origin, where);
  const auto f = parse_format(s);
  if (!f) fail(origin, "'" + where + "." + key + "' is not a format: '" + s + "'");
  return *f;
}

}  // namespace

StampedChange parse_live_change(const std::string& line, const std::string& origin) {
  json j;
  try {
    j = json::parse(line);
  } catch (const json::exception&) {
    fail(origin, "not a JSON object");
  }
  if (!j.is_object()) fail(origin, "not a JSON object");
  StampedChange s;
  const double run = number(j, "run", origin, "");
  const double step = number(j, "after_step", origin, "");
  if (run < 0 || run > 1e6 || run != static_cast<double>(static_cast<int>(run))) fail(origin, "'run' must be a run index");
  if (step < 0 || step > 1e12 || step != static_cast<double>(static_cast<std::int64_t>(step)))
    fail(origin, "'after_step' must be a step count");
  s.run_id = static_cast<int>(run);
  s.after_step = static_cast<std::int64_t>(step);
  LiveChange& c = s.change;
  int kinds = 0;
  if (j.contains("set_layer_precision")) {
    ++kinds;
    const json& p = j["set_layer_precision"];
    c.kind = LiveChange::Kind::LayerPrecision;
    c.layer = text(p, "layer", origin, "set_layer_precision");
    c.precision.compute = format_of(p, "compute", origin, "set_layer_precision");
    c.precision.storage = format_of(p, "storage", origin, "set_layer_precision");
    c.precision.accumulate = format_of(p, "accumulate", origin, "set_layer_precision");
    c.precision.grad = format_of(p, "grad", origin, "set_layer_precision");
  }
  if (j.contains("set_loss_scaler")) {
    ++kinds;
    const json& p = j["set_loss_scaler"];
    c.kind = LiveChange::Kind::LossScaler;
    const std::string mode = text(p, "mode", origin, "set_loss_scaler");
    if (mode == "none") c.scaler.mode = ScalingMode::None;
    else if (mode == "static") c.scaler.mode = ScalingMode::Static;
    else if (mode == "dynamic") c.scaler.mode = ScalingMode::Dynamic;
    else fail(origin, "'set_loss_scaler.mode' must be none, static or dynamic");
    c.scaler.init_scale = number(p, "init", origin, "set_loss_scaler");
    c.scaler.growth_factor = number(p, "growth_factor", origin, "set_loss_scaler");
    c.scaler.backoff_factor = number(p, "backoff_factor", origin, "set_loss_scaler");
    const double interval = number(p, "growth_interval", origin, "set_loss_scaler");
    if (interval < 1 || interval > 1e12) fail(origin, "'set_loss_scaler.growth_interval' is out of range");
    c.scaler.growth_interval = static_cast<std::int64_t>(interval);
    try {
      validate(c.scaler);
    } catch (const std::invalid_argument& e) {
      fail(origin, e.what());
    }
  }
  if (j.contains("inspect")) {
    ++kinds;
    c.kind = LiveChange::Kind::Inspect;
  }
  if (j.contains("inject_fault")) {
    ++kinds;
    const json& p = j["inject_fault"];
    c.kind = LiveChange::Kind::InjectFault;
    const std::string target = text(p, "target", origin, "inject_fault");
    bool known = false;
    for (FaultTarget t : {FaultTarget::Weights, FaultTarget::Activations, FaultTarget::Gradients, FaultTarget::Loss})
      if (target == fault_target_name(t)) c.fault = t, known = true;
    if (!known) fail(origin, "'inject_fault.target' must be weights, activations, gradients or loss");
    c.layer = text(p, "layer", origin, "inject_fault");
    const std::string value = text(p, "value", origin, "inject_fault");
    if (value != "nan" && value != "inf") fail(origin, "'inject_fault.value' must be nan or inf");
    c.fault_inf = value == "inf";
  }
  if (kinds != 1)
    fail(origin, "a line holds exactly one of set_layer_precision, set_loss_scaler, inspect, inject_fault");
  return s;
}

}  // namespace engine
