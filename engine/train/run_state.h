// Run's private state: the buffers a step reuses (Run::Impl) and one step's
// facts as its phases pass them on (Run::StepState). Shared by run.cpp (the
// step) and run_statistics.cpp (statistics, shadow pass, inspection,
// overflow attribution); nothing else includes it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "amp/grad_set.h"
#include "amp/loss_scaler.h"
#include "backend/backend.h"
#include "backend/cuda_step.h"
#include "data/sampler.h"
#include "nn/model.h"
#include "optim/optimizer.h"
#include "optim/param_slot.h"
#include "optim/schedule.h"
#include "tensor/tensor.h"
#include "train/run.h"

namespace engine {

class DelayedScale;

// The results slots of a step (8 bytes each), read back in one transfer:
// the loss (double), the correct count, the sum of squared unscaled
// gradients (double), the z-loss's mean log^2 Z (double, 0 without it),
// one non-finite count per parameter, then one pending FP8 amax (float) each.
// A captured CUDA step adds the device's scale state (PlCudaScaleState)
// after them (kScaleStateSlots slots).
enum : std::size_t { kLossSlot = 0, kCorrectSlot = 1, kSumSquaresSlot = 2, kZSlot = 3, kCountsSlot = 4 };
inline constexpr std::size_t kScaleStateSlots = (sizeof(PlCudaScaleState) + 7) / 8;

inline double slot_double(const std::vector<std::int64_t>& r, std::size_t k) {
  double d;
  std::memcpy(&d, &r[k], sizeof d);
  return d;
}

// Adam with its state below FP32: after the update of step `step` (counted
// at the next step with non-finite values), how many second moments the
// state's format had flushed to zero while their first moments had not
// (those weights moved by lr * m / eps), of how many. A divergence names it
// as the cause (run.cpp).
struct FlushedMoments {
  std::int64_t flushed = 0, moments = 0, step = 0;
};

// What a captured step's graph has baked in: a change of any of these
// (the batch's size or buffers, a precision or scaler change) means the
// graph is dropped, the step runs uncaptured, and the next one recaptures.
struct StepGraphKey {
  std::int64_t batch = -1;
  const void* x = nullptr;
  const void* labels = nullptr;
  const void* targets = nullptr;
  const void* results = nullptr;
  std::int64_t epoch = -1;  // Run::m_graph_epoch
  bool operator==(const StepGraphKey&) const = default;
};

struct Run::Impl {
  std::unique_ptr<Optimizer> optimizer;
  LossScaler scaler;
  LrSchedule schedule;
  std::unique_ptr<BatchSampler> sampler;
  std::int64_t batch_in_epoch = 0;
  std::int64_t epoch = 0;
  Shape sample_shape;
  std::int64_t outputs = 0;
  // Step buffers (reused every step), all backend memory.
  Tensor x;
  Buffer labels;  // int32 per sample
  Tensor targets;
  Tensor logits_f32;
  Tensor probs;
  Tensor dlogits;
  Tensor lse;  // the z-loss's log Z per row
  GradSet grads;                      // the step's gradients, FP32 views
  std::vector<Tensor> weight_scratch; // f32 views of non-FP32 weights, per parameter
  std::vector<ParamSlot> slots;
  // The step's results (the slots above), read back in one transfer.
  Buffer results;
  std::vector<std::int64_t> results_host;
  std::vector<DelayedScale*> pending;
  std::vector<UpdateEncode> encodes;  // the slots' encodes (ParamSlot::encode)
  Tensor fp8_scratch;                 // FP8 weights' f32 scratch (UpdateEncode::scratch)
  std::size_t param_count = 0;
  std::size_t amax_slots = 0;  // the model's delayed scales: the most amaxes a step can have pending
  // The FP32 shadow model of statistics steps (built at the first one) and
  // its loss buffers. Not part of the recipe's memory: a measuring tool.
  std::unique_ptr<Model> shadow;
  Tensor shadow_probs, shadow_dlogits, shadow_lse;
  FlushedMoments flushed;

  // The step on the device (CUDA backends with the module's ABI 6; run.cpp
  // captured_step). Null step_control: every step as above.
  CudaStepControl* step_control = nullptr;
  PlCudaScaleState* scale_state = nullptr;  // backend memory: the scaler's state, the device's copy
  bool scale_state_stale = true;            // the host scaler moved since the last upload
  PlCudaGraph* graph = nullptr;             // the captured step, replayed
  StepGraphKey graph_key;
  StepGraphKey warm_key;                    // the last uncaptured step's: its buffers exist
  std::int64_t* results_pinned = nullptr;   // host_allocate memory: the graph's read lands here
  std::size_t results_pinned_slots = 0;
};

// What one step has decided and found so far, passed from phase to phase.
struct Run::StepState {
  std::int64_t number = 0;    // this step's number (1-based)
  float loss_scale = 1.0f;    // the scale its loss is multiplied by
  bool inspect = false;       // a StepInspection was requested
  bool statistics = false;    // gradient statistics are taken (and the shadow pass)
  std::optional<Fault> fault; // injected this step (the attribution re-run sees it too)
  std::int64_t batch = 0;     // samples in the batch
  // From the step's one read:
  double loss = 0.0;
  double z_term = 0.0;
  std::int64_t correct = 0;
  double sum_squares = 0.0;
  std::int64_t nonfinite = 0;  // inf/NaN values among the unscaled gradients
  bool overflow = false;
  // From the update:
  double grad_norm = 0.0;
  double lr = 0.0;
  bool taken = false;  // the optimizer stepped (no skip)
  StepInspection inspection;
};

}  // namespace engine
