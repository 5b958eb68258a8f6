// CpuBackend::run_fused: every fused op reaches the CPU's own pass for it.
#include <type_traits>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/kernels.h"

namespace engine {

bool CpuBackend::run_fused(const FusedOp& op) {
  using namespace fused;
  if (!m_fast_fused) return false;
  return std::visit(
      [this](const auto& o) -> bool {
        using Op = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<Op, ScaleAmaxEncodeOp>) {
          scale_amax_encode(o.x, o.scale, o.f, o.q, o.n, o.opt, o.amax, o.scratch);
        } else if constexpr (std::is_same_v<Op, ScaleAmaxEncode16Op>) {
          scale_amax_encode16(o.from, o.x, o.scale, o.f, o.q, o.n, o.opt, o.amax, o.scratch);
        } else if constexpr (std::is_same_v<Op, ScaleAmaxEncodeSumsOp>) {
          scale_amax_encode_sums(o.from, o.x, o.rows, o.cols, o.scale, o.f, o.q, o.opt, o.amax, o.db, o.scratch);
        } else if constexpr (std::is_same_v<Op, ScaleAmaxEncodePlanesOp>) {
          scale_amax_encode_planes(o.x, o.n, o.c, o.hw, o.scale, o.f, o.q, o.opt, o.amax, o.decoded, o.db,
                                   o.scratch);
        } else if constexpr (std::is_same_v<Op, UnscaleGradsCodedOp>) {
          unscale_grads_coded(o.grads, o.codes, o.count, o.inv_scale, o.sum_squares);
        } else if constexpr (std::is_same_v<Op, SgdUpdateEncodeOp>) {
          sgd_update_encode(o.u, o.e);
        } else if constexpr (std::is_same_v<Op, SgdUpdateCodedOp>) {
          sgd_update_coded(o.u, o.e);
        } else if constexpr (std::is_same_v<Op, GemmEncodeOp>) {
          gemm_encode(o.args, o.e);
        } else if constexpr (std::is_same_v<Op, AttentionForwardOp>) {
          return attention_forward(o.a);
        } else if constexpr (std::is_same_v<Op, AttentionBackwardOp>) {
          return attention_backward(o.a);
        } else if constexpr (std::is_same_v<Op, Conv2dForwardCodedOp>) {
          return conv2d_forward_coded(o.s, o.compute, o.x, o.w, o.bias, o.y);
        } else if constexpr (std::is_same_v<Op, Conv2dBackwardDataCodedOp>) {
          return conv2d_backward_data_coded(o.s, o.compute, o.dy, o.w, o.dx);
        } else if constexpr (std::is_same_v<Op, Conv2dBackwardWeightsCodedOp>) {
          return conv2d_backward_weights_coded(o.s, o.compute, o.x, o.dy, o.dw, o.db);
        } else if constexpr (std::is_same_v<Op, ScaleBiasAddChannelsOp>) {
          scale_bias_add_channels(o.y, o.alpha, o.bias, o.n, o.c, o.hw);
        } else if constexpr (std::is_same_v<Op, MaxPoolForward16Op>) {
          maxpool2d_forward16(o.f, o.n, o.c, o.h, o.w, o.k, o.x, o.y, o.argmax, o.x32, o.y32);
        } else if constexpr (std::is_same_v<Op, Gelu16ForwardOp>) {
          gelu16_forward(o.f, o.x, o.y, o.n, o.sx, o.sy);
        } else if constexpr (std::is_same_v<Op, Gelu16BackwardOp>) {
          gelu16_backward(o.f, o.x, o.g, o.dy, o.dx, o.n, o.sx, o.sdy, o.sdx);
        } else if constexpr (std::is_same_v<Op, ActivationBackwardCodedOp>) {
          if (o.act == Activation::Gelu) gelu_backward_coded(o.x, o.g, o.dy, o.dx, o.n, o.sdy);
          else relu_backward_coded(o.x, o.g, o.dy, o.dx, o.n, o.sdy);
        } else if constexpr (std::is_same_v<Op, ActivationForwardEncodeOp>) {
          if (o.act == Activation::Gelu) gelu_forward_encode(o.x, o.n, o.scale, o.f, o.q, o.opt, o.amax, o.scratch);
          else relu_forward_encode(o.x, o.n, o.scale, o.f, o.q, o.opt, o.amax, o.scratch);
        } else if constexpr (std::is_same_v<Op, AddEncodeOp>) {
          add_encode(o.fa, o.a, o.fb, o.b, o.fy, o.y, o.n, o.opt, o.sa, o.sb, o.sy);
        } else if constexpr (std::is_same_v<Op, ColumnSums16Op>) {
          column_sums16(o.f, o.dy, o.rows, o.cols, o.db, o.scratch);
        } else if constexpr (std::is_same_v<Op, LayerNormCodedForwardOp>) {
          layernorm_coded_forward(o.fx, o.x, o.gamma, o.beta, o.fy, o.y, o.mean, o.rstd, o.rows, o.cols, o.eps, o.opt,
                                  o.sx, o.sy);
        } else if constexpr (std::is_same_v<Op, LayerNormCodedBackwardOp>) {
          layernorm_coded_backward(o.fdy, o.dy, o.fx, o.x, o.mean, o.rstd, o.gamma, o.fdx, o.dx, o.dgamma, o.dbeta,
                                   o.rows, o.cols, o.sdy, o.sx, o.sdx);
        } else if constexpr (std::is_same_v<Op, LayerNormBackwardAddOp>) {
          layernorm_backward_add(o.fdy, o.dy, o.fx, o.x, o.mean, o.rstd, o.gamma, o.r, o.dx, o.fc, o.codes, o.dgamma,
                                 o.dbeta, o.rows, o.cols, o.sdy, o.sx);
        } else if constexpr (std::is_same_v<Op, SoftmaxCodedForwardOp>) {
          softmax_coded_forward(o.fx, o.x, o.y, o.rows, o.cols, o.sx);
        } else if constexpr (std::is_same_v<Op, SoftmaxCodedBackwardOp>) {
          softmax_coded_backward(o.y, o.fdy, o.dy, o.dx, o.rows, o.cols, o.sdy);
        } else if constexpr (std::is_same_v<Op, CausalZeroOp>) {
          use_threads();
          cpu::causal_zero(o.x, o.rows, o.T);
        } else if constexpr (std::is_same_v<Op, CopyColumnsOp>) {
          use_threads();
          cpu::copy_columns(o.src, o.src_ld, o.dst, o.dst_ld, o.rows, o.cols);
        } else if constexpr (std::is_same_v<Op, CausalSoftmaxOp>) {
          use_threads();
          cpu::causal_softmax(o.pass == Pass::Forward, o.in, o.dy, o.out, o.rows, o.T, o.accumulate);
        } else {
          static_assert(!sizeof(Op), "a fused op the CPU backend does not dispatch");
        }
        return true;
      },
      op.op);
}

