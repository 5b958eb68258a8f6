// Run: the training step — forward, loss, scaled backward, unscale and
// non-finite check, clipping, optimizer step (or skip), scale update — and
// its metrics.
#include "train/run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <unistd.h>

#include "amp/apply.h"
#include "amp/loss_scaler.h"
#include "amp/recipe.h"
#include "backend/backend.h"
#include "data/batch.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "nn/block_gemm.h"
#include "nn/layer.h"
#include "nn/model.h"
#include "numeric/block.h"
#include "numeric/cast.h"
#include "numeric/convert.h"
#include "numeric/inspect.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"

namespace engine {

std::int64_t process_rss_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  long pages_total = 0, pages_rss = 0;
  const int got = std::fscanf(f, "%ld %ld", &pages_total, &pages_rss);
  std::fclose(f);
  if (got != 2) return 0;
  return static_cast<std::int64_t>(pages_rss) * static_cast<std::int64_t>(sysconf(_SC_PAGESIZE));
}

struct Run::Impl {
  std::unique_ptr<Optimizer> optimizer;
  LossScaler scaler;
  LrSchedule schedule;
  std::unique_ptr<BatchSampler> sampler;
  std::int64_t batch_in_epoch = 0;
  std::int64_t epoch = 0;
  Shape sample_shape;
  std::int64_t outputs = 0;
  // Step buffers (reused every step).
  Tensor x;
  std::vector<std::int32_t> labels;
  Tensor targets;
  Tensor logits_f32;
  Tensor probs;
  Tensor dlogits;
  // f32 views of non-FP32 gradients / weights (the fp16 recipe), per parameter.
  std::vector<Tensor> grad_scratch;
  std::vector<Tensor> weight_scratch;
  std::vector<ParamSlot> slots;
  std::vector<LossScaler::GradSpan> scaler_spans;
  std::vector<GradSpan> clip_spans;
  // The FP32 shadow model of statistics steps (built at the first one) and
  // its loss buffers. Not part of the recipe's memory: a measuring tool.
  std::unique_ptr<Model> shadow;
  Tensor shadow_probs, shadow_dlogits;
};

