// Losses on the backend's loss kernels, with format handling at both ends.
#include "nn/loss.h"

#include <cstring>
#include <stdexcept>

#include "backend/backend.h"
#include "nn/layer_io.h"

namespace engine {

namespace {

void check_rank2(const Tensor& t, const char* what) {
  if (t.rank() != 2 || t.dim(0) < 1 || t.dim(1) < 1)
    throw_shape(what, "expects [rows, columns]", t.shape());
}

}  // namespace

double cross_entropy_loss(Backend& be, const Tensor& logits, const std::int32_t* labels, float scale,
                          Tensor* dlogits, LossWorkspace& ws, std::int64_t* correct, Format grad_format) {
  check_rank2(logits, "cross-entropy loss");
  const std::int64_t rows = logits.dim(0), classes = logits.dim(1);
  const float* lf = f32_values(be, logits, ws.pred_f32);
  ws.probs.resize(logits.shape(), Format::FP32);
  ws.result.reserve(2 * sizeof(double));
  auto* r = ws.result.as<double>();
  be.cross_entropy_forward(lf, labels, rows, classes, ws.probs.f32(), r, reinterpret_cast<std::int64_t*>(r + 1));
  if (dlogits) {
    float* g = output_begin(*dlogits, logits.shape(), grad_format, ws.grad_f32);
    be.cross_entropy_backward(ws.probs.f32(), labels, rows, classes, scale, g);
    output_end(be, *dlogits, grad_format, ws.grad_f32, false, nullptr);
  }
  double out[2];
  ws.result.download(out, sizeof out);
  if (correct) std::memcpy(correct, &out[1], sizeof *correct);
  return out[0];
}

double mse_loss(Backend& be, const Tensor& pred, const float* target, float scale, Tensor* dpred,
                LossWorkspace& ws, Format grad_format) {
  check_rank2(pred, "mse loss");
  const float* pf = f32_values(be, pred, ws.pred_f32);
  ws.result.reserve(2 * sizeof(double));
  be.mse_forward(pf, target, pred.numel(), ws.result.as<double>());
  if (dpred) {
    float* g = output_begin(*dpred, pred.shape(), grad_format, ws.grad_f32);
    be.mse_backward(pf, target, pred.numel(), scale, g);
    output_end(be, *dpred, grad_format, ws.grad_f32, false, nullptr);
  }
  double loss = 0.0;
  ws.result.download(&loss, sizeof loss);
  return loss;
}

}  // namespace engine
