// export_pytorch: checks a run folder's run, writes train.py with its weights, batches and data into a folder renamed into place.
#include "bridge/pytorch_export.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "bridge/pytorch_script.h"
#include "bridge/translation.h"
#include "data/dataset.h"
#include "journal/initial_state.h"
#include "journal/journal.h"
#include "journal/npy.h"
#include "nn/model.h"
#include "nn/parameter.h"
#include "train/build_model.h"

namespace engine {

namespace fs = std::filesystem;

namespace {

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string t = "[";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

NpyArray npy_i64(const std::vector<std::int64_t>& v) {
  NpyArray a;
  a.type = NpyType::I64;
  a.shape = {static_cast<std::int64_t>(v.size())};
  a.data.assign(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(std::int64_t));
  return a;
}

// The model the run trained, built from its config on its data set's shapes.
std::unique_ptr<Model> model_of(const RunConfig& c, const Dataset& train) {
  Shape sample;
  if (train.shape.is_image())
    sample = {static_cast<std::int64_t>(train.shape.channels), static_cast<std::int64_t>(train.shape.height),
              static_cast<std::int64_t>(train.shape.width)};
  else
    sample = {static_cast<std::int64_t>(train.shape.features)};
  return build_model(c, sample, static_cast<std::int64_t>(train.output_width()));
}

// The image bytes behind an image set's floats: pixel p was fed as
// float((p/255 - mean) / std); every value must come back exactly, or the
// export keeps floats.
bool pixels_of(const Dataset& d, const std::vector<std::int64_t>& rows, std::string& pixels, std::vector<float>& table) {
  table.resize(256);
  for (int v = 0; v < 256; ++v)
    table[static_cast<std::size_t>(v)] = static_cast<float>((v / 255.0 - d.input_mean) / d.input_std);
  const std::size_t f = d.shape.features;
  pixels.resize(rows.size() * f);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const float* x = d.inputs.data() + static_cast<std::size_t>(rows[r]) * d.input_stride();
    for (std::size_t i = 0; i < f; ++i) {
      const long code = std::lround((static_cast<double>(x[i]) * d.input_std + d.input_mean) * 255.0);
      if (code < 0 || code > 255 || std::memcmp(&table[static_cast<std::size_t>(code)], &x[i], sizeof(float)) != 0)
        return false;
      pixels[r * f + i] = static_cast<char>(static_cast<unsigned char>(code));
    }
  }
  return true;
}

void write_data(const fs::path& dir, const Dataset& d, const std::vector<std::vector<std::uint32_t>>& batches,
                ScriptData& kind) {
  fs::create_directories(dir);
  if (d.is_text()) {
    kind = ScriptData::Text;
    NpyArray t;
    t.type = NpyType::U16;
    t.shape = {static_cast<std::int64_t>(d.inputs.size())};
    t.data.resize(d.inputs.size() * 2);
    for (std::size_t i = 0; i < d.inputs.size(); ++i) {
      const auto id = static_cast<std::uint16_t>(d.inputs[i]);
      std::memcpy(&t.data[2 * i], &id, 2);
    }
    write_file_synced((dir / "tokens.npy").string(), serialize_npy(t));
    std::string vocab = "# One line per token id (from 0): the character's UTF-8 bytes as hex.\n";
    for (const std::string& ch : d.vocabulary) {
      char hex[3];
      for (unsigned char b : ch) {
        std::snprintf(hex, sizeof hex, "%02x", b);
        vocab += hex;
      }
      vocab += "\n";
    }
    write_file_synced((dir / "vocabulary.txt").string(), vocab);
    return;
  }
  std::vector<std::int64_t> rows;
  for (const auto& b : batches) rows.insert(rows.end(), b.begin(), b.end());
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  write_file_synced((dir / "index.npy").string(), serialize_npy(npy_i64(rows)));
  Shape sample = {static_cast<std::int64_t>(rows.size())};
  if (d.shape.is_image())
    sample.insert(sample.end(), {static_cast<std::int64_t>(d.shape.channels), static_cast<std::int64_t>(d.shape.height),
                                 static_cast<std::int64_t>(d.shape.width)});
  else
    sample.push_back(static_cast<std::int64_t>(d.shape.features));
  std::string pixels;
  std::vector<float> table;
  if (d.shape.is_image() && pixels_of(d, rows, pixels, table)) {
    kind = ScriptData::Images;
    NpyArray a;
    a.type = NpyType::U8;
    a.shape = sample;
    a.data = std::move(pixels);
    write_file_synced((dir / "pixels.npy").string(), serialize_npy(a));
    write_file_synced((dir / "table.npy").string(), serialize_npy(npy_f32({256}, table)));
  } else {
    kind = ScriptData::Flat;
    std::vector<float> x;
    for (auto r : rows) {
      const float* p = d.inputs.data() + static_cast<std::size_t>(r) * d.input_stride();
      x.insert(x.end(), p, p + d.shape.features);
    }
    write_file_synced((dir / "inputs.npy").string(), serialize_npy(npy_f32(sample, x)));
  }
  if (d.is_classification()) {
    std::vector<std::int64_t> labels;
    for (auto r : rows) labels.push_back(d.labels[static_cast<std::size_t>(r) * d.label_stride()]);
    write_file_synced((dir / "labels.npy").string(), serialize_npy(npy_i64(labels)));
  } else {
    std::vector<float> y;
    for (auto r : rows) {
      const float* p = d.targets.data() + static_cast<std::size_t>(r) * d.target_width;
      y.insert(y.end(), p, p + d.target_width);
    }
    write_file_synced((dir / "targets.npy").string(),
                      serialize_npy(npy_f32({static_cast<std::int64_t>(rows.size()),
                                             static_cast<std::int64_t>(d.target_width)}, y)));
  }
}

}  // namespace