namespace {

Shape sample_shape_of(const Dataset& d) {
  if (d.shape.is_image())
    return {static_cast<std::int64_t>(d.shape.channels), static_cast<std::int64_t>(d.shape.height),
            static_cast<std::int64_t>(d.shape.width)};
  return {static_cast<std::int64_t>(d.shape.features)};
}

OptimizerConfig optimizer_config(const RunConfig& c, Format state) {
  OptimizerConfig o;
  o.kind = *parse_optimizer_kind(c.optimizer);
  o.sgd.momentum = c.momentum;
  o.sgd.weight_decay = c.weight_decay;
  o.adam.weight_decay = c.weight_decay;
  o.state_format = state;
  return o;
}

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

Run::Run(int id, const RunConfig& config, std::shared_ptr<const DatasetPair> data, Backend& backend)
    : m_id(id), m_config(config), m_recipe(make_recipe(config.recipe)), m_data(std::move(data)),
      m_backend(backend), m_impl(std::make_unique<Impl>()) {
  const Dataset& train = m_data->train;
  if (train.count == 0) throw std::runtime_error(train.name + ": the training split is empty");
  Impl& s = *m_impl;
  s.sample_shape = sample_shape_of(train);
  s.outputs = static_cast<std::int64_t>(train.output_width());
  if (m_config.model == "mlp" && !m_config.widths.empty())
    m_model = build_mlp(s.sample_shape, s.outputs, m_config.widths);
  else
    m_model = build_model(m_config.model, s.sample_shape, s.outputs);
  // Regression heads start at zero (their targets can be far below a
  // default-initialised network's outputs: tiny-gradients' are ~2^-14).
  m_model->init(m_config.seed, !train.is_classification());

  for (const auto& [name, p] : m_config.layers) {
    // A per-layer setting for a layer the model does not have would be
    // silently ignored: refuse it by name.
    if (name.rfind(kKindPrefix, 0) != 0) {
      bool found = false;
      for (Layer* l : m_model->leaves()) found = found || l->name() == name;
      if (!found) {
        std::string names;
        for (Layer* l : m_model->leaves()) names += (names.empty() ? "" : ", ") + l->name();
        throw std::runtime_error("'layers." + name + "': the " + m_config.model + " has no layer '" + name +
                                 "' (its layers: " + names + ")");
      }
    }
    m_recipe.overrides[name] = p;
  }
  if (m_config.loss_scale_set) m_recipe.scaling = m_config.loss_scale;
  if (m_config.master_weights >= 0) m_recipe.master_weights = m_config.master_weights == 1;
  m_recipe.fp8.enabled = m_config.fp8_scaling != "none";
  if (m_config.grad_rounding != "recipe") m_recipe.stochastic_grads = m_config.grad_rounding == "stochastic";
  for (Layer* l : m_model->leaves()) {
    const std::string problem = precision_problem(*l, m_recipe.precision_for(*l));
    if (!problem.empty()) throw std::runtime_error(problem);
  }
  apply_recipe(*m_model, m_recipe);
  if (!m_config.spike.empty()) {
    std::string layer;
    float value = 0.0f;
    if (!parse_spike(m_config.spike, m_spike_step, layer, value))
      throw std::runtime_error("'spike' must be STEP:LAYER:VALUE (got '" + m_config.spike + "')");
    for (Layer* l : m_model->leaves())
      if (l->name() == layer) m_spike = Fault{FaultTarget::Activations, l, value};
    if (!m_spike) throw std::runtime_error("'spike': the " + m_config.model + " has no layer '" + layer + "'");
  }
  m_model->set_track_nonfinite(false);  // counted only on overflow steps (see step())

  s.scaler.set_config(m_recipe.scaling, true);
  s.optimizer = make_optimizer(optimizer_config(m_config, m_recipe.optimizer_state));
  s.sampler = std::make_unique<BatchSampler>(train.count, static_cast<std::size_t>(m_config.batch),
                                             m_config.seed);
  m_steps_per_epoch = static_cast<std::int64_t>(s.sampler->batches_per_epoch());
  m_total_steps = m_config.steps > 0 ? m_config.steps : m_config.epochs * m_steps_per_epoch;
  s.schedule.kind = *parse_schedule_kind(m_config.schedule);
  s.schedule.base_lr = m_config.lr;
  s.schedule.warmup_steps = m_config.warmup;
  s.schedule.total_steps = m_total_steps;
  s.sampler->set_epoch(0);
  m_history.steps.reserve(static_cast<std::size_t>(std::min<std::int64_t>(m_total_steps, 1 << 20)));
}

Run::~Run() = default;

bool Run::is_classification() const { return m_data->train.is_classification(); }

std::string Run::backend_name() const { return m_backend.info().name; }

MemoryBytes Run::memory() const {
  MemoryBytes m;
  std::int64_t em = 0;
  for (Layer* l : m_model->leaves()) {
    for (Parameter* p : l->parameters()) {
      m.weights += weight_device_bytes(*p);
      // A block-compute GEMM weight with a master: the FP32 copy the CPU
      // quantizes from holds the master's values, emulation only.
      if (is_block_format(p->quantized) && p->has_master()) em += static_cast<std::int64_t>(p->weight.bytes());
      m.master += static_cast<std::int64_t>(p->master.bytes());
      m.grads += static_cast<std::int64_t>(p->grad.bytes());
    }
  }
  const Impl& s = *m_impl;
  m.optimizer = static_cast<std::int64_t>(s.optimizer->state_bytes());
  m.activations = static_cast<std::int64_t>(m_model->saved_activation_bytes());
  m.workspace = static_cast<std::int64_t>(s.x.bytes() + s.targets.bytes() + s.probs.bytes() + s.dlogits.bytes()) +
                static_cast<std::int64_t>(s.labels.size() * sizeof(std::int32_t));
  // What only the CPU's emulation needs: f32 views of low-precision
  // gradients and weights for the f32 optimizer, decoded logits, and the
  // layers' decode/encode scratch. A device holding the recipe has none.
  em += static_cast<std::int64_t>(s.logits_f32.bytes()) + static_cast<std::int64_t>(m_model->workspace_bytes()) +
        static_cast<std::int64_t>(m_model->saved_emulation_bytes());
  for (const Tensor& t : s.grad_scratch) em += static_cast<std::int64_t>(t.bytes());
  for (const Tensor& t : s.weight_scratch) em += static_cast<std::int64_t>(t.bytes());
  m.emulation = em;
  return m;
}

void Run::step(std::vector<Record>& out) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  Impl& s = *m_impl;
  const Dataset& train = m_data->train;

