// The fused ops' portable compositions of core ops, and their dispatch.
#include "backend/fused.h"

#include <stdexcept>
#include <type_traits>

namespace engine::fused {

namespace {

// Each composition is the default body the op had as a Backend virtual:
// nested fused ops go back through run() so a backend's fast path for them
// is still taken.

bool compose_op(Backend& be, const ScaleAmaxEncodeOp& o) {
  be.scale_amax(o.x, o.scale, o.scratch, o.n, o.amax);
  be.convert(Format::FP32, o.scratch, o.f, o.q, o.n, o.opt);
  return true;
}

bool compose_op(Backend& be, const ScaleAmaxEncode16Op& o) {
  be.convert(o.from, o.x, Format::FP32, o.scratch, o.n, {});
  scale_amax_encode(be, o.scratch, o.scale, o.f, o.q, o.n, o.opt, o.amax, o.scratch);
  return true;
}

bool compose_op(Backend& be, const ScaleAmaxEncodeSumsOp& o) {
  if (o.from == Format::FP32) {
    const auto* x = static_cast<const float*>(o.x);
    scale_amax_encode(be, x, o.scale, o.f, o.q, o.rows * o.cols, o.opt, o.amax, o.scratch);
    be.column_sums(x, o.rows, o.cols, o.db);
    return true;
  }
  scale_amax_encode16(be, o.from, o.x, o.scale, o.f, o.q, o.rows * o.cols, o.opt, o.amax, o.scratch);
  column_sums16(be, o.from, o.x, o.rows, o.cols, o.db, o.scratch);
  return true;
}

bool compose_op(Backend& be, const ScaleAmaxEncodePlanesOp& o) {
  const std::int64_t size = o.n * o.c * o.hw;
  scale_amax_encode(be, o.x, o.scale, o.f, o.q, size, o.opt, o.amax, o.scratch);
  if (o.decoded) be.convert(o.f, o.q, Format::FP32, o.decoded, size, {});
  if (o.db) be.channel_sums(o.x, o.db, o.n, o.c, o.hw);
  return true;
}

bool compose_op(Backend& be, const UnscaleGradsCodedOp& o) {
  for (std::size_t k = 0; k < o.count; ++k)
    if (o.codes[k].data && o.grads[k].n > 0)
      be.convert(o.codes[k].format, o.codes[k].data, Format::FP32, o.grads[k].data, o.grads[k].n, {});
  be.unscale_grads(o.grads, o.count, o.inv_scale, o.sum_squares);
  return true;
}

bool compose_op(Backend& be, const SgdUpdateEncodeOp& o) {
  be.sgd_update(o.u);
  encode_updated(be, o.u.value, o.u.n, o.e);
  return true;
}

bool compose_op(Backend& be, const SgdUpdateCodedOp& o) {
  if (o.e.amax) throw std::logic_error("sgd_update_coded: scaled codes hold value * scale, not the values");
  if (o.u.n > 0) be.convert(o.e.format, o.e.codes, Format::FP32, o.u.value, o.u.n, {});
  sgd_update_encode(be, o.u, o.e);
  return true;
}

bool compose_op(Backend& be, const GemmEncodeOp& o) {
  be.gemm(o.args);
  if (o.args.m <= 0 || o.args.n <= 0) return true;
  if (o.e.codes) be.convert(Format::FP32, o.args.c, o.e.format, o.e.codes, o.args.m * o.args.n, o.e.opt);
  else be.quantize(o.e.format, o.args.c, o.args.m * o.args.n, o.e.opt.saturate);
  return true;
}

bool compose_op(Backend&, const AttentionForwardOp&) { return false; }
bool compose_op(Backend&, const AttentionBackwardOp&) { return false; }
bool compose_op(Backend&, const Conv2dForwardCodedOp&) { return false; }
bool compose_op(Backend&, const Conv2dBackwardDataCodedOp&) { return false; }
bool compose_op(Backend&, const Conv2dBackwardWeightsCodedOp&) { return false; }

bool compose_op(Backend& be, const ScaleBiasAddChannelsOp& o) {
  if (o.alpha != 1.0f) be.scale(o.y, o.alpha, o.n * o.c * o.hw);
  if (o.bias) be.bias_add_channels(o.y, o.bias, o.n, o.c, o.hw);
  return true;
}

bool compose_op(Backend& be, const MaxPoolForward16Op& o) {
  be.convert(o.f, o.x, Format::FP32, o.x32, o.n * o.c * o.h * o.w, {});
  be.maxpool2d_forward(o.n, o.c, o.h, o.w, o.k, o.x32, o.y32, o.argmax);
  be.convert(Format::FP32, o.y32, o.f, o.y, o.n * o.c * (o.h / o.k) * (o.w / o.k), {});
  return true;
}

bool compose_op(Backend& be, const Gelu16ForwardOp& o) {
  be.convert(o.f, o.x, Format::FP32, o.sx, o.n, {});
  be.gelu_forward(o.sx, o.sy, o.n);
  be.convert(Format::FP32, o.sy, o.f, o.y, o.n, {});
  return true;
}

bool compose_op(Backend& be, const Gelu16BackwardOp& o) {
  be.convert(o.f, o.x, Format::FP32, o.sx, o.n, {});
  be.convert(o.g, o.dy, Format::FP32, o.sdy, o.n, {});
  be.gelu_backward(o.sx, o.sdy, o.sdx, o.n);
  be.convert(Format::FP32, o.sdx, o.g, o.dx, o.n, {});
  return true;
}

bool compose_op(Backend& be, const ActivationBackwardCodedOp& o) {
  be.convert(o.g, o.dy, Format::FP32, o.sdy, o.n, {});
  be.activation_backward(o.act, Format::FP32, o.x, Format::FP32, o.sdy, o.dx, o.n);
  return true;
}

bool compose_op(Backend& be, const ActivationForwardEncodeOp& o) {
  be.activation_forward(o.act, Format::FP32, o.x, o.scratch, o.n);
  be.scale_amax(o.scratch, o.scale, o.scratch, o.n, o.amax);
  be.convert(Format::FP32, o.scratch, o.f, o.q, o.n, o.opt);
  return true;
}

bool compose_op(Backend& be, const AddEncodeOp& o) {
  be.convert(o.fa, o.a, Format::FP32, o.sa, o.n, {});
  be.convert(o.fb, o.b, Format::FP32, o.sb, o.n, {});
  be.add(o.sa, o.sb, o.sy, o.n);
  be.convert(Format::FP32, o.sy, o.fy, o.y, o.n, o.opt);
  return true;
}

bool compose_op(Backend& be, const ColumnSums16Op& o) {
  be.convert(o.f, o.dy, Format::FP32, o.scratch, o.rows * o.cols, {});
  be.column_sums(o.scratch, o.rows, o.cols, o.db);
  return true;
}

bool compose_op(Backend& be, const LayerNormCodedForwardOp& o) {
  const std::int64_t n = o.rows * o.cols;
  const float* xf = o.fx == Format::FP32 ? static_cast<const float*>(o.x) : o.sx;
  float* yf = o.fy == Format::FP32 ? static_cast<float*>(o.y) : o.sy;
  if (o.fx != Format::FP32) be.convert(o.fx, o.x, Format::FP32, o.sx, n, {});
  be.layernorm_forward(xf, o.gamma, o.beta, yf, o.mean, o.rstd, o.rows, o.cols, o.eps, Format::FP32);
  if (o.fy != Format::FP32) be.convert(Format::FP32, o.sy, o.fy, o.y, n, o.opt);
  return true;
}

bool compose_op(Backend& be, const LayerNormCodedBackwardOp& o) {
  const std::int64_t n = o.rows * o.cols;
  const float* dyf = o.fdy == Format::FP32 ? static_cast<const float*>(o.dy) : o.sdy;
  const float* xf = o.fx == Format::FP32 ? static_cast<const float*>(o.x) : o.sx;
  float* dxf = o.fdx == Format::FP32 ? static_cast<float*>(o.dx) : o.sdx;
  if (o.fdy != Format::FP32) be.convert(o.fdy, o.dy, Format::FP32, o.sdy, n, {});
  if (o.fx != Format::FP32) be.convert(o.fx, o.x, Format::FP32, o.sx, n, {});
  be.layernorm_backward(dyf, xf, o.mean, o.rstd, o.gamma, dxf, o.dgamma, o.dbeta, o.rows, o.cols);
  if (o.fdx != Format::FP32) be.convert(Format::FP32, o.sdx, o.fdx, o.dx, n, {});
  return true;
}

bool compose_op(Backend& be, const LayerNormBackwardAddOp& o) {
  layernorm_coded_backward(be, o.fdy, o.dy, o.fx, o.x, o.mean, o.rstd, o.gamma, Format::FP32, o.dx, o.dgamma,
                           o.dbeta, o.rows, o.cols, o.sdy, o.sx, nullptr);
  be.add(o.r, o.dx, o.dx, o.rows * o.cols);
  if (o.codes) be.convert(Format::FP32, o.dx, o.fc, o.codes, o.rows * o.cols, {});
  return true;
}

bool compose_op(Backend& be, const SoftmaxCodedForwardOp& o) {
  const float* xf = static_cast<const float*>(o.x);
  if (o.fx != Format::FP32) {
    be.convert(o.fx, o.x, Format::FP32, o.sx, o.rows * o.cols, {});
    xf = o.sx;
  }
  be.softmax_forward(xf, o.y, o.rows, o.cols, Format::FP32);
  return true;
}

bool compose_op(Backend& be, const SoftmaxCodedBackwardOp& o) {
  const float* dyf = static_cast<const float*>(o.dy);
  if (o.fdy != Format::FP32) {
    be.convert(o.fdy, o.dy, Format::FP32, o.sdy, o.rows * o.cols, {});
    dyf = o.sdy;
  }
  be.softmax_backward(o.y, dyf, o.dx, o.rows, o.cols);
  return true;
}

// Row by row: one core call per row (a backend with the op does better).
bool compose_op(Backend& be, const CausalZeroOp& o) {
  for (std::int64_t r = 0; r < o.rows; ++r) {
    const std::int64_t seen = r % o.T + 1;
    if (seen < o.T) be.fill_zero(o.x + r * o.T + seen, static_cast<std::size_t>(o.T - seen) * sizeof(float));
  }
  return true;
}

bool compose_op(Backend& be, const CausalSoftmaxOp& o) {
  for (std::int64_t r = 0; r < o.rows; ++r) {
    const std::int64_t seen = r % o.T + 1;
    be.softmax(o.pass, o.in + r * o.T, o.dy ? o.dy + r * o.T : nullptr, o.out + r * o.T, 1, seen, o.accumulate);
    if (seen < o.T) be.fill_zero(o.out + r * o.T + seen, static_cast<std::size_t>(o.T - seen) * sizeof(float));
  }
  return true;
}

bool compose_op(Backend& be, const CopyColumnsOp& o) {
  if (o.cols <= 0) return true;
  for (std::int64_t r = 0; r < o.rows; ++r)
    be.copy(o.dst + r * o.dst_ld, o.src + r * o.src_ld, static_cast<std::size_t>(o.cols) * sizeof(float));
  return true;
}

}  // namespace

bool compose(Backend& be, const FusedOp& op) {
  return std::visit([&be](const auto& o) { return compose_op(be, o); }, op.op);
}

void run(Backend& be, const FusedOp& op) {
  if (!be.run_fused(op)) compose(be, op);
}

void encode_updated(Backend& be, const float* value, std::int64_t n, const UpdateEncode& e) {
  if (n <= 0) return;
  if (e.amax) scale_amax_encode(be, value, e.scale, e.format, e.codes, n, e.opt, e.amax, e.scratch);
  else be.convert(Format::FP32, value, e.format, e.codes, n, e.opt);
}

bool attention_forward(Backend& be, const AttentionForward& a) { return be.run_fused(FusedOp{AttentionForwardOp{a}}); }
bool attention_backward(Backend& be, const AttentionBackward& a) {
  return be.run_fused(FusedOp{AttentionBackwardOp{a}});
}
bool conv2d_forward_coded(Backend& be, const ConvShape& s, Format compute, ConvInput x, const float* w,
                          const float* bias, float* y) {
  return be.run_fused(FusedOp{Conv2dForwardCodedOp{s, compute, x, w, bias, y}});
}
bool conv2d_backward_data_coded(Backend& be, const ConvShape& s, Format compute, ConvInput dy, const float* w,
                                float* dx) {
  return be.run_fused(FusedOp{Conv2dBackwardDataCodedOp{s, compute, dy, w, dx}});
}
bool conv2d_backward_weights_coded(Backend& be, const ConvShape& s, Format compute, ConvInput x, ConvInput dy,
                                   float* dw, float* db) {
  return be.run_fused(FusedOp{Conv2dBackwardWeightsCodedOp{s, compute, x, dy, dw, db}});
}

}  // namespace engine::fused
