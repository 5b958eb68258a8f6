// RunConfig: everything needed to repeat a run; read from JSON or the CLI.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "amp/loss_scaler.h"
#include "numeric/precision.h"

namespace engine {

struct RunConfig {
  std::string recipe = "fp32";
  std::string model = "mlp";             // mlp | cnn | transformer | gpt
  std::string dataset = "fashion-mnist"; // fashion-mnist | spirals | tiny-gradients | a folder
  std::int64_t epochs = 1;               // used when steps == 0
  std::int64_t steps = 0;                // > 0: stop after this many steps
  std::int64_t batch = 128;
  std::string optimizer = "sgd";         // sgd | adam | adamw
  double lr = 0.05;
  double momentum = 0.9;                 // sgd
  double weight_decay = 0.0;
  std::string schedule = "cosine";       // cosine (to 0 over the run) | constant
  std::int64_t warmup = 0;               // cosine warm-up steps
  double clip = 0.0;                     // max global grad norm; 0 = off
  std::uint64_t seed = 0;
  std::string backend = "auto";          // auto | cpu | cuda
  std::int64_t threads = 0;              // 0 = all cores
  std::int64_t eval_every = 0;           // steps between evaluations; 0 = once per epoch
  std::int64_t eval_batches = 0;         // batches of the validation split an evaluation reads, from its start; 0 = all
  std::int64_t stats_every = 100;        // steps between gradient statistics
  std::vector<std::int64_t> widths;      // mlp hidden widths (empty = model default)
  std::vector<std::int64_t> channels;    // cnn conv stages' output channels (empty = model default 32,64)
  // The transformer's and the gpt's shape (nn/model.h build_transformer,
  // build_gpt); unset = the model's default (train/model_defaults.h
  // model_shape: transformer depth 2, width 64, heads 4; gpt 4, 128, 4).
  // JSON and CLI key "layers" for the depth when it is a number ("layers"
  // as an object holds the per-layer precisions); config.json writes it as
  // "depth". config.json writes them always for a gpt, and for the
  // transformer only where they are not its default, so the other models'
  // config.json stay as they were.
  std::optional<std::int64_t> depth;     // transformer blocks
  std::optional<std::int64_t> width;     // channels (divisible by heads)
  std::optional<std::int64_t> heads;     // attention heads
  std::int64_t context = 64;             // gpt: tokens per sample
  bool qk_norm = false;                  // LayerNorm on each head's queries and keys
  double z_loss = 0.0;                   // C of the auxiliary C * mean(log^2 Z) loss
  LossScalerConfig loss_scale;           // mode/init/... (recipe default unless set)
  bool loss_scale_set = false;           // true when the config or CLI set any loss_scale field
  std::map<std::string, LayerPrecision> layers;  // per-layer overrides (custom recipe)
  // FP32 master weights: -1 as the recipe says, 0 off, 1 on (a lesson can
  // take them away from mixed-fp16 and nothing else).
  std::int64_t master_weights = -1;
  // How a weight update is rounded into low-precision weights without a
  // master copy: "nearest" (RNE: an update below half an ulp vanishes) or
  // "stochastic" (seeded, unbiased: small updates survive on average).
  std::string weight_rounding = "nearest";
  // FP8 per-tensor scaling: "delayed" (Transformer Engine's) or "none".
  std::string fp8_scaling = "delayed";
  // Block-scaled gradients (mxfp8, mxfp4, nvfp4): "recipe" (nvfp4 rounds
  // stochastically, the others to nearest), "nearest" or "stochastic".
  std::string grad_rounding = "recipe";
  // An activation spike (lessons on outliers): "STEP:LAYER:VALUE" makes the
  // first output value of leaf LAYER at step STEP equal VALUE (finite), for
  // that one step; "" for none.
  std::string spike;
  std::vector<std::string> compare;      // recipes run side by side (compare); empty for run
  // Whether the run folder keeps the initial weights and the batch order
  // (journal/initial_state.h, for export-pytorch): "on", "off", or "auto":
  // kept when the run reads at most kKeepInitialAutoSamples samples (the
  // batch-order file grows with steps x batch). The CLI's run says "on".
  std::string keep_initial = "auto";
};

// "auto" keeps the initial state of runs of at most this many samples
// (steps x batch; about 7 MB of batch order).
inline constexpr std::int64_t kKeepInitialAutoSamples = std::int64_t{1} << 20;
// Whether a run of `total_steps` steps keeps its initial state (keep_initial).
bool keeps_initial_state(const RunConfig& c, std::int64_t total_steps);

// Parses a JSON config file. Unknown keys and out-of-range values are
// rejected with a one-line std::runtime_error naming the file and the key:
//   "run.json: unknown key 'lerning_rate'"
RunConfig load_run_config(const std::string& path);
// Same, from a JSON string; `origin` names the source in errors.
RunConfig parse_run_config(const std::string& json_text, const std::string& origin);
// The keys of a JSON object applied on top of `base` (a preset's per-run
// overrides); same checks, and the result is validated. `field` prefixes
// key names in errors ("runs[2]." gives "'runs[2].lr' must be ...").
RunConfig parse_run_config_over(const RunConfig& base, const std::string& json_text, const std::string& origin,
                                const std::string& field = "");
// "STEP:LAYER:VALUE" (RunConfig::spike); false when malformed.
bool parse_spike(const std::string& text, std::int64_t& step, std::string& layer, float& value);
// Sets one key from its string form (the CLI's --key value); same checks.
void set_config_value(RunConfig& c, const std::string& key, const std::string& value,
                      const std::string& origin);
// Range checks of the whole config; throws naming the field.
void validate(const RunConfig& c, const std::string& origin);
// The JSON written to config.json (round-trips through parse_run_config).
std::string to_json(const RunConfig& c);

}  // namespace engine