  // --- batch ---
  if (s.batch_in_epoch >= m_steps_per_epoch) {
    s.batch_in_epoch = 0;
    ++s.epoch;
    s.sampler->set_epoch(static_cast<std::uint64_t>(s.epoch));
  }
  const auto idx = s.sampler->batch(static_cast<std::size_t>(s.batch_in_epoch));
  const std::int64_t B = static_cast<std::int64_t>(idx.size());
  Shape xs = {B};
  xs.insert(xs.end(), s.sample_shape.begin(), s.sample_shape.end());
  s.x.resize(xs, Format::FP32);
  const bool cls = train.is_classification();
  if (cls) {
    s.labels.resize(static_cast<std::size_t>(B));
    gather_batch(train, idx, s.x.f32(), s.labels.data(), nullptr);
  } else {
    s.targets.resize({B, s.outputs}, Format::FP32);
    gather_batch(train, idx, s.x.f32(), nullptr, s.targets.f32());
  }

  // --- forward, the true (unscaled) loss in FP32/double, scaled backward ---
  const float loss_scale = s.scaler.scale();
  const std::int64_t step_no = m_step + 1;
  const bool inspect = m_inspect_next;
  m_inspect_next = false;
  const bool stats_step =
      inspect || (m_config.stats_every > 0 && (step_no == 1 || step_no % m_config.stats_every == 0));
  if (inspect) m_model->set_track_nonfinite(true);
  // An injected fault lasts this one step (the attribution re-run sees it too).
  if (m_spike && step_no == m_spike_step && !m_fault) m_fault = m_spike;
  const std::optional<Fault> fault = m_fault;
  m_fault.reset();
  if (fault && fault->target == FaultTarget::Weights) {
    Parameter& p = *fault->layer->parameters().front();
    if (p.has_master()) p.master.f32()[0] = fault->value;
    if (p.weight.format() == Format::FP32 || p.weight.format() == Format::TF32) p.weight.f32()[0] = fault->value;
    else cast_from_f32(p.weight.format(), &fault->value, p.weight.data(), 1);
  }
  if (fault && fault->target == FaultTarget::Activations) {
    fault->layer->fault_output = true;
    fault->layer->fault_value = fault->value;
  }
  // Statistics steps keep each parameterised leaf's output for the
  // comparison with the FP32 shadow pass.
  if (stats_step) m_model->set_capture_outputs(true);
  std::int64_t correct = 0;
  auto forward_backward = [&]() -> double {
    const Tensor& logits = m_model->forward(m_backend, s.x);
    const float* lg = logits.format() == Format::FP32 ? logits.f32() : nullptr;
    if (!lg) {
      decode_to(logits, s.logits_f32);
      lg = s.logits_f32.f32();
    }
    s.dlogits.resize({B, s.outputs}, Format::FP32);
    double l = 0.0;
    if (cls) {
      s.probs.resize({B, s.outputs}, Format::FP32);
      l = m_backend.cross_entropy_forward(lg, s.labels.data(), B, s.outputs, s.probs.f32(), &correct);
      m_backend.cross_entropy_backward(s.probs.f32(), s.labels.data(), B, s.outputs, loss_scale,
                                       s.dlogits.f32());
    } else {
      l = m_backend.mse_forward(lg, s.targets.f32(), B * s.outputs);
      m_backend.mse_backward(lg, s.targets.f32(), B * s.outputs, loss_scale, s.dlogits.f32());
    }
    if (fault && fault->target == FaultTarget::Loss) {
      l = fault->value;
      s.dlogits.f32()[0] = fault->value;
    }
    m_model->backward(m_backend, s.dlogits);
    if (fault && fault->target == FaultTarget::Gradients) {
      Parameter& p = *fault->layer->parameters().front();
      if (p.grad.format() == Format::FP32) p.grad.f32()[0] = fault->value;
      else cast_from_f32(p.grad.format(), &fault->value, p.grad.data(), 1);
      if (fault->layer->track_nonfinite) ++fault->layer->nonfinite.weight_grad;
    }
    return l;
  };
  const double loss = forward_backward();

