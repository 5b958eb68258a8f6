// GELU layer: the backend's elementwise kernels.
#include "nn/gelu.h"

#include "backend/backend.h"

namespace engine {

void gelu_forward(Backend& be, const float* x, float* y, std::int64_t n) { be.gelu_forward(x, y, n); }

void gelu_backward(Backend& be, const float* x, const float* dy, float* dx, std::int64_t n) {
  be.gelu_backward(x, dy, dx, n);
}

}  // namespace engine
