// Losses: softmax cross-entropy and mean squared error, with the loss scale in the gradient.
#pragma once

#include <cstdint>

#include "numeric/format.h"
#include "tensor/tensor.h"

namespace engine {

class Backend;

// Reused buffers of the loss functions (decoded predictions, probabilities).
struct LossWorkspace {
  Tensor pred_f32;
  Tensor probs;
  Tensor grad_f32;
  Buffer result;  // the loss (double) and the correct count (int64), read back
};

// Mean softmax cross-entropy of logits [rows, classes] (any format; decoded
// exactly) against integer labels, computed in FP32 with the sum in double.
// When dlogits is non-null it receives (softmax - onehot) * scale / rows,
// rounded to and stored in `grad_format` (FP32 by default): `scale` carries
// the loss scale, so an FP16 gradient overflows exactly where a scaled FP16
// backward would. `correct` (optional) gets the count of rows whose argmax
// is the label. Labels must lie in [0, classes) (checked by the data layer).
// The loss (and `correct`) are read back from the backend: one download per
// call (the training step does not use these; it reads once per step).
// Trainer thread only.
double cross_entropy_loss(Backend& be, const Tensor& logits, const std::int32_t* labels, float scale,
                          Tensor* dlogits, LossWorkspace& ws, std::int64_t* correct = nullptr,
                          Format grad_format = Format::FP32);

// Mean squared error over all elements of pred [rows, cols] (any format)
// against target (rows*cols floats). dpred (optional) receives
// 2 (pred - target) * scale / n in `grad_format`.
double mse_loss(Backend& be, const Tensor& pred, const float* target, float scale, Tensor* dpred,
                LossWorkspace& ws, Format grad_format = Format::FP32);

}  // namespace engine
