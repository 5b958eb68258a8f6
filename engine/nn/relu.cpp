// ReLU layer: the backend's elementwise kernels.
#include "nn/relu.h"

#include "backend/backend.h"

namespace engine {

void relu_forward(Backend& be, const float* x, float* y, std::int64_t n) { be.relu_forward(x, y, n); }

void relu_backward(Backend& be, const float* x, const float* dy, float* dx, std::int64_t n) {
  be.relu_backward(x, dy, dx, n);
}

}  // namespace engine
