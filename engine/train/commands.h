// Live changes: typed commands that change a run between two steps, as the
// app sends them, the journal writes them (commands.jsonl) and replay reads
// them back.
#pragma once

#include <cstdint>
#include <string>

#include "amp/loss_scaler.h"
#include "numeric/precision.h"

namespace engine {

class Run;

// Where an injected fault goes (the robustness lesson: inf or NaN in a
// tensor becomes an attributed event, never a crash).
enum class FaultTarget : std::uint8_t { Weights, Activations, Gradients, Loss };
const char* fault_target_name(FaultTarget t);  // "weights", "activations", "gradients", "loss"

struct LiveChange {
  enum class Kind : std::uint8_t { LayerPrecision, LossScaler, Inspect, InjectFault };
  Kind kind = Kind::Inspect;
  std::string layer;           // LayerPrecision, InjectFault (not for Loss)
  LayerPrecision precision;    // LayerPrecision
  LossScalerConfig scaler;     // LossScaler
  FaultTarget fault = FaultTarget::Weights;  // InjectFault
  bool fault_inf = false;      // InjectFault: +inf instead of NaN
};

// Applies the change to the run (between two steps; the trainer's thread).
// Throws std::invalid_argument naming what is wrong (an unknown layer).
void apply_live_change(Run& run, const LiveChange& c);

// One line of commands.jsonl: {"run": 0, "after_step": 12, "set_layer_precision": {...}}.
std::string live_change_json(int run_id, std::int64_t after_step, const LiveChange& c);

struct StampedChange {
  int run_id = 0;
  std::int64_t after_step = 0;  // the change took effect after this many steps of the run
  LiveChange change;
};
// Parses one line; throws std::runtime_error "<origin>: <what>" (origin
// names the file and line).
StampedChange parse_live_change(const std::string& line, const std::string& origin);

}  // namespace engine
