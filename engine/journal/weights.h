// Weights file: a run's final parameters in its run folder (weights-<run_id>.bin), written and read back.
//
// The format (docs/numerics.md "The final weights"), every number
// little-endian, strings as a u32 byte count and UTF-8 bytes:
//   "PLWEIGHT"   8-byte magic
//   u32          version (1)
//   u32          parameter count P
//   i64          steps the run had taken
//   string       the model ("mlp", "gpt", ...)
//   P times:     string name ("fc1.weight": leaf and parameter), u32 rank,
//                rank x i64 dims, string format the values came from
//                ("fp32" for a master copy), f32 scale (the FP8 compute
//                copy holds value * scale; else 1), numel x f32 values
//   u32          CRC-32 (zlib's) of every byte before it
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "numeric/format.h"
#include "tensor/tensor.h"

namespace engine {

class Backend;
class Model;

inline constexpr char kWeightsMagic[8] = {'P', 'L', 'W', 'E', 'I', 'G', 'H', 'T'};
inline constexpr std::uint32_t kWeightsVersion = 1;

// The folder's file of run `run_id`: "weights-0.bin".
std::string weights_file_name(int run_id);

struct StoredParameter {
  std::string name;
  Shape shape;
  Format format = Format::FP32;  // the copy the values came from
  float scale = 1.0f;            // Parameter::weight_scale
  std::vector<float> values;     // FP32, exactly the parameter's values
};

struct WeightsFile {
  std::uint32_t version = kWeightsVersion;
  std::int64_t steps = 0;
  std::string model;
  std::vector<StoredParameter> parameters;
};

// What `model` holds now: per parameter its master copy when the recipe
// keeps one, else its stored weights decoded (divided by an FP8 scale, as
// a precision change takes them). Trainer thread (downloads through the
// parameters' backend).
WeightsFile capture_weights(Model& model, std::int64_t steps);

// The file's bytes.
std::string serialize_weights(const WeightsFile& w);

// Writes dir/name through ".name.tmp", fsync and a rename: the file is
// whole or absent. Throws std::runtime_error naming the file.
void write_weights(const std::string& dir, const std::string& name, const WeightsFile& w);

// Parses the bytes of a weights file. Throws std::runtime_error
// "<origin>: <problem>" (one line) on a wrong magic, an unknown version, a
// truncated or oversized part, a bad name, rank, dimension or format, a
// checksum mismatch or bytes after the checksum. Sizes are checked against
// the bytes left before anything is allocated.
WeightsFile parse_weights(const std::string& bytes, const std::string& origin);
// Reads and parses `path` (errors name it).
WeightsFile read_weights(const std::string& path);

// Checks `w` against `model` (a model built from the run's config: the same
// model, the same parameters by name and shape, in order) and writes its
// values into the model: the master copy (when kept) and the compute copy
// as the recipe stores it (re-rounded from the master as a refresh does,
// FP8 with the stored scale). A model laid out as the run's recipe computes
// then exactly as the run did at its end. Throws std::runtime_error
// "<origin>: <problem>" and changes nothing when a check fails.
void load_weights(Backend& be, Model& model, const WeightsFile& w, const std::string& origin);

// read_weights(path) into `model` (load_weights; errors name the path). The
// run's own precision: `model` from a Run built from the folder's config
// (runs.json), whose constructor lays it out by the run's recipe.
void restore_weights(Backend& be, Model& model, const std::string& path);

}  // namespace engine
