// The text of the exported train.py: its header (the run, what does not translate), settings, model and loop.
#pragma once

#include <cstddef>
#include <string>

#include "bridge/translation.h"
#include "train/run_config.h"

namespace engine {

class Model;

enum class ScriptData { Images, Flat, Text };

struct ScriptFacts {
  RunConfig config;
  std::string run_name;
  int run_id = 0;
  std::string run_dir;
  Translation translation;
  ScriptData data = ScriptData::Flat;
  bool classification = true;
  std::size_t train_samples = 0;
  std::int64_t steps = 0;        // lines of batches.txt
  std::int64_t total_steps = 0;  // the run's planned length (the schedule's)
};

// train.py for `facts` on `model` (built from the config: its leaves give
// the forward). Throws std::runtime_error naming a layer kind the script
// cannot build.
std::string pytorch_script(const ScriptFacts& facts, Model& model);

}  // namespace engine
