// Pointwise layers' shared frame: y = f(x) elementwise, saving x for f'.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "nn/layer.h"

namespace engine {

struct CastOptions;

// What a pointwise layer saves: its input in the compute format (the
// caller's tensor when it already was, else an owned copy).
struct PointwiseContext : Context {
  const Tensor* x = nullptr;
  Tensor x_compute;
  std::size_t bytes() const override { return x ? x->bytes() : 0; }
};

// Any shape in, the same shape out. The caller keeps x alive until backward.
// Subclasses supply the f32 math (ReLU, GELU). Trainer thread only.
class PointwiseLayer : public Layer {
 public:
  using Layer::Layer;

  Shape output_shape(const Shape& in) const override;
  std::unique_ptr<Context> make_context() const override;
  void forward(Backend& be, const Tensor& x, Tensor& y, Context& ctx) override;
  void backward(Backend& be, const Tensor& dy, Tensor* dx, Context& ctx) override;
  // Layer::forward_cast_for where `c` is FP8's delayed-scaled cast (c.amax
  // set) and the layer has a backend op for it (forward_encode): the codes
  // into y, y's f32 values never stored. FP32 layers only, without
  // non-finite attribution.
  bool forward_cast_for(Backend& be, const Tensor& x, Tensor& y, Context& ctx, const InputCast& c) override;

 protected:
  // The backend op that writes f(x)'s delayed-scaled FP8 cast in one pass
  // (fused::gelu_forward_encode, relu_forward_encode), or null.
  using ForwardEncode = void (*)(Backend&, const float*, std::int64_t, float, Format, void*, const CastOptions&, float*,
                                 float*);
  virtual ForwardEncode forward_encode() const { return nullptr; }
  virtual void apply_forward(Backend& be, const float* x, float* y, std::int64_t n) = 0;
  virtual void apply_backward(Backend& be, const float* x, const float* dy, float* dx, std::int64_t n) = 0;
  // A layer whose f keeps x or gives 0 by x's sign (ReLU) may work on the
  // stored 16-bit patterns directly when input, output and gradient are all
  // in one 16-bit format: the same bits as decode, f32 math, encode, without
  // the three passes. Returns false where it does not apply.
  virtual bool forward_bits(Backend& /*be*/, const Tensor& /*x*/, Tensor& /*y*/) { return false; }
  virtual bool backward_bits(Backend& /*be*/, const Tensor& /*x*/, const Tensor& /*dy*/, Tensor& /*dx*/) { return false; }
  // FP32 x and dx with dy stored as codes of another format (FP16, BF16 or
  // unscaled FP8): a layer may decode dy as its f32 math reads it. Returns
  // false where it does not apply.
  virtual bool backward_coded_dy(Backend& /*be*/, const Tensor& /*x*/, const Tensor& /*dy*/, Tensor& /*dx*/) {
    return false;
  }

  // The f32 scratch of the generic path (a bits op may hand it to a
  // backend default that decodes into it).
  Tensor m_x32, m_y32, m_dy32, m_dx32;

 private:
  std::size_t workspace_bytes() const override {
    return tensors_bytes({&m_x32, &m_y32, &m_dy32, &m_dx32});
  }
};

}  // namespace engine