  // --- gradients as f32 spans; unscale in FP32 and find inf/NaN ---
  std::vector<Parameter*> params = m_model->parameters();
  s.grad_scratch.resize(params.size());
  s.weight_scratch.resize(params.size());
  auto gradient_spans = [&] {
    s.scaler_spans.clear();
    s.clip_spans.clear();
    for (std::size_t i = 0; i < params.size(); ++i) {
      Parameter& p = *params[i];
      float* g;
      if (p.grad.format() == Format::FP32) {
        g = p.grad.f32();
      } else {
        decode_to(p.grad, s.grad_scratch[i]);
        g = s.grad_scratch[i].f32();
      }
      s.scaler_spans.push_back({g, p.grad.numel()});
      s.clip_spans.push_back({g, static_cast<std::size_t>(p.grad.numel())});
    }
  };
  gradient_spans();
  double sum_squares = 0.0;
  const std::int64_t nonfinite = s.scaler.unscale(s.scaler_spans, &sum_squares);
  const bool overflow = nonfinite > 0;
  if (overflow || !std::isfinite(loss)) {
    // Attribution: per-layer counting costs a pass over every activation
    // and gradient, so it runs only on steps that overflowed. The step is
    // recomputed with counting on — same batch, same weights, same scale,
    // so the same values — and the gradients unscaled again.
    m_model->set_track_nonfinite(true);
    (void)forward_backward();
    if (!inspect) m_model->set_track_nonfinite(false);
    record_overflow_events(step_no, out);
    gradient_spans();
    LossScaler::multiply_by_inverse(s.scaler_spans, loss_scale);
  }
  StepInspection inspection;
  if (stats_step) {
    const std::size_t first_stats = m_history.grads.size();
    gradient_statistics(step_no, loss_scale, out);
    m_model->set_capture_outputs(false);
    if (inspect) {
      // Per leaf: the non-finite counts of this step, the underflow the
      // statistics measured, and the largest unscaled weight gradient.
      inspection.layers.reserve(m_model->leaves().size());
      std::size_t pi = 0;
      for (Layer* l : m_model->leaves()) {
        LayerInspection li;
        li.layer = l->name();
        li.grad_format = format_name(l->precision().grad);
        li.nonfinite_activation = l->nonfinite.activation;
        li.nonfinite_activation_grad = l->nonfinite.activation_grad;
        li.nonfinite_weight_grad = l->nonfinite.weight_grad;
        bool first = true;
        for (Parameter* p : l->parameters()) {
          li.has_weights = true;
          while (pi < params.size() && params[pi] != p) ++pi;
          if (pi >= params.size()) break;
          const float* g = s.clip_spans[pi].data;
          for (std::size_t k = 0; k < s.clip_spans[pi].n; ++k)
            li.max_abs_grad = std::max(li.max_abs_grad, static_cast<double>(std::fabs(g[k])));
          if (first) {
            first = false;
            inspect_block(*p, g, s.clip_spans[pi].n, li);
          }
        }
        for (std::size_t k = first_stats; k < m_history.grads.size(); ++k)
          if (m_history.grads[k].layer == li.layer) li.underflow = m_history.grads[k].underflow_scaled;
        inspection.layers.push_back(std::move(li));
      }
      m_model->set_track_nonfinite(false);
    }
  }

  const double grad_norm = std::sqrt(sum_squares);
  if (m_config.clip > 0.0 && !overflow) clip_grad_norm(s.clip_spans, m_config.clip);

  // --- optimizer step, or skip ---
  const double lr = learning_rate(s.schedule, m_step);
  const bool take = s.scaler.should_step();
  if (take) {
    s.slots.clear();
    for (std::size_t i = 0; i < params.size(); ++i) {
      Parameter& p = *params[i];
      Tensor& u = p.updated();
      float* value;
      if (u.format() == Format::FP32 || u.format() == Format::TF32) {
        value = u.f32();
      } else {
        decode_to(u, s.weight_scratch[i]);
        value = s.weight_scratch[i].f32();
      }
      s.slots.push_back({value, s.clip_spans[i].data, static_cast<std::size_t>(p.grad.numel()), p.decay});
    }
    s.optimizer->step(s.slots, lr);
    for (std::size_t i = 0; i < params.size(); ++i) {
      Parameter& p = *params[i];
      Tensor& u = p.updated();
      if (u.format() == Format::TF32) {
        quantize_inplace(Format::TF32, u.f32(), static_cast<std::size_t>(u.numel()));
      } else if (u.format() != Format::FP32) {
        // Updates smaller than half an ulp of the stored weight vanish here
        // under round-to-nearest; stochastic rounding keeps them on average
        // (seeded per run, step and parameter: a run repeats bit for bit).
        CastOptions opt;
        if (m_config.weight_rounding == "stochastic") {
          opt.stochastic = true;
          opt.seed = m_config.seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(step_no) * 1000003ull + i;
        }
        cast_from_f32(u.format(), s.weight_scratch[i].f32(), u.data(), static_cast<std::size_t>(u.numel()), opt);
      }
    }
    refresh_weights(*m_model);
  }
  s.scaler.update();

