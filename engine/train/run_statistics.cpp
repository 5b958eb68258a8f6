// Run's measuring phases: overflow attribution, gradient statistics against
// an FP32 shadow pass, and the step inspector's per-layer view.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "data/dataset.h"
#include "nn/layer.h"
#include "numeric/block.h"
#include "numeric/inspect.h"
#include "train/build_model.h"
#include "train/run.h"
#include "train/run_state.h"

namespace engine {

namespace {

// The explorer's live block of one parameter (LayerInspection::weight_block).
void inspect_block(const Parameter& p, const float* grad, std::size_t n, LayerInspection& li) {
  std::vector<float> w = p.has_master() ? p.master.to_f32() : p.weight.to_f32();
  if (p.weight_scale != 1.0f)
    for (float& v : w) v /= p.weight_scale;
  if (w.size() != n || n == 0) return;
  std::size_t arg = 0;
  for (std::size_t k = 0; k < n; ++k) {
    li.weight_amax = std::max(li.weight_amax, static_cast<double>(std::fabs(w[k])));
    li.grad_amax = std::max(li.grad_amax, static_cast<double>(std::fabs(grad[k])));
    if (std::fabs(w[k]) > std::fabs(w[arg])) arg = k;
  }
  // The aligned run of 64 (two MX blocks, four NVFP4 blocks) along the row
  // (everything after the first dimension: a GEMM weight's reduction
  // dimension) holding arg.
  const std::size_t row = p.shape.size() < 2 ? n : n / static_cast<std::size_t>(p.shape.front());
  const std::size_t row_start = arg / row * row;
  const std::size_t start = row_start + (arg - row_start) / 64 * 64;
  const std::size_t end = std::min(start + 64, row_start + row);
  li.weight_block.assign(w.begin() + static_cast<std::ptrdiff_t>(start), w.begin() + static_cast<std::ptrdiff_t>(end));
  li.grad_block.assign(grad + start, grad + end);
}

}  // namespace

void Run::attribute_overflow(const StepState& st, std::vector<Record>& out) {
  // Per-layer counting costs a pass over every activation and gradient, so
  // it runs only on steps that overflowed. The step is recomputed with
  // counting on (same batch, same weights, same scale, so the same values)
  // and its gradients unscaled again.
  const std::int64_t step = st.number;
  m_model->set_track_nonfinite(true);
  forward_backward(st);
  // Backward order: the first row of a step is the first layer whose
  // gradients went non-finite as backward ran.
  // (Overflow steps only: one read of each leaf's counters.)
  std::vector<Layer*> leaves = m_model->leaves();
  std::vector<NonfiniteCounts> counts;
  for (Layer* l : leaves) counts.push_back(l->nonfinite_counts());
  for (std::size_t k = leaves.size(); k-- > 0;) {
    const NonfiniteCounts& c = counts[k];
    auto overflow = [&](const char* tensor, std::int64_t n) {
      if (n > 0) emit(Event{m_id, step, EventKind::Overflow, leaves[k]->name(), tensor, n}, out);
    };
    overflow("activation_grad", c.activation_grad);
    overflow("weight_grad", c.weight_grad);
  }
  // Forward activations that overflowed (in forward order).
  for (std::size_t k = 0; k < leaves.size(); ++k)
    if (counts[k].activation > 0)
      emit(Event{m_id, step, EventKind::Overflow, leaves[k]->name(), "activation", counts[k].activation}, out);
  if (!st.inspect) m_model->set_track_nonfinite(false);
  m_impl->scaler.unscale_again(m_backend, m_impl->grads);
}

void Run::measure(StepState& st, std::vector<Record>& out) {
  const std::size_t first_stats = m_history.grads.size();
  gradient_statistics(st.number, st.loss_scale, out);
  m_model->set_capture_outputs(false);
  if (st.inspect) {
    st.inspection = inspect_layers(first_stats);
    m_model->set_track_nonfinite(false);
  }
}

// Per leaf: the non-finite counts of this step, the underflow the
// statistics measured (GradStats from first_stats on), and the largest
// unscaled weight gradient.
StepInspection Run::inspect_layers(std::size_t first_stats) {
  const GradSet& grads = m_impl->grads;
  const std::size_t P = grads.size();
  StepInspection inspection;
  inspection.layers.reserve(m_model->leaves().size());
  std::size_t pi = 0;
  for (Layer* l : m_model->leaves()) {
    LayerInspection li;
    li.layer = l->name();
    li.grad_format = format_name(l->precision().grad);
    const NonfiniteCounts c = l->nonfinite_counts();
    li.nonfinite_activation = c.activation;
    li.nonfinite_activation_grad = c.activation_grad;
    li.nonfinite_weight_grad = c.weight_grad;
    bool first = true;
    for (Parameter* p : l->parameters()) {
      li.has_weights = true;
      while (pi < P && &grads.param(pi) != p) ++pi;
      if (pi >= P) break;
      std::vector<float> g(static_cast<std::size_t>(grads.numel(pi)));
      m_backend.download(g.data(), grads.values(pi), g.size() * sizeof(float));
      for (float v : g) li.max_abs_grad = std::max(li.max_abs_grad, static_cast<double>(std::fabs(v)));
      if (first) {
        first = false;
        inspect_block(*p, g.data(), g.size(), li);
      }
    }
    for (std::size_t k = first_stats; k < m_history.grads.size(); ++k)
      if (m_history.grads[k].layer == li.layer) li.underflow = m_history.grads[k].underflow_scaled;
    inspection.layers.push_back(std::move(li));
  }
  return inspection;
}

bool Run::shadow_pass() {
  Impl& s = *m_impl;
  Backend& be = m_backend;
  bool low = false;
  for (Layer* l : m_model->leaves()) low = low || !l->precision().is_fp32();
  if (!low) return false;
  const Dataset& train = m_data->train;
  if (!s.shadow) {
    // The same architecture, all FP32 (no master copies, no FP8 scaling).
    s.shadow = build_model(m_config, s.sample_shape, s.outputs);
    s.shadow->set_precision(LayerPrecision{});
  }
  // The weights as exact arithmetic has them: the FP32 master copy where the
  // recipe keeps one, else the stored weights decoded (and unscaled for FP8).
  std::vector<Parameter*> mine = m_model->parameters();
  std::vector<Parameter*> ref = s.shadow->parameters();
  for (std::size_t i = 0; i < mine.size() && i < ref.size(); ++i) {
    Parameter& p = *mine[i];
    float* dst = ref[i]->weight.f32();
    const std::int64_t n = p.numel();
    if (p.has_master()) {
      be.copy(dst, p.master.f32(), static_cast<std::size_t>(n) * sizeof(float));
    } else {
      be.convert(p.weight.format(), p.weight.data(), Format::FP32, dst, n, {});
      if (p.weight_scale != 1.0f) be.scale(dst, 1.0f / p.weight_scale, n);
    }
  }
  s.shadow->set_capture_outputs(true);
  const Tensor& logits = s.shadow->forward(be, s.x);
  // A language model's logits are [B, T, V]: B * T rows of V.
  const std::int64_t B = logits.numel() / s.outputs;
  s.shadow_dlogits.resize(logits.shape(), Format::FP32);
  // The shadow's loss is not read: it lands in the results buffer's scratch slot.
  auto* loss = reinterpret_cast<double*>(s.results.as<std::int64_t>() + kLossSlot);
  if (train.is_classification()) {
    s.shadow_probs.resize({B, s.outputs}, Format::FP32);
    be.cross_entropy_forward(logits.f32(), s.labels.as<std::int32_t>(), B, s.outputs, s.shadow_probs.f32(), loss,
                             nullptr);
    be.cross_entropy_backward(s.shadow_probs.f32(), s.labels.as<std::int32_t>(), B, s.outputs, 1.0f,
                              s.shadow_dlogits.f32());
  } else {
    be.mse_forward(logits.f32(), s.targets.f32(), B * s.outputs, loss);
    be.mse_backward(logits.f32(), s.targets.f32(), B * s.outputs, 1.0f, s.shadow_dlogits.f32());
  }
  s.shadow->backward(be, s.shadow_dlogits);
  return true;
}

namespace {

// ||a - b|| / ||b|| from Backend::error_sums' three sums (0 when both are
// zero; inf when only b is), and <a - b, b> / ||b||^2: the error's
// component along b, relative to b.
double relative_error(const double* e) {
  if (e[0] == 0.0) return 0.0;
  return e[1] > 0.0 ? std::sqrt(e[0] / e[1]) : std::numeric_limits<double>::infinity();
}
double error_bias(const double* e) { return e[1] > 0.0 && std::isfinite(e[2]) ? e[2] / e[1] : 0.0; }

}  // namespace

void Run::gradient_statistics(std::int64_t step, float loss_scale, std::vector<Record>& out) {
  // Statistics steps: every per-layer figure is computed by the backend
  // into one buffer and read once.
  Impl& s = *m_impl;
  Backend& be = m_backend;
  const bool shadow = shadow_pass();
  std::vector<Parameter*> all = m_model->parameters();
  std::vector<Layer*> leaves = m_model->leaves();
  std::vector<Parameter*> ref_params = shadow ? s.shadow->parameters() : std::vector<Parameter*>{};
  std::vector<Layer*> ref_leaves = shadow ? s.shadow->leaves() : std::vector<Layer*>{};
  // Per leaf with parameters: kCensusSlots counts, then 6 doubles (the
  // gradient's and the output's error sums).
  constexpr std::size_t kPer = kCensusSlots + 6;
  std::vector<std::size_t> with_params;
  for (std::size_t li = 0; li < leaves.size(); ++li)
    if (!leaves[li]->parameters().empty()) with_params.push_back(li);
  Buffer stats;
  stats.reserve(with_params.size() * kPer * sizeof(std::int64_t));
  stats.zero(with_params.size() * kPer * sizeof(std::int64_t));
  Tensor block_q;
  std::vector<std::int64_t> totals(with_params.size(), 0);
  std::size_t pi = 0;
  for (std::size_t k = 0; k < with_params.size(); ++k) {
    Layer* l = leaves[with_params[k]];
    std::int64_t* slots = stats.as<std::int64_t>() + k * kPer;
    auto* errors = reinterpret_cast<double*>(slots + kCensusSlots);
    const Format f = l->precision().grad;
    const bool block = is_block_format(f);
    for (Parameter* p : l->parameters()) {
      while (pi < all.size() && all[pi] != p) ++pi;
      if (pi >= all.size()) break;
      const float* own = s.grads.values(pi);
      const std::int64_t n = s.grads.numel(pi);
      // The gradient the format's fate is measured on: the exact (FP32
      // shadow) one where the layer computed in low precision, since its own
      // has already lost what the format flushed.
      const float* gv = shadow ? ref_params[pi]->grad.f32() : own;
      if (shadow) be.error_sums(own, gv, n, errors);
      totals[k] += n;
      GradCensus c;
      c.values = gv;
      c.own = shadow ? own : nullptr;
      c.n = n;
      c.thresholds = rounding_thresholds(block ? Format::FP32 : f);
      c.scale = static_cast<double>(loss_scale);
      c.log2_lo = -40;
      c.out = slots;
      // A block format decides a value's fate by its block, not by a fixed
      // range: quantize the gradient in it (blocks along its rows) and see
      // which nonzero values became zero. Block scales cannot overflow.
      if (block) {
        const std::int64_t rows = p->shape.size() < 2 ? 1 : p->shape.front();
        block_q.resize({n}, Format::FP32);
        be.block_quantize(f, gv, block_q.f32(), rows, n / rows, BlockLayout::Rows, {}, nullptr);
        c.block = block_q.f32();
      }
      be.gradient_census(c);
    }
    if (shadow) {
      const Tensor& y = l->captured_output;
      const Tensor& y32 = ref_leaves[with_params[k]]->captured_output;
      if (!y.empty() && y.numel() == y32.numel()) be.error_sums(y.f32(), y32.f32(), y.numel(), errors + 3);
    }
  }
  std::vector<std::int64_t> host(with_params.size() * kPer);
  stats.download(host.data(), host.size() * sizeof(std::int64_t));
  for (std::size_t k = 0; k < with_params.size(); ++k) {
    Layer* l = leaves[with_params[k]];
    const std::int64_t* c = host.data() + k * kPer;
    double errors[6];
    std::memcpy(errors, c + kCensusSlots, sizeof errors);
    GradStats g;
    g.run_id = m_id;
    g.step = step;
    g.layer = l->name();
    g.format = format_name(l->precision().grad);
    g.shadow = shadow;
    g.log2_lo = -40;
    g.total = totals[k];
    g.zeros = c[0];
    g.histogram.assign(c + 1, c + 1 + kCensusBins);
    const std::int64_t* scaled = c + 1 + kCensusBins;
    const std::int64_t* unscaled = scaled + 5;
    const double t = g.total > 0 ? static_cast<double>(g.total) : 1.0;
    auto frac = [t](const std::int64_t* v, Magnitude m) { return static_cast<double>(v[static_cast<int>(m)]) / t; };
    g.underflow_unscaled = frac(unscaled, Magnitude::Underflow);
    g.subnormal_unscaled = frac(unscaled, Magnitude::Subnormal);
    g.overflow_unscaled = frac(unscaled, Magnitude::Overflow);
    g.underflow_scaled = frac(scaled, Magnitude::Underflow);
    g.subnormal_scaled = frac(scaled, Magnitude::Subnormal);
    g.overflow_scaled = frac(scaled, Magnitude::Overflow);
    if (shadow) {
      g.grad_error = relative_error(errors);
      g.grad_bias = error_bias(errors);
      const Tensor& y = l->captured_output;
      if (!y.empty() && y.numel() == ref_leaves[with_params[k]]->captured_output.numel())
        g.output_error = relative_error(errors + 3);
    }
    m_history.add(g);
    out.emplace_back(std::move(g));
  }
}

}  // namespace engine
