// Flatten layer: [N, d1, d2, ...] -> [N, d1*d2*...], a reshape.
#pragma once

#include <memory>
#include <string>

#include "nn/layer.h"

namespace engine {

// The values are copied unchanged (same bytes, same format): a reshape does
// no arithmetic, so no rounding happens here whatever precision() says. In a
// Model, a Flatten whose next layer casts its input first writes that cast
// instead of the copy (Flatten::forward_cast_for; the same bits).
void flatten_forward(Backend& be, const Tensor& x, Tensor& y);
// dx gets dy's values in dy's format with x's shape.
void flatten_backward(Backend& be, const Tensor& dy, const Shape& x_shape, Tensor& dx);

// Saves only the input shape (0 bytes).
struct FlattenContext : Context {
  Shape x_shape;
  std::size_t bytes() const override { return 0; }
};

// Trainer thread only.
class Flatten : public Layer {
 public:
  explicit Flatten(std::string name) : Layer(std::move(name)) {}

  const char* kind() const override { return "flatten"; }
  Shape output_shape(const Shape& in) const override;
  std::unique_ptr<Context> make_context() const override;
  void forward(Backend& be, const Tensor& x, Tensor& y, Context& ctx) override;
  void backward(Backend& be, const Tensor& dy, Tensor* dx, Context& ctx) override;
  // forward() with an FP32 input written as the next layer's cast
  // (Layer::input_cast says it: a rounding, or round_scaled's encode and
  // amax) in the copy's pass. Other inputs: false, nothing done.
  bool forward_cast_for(Backend& be, const Tensor& x, Tensor& y, Context& ctx, const InputCast& c) override;
};

}  // namespace engine