  // --- metrics ---
  m_step = step_no;
  ++s.batch_in_epoch;
  const double wall_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();

  StepMetrics m;
  m.run_id = m_id;
  m.step = step_no;
  m.epoch = s.epoch;
  m.loss = loss;
  m.loss_scale = loss_scale;
  m.overflow = overflow;
  m.skipped = !take;
  m.grad_norm = grad_norm;
  m.lr = lr;
  m.mem = memory();
  // /proc costs a few syscalls: sample the RSS every 50 steps.
  if (step_no == 1 || step_no % 50 == 0) m_last_rss = process_rss_bytes();
  m.rss = m_last_rss;
  m.wall_ms = wall_ms;
  m.samples_per_second = wall_ms > 0 ? static_cast<double>(B) / (wall_ms / 1000.0) : 0.0;
  m.train_accuracy = cls ? static_cast<double>(correct) / static_cast<double>(B) : -1.0;

  if (!std::isfinite(loss)) emit(Event{m_id, step_no, EventKind::NanLoss, "", "loss", 1}, out);
  if (!take) emit(Event{m_id, step_no, EventKind::Skipped, "", "optimizer", nonfinite}, out);
  if (s.scaler.scale() != loss_scale) {
    Event e{m_id, step_no, EventKind::ScaleChange, "", overflow ? "backoff" : "growth", 0};
    e.value = static_cast<double>(s.scaler.scale());
    emit(e, out);
  }
  m_history.add(m);
  out.emplace_back(m);
  if (fault && fault->target == FaultTarget::Activations) fault->layer->fault_output = false;
  if (inspect) {
    inspection.run_id = m_id;
    inspection.step = step_no;
    inspection.loss = loss;
    inspection.scale_before = loss_scale;
    inspection.scale_after = s.scaler.scale();
    inspection.overflow = overflow;
    inspection.skipped = !take;
    out.emplace_back(std::move(inspection));
  }
  // Divergence ends the run, cleanly and with its reason: non-finite
  // gradients applied (no loss scaler skipped the step) leave the weights
  // NaN for good; a loss that stays non-finite for 10 steps has diverged.
  m_nan_loss_run = std::isfinite(loss) ? 0 : m_nan_loss_run + 1;
  if (take && overflow)
    throw std::runtime_error("diverged at step " + std::to_string(step_no) + ": " + std::to_string(nonfinite) +
                             " gradient values were inf or NaN and no loss scaler skipped the step, so the weights "
                             "are no longer finite");
  if (m_nan_loss_run >= 10)
    throw std::runtime_error("diverged at step " + std::to_string(step_no) +
                             ": the loss has been inf or NaN for 10 steps");
}

void Run::inject_fault(FaultTarget target, const std::string& layer, bool inf) {
  Fault f{target, nullptr, inf ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN()};
  if (target != FaultTarget::Loss) {
    for (Layer* l : m_model->leaves())
      if (l->name() == layer) f.layer = l;
    if (!f.layer) {
      std::string names;
      for (Layer* l : m_model->leaves()) names += (names.empty() ? "" : ", ") + l->name();
      throw std::invalid_argument("inject_fault: the model has no layer '" + layer + "' (layers: " + names + ")");
    }
    if (target != FaultTarget::Activations && f.layer->parameters().empty())
      throw std::invalid_argument("inject_fault: layer '" + layer + "' has no weights");
  }
  m_fault = f;
}

void Run::emit(const Event& e, std::vector<Record>& out) {
  m_history.add(e);
  out.emplace_back(e);
}

void Run::record_overflow_events(std::int64_t step, std::vector<Record>& out) {
  // Backward order: the first row of a step is the first layer whose
  // gradients went non-finite as backward ran.
  std::vector<Layer*> leaves = m_model->leaves();
  for (auto it = leaves.rbegin(); it != leaves.rend(); ++it) {
    const Layer& l = **it;
    const NonfiniteCounts& c = l.nonfinite;
    auto overflow = [&](const char* tensor, std::int64_t n) {
      if (n > 0) emit(Event{m_id, step, EventKind::Overflow, l.name(), tensor, n}, out);
    };
    overflow("activation_grad", c.activation_grad);
    overflow("weight_grad", c.weight_grad);
  }
  // Forward activations that overflowed (in forward order).
  for (Layer* l : leaves)
    if (l->nonfinite.activation > 0)
      emit(Event{m_id, step, EventKind::Overflow, l->name(), "activation", l->nonfinite.activation}, out);
}

