// Per-model defaults shared by the CLI, the app's setup panel and the
// benchmarks: the optimizer a model trains with when the user names none,
// each model's shape, and the named sizes (--size default|gpu).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "train/run_config.h"

namespace engine {

// The gpt's learning rate under AdamW (or Adam) when none is named:
// nanoGPT's for its small character models. Measured at the baby shape on
// jargon (fp32, batch 32, 300 steps, cosine to 0 without warm-up: what a
// first run in the app has time for), validation loss 2.621 nats against
// 2.736 at 2e-3 and 2.770 at 3e-3; the higher rates pay off only with a
// warm-up and longer runs (tests/bench/gpt_convergence.sh uses 3e-3).
inline constexpr double kGptLearningRate = 1e-3;

struct OptimizerDefaults {
  std::string optimizer;  // "sgd" or "adamw"
  double lr = 0.0;
};

// The mlp, the cnn and the transformer: RunConfig's own (SGD with momentum,
// lr 0.05). The gpt: AdamW at kGptLearningRate (SGD trains a transformer
// language model slowly and unevenly; every nanoGPT user starts from AdamW).
OptimizerDefaults optimizer_defaults(const std::string& model);

// The learning rate `optimizer` starts from on `model`: the gpt's under the
// Adam family, RunConfig's otherwise.
double default_learning_rate(const std::string& model, const std::string& optimizer);

// Fills in c.model's defaults for what the user did not name: the optimizer
// when !optimizer_named, then the learning rate (for the optimizer c now
// has) when !lr_named. What was named stays as it is.
void apply_optimizer_defaults(RunConfig& c, bool optimizer_named, bool lr_named);

// The shape of every model in one place. Defaults: the mlp 784-256-128-10,
// the cnn's conv stages 32 and 64 channels, the vision transformer 2 blocks
// of width 64 with 4 heads, the gpt nanoGPT's CPU "baby" (4 layers, width
// 128, 4 heads, context 64).
inline constexpr std::int64_t kTransformerDepth = 2, kTransformerWidth = 64, kTransformerHeads = 4;
inline constexpr std::int64_t kGptDepth = 4, kGptWidth = 128, kGptHeads = 4, kGptContext = 64;

struct ModelShape {
  std::vector<std::int64_t> widths;    // mlp hidden widths
  std::vector<std::int64_t> channels;  // cnn conv stages
  std::int64_t depth = 0, width = 0, heads = 0;  // transformer and gpt (0 for the others)
  std::int64_t context = 0;            // gpt (0 for the others)
  bool operator==(const ModelShape&) const = default;
};
// `model`'s default shape (an unknown model: all empty).
ModelShape default_shape(const std::string& model);
// The shape c builds for c.model: c's fields where it sets them, else the
// model's defaults.
ModelShape model_shape(const RunConfig& c);

// The named sizes: "default" (the shapes above, batch 128: what a CPU
// trains in seconds) and "gpu" (GEMMs large enough to keep a GPU's Tensor
// Cores busy, where mixed precision pays): the mlp 784-4096-4096-4096-10 at
// batch 1024, the cnn's stages 128 and 256 channels at batch 512, the
// transformer 8 blocks of width 1024 with 16 heads at batch 512 (16 tokens
// a sample: GEMMs of 8192 rows by 1024 and 2048), the gpt 8 layers of width
// 768 with 12 heads over a context of 256 at batch 64 (16384 tokens a step).
const std::vector<std::string>& size_names();
struct SizedModel {
  ModelShape shape;
  std::int64_t batch = 0;
};
// `model` at `size`; throws std::invalid_argument naming the size when it
// is not one of size_names().
SizedModel sized_model(const std::string& model, const std::string& size);
// Sets c.model's shape fields and the batch to `size`'s, leaving alone the
// keys in `named` (config keys: "widths", "channels", "depth" or "layers",
// "width", "heads", "context", "batch"): explicit fields override the size.
// "default" clears the shape fields (the model's defaults). Throws
// std::runtime_error "ORIGIN: 'size' must be default or gpu (got 'x')".
// The one place the CLI, config files, the app and bench_train size a model.
void apply_size(RunConfig& c, const std::string& size, const std::set<std::string>& named = {},
                const std::string& origin = "size");
// The size whose shape c's model has ("default" or "gpu"; the batch is the
// size's suggestion, not part of it), or "" for neither (a custom shape):
// what the app's Size choice shows.
std::string size_of(const RunConfig& c);

}  // namespace engine
