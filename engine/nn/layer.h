// Layer: a forward/backward pair with an explicit context of saved activations.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "numeric/precision.h"
#include "nn/parameter.h"
#include "tensor/tensor.h"

namespace engine {

class Backend;

// What forward() saved for backward(): owned by the caller (the Model),
// created by the layer. bytes() is the saved-activation memory.
struct Context {
  virtual ~Context() = default;
  virtual std::size_t bytes() const = 0;
  // Bytes of saved copies that exist only because the CPU emulates a
  // format (block-quantized values kept in BF16/FP32 containers).
  virtual std::size_t emulation_bytes() const { return 0; }
};

// Non-finite values a layer saw in its last forward/backward (the overflow
// attribution of docs/numerics.md "What the numbers mean"). Counted only when Layer::track_nonfinite.
struct NonfiniteCounts {
  std::int64_t activation = 0;       // in the output of forward
  std::int64_t activation_grad = 0;  // in dx produced by backward
  std::int64_t weight_grad = 0;      // in this layer's parameter gradients
};
// The three counters, in this order, in a layer's backend buffer.
enum class NonfiniteSlot : int { Activation = 0, ActivationGrad = 1, WeightGrad = 2 };

class DelayedScale;

// A layer of the model. Called from the trainer thread only.
//
// Precision contract: forward rounds its input and weights to
// precision().compute (weights: Parameter::weight is already in it), runs the
// op with precision().accumulate, and writes y in precision().storage.
// backward rounds dy to precision().grad, writes dx in precision().grad and
// parameter gradients rounded to precision().grad and stored in grad's format.
// For FP32 everywhere this is plain FP32 training with no extra copies.
class Layer {
 public:
  explicit Layer(std::string name) : m_name(std::move(name)) {}
  virtual ~Layer() = default;

  const std::string& name() const { return m_name; }
  virtual const char* kind() const = 0;  // "linear", "conv2d", "layernorm", ...
  // Output shape for an input shape (batch first); throws std::invalid_argument
  // naming the layer when the input does not fit.
  virtual Shape output_shape(const Shape& in) const = 0;

  virtual std::unique_ptr<Context> make_context() const = 0;
  virtual void forward(Backend& be, const Tensor& x, Tensor& y, Context& ctx) = 0;
  // dx == nullptr: the input gradient is not needed (first layer).
  virtual void backward(Backend& be, const Tensor& dy, Tensor* dx, Context& ctx) = 0;

  virtual std::vector<Parameter*> parameters() { return {}; }
  // The cast this layer makes first of an FP32 input of shape x, which a
  // layer before it that only moves values (Flatten) may write instead, the
  // same bits, one pass fewer: true, with `c` filled for this forward,
  // where there is one. Either a rounding to FP16/BF16 (amax null; the
  // layer then takes the codes through forward(), as they are), or FP8's
  // delayed-scaled cast (saturating encode of x * scale, max |x| into amax;
  // the layer then takes the codes through forward_cast()).
  struct InputCast {
    Format format = Format::FP32;
    bool saturate = false;     // the rounding's (the FP8 cast always saturates)
    float scale = 1.0f;
    float* amax = nullptr;     // backend memory
    float* scratch = nullptr;  // x's numel floats: the FP8 cast's scratch (Backend::scale_amax_encode)
  };
  virtual bool input_cast(const Shape& /*x*/, InputCast& /*c*/) { return false; }
  // forward() from the input cast as input_cast() said with an amax (codes
  // of the input's shape, kept alive by the caller until backward).
  virtual void forward_cast(Backend& /*be*/, const Tensor& /*codes*/, float /*scale*/, Tensor& /*y*/,
                            Context& /*ctx*/) {
    throw std::logic_error(name() + ": forward_cast without an input cast");
  }
  // forward() with its output written as the next layer's input cast `c`
  // (its input_cast()), the same bits as forward() and that cast in one
  // pass: true where this layer does it (Flatten, GELU), the next layer
  // then taking y through forward() (a rounding) or forward_cast() (c.amax
  // set); false, nothing done, where not: call forward().
  virtual bool forward_cast_for(Backend& /*be*/, const Tensor& /*x*/, Tensor& /*y*/, Context& /*ctx*/,
                                const InputCast& /*c*/) {
    return false;
  }
  // Leaf layers for the precision table; a composite (a transformer block)
  // returns its children, a leaf returns {this}.
  virtual std::vector<Layer*> leaves() { return {this}; }
  // Whether the layer is a GEMM/conv layer (low precision under autocast) or
  // a norm/softmax/loss-side layer (kept FP32 by mixed recipes).
  virtual bool is_matmul() const { return false; }