bool Run::shadow_pass() {
  Impl& s = *m_impl;
  bool low = false;
  for (Layer* l : m_model->leaves()) low = low || !l->precision().is_fp32();
  if (!low) return false;
  const Dataset& train = m_data->train;
  if (!s.shadow) {
    // The same architecture, all FP32 (no master copies, no FP8 scaling).
    if (m_config.model == "mlp" && !m_config.widths.empty())
      s.shadow = build_mlp(s.sample_shape, s.outputs, m_config.widths);
    else
      s.shadow = build_model(m_config.model, s.sample_shape, s.outputs);
    s.shadow->set_precision(LayerPrecision{});
  }
  // The weights as exact arithmetic has them: the FP32 master copy where the
  // recipe keeps one, else the stored weights decoded (and unscaled for FP8).
  std::vector<Parameter*> mine = m_model->parameters();
  std::vector<Parameter*> ref = s.shadow->parameters();
  for (std::size_t i = 0; i < mine.size() && i < ref.size(); ++i) {
    Parameter& p = *mine[i];
    float* dst = ref[i]->weight.f32();
    const std::size_t n = static_cast<std::size_t>(p.numel());
    if (p.has_master()) {
      std::memcpy(dst, p.master.f32(), n * sizeof(float));
    } else if (p.weight.format() == Format::FP32 || p.weight.format() == Format::TF32) {
      std::memcpy(dst, p.weight.f32(), n * sizeof(float));
    } else {
      cast_to_f32(p.weight.format(), p.weight.data(), dst, n);
    }
    if (p.weight_scale != 1.0f && !p.has_master())
      for (std::size_t k = 0; k < n; ++k) dst[k] /= p.weight_scale;
  }
  s.shadow->set_capture_outputs(true);
  const Tensor& logits = s.shadow->forward(m_backend, s.x);
  const std::int64_t B = logits.dim(0);
  s.shadow_dlogits.resize({B, s.outputs}, Format::FP32);
  if (train.is_classification()) {
    s.shadow_probs.resize({B, s.outputs}, Format::FP32);
    (void)m_backend.cross_entropy_forward(logits.f32(), s.labels.data(), B, s.outputs, s.shadow_probs.f32(), nullptr);
    m_backend.cross_entropy_backward(s.shadow_probs.f32(), s.labels.data(), B, s.outputs, 1.0f,
                                     s.shadow_dlogits.f32());
  } else {
    (void)m_backend.mse_forward(logits.f32(), s.targets.f32(), B * s.outputs);
    m_backend.mse_backward(logits.f32(), s.targets.f32(), B * s.outputs, 1.0f, s.shadow_dlogits.f32());
  }
  s.shadow->backward(m_backend, s.shadow_dlogits);
  return true;
}

namespace {

// ||a - b|| / ||b|| in double (0 when both are zero; inf when only b is).
struct ErrorSum {
  double diff = 0.0, ref = 0.0, along = 0.0;
  void add(const float* a, const float* b, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
      diff += d * d;
      ref += static_cast<double>(b[i]) * static_cast<double>(b[i]);
      along += d * static_cast<double>(b[i]);
    }
  }
  // <a - b, b> / ||b||^2: the error's component along b, relative to b.
  double bias() const { return ref > 0.0 && std::isfinite(along) ? along / ref : 0.0; }
  double relative() const {
    if (diff == 0.0) return 0.0;
    return ref > 0.0 ? std::sqrt(diff / ref) : std::numeric_limits<double>::infinity();
  }
};

}  // namespace


