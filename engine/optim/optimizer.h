// Optimizer: the interface SGD and Adam/AdamW share, state storage format, factory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "numeric/format.h"
#include "optim/param_slot.h"
#include "tensor/tensor.h"

namespace engine {

class Backend;

// Updates parameter spans (backend memory) in place, through the backend's
// sgd_update / adam_update. State (momentum, exp_avg, exp_avg_sq) is
// kept per slot in an FP32 container and, for a state format other than
// FP32, rounded (RNE, engine::quantize_inplace) to that format after every
// update and *before* it is used, as a state tensor stored in that format
// would be. state_bytes() counts the format's storage width (2 bytes for
// BF16/FP16), which is what the memory chart shows.
//
// Threading: one thread at a time per instance (the training thread).
// step() allocates the state on the first call only; later calls are
// allocation-free. Spans of >= 64k elements are updated by OpenMP threads.
class Optimizer {
 public:
  explicit Optimizer(Format state_format);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual const char* name() const = 0;  // "sgd", "adam", "adamw"

  // One update of every slot with learning rate lr. The slots must have the
  // same count and sizes on every call (their pointers may change); a
  // different layout throws std::invalid_argument: call reset() first.
  void step(Backend& be, std::span<const ParamSlot> slots, double lr);

  std::int64_t step_count() const { return m_step; }  // completed steps
  // Forget all state and the step count (a new model, or a restart).
  void reset();

  Format state_format() const { return m_format; }
  // Changes the storage format; existing state is rounded to it now.
  void set_state_format(Format f);

  // State buffers per parameter element (SGD: 1 with momentum, else 0; Adam: 2).
  virtual std::size_t state_buffers() const = 0;
  // Bytes of state for `params` parameter elements in the current format
  // (the memory chart can show it before the first step).
  std::size_t state_bytes_for(std::size_t params) const {
    return params * state_buffers() * storage_bytes(m_format);
  }
  // Bytes of the state allocated so far (0 before the first step).
  std::size_t state_bytes() const;

  // State buffer `buffer` (< state_buffers()) of slot `slot`, downloaded,
  // for inspection and tests; empty before the first step.
  std::vector<float> state(std::size_t slot, std::size_t buffer) const;

 protected:
  // t: 1 on the first step. m_state[slot * state_buffers() + buffer] has been
  // allocated (zeros) to the slot sizes.
  virtual void update(Backend& be, std::span<const ParamSlot> slots, double lr, std::int64_t t) = 0;
  float* state_data(std::size_t slot, std::size_t buffer) {
    return m_state[slot * state_buffers() + buffer].f32();
  }

 private:
  Format m_format;
  std::int64_t m_step = 0;
  std::vector<std::size_t> m_sizes;
  std::vector<Tensor> m_state;  // FP32 containers holding state_format values
};

enum class OptimizerKind : std::uint8_t { SGD, Adam, AdamW };
// "sgd", "adam", "adamw"
std::optional<OptimizerKind> parse_optimizer_kind(std::string_view s);
const char* optimizer_key(OptimizerKind k);

// torch.optim.SGD's parameters and defaults (lr is passed to step()).
struct SgdOptions {
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;  // L2: wd * p added to the gradient
  bool nesterov = false;      // needs momentum > 0 and dampening == 0
};

// torch.optim.Adam's parameters and defaults. For AdamW PyTorch's default
// weight_decay is 1e-2 (kAdamWDefaultWeightDecay); here it is whatever is set.
struct AdamOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};
inline constexpr double kAdamWDefaultWeightDecay = 1e-2;

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::SGD;
  SgdOptions sgd;
  AdamOptions adam;  // Adam and AdamW
  Format state_format = Format::FP32;
};

// Throws std::invalid_argument naming the field (e.g. "sgd.momentum: ...")
// for out-of-range values. Any thread.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config);

}  // namespace engine