  const LayerPrecision& precision() const { return m_precision; }
  virtual void set_precision(const LayerPrecision& p) { m_precision = p; }
  // Restarts the FP8 delayed scaling of this layer's activation operands (x
  // and dy: empty amax histories, scale 1) with these parameters; the AMP
  // code calls it whenever it sets the layer's precision. No-op for layers
  // without FP8 GEMMs.
  virtual void set_delayed_scaling(const DelayedScaling&) {}

  // Bytes of the layer's own scratch tensors (decode/encode copies the CPU
  // needs to emulate a format): memory accounting's `emulation`.
  virtual std::size_t workspace_bytes() const { return 0; }

  // Block-scaled gradient formats (NVFP4's recipe): dy is quantized with
  // stochastic rounding instead of round-to-nearest-even. Set by the AMP
  // code from the recipe's grad_rounding.
  bool stochastic_grads = false;

  // Overflow attribution: while on, the layer adds the non-finite counts of
  // what it produces to counters in backend memory (nonfinite_slot), read
  // with nonfinite_counts() only on the steps that need them.
  bool track_nonfinite = false;
  // Turns tracking on (counters allocated from current_backend() and
  // zeroed) or off.
  void set_track_nonfinite(bool on);
  std::int64_t* nonfinite_slot(NonfiniteSlot s) {
    return track_nonfinite && m_nonfinite.data() ? m_nonfinite.as<std::int64_t>() + static_cast<int>(s) : nullptr;
  }
  // Downloads the counters (zeros when not tracking): a host read.
  NonfiniteCounts nonfinite_counts() const;
  // The FP8 delayed scales of the layer's activation operands (x, dy, and
  // the GEMM weight's own without master weights): the step records their
  // pending amaxes with its one read.
  virtual std::vector<DelayedScale*> delayed_scales() { return {}; }
  // Statistics steps: when set, the caller of forward() keeps a copy of the
  // output as floats in captured_output (record_output() below, backend
  // memory), for the comparison with the FP32 shadow pass.
  bool capture_output = false;
  Tensor captured_output;
  // An injected fault (the robustness tests and lessons): when set, the
  // first value of the layer's output becomes fault_value (NaN or inf).
  bool fault_output = false;
  float fault_value = 0.0f;

 protected:
  LayerPrecision m_precision;

 private:
  std::string m_name;
  Buffer m_nonfinite;
};

// After l.forward(..., y, ...): keeps y's values when l.capture_output, and
// writes an injected fault into y. Called by whoever calls forward (the
// Model, composite layers).
void record_output(Backend& be, Layer& l, Tensor& y);

// An injected fault: element 0 of t becomes v (encoded on the host and
// uploaded: a write), counted in l's `slot` counter when l tracks them.
void inject_value(Backend& be, Layer& l, Tensor& t, float v, NonfiniteSlot slot);
// The same write without counting (weights, the loss gradient).
void write_first(Backend& be, Tensor& t, float v);

// Sum of the bytes of some scratch tensors (Layer::workspace_bytes).
std::size_t tensors_bytes(std::initializer_list<const Tensor*> tensors);

}  // namespace engine
