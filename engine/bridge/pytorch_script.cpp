// pytorch_script: train.py's text, the run's facts as Python constants and its model's forward written out layer by layer.
#include "bridge/pytorch_script.h"

#include <charconv>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "bridge/script_parts.h"
#include "nn/attention.h"
#include "nn/layer.h"
#include "nn/model.h"
#include "nn/parameter.h"
#include "nn/transformer_block.h"
#include "report/csv.h"

namespace engine {

namespace {

// A Python literal of a double that reads back to the same value.
// (the shortest such text: 0.05, not 0.050000000000000003).
std::string py(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// A comment block: each line of `text` wrapped at about 100 columns after "# ".
std::string comment(const std::string& text, const std::string& indent = "") {
  std::string out, line = "#" + indent;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t j = text.find(' ', i);
    if (j == std::string::npos) j = text.size();
    const std::string word = text.substr(i, j - i);
    if (line.size() + 1 + word.size() > 100 && line.size() > 1 + indent.size() + 2) {
      out += line + "\n";
      line = "#" + indent + "  ";
    }
    line += " " + word;
    i = j + 1;
  }
  return out + line + "\n";
}

std::string params_of(Layer& l) {
  std::string s;
  for (Parameter* p : l.parameters()) s += ", P[" + quoted(p->name) + "]";
  return s;
}

// The forward pass: one line per top-level layer of the lab's model.
std::string forward_of(Model& model, const RunConfig& c, std::string& helpers) {
  std::string f = "def forward(x):\n    \"\"\"The lab's " + model.name() +
                  ", layer by layer (each layer() call names the lab's layer and runs it in its precision).\"\"\"\n";
  Shape shape = {1};
  for (auto d : model.sample_shape()) shape.push_back(d);
  for (const auto& up : model.layers()) {
    Layer& l = *up;
    const std::string k = l.kind(), n = quoted(l.name());
    const Shape out = l.output_shape(shape);
    if (k == "flatten") {
      f += "    x = layer(" + n + ", lambda x: x.flatten(1), x)\n";
    } else if (k == "linear") {
      f += "    x = layer(" + n + ", F.linear, x" + params_of(l) + ")\n";
    } else if (k == "relu") {
      f += "    x = layer(" + n + ", F.relu, x)\n";
    } else if (k == "gelu") {
      f += "    x = layer(" + n + ", F.gelu, x)\n";
    } else if (k == "conv2d") {
      const auto& w = l.parameters().front()->shape;  // [out, in, k, k]
      const std::int64_t pad = (out[2] - shape[2] + w[2] - 1) / 2;
      f += "    x = layer(" + n + ", lambda x, w, b: F.conv2d(x, w, b, padding=" + std::to_string(pad) + "), x" +
           params_of(l) + ")\n";
    } else if (k == "maxpool2d") {
      f += "    x = layer(" + n + ", lambda x: F.max_pool2d(x, " + std::to_string(shape[2] / out[2]) + "), x)\n";
    } else if (k == "layernorm") {
      f += "    x = layer(" + n + ", layer_norm, x" + params_of(l) + ")\n";
    } else if (k == "mean_pool") {
      f += "    x = layer(" + n + ", lambda x: x.mean(dim=1), x)  # the mean over tokens\n";
    } else if (k == "patch_embed") {
      const std::int64_t tokens = out[1];
      const std::int64_t side = shape[2] * shape[3] / tokens;  // patch area
      std::int64_t patch = 1;
      while (patch * patch < side) ++patch;
      helpers +=
          "\n\ndef patch_embed(x, w, b, pos, patch=" + std::to_string(patch) +
          "):\n"
          "    \"\"\"The lab's patch embedding: the image cut into patch x patch squares (row by row), each\n"
          "    square's values in (channel, row, column) order times w^T, plus the bias and the position's\n"
          "    embedding.\"\"\"\n"
          "    B, C, H, W = x.shape\n"
          "    t = x.reshape(B, C, H // patch, patch, W // patch, patch).permute(0, 2, 4, 1, 3, 5)\n"
          "    patches = t.reshape(B, (H // patch) * (W // patch), C * patch * patch)\n"
          "    return F.linear(patches, w, b) + pos\n";
      f += "    x = layer(" + n + ", patch_embed, x" + params_of(l) + ")\n";
    } else if (k == "transformer_block") {
      auto& b = dynamic_cast<TransformerBlock&>(l);
      const std::int64_t C = shape.back(), T = shape[shape.size() - 2];
      const std::int64_t heads = b.attn().scores().output_shape({1, T, 3 * C})[1];
      f += "    x = block(" + n + ", x, heads=" + std::to_string(heads) +
           (b.attn().causal() ? ", causal=True" : "") + (b.attn().qk_norm() ? ", qk_norm=True" : "") + ")\n";
    } else if (k == "embedding") {
      f += "    x = layer(" + n + ", lambda ids, w: F.embedding(ids, w), x" + params_of(l) + ")\n";
    } else if (k == "pos_embedding") {
      f += "    x = layer(" + n + ", lambda x, pos: x + pos[:x.shape[1]], x" + params_of(l) +
           ")  # learned positions\n";
    } else {
      throw std::runtime_error("export-pytorch: the " + c.model + "'s layer " + l.name() + " (" + k +
                               ") has no PyTorch translation");
    }
    shape = out;
  }
  return f + "    return x\n";
}

}  // namespace

std::string pytorch_script(const ScriptFacts& s, Model& model) {
  const RunConfig& c = s.config;
  const Translation& t = s.translation;
  std::string h = "#!/usr/bin/env python3\n";
  h += "# train.py: run \"" + s.run_name + "\" (run " + std::to_string(s.run_id) + ") of the Precision Lab run folder\n";
  h += "# " + s.run_dir + ", rebuilt in PyTorch by `precision-lab-cli export-pytorch`.\n#\n";
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "The run: the %s on %s, recipe %s, %lld steps of batch %lld, %s at lr %s (%s schedule, warm-up %lld "
                "steps), clipping %s, seed %llu. Same initial weights (initial/), same batches in the same order "
                "(batches.txt), same data (data/).",
                c.model.c_str(), c.dataset.c_str(), c.recipe.c_str(), static_cast<long long>(s.steps),
                static_cast<long long>(c.batch), c.optimizer.c_str(), py(c.lr).c_str(), c.schedule.c_str(),
                static_cast<long long>(c.warmup), c.clip > 0 ? ("at global norm " + py(c.clip)).c_str() : "off",
                static_cast<unsigned long long>(c.seed));
  h += comment(buf) + "#\n";
  h += "# What PyTorch cannot express here (the lab does it; this script does not):\n";
  if (t.untranslated.empty()) h += "#   - nothing: every part of the recipe has a PyTorch form.\n";
  for (const std::string& u : t.untranslated) h += comment("- " + u, "  ");
  h += "#\n";
  if (t.autocast == "float16")
    h += comment("On a CPU: torch before 2.x has no autocast(float16) there; this script then emulates it (each "
                 "low-precision layer's inputs and output rounded to float16, FP32 arithmetic: what a Tensor Core "
                 "computes) and says so when it starts.");
  if (t.autocast != "none")
    h += comment(t.rounded_weights.empty()
                     ? "Master weights: the parameters are FP32 tensors, the lab's FP32 master copy; autocast "
                       "computes from them in " + t.autocast + " and the optimizer updates them in FP32."
                     : "No master weights: the parameters in ROUNDED live in " + t.autocast +
                           " (FP32 tensors holding its values, rounded to nearest after every update), as the "
                           "lab stores them.");
  if (t.scaling == ScalingMode::Dynamic)
    h += comment("Loss scaling: torch.cuda.amp.GradScaler on CUDA; on a CPU torch.amp.GradScaler('cpu') where it "
                 "exists (torch 2.3 and later), else LabScaler below, GradScaler's state machine written out. It "
                 "says which when it starts.");
  h += comment("Not done here: evaluations (evals.csv) and text samples; the script trains and writes steps.csv "
               "with the lab's columns, leaving empty what PyTorch does not measure (memory by category, rss).");
  h += "#\n# Run it: python3 train.py [--device cpu|cuda] [--steps N] [--out FILE] [--overflow-steps 5,17]\n\n";

