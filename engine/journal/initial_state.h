// A run's starting point kept in its folder: initial weights (.npy per parameter) and the batch order.
//
// DIR/initial-<run_id>/parameters.txt  the parameters in the optimizer's order, one name a line
//                                      ("fc1.weight"); '#' lines are comments
// DIR/initial-<run_id>/<name>.npy      each parameter's values before the first step, float32,
//                                      the lab's shape (Linear [out, in], Conv2d [out, in, kh, kw])
// DIR/initial-<run_id>/batches.txt     one line per step: the training split's sample indices
//                                      (0-based, space-separated) in the order the batch holds them;
//                                      '#' lines are comments (the first says what the rest is)
//
// The folder is written whole into ".initial-<run_id>.tmp" and renamed: it
// is complete or absent. docs/pytorch.md describes the formats.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "journal/weights.h"

namespace engine {

class Run;

// "initial-0".
std::string initial_state_dir_name(int run_id);

// The batch order of a run: `steps` batches of `batch` sample indices from a
// split of `samples`, epoch after epoch, as Run::load_batch takes them (the
// sampler's permutation per epoch; a kept last partial batch).
// `each(step, indices)` is called once per step, from 0.
template <class F>
void for_each_batch(std::size_t samples, std::size_t batch, std::uint64_t seed, std::int64_t steps, F&& each);

// Writes DIR/initial-<run_id>/ from `weights` (capture_weights before the
// first step) and the batch order of `steps` steps. Throws
// std::runtime_error naming the file it could not write.
void write_initial_state(const std::string& dir, int run_id, const WeightsFile& weights, std::size_t samples,
                         std::size_t batch, std::uint64_t seed, std::int64_t steps, const std::string& note);

// What DIR/initial-<run_id>/ holds, read back and checked (the exporter's
// input). Throws std::runtime_error "<file>: <problem>" (one line): a
// missing folder or file, a malformed line, an index outside `samples`.
struct InitialState {
  std::vector<std::string> names;
  std::vector<std::vector<std::int64_t>> shapes;
  std::vector<std::vector<float>> values;
  std::vector<std::vector<std::uint32_t>> batches;  // one per step
};
InitialState read_initial_state(const std::string& dir, int run_id, std::size_t samples);

}  // namespace engine

#include "data/sampler.h"

namespace engine {

template <class F>
void for_each_batch(std::size_t samples, std::size_t batch, std::uint64_t seed, std::int64_t steps, F&& each) {
  BatchSampler sampler(samples, batch, seed);
  const auto per_epoch = static_cast<std::int64_t>(sampler.batches_per_epoch());
  for (std::int64_t s = 0; s < steps; ++s) {
    const std::int64_t epoch = s / per_epoch, b = s % per_epoch;
    if (b == 0) sampler.set_epoch(static_cast<std::uint64_t>(epoch));
    each(s, sampler.batch(static_cast<std::size_t>(b)));
  }
}

}  // namespace engine