std::vector<std::string> untranslated_parts(const RunConfig& config, const std::vector<StampedChange>& changes,
                                            int run_id) {
  std::unique_ptr<Model> model = build_model(config);
  return translate_recipe(config, changes, run_id, *model).untranslated;
}

PytorchExport export_pytorch(const std::string& run_dir, const std::string& out_dir, int run_id) {
  const fs::path src(run_dir);
  if (!fs::is_regular_file(src / "runs.json"))
    throw std::runtime_error((src / "runs.json").string() + ": missing (" + run_dir + " is not a run folder)");
  const JournalContents journal = read_journal(run_dir);
  if (run_id < 0 || static_cast<std::size_t>(run_id) >= journal.runs.size())
    throw std::runtime_error(run_dir + ": has no run " + std::to_string(run_id) + " (it holds " +
                             std::to_string(journal.runs.size()) + ")");
  const JournalEntry& entry = journal.runs[static_cast<std::size_t>(run_id)];
  const RunConfig& c = entry.config;
  // The recipe first: an export that cannot be expressed fails before any data is read.
  (void)untranslated_parts(c, journal.commands, run_id);
  const DatasetPair data = load_dataset(c.dataset, c.seed, static_cast<std::size_t>(c.context));
  const Dataset& train = data.train;
  std::unique_ptr<Model> model = model_of(c, train);
  const Translation t = translate_recipe(c, journal.commands, run_id, *model);
  const InitialState init = read_initial_state(run_dir, run_id, train.count);
  const std::string init_dir = (src / initial_state_dir_name(run_id)).string();
  const std::vector<Parameter*> params = model->parameters();
  if (params.size() != init.names.size())
    throw std::runtime_error(init_dir + "/parameters.txt: names " + std::to_string(init.names.size()) +
                             " parameters; the run's " + c.model + " has " + std::to_string(params.size()));
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (params[i]->name != init.names[i])
      throw std::runtime_error(init_dir + "/parameters.txt: parameter " + std::to_string(i + 1) + " is '" +
                               init.names[i] + "'; the run's " + c.model + " has '" + params[i]->name + "' there");
    if (params[i]->shape != init.shapes[i])
      throw std::runtime_error(init_dir + "/" + init.names[i] + ".npy: shape " + shape_text(init.shapes[i]) +
                               "; the run's " + c.model + " has " + shape_text(params[i]->shape));
  }
  for (std::size_t b = 0; b < init.batches.size(); ++b)
    if (static_cast<std::int64_t>(init.batches[b].size()) > c.batch)
      throw std::runtime_error(init_dir + "/batches.txt: step " + std::to_string(b + 1) + " holds " +
                               std::to_string(init.batches[b].size()) + " samples, more than the batch of " +
                               std::to_string(c.batch));

  // Everything into a temporary folder beside out_dir, renamed into place.
  fs::path out = fs::absolute(fs::path(out_dir)).lexically_normal();
  if (out.filename().empty()) out = out.parent_path();
  std::error_code ec;
  if (fs::exists(out) && !fs::is_empty(out, ec) && !fs::exists(out / "train.py"))
    throw std::runtime_error(out.string() + ": exists and holds something other than an export (no train.py)");
  fs::create_directories(out.parent_path(), ec);
  const fs::path tmp = out.parent_path() / ("." + out.filename().string() + ".export-tmp");
  fs::remove_all(tmp, ec);
  try {
    fs::create_directories(tmp / "initial");
    fs::copy_file(fs::path(init_dir) / "parameters.txt", tmp / "initial" / "parameters.txt");
    for (std::size_t i = 0; i < init.names.size(); ++i)
      write_file_synced((tmp / "initial" / (init.names[i] + ".npy")).string(),
                        serialize_npy(npy_f32(init.shapes[i], init.values[i])));
    fs::copy_file(fs::path(init_dir) / "batches.txt", tmp / "batches.txt");
    ScriptFacts facts;
    facts.config = c;
    facts.run_name = entry.name;
    facts.run_id = run_id;
    facts.run_dir = fs::absolute(src).lexically_normal().string();
    facts.translation = t;
    facts.classification = train.is_classification();
    facts.train_samples = train.count;
    facts.steps = static_cast<std::int64_t>(init.batches.size());
    facts.total_steps = entry.total_steps > 0 ? entry.total_steps : facts.steps;
    write_data(tmp / "data", train, init.batches, facts.data);
    write_file_synced((tmp / "train.py").string(), pytorch_script(facts, *model));
    fs::permissions(tmp / "train.py", fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                    fs::perm_options::add, ec);
    if (fs::exists(out)) fs::remove_all(out);
    fs::rename(tmp, out);
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp, ec);
    throw std::runtime_error(out.string() + ": cannot write (" + e.code().message() + ")");
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  PytorchExport r;
  r.dir = out.string();
  r.script = (out / "train.py").string();
  r.run_name = entry.name;
  r.untranslated = t.untranslated;
  return r;
}

}  // namespace engine