void Run::gradient_statistics(std::int64_t step, float loss_scale, std::vector<Record>& out) {
  Impl& s = *m_impl;
  const bool shadow = shadow_pass();
  std::vector<Parameter*> all = m_model->parameters();
  std::vector<Layer*> leaves = m_model->leaves();
  std::vector<Parameter*> ref_params = shadow ? s.shadow->parameters() : std::vector<Parameter*>{};
  std::vector<Layer*> ref_leaves = shadow ? s.shadow->leaves() : std::vector<Layer*>{};
  std::vector<float> block_q;
  std::size_t pi = 0;
  for (std::size_t li = 0; li < leaves.size(); ++li) {
    Layer* l = leaves[li];
    std::vector<Parameter*> ps = l->parameters();
    if (ps.empty()) continue;
    GradStats g;
    g.run_id = m_id;
    g.step = step;
    g.layer = l->name();
    const Format f = l->precision().grad;
    g.format = format_name(f);
    g.shadow = shadow;
    g.log2_lo = -40;
    g.histogram.assign(64, 0);
    const bool block = is_block_format(f);
    const RoundingThresholds th = rounding_thresholds(block ? Format::FP32 : f);
    std::int64_t counts_unscaled[5] = {}, counts_scaled[5] = {};
    const double scale = static_cast<double>(loss_scale);
    ErrorSum grad_err;
    for (Parameter* p : ps) {
      // The unscaled f32 gradient of p (same span order as parameters()).
      while (pi < all.size() && all[pi] != p) ++pi;
      if (pi >= all.size()) break;
      const float* own = s.clip_spans[pi].data;
      const std::int64_t n = static_cast<std::int64_t>(s.clip_spans[pi].n);
      // The gradient the format's fate is measured on: the exact (FP32
      // shadow) one where the layer computed in low precision, since its own
      // has already lost what the format flushed.
      const float* gv = shadow ? ref_params[pi]->grad.f32() : own;
      if (shadow) grad_err.add(own, gv, static_cast<std::size_t>(n));
      g.total += n;
      // A block format decides a value's fate by its block, not by a fixed
      // range: quantize the gradient in it (blocks along its rows) and see
      // which nonzero values became zero. Block scales cannot overflow.
      if (block) {
        const std::int64_t rows = p->shape.size() < 2 ? 1 : p->shape.front();
        block_q.resize(static_cast<std::size_t>(n));
        block_quantize(f, gv, block_q.data(), rows, n / rows, BlockLayout::Rows);
      }
      for (std::int64_t i = 0; i < n; ++i) {
        const float v = gv[i];
        if (v == 0.0f) {
          ++g.zeros;
          continue;
        }
        if (std::isfinite(v)) {
          int bin = std::ilogb(v) - g.log2_lo;  // floor(log2|v|), subnormals included
          bin = std::clamp(bin, 0, static_cast<int>(g.histogram.size()) - 1);
          ++g.histogram[static_cast<std::size_t>(bin)];
        }
        const double a = std::fabs(static_cast<double>(v));
        if (block) {
          const bool flushed = block_q[static_cast<std::size_t>(i)] == 0.0f || (shadow && own[i] == 0.0f);
          const Magnitude m = flushed ? Magnitude::Underflow : Magnitude::Normal;
          ++counts_scaled[static_cast<int>(m)];
          ++counts_unscaled[static_cast<int>(m)];
          continue;
        }
        Magnitude as_run = classify_magnitude(th, a * scale);
        // Nonzero in exact arithmetic, zero as this run computed it: the
        // format flushed it somewhere on the way (an activation gradient
        // that underflowed upstream wipes out whole rows). That is
        // underflow as the run saw it, whatever the exact value's size.
        if (shadow && own[i] == 0.0f) as_run = Magnitude::Underflow;
        ++counts_scaled[static_cast<int>(as_run)];
        // Unscaled: what the format does without loss scaling. A run that
        // is not scaled saw exactly that; for a scaled one only the exact
        // magnitude can tell.
        ++counts_unscaled[static_cast<int>(scale == 1.0 ? as_run : classify_magnitude(th, a))];
      }
    }
    const double t = g.total > 0 ? static_cast<double>(g.total) : 1.0;
    auto frac = [t](const std::int64_t* c, Magnitude m) { return static_cast<double>(c[static_cast<int>(m)]) / t; };
    g.underflow_unscaled = frac(counts_unscaled, Magnitude::Underflow);
    g.subnormal_unscaled = frac(counts_unscaled, Magnitude::Subnormal);
    g.overflow_unscaled = frac(counts_unscaled, Magnitude::Overflow);
    g.underflow_scaled = frac(counts_scaled, Magnitude::Underflow);
    g.subnormal_scaled = frac(counts_scaled, Magnitude::Subnormal);
    g.overflow_scaled = frac(counts_scaled, Magnitude::Overflow);
    if (shadow) {
      g.grad_error = grad_err.relative();
      g.grad_bias = grad_err.bias();
      const std::vector<float>& y = l->captured_output;
      const std::vector<float>& y32 = ref_leaves[li]->captured_output;
      if (!y.empty() && y.size() == y32.size()) {
        ErrorSum e;
        e.add(y.data(), y32.data(), y.size());
        g.output_error = e.relative();
      }
    }
    m_history.add(g);
    out.emplace_back(std::move(g));
  }
}