  // The settings.
  std::string v = "# ---------------------------------------------------------------- the run's settings\n";
  v += "RUN_ID = " + std::to_string(s.run_id) + "\nRUN_NAME = " + quoted(s.run_name) + "\nRECIPE = " +
       quoted(c.recipe) + "\nMODEL = " + quoted(c.model) + "\n";
  v += "STEPS = " + std::to_string(s.steps) + "\nTOTAL_STEPS = " + std::to_string(s.total_steps) +
       "  # the schedule's length\nBATCH = " + std::to_string(c.batch) + "\nTRAIN_SAMPLES = " +
       std::to_string(s.train_samples) + "  # the lab's training split\n";
  v += std::string("CLASSIFICATION = ") + (s.classification ? "True" : "False") + "\n";
  v += std::string("TEXT = ") + (s.data == ScriptData::Text ? "True" : "False") + "\n";
  v += "CONTEXT = " + std::to_string(c.context) + "  # tokens per window (text sets)\n";
  v += "OPTIMIZER = " + quoted(c.optimizer) + "\nLR = " + py(c.lr) + "\nMOMENTUM = " + py(c.momentum) +
       "\nWEIGHT_DECAY = " + py(c.weight_decay) + "\nBETAS = (0.9, 0.999)\nEPS = 1e-08\n";
  v += "SCHEDULE = " + quoted(c.schedule) + "\nWARMUP = " + std::to_string(c.warmup) + "\nCLIP = " + py(c.clip) +
       "  # 0: off\nZ_LOSS = " + py(c.z_loss) + "\n";
  v += "# The recipe: torch.autocast's dtype (\"none\": FP32 throughout) and, per lab layer, how it runs:\n"
       "# \"lowp\" in that dtype, \"fp32\" kept in FP32 (outside autocast), \"follow\" its input's dtype.\n";
  v += "AUTOCAST = " + quoted(t.autocast) + "\nPRECISION = {\n";
  for (const auto& [leaf, mode] : t.precision) v += "    " + quoted(leaf) + ": " + quoted(mode) + ",\n";
  v += "}\n";
  v += "# Parameters without an FP32 master copy, kept in the autocast dtype (rounded after every update).\n";
  v += "ROUNDED = [";
  for (std::size_t i = 0; i < t.rounded_weights.size(); ++i) v += (i ? ", " : "") + quoted(t.rounded_weights[i]);
  v += "]\nNO_DECAY = {";
  for (std::size_t i = 0; i < t.no_decay.size(); ++i) v += (i ? ", " : "") + quoted(t.no_decay[i]);
  v += t.no_decay.empty() ? "}  # set()\n" : "}  # no weight decay (biases, norms, position embeddings)\n";
  if (t.no_decay.empty()) v.replace(v.rfind("NO_DECAY = {}"), 13, "NO_DECAY = set()");
  v += "LOSS_SCALING = " + quoted(scaling_mode_key(t.scaling)) + "  # none | static | dynamic (GradScaler)\n";
  v += "INIT_SCALE = " + py(t.scaler.init_scale) + "\nGROWTH_FACTOR = " + py(t.scaler.growth_factor) +
       "\nBACKOFF_FACTOR = " + py(t.scaler.backoff_factor) + "\nGROWTH_INTERVAL = " +
       std::to_string(t.scaler.growth_interval) + "\n";
  std::string columns = csv_header(CsvFile::Steps);
  while (!columns.empty() && (columns.back() == '\n' || columns.back() == '\r')) columns.pop_back();
  v += "STEP_COLUMNS = " + quoted(columns) + "  # the lab's steps.csv\n\n";

  std::string body = script_parts::setup;
  if (t.tf32)
    body += "\ntorch.backends.cuda.matmul.allow_tf32 = True  # layers the run computed in TF32\n"
            "torch.backends.cudnn.allow_tf32 = True\n";
  body += script_parts::batches;
  body += s.data == ScriptData::Images ? script_parts::data_images
          : s.data == ScriptData::Text ? script_parts::data_text
                                       : script_parts::data_flat;
  std::string helpers;
  bool transformer = false;
  for (const auto& l : model.layers()) transformer = transformer || std::strcmp(l->kind(), "transformer_block") == 0;
  if (transformer) body += script_parts::blocks;
  const std::string fwd = forward_of(model, c, helpers);
  body += "\n\n# ---------------------------------------------------------------- the model" + helpers + "\n\n" + fwd;
  body += script_parts::train;
  return h + v + body;
}

}  // namespace engine
