// ParamSlot: one parameter tensor as the optimizers see it (plain float spans).
#pragma once

#include <cstddef>

namespace engine {

struct UpdateEncode;

// value: the weights the update writes (FP32 master weights, or low-precision
// weights decoded to float and re-encoded by the caller afterwards).
// grad: the matching gradient, already unscaled (and clipped). decay=false
// exempts the tensor from weight decay (biases, norm gains), as a PyTorch
// param group with weight_decay=0 would. encode, when set, is the copy the
// update writes of the new values (Backend::sgd_update_encode): the caller
// need not encode them afterwards; with value_in_codes it is also where the
// values to update are read.
struct ParamSlot {
  float* value = nullptr;
  const float* grad = nullptr;
  std::size_t n = 0;
  bool decay = true;
  const UpdateEncode* encode = nullptr;
  // The weights live only as encode's codes (FP16 weights without a master
  // copy): value is scratch that the update first fills with their decode
  // (Backend::sgd_update_coded).
  bool value_in_codes = false;
};

}  // namespace engine