bool Run::eval_due() const {
  if (m_step >= m_total_steps) return true;
  if (m_config.eval_every > 0) return m_step % m_config.eval_every == 0;
  return m_steps_per_epoch > 0 && m_step % m_steps_per_epoch == 0;
}

EvalMetrics Run::evaluate(std::vector<Record>& out) {
  Impl& s = *m_impl;
  const Dataset& test = m_data->test;
  const bool cls = test.is_classification();
  const std::int64_t n = static_cast<std::int64_t>(test.count);
  const std::int64_t bs = m_config.batch;
  double loss_sum = 0.0;
  std::int64_t correct_sum = 0;
  std::vector<std::uint32_t> idx;
  Tensor x, probs, logits_f32, targets;
  std::vector<std::int32_t> labels;
  for (std::int64_t start = 0; start < n; start += bs) {
    const std::int64_t b = std::min(bs, n - start);
    idx.resize(static_cast<std::size_t>(b));
    for (std::int64_t i = 0; i < b; ++i) idx[static_cast<std::size_t>(i)] = static_cast<std::uint32_t>(start + i);
    Shape xs = {b};
    xs.insert(xs.end(), s.sample_shape.begin(), s.sample_shape.end());
    x.resize(xs, Format::FP32);
    if (cls) {
      labels.resize(static_cast<std::size_t>(b));
      gather_batch(test, idx, x.f32(), labels.data(), nullptr);
    } else {
      targets.resize({b, s.outputs}, Format::FP32);
      gather_batch(test, idx, x.f32(), nullptr, targets.f32());
    }
    const Tensor& logits = m_model->forward(m_backend, x);
    const float* lg = logits.format() == Format::FP32 ? logits.f32() : nullptr;
    if (!lg) {
      decode_to(logits, logits_f32);
      lg = logits_f32.f32();
    }
    if (cls) {
      probs.resize({b, s.outputs}, Format::FP32);
      std::int64_t correct = 0;
      loss_sum += m_backend.cross_entropy_forward(lg, labels.data(), b, s.outputs, probs.f32(), &correct) *
                  static_cast<double>(b);
      correct_sum += correct;
    } else {
      loss_sum += m_backend.mse_forward(lg, targets.f32(), b * s.outputs) * static_cast<double>(b);
    }
  }
  EvalMetrics e;
  e.run_id = m_id;
  e.step = m_step;
  e.epoch = s.epoch;
  e.val_loss = n > 0 ? loss_sum / static_cast<double>(n) : 0.0;
  e.val_accuracy = cls && n > 0 ? static_cast<double>(correct_sum) / static_cast<double>(n) : -1.0;
  m_history.add(e);
  out.emplace_back(e);
  return e;
}

RunSummary Run::summary() const {
  RunSummary r = m_history.summarize(m_impl->scaler.scale());
  r.run_id = m_id;
  r.recipe = m_config.recipe;
  r.model = m_config.model;
  r.dataset = m_config.dataset;
  r.backend = backend_name();
  return r;
}

void Run::set_layer_precision(const std::string& layer, const LayerPrecision& p) {
  for (Layer* l : m_model->leaves()) {
    if (l->name() != layer) continue;
    const std::string problem = precision_problem(*l, p);
    if (!problem.empty()) throw std::invalid_argument(problem);
  }
  apply_layer_precision(*m_model, layer, p, m_recipe.master_weights, m_recipe.fp8, m_recipe.stochastic_grads);
  m_recipe.overrides[layer] = p;
  // The optimizer's state layout is unchanged (same element counts); only
  // the stored formats of this layer's tensors changed.
  Event e{m_id, m_step, EventKind::PrecisionChange, layer, "", 0};
  e.precision = p;
  m_history.add(e);
}

void Run::set_loss_scaler(const LossScalerConfig& c) {
  m_impl->scaler.set_config(c);
  m_recipe.scaling = c;
}

}  // namespace engine