// The merged core ops, each to the CPU's op for its pass or kind.

void CpuBackend::transfer(Transfer dir, void* dst, const void* src, std::size_t bytes) {
  switch (dir) {
    case Transfer::Upload: upload(dst, src, bytes); break;
    case Transfer::Download: download(dst, src, bytes); break;
    case Transfer::Copy: copy(dst, src, bytes); break;
  }
}

void CpuBackend::conv2d(const ConvArgs& a) {
  switch (a.kind) {
    case ConvKind::Forward: conv2d_forward(a.shape, a.compute, a.a, a.b, a.bias, a.out); break;
    case ConvKind::BackwardData: conv2d_backward_data(a.shape, a.compute, a.a, a.b, a.out); break;
    case ConvKind::BackwardWeights: conv2d_backward_weights(a.shape, a.compute, a.a, a.b, a.out, a.db); break;
  }
}

void CpuBackend::maxpool2d(Pass pass, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                           const float* in, float* out, std::int32_t* argmax) {
  if (pass == Pass::Forward) maxpool2d_forward(n, c, h, w, k, in, out, argmax);
  else maxpool2d_backward(n, c, h, w, k, in, argmax, out);
}

void CpuBackend::activation_forward(Activation act, Format f, const void* x, void* y, std::int64_t n) {
  if (f != Format::FP32) {
    if (act != Activation::Relu) throw std::invalid_argument("activation_forward: GELU on codes is a fused op");
    relu16_forward(f, x, y, n);
  } else if (act == Activation::Relu) {
    relu_forward(static_cast<const float*>(x), static_cast<float*>(y), n);
  } else {
    gelu_forward(static_cast<const float*>(x), static_cast<float*>(y), n);
  }
}

void CpuBackend::activation_backward(Activation act, Format f, const void* x, Format g, const void* dy, void* dx,
                                     std::int64_t n) {
  if (f != Format::FP32) {
    if (act != Activation::Relu) throw std::invalid_argument("activation_backward: GELU on codes is a fused op");
    relu16_backward(f, x, g, dy, dx, n);
  } else if (act == Activation::Relu) {
    relu_backward(static_cast<const float*>(x), static_cast<const float*>(dy), static_cast<float*>(dx), n);
  } else {
    gelu_backward(static_cast<const float*>(x), static_cast<const float*>(dy), static_cast<float*>(dx), n);
  }
}

void CpuBackend::patch_layout(Pass pass, const float* src, float* dst, std::int64_t B, std::int64_t C, std::int64_t H,
                              std::int64_t W, std::int64_t p) {
  if (pass == Pass::Forward) patchify(src, dst, B, C, H, W, p);
  else unpatchify(src, dst, B, C, H, W, p);
}

void CpuBackend::layernorm(const LayerNormArgs& a) {
  if (a.pass == Pass::Forward)
    layernorm_forward(a.x, a.gamma, a.beta, a.y, a.mean, a.rstd, a.rows, a.cols, a.eps, a.accumulate);
  else
    layernorm_backward(a.dy, a.x, a.mean, a.rstd, a.gamma, a.dx, a.dgamma, a.dbeta, a.rows, a.cols);
}

void CpuBackend::softmax(Pass pass, const float* in, const float* dy, float* out, std::int64_t rows, std::int64_t cols,
                         Format accumulate) {
  if (pass == Pass::Forward) softmax_forward(in, out, rows, cols, accumulate);
  else softmax_backward(in, dy, out, rows, cols);
}

void CpuBackend::loss_forward(const LossArgs& a) {
  if (a.kind == LossKind::CrossEntropy)
    cross_entropy_forward(a.pred, a.labels, a.rows, a.cols, a.probs, a.loss, a.correct);
  else
    mse_forward(a.pred, a.target, a.rows * a.cols, a.loss);
}

void CpuBackend::loss_backward(const LossArgs& a) {
  if (a.kind == LossKind::CrossEntropy)
    cross_entropy_backward(a.probs, a.labels, a.rows, a.cols, a.scale, a.grad);
  else
    mse_backward(a.pred, a.target, a.rows * a.cols, a.scale, a.grad);
}

}  // namespace engine
