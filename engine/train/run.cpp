// Run: one training step as named phases (load the batch, forward and
// scaled backward, unscale and check, step or skip, record) and the run's
// construction, evaluation and step-boundary changes. The measuring phases
// (statistics, shadow pass, inspection, overflow attribution) are in
// run_statistics.cpp.
#include "train/run.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <unistd.h>

#include "amp/apply.h"
#include "amp/recipe.h"
#include "backend/backend.h"
#include "backend/cuda_step.h"
#include "backend/fused.h"
#include "data/batch.h"
#include "data/dataset.h"
#include "nn/block_gemm.h"
#include "nn/layer.h"
#include "numeric/block.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "train/build_model.h"
#include "train/run_state.h"
#include "train/sample.h"

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

namespace {

// Adam keeps its state in the recipe's optimizer format (FP16 for the fp16
// recipe, as a .half() model's buffers are). g^2 (1 - beta2) below FP16's
// smallest subnormal, 6e-8, is flushed to zero, and the weight then moves
// by lr * m / eps: eps = 1e-8 makes that thousands of times the learning
// rate. Counted on a step with non-finite values, in the state the last
// update left (downloaded: such a step is not an ordinary step's one
// read), so that a divergence can say why. `step`: that update's.
void count_flushed_moments(const Optimizer& o, std::size_t slots, std::int64_t step, FlushedMoments& out) {
  if (!dynamic_cast<const Adam*>(&o) || o.state_format() == Format::FP32) return;  // nothing rounds v
  out = FlushedMoments{0, 0, step};
  for (std::size_t slot = 0; slot < slots; ++slot) {
    const std::vector<float> m = o.state(slot, 0), v = o.state(slot, 1);
    for (std::size_t i = 0; i < m.size() && i < v.size(); ++i) out.flushed += v[i] == 0.0f && m[i] != 0.0f;
    out.moments += static_cast<std::int64_t>(m.size());
  }
}

// The cause a divergence names when count_flushed_moments found one ("" if not).
std::string flushed_moments(const FlushedMoments& f, const Optimizer& o) {
  const auto* adam = dynamic_cast<const Adam*>(&o);
  if (f.flushed == 0 || !adam) return {};
  const double pct = 100.0 * static_cast<double>(f.flushed) / static_cast<double>(std::max<std::int64_t>(f.moments, 1));
  char buf[320];
  std::snprintf(buf, sizeof buf,
                ". Why: at step %lld, %lld of %s's %lld second moments (%.1f%%), kept in %s, had underflowed to 0 "
                "while their first moments had not, so those weights moved by lr*m/eps (eps %g), far more than "
                "the learning rate",
                static_cast<long long>(f.step), static_cast<long long>(f.flushed), o.name(),
                static_cast<long long>(f.moments), pct, format_key(o.state_format()), adam->options().eps);
  return buf;
}

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

}  // namespace

Run::Run(int id, const RunConfig& config, std::shared_ptr<const DatasetPair> data, Backend& backend)
    : m_id(id), m_config(config), m_recipe(make_recipe(config.recipe)), m_data(std::move(data)),
      m_backend(backend), m_impl(std::make_unique<Impl>()) {
  // Every buffer the run allocates is the backend's.
  BackendScope scope(m_backend);
  const Dataset& train = m_data->train;
  if (train.count == 0) throw std::runtime_error(train.name + ": the training split is empty");
  Impl& s = *m_impl;
  s.sample_shape = sample_shape_of(train);
  s.outputs = static_cast<std::int64_t>(train.output_width());
  m_model = build_model(m_config, s.sample_shape, s.outputs);
  // Regression heads start at zero (their targets can be far below a
  // default-initialised network's outputs: tiny-gradients' are ~2^-14).
  m_model->init(m_config.seed, !train.is_classification());

  for (const auto& [name, p] : m_config.layers) {
    // A per-layer setting for a layer the model does not have would be
    // silently ignored: refuse it by name.
    if (name.rfind(kKindPrefix, 0) != 0 && !m_model->find_leaf(name))
      throw std::runtime_error("'layers." + name + "': the " + m_config.model + " has no layer '" + name +
                               "' (its layers: " + m_model->leaf_names() + ")");
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
  apply_recipe(m_backend, *m_model, m_recipe);
  if (!m_config.spike.empty()) {
    std::string layer;
    float value = 0.0f;
    if (!parse_spike(m_config.spike, m_spike_step, layer, value))
      throw std::runtime_error("'spike' must be STEP:LAYER:VALUE (got '" + m_config.spike + "')");
    if (Layer* l = m_model->find_leaf(layer)) m_spike = Fault{FaultTarget::Activations, l, value};
    if (!m_spike) throw std::runtime_error("'spike': the " + m_config.model + " has no layer '" + layer + "'");
  }
  m_model->set_track_nonfinite(false);  // counted only on overflow steps (attribute_overflow)
  for (Layer* l : m_model->leaves())
    s.amax_slots += l->delayed_scales().size() + l->parameters().size();
  s.param_count = m_model->parameters().size();

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
  s.step_control = cuda_step_control(m_backend);
  if (s.step_control) s.scale_state = static_cast<PlCudaScaleState*>(m_backend.allocate(sizeof(PlCudaScaleState)));
  m_history.steps.reserve(static_cast<std::size_t>(std::min<std::int64_t>(m_total_steps, 1 << 20)));
}

Run::~Run() {
  Impl& s = *m_impl;
  if (!s.step_control) return;
  drop_graph();
  if (s.results_pinned) s.step_control->host_release(s.results_pinned);
  m_backend.release(s.scale_state);
}

bool Run::is_classification() const { return m_data->train.is_classification(); }

std::size_t Run::train_samples() const { return m_data->train.count; }

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
  m.workspace = static_cast<std::int64_t>(s.x.bytes() + s.targets.bytes() + s.probs.bytes() + s.dlogits.bytes() +
                                          s.lse.bytes()) +
                (is_classification() && !s.x.empty()
                     ? s.x.dim(0) * static_cast<std::int64_t>(m_data->train.labels_per_sample * sizeof(std::int32_t))
                     : 0);
  // What only the CPU's emulation needs: f32 views of low-precision
  // gradients and weights for the f32 optimizer, decoded logits, and the
  // layers' decode/encode scratch. A device holding the recipe has none.
  em += static_cast<std::int64_t>(s.logits_f32.bytes()) + static_cast<std::int64_t>(m_model->workspace_bytes()) +
        static_cast<std::int64_t>(m_model->saved_emulation_bytes());
  em += s.grads.scratch_bytes();
  for (const Tensor& t : s.weight_scratch) em += static_cast<std::int64_t>(t.bytes());
  m.emulation = em;
  return m;
}

// One step, in the order of PyTorch's AMP loop (scale the loss, backward,
// GradScaler.unscale_, clip, GradScaler.step, GradScaler.update), with the
// lab's measuring phases where they must sit: overflow attribution before
// the update changes the weights, statistics on the unscaled gradients.
void Run::step(std::vector<Record>& out) {
  const auto t0 = std::chrono::steady_clock::now();
  BackendScope scope(m_backend);
  StepState st = begin_step();
  if (!captured_step(st, out)) {
    load_batch(st);
    forward_backward(st);
    unscale_and_check(st);
    if (st.overflow || !std::isfinite(st.loss)) attribute_overflow(st, out);
    if (st.statistics) measure(st, out);
    step_or_skip(st);
    // Its buffers now exist: the next ordinary step may be captured.
    if (m_impl->step_control) {
      const Impl& s = *m_impl;
      m_impl->warm_key = {st.batch, s.x.data(), s.labels.data(), s.targets.data(), s.results.data(), m_graph_epoch};
    }
  }
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  record(st, wall_ms, out);
}

Run::StepState Run::begin_step() {
  StepState st;
  st.number = m_step + 1;
  st.loss_scale = m_impl->scaler.scale();
  st.inspect = m_inspect_next;
  m_inspect_next = false;
  st.statistics =
      st.inspect || (m_config.stats_every > 0 && (st.number == 1 || st.number % m_config.stats_every == 0));
  if (st.inspect) m_model->set_track_nonfinite(true);
  // An injected fault lasts this one step (the attribution re-run sees it too).
  if (m_spike && st.number == m_spike_step && !m_fault) m_fault = m_spike;
  st.fault = m_fault;
  m_fault.reset();
  if (st.fault && st.fault->target == FaultTarget::Weights) {
    Parameter& p = *st.fault->layer->parameters().front();
    if (p.has_master()) write_first(m_backend, p.master, st.fault->value);
    write_first(m_backend, p.weight, st.fault->value);
  }
  if (st.fault && st.fault->target == FaultTarget::Activations) {
    st.fault->layer->fault_output = true;
    st.fault->layer->fault_value = st.fault->value;
  }
  // Statistics steps keep each parameterised leaf's output for the
  // comparison with the FP32 shadow pass.
  if (st.statistics) m_model->set_capture_outputs(true);
  return st;
}

void Run::load_batch(StepState& st) {
  Impl& s = *m_impl;
  const Dataset& train = m_data->train;
  if (s.batch_in_epoch >= m_steps_per_epoch) {
    s.batch_in_epoch = 0;
    ++s.epoch;
    s.sampler->set_epoch(static_cast<std::uint64_t>(s.epoch));
  }
  const auto idx = s.sampler->batch(static_cast<std::size_t>(s.batch_in_epoch));
  st.batch = static_cast<std::int64_t>(idx.size());
  Shape xs = {st.batch};
  xs.insert(xs.end(), s.sample_shape.begin(), s.sample_shape.end());
  s.x.resize(xs, Format::FP32);
  if (train.is_classification())
    s.labels.reserve(static_cast<std::size_t>(st.batch) * train.labels_per_sample * sizeof(std::int32_t));
  else s.targets.resize({st.batch, s.outputs}, Format::FP32);
  upload_batch(m_backend, train, idx, s.x.data(), s.labels.data(), s.targets.data());
  // The step's results slots (see run_state.h), reused step after step.
  s.results.reserve((kCountsSlot + s.param_count + s.amax_slots + (s.step_control ? kScaleStateSlots : 0)) *
                    sizeof(std::int64_t));
}

// The true (unscaled) loss in FP32/double into the results slots, then the
// backward of the loss times st.loss_scale.
void Run::forward_backward(const StepState& st) {
  Impl& s = *m_impl;
  Backend& be = m_backend;
  auto* results = s.results.as<std::int64_t>();
  auto* loss_slot = reinterpret_cast<double*>(results + kLossSlot);
  const Tensor& logits = m_model->forward(be, s.x);
  // One row per label: B for a classifier, B * T for a language model's
  // [B, T, V] logits (the loss is the mean over its tokens).
  const std::int64_t B = logits.numel() / s.outputs;
  const float* lg = logits.format() == Format::FP32 ? logits.f32() : nullptr;
  if (!lg) {
    decode_to(be, logits, s.logits_f32);
    lg = s.logits_f32.f32();
  }
  s.dlogits.resize(logits.shape(), Format::FP32);
  if (is_classification()) {
    s.probs.resize({B, s.outputs}, Format::FP32);
    be.cross_entropy_forward(lg, s.labels.as<std::int32_t>(), B, s.outputs, s.probs.f32(), loss_slot,
                             results + kCorrectSlot);
    be.cross_entropy_backward(s.probs.f32(), s.labels.as<std::int32_t>(), B, s.outputs, st.loss_scale,
                              s.dlogits.f32());
    if (m_config.z_loss > 0.0) {
      // The objective gains C * mean(log^2 Z); the loss read back stays the
      // cross-entropy, the z term has its own slot.
      const auto coef = static_cast<float>(m_config.z_loss);
      s.lse.resize({B}, Format::FP32);
      be.z_loss(Pass::Forward, lg, nullptr, s.lse.f32(), reinterpret_cast<double*>(results + kZSlot), nullptr, B,
                s.outputs, coef, 1.0f);
      be.z_loss(Pass::Backward, nullptr, s.probs.f32(), s.lse.f32(), nullptr, s.dlogits.f32(), B, s.outputs, coef,
                st.loss_scale);
    }
  } else {
    be.mse_forward(lg, s.targets.f32(), B * s.outputs, loss_slot);
    be.mse_backward(lg, s.targets.f32(), B * s.outputs, st.loss_scale, s.dlogits.f32());
  }
  const std::optional<Fault>& fault = st.fault;
  if (fault && fault->target == FaultTarget::Loss) write_first(be, s.dlogits, fault->value);
  m_model->backward(be, s.dlogits);
  if (fault && fault->target == FaultTarget::Gradients)
    inject_value(be, *fault->layer, fault->layer->parameters().front()->grad, fault->value, NonfiniteSlot::WeightGrad);
}

// The scaler's fused unscale-and-check, then the step's one read: loss,
// correct count, gradient norm, non-finite counts and the FP8 amaxes.
void Run::unscale_and_check(StepState& st) {
  Impl& s = *m_impl;
  Backend& be = m_backend;
  auto* results = s.results.as<std::int64_t>();
  const std::vector<Parameter*> params = m_model->parameters();
  const std::size_t P = params.size();
  s.grads.bind(params, results + kCountsSlot, reinterpret_cast<double*>(results + kSumSquaresSlot));
  s.scaler.unscale(be, s.grads);
  // This step's FP8 amaxes join the read.
  s.pending = pending_amaxes(*m_model);
  const std::size_t n_slots = kCountsSlot + P + s.pending.size();
  for (std::size_t k = 0; k < s.pending.size(); ++k)
    be.copy(results + kCountsSlot + P + k, s.pending[k]->pending_slot(), sizeof(float));

  s.results_host.resize(n_slots);
  be.download(s.results_host.data(), results, n_slots * sizeof(std::int64_t));
  take_results(st, s.results_host.data(), P);
  s.scaler.record_nonfinite(st.nonfinite);
  // The device's copy of the scale state follows the host's decisions.
  s.scale_state_stale = true;
}

void Run::take_results(StepState& st, const std::int64_t* r, std::size_t P) {
  Impl& s = *m_impl;
  auto slot_f64 = [r](std::size_t k) {
    double d;
    std::memcpy(&d, &r[k], sizeof d);
    return d;
  };
  for (std::size_t k = 0; k < s.pending.size(); ++k) {
    float a;
    std::memcpy(&a, &r[kCountsSlot + P + k], sizeof a);
    s.pending[k]->take_pending(a);
  }
  st.loss = slot_f64(kLossSlot);
  st.z_term = m_config.z_loss > 0.0 ? slot_f64(kZSlot) : 0.0;
  if (st.fault && st.fault->target == FaultTarget::Loss) st.loss = st.fault->value;
  st.correct = r[kCorrectSlot];
  st.sum_squares = slot_f64(kSumSquaresSlot);
  for (std::size_t i = 0; i < P; ++i) st.nonfinite += r[kCountsSlot + i];
  st.overflow = st.nonfinite > 0;
}

// Clipping, then the optimizer's step unless the scaler skips it, then the
// scale's update.
void Run::step_or_skip(StepState& st) {
  Impl& s = *m_impl;
  st.grad_norm = std::sqrt(st.sum_squares);
  if (m_config.clip > 0.0 && !st.overflow) clip_grad_norm(m_backend, s.grads.views(), st.grad_norm, m_config.clip);
  st.lr = learning_rate(s.schedule, m_step);
  st.taken = s.scaler.should_step();
  // Non-finite values: the state that moved the weights here, before this
  // step's update changes it (an overflow step reads more anyway).
  if (st.overflow || !std::isfinite(st.loss)) count_flushed_moments(*s.optimizer, s.slots.size(), m_step, s.flushed);
  if (st.taken) update_parameters(st.lr, st.number);
  s.scaler.update();
  m_step = st.number;
  ++s.batch_in_epoch;
}

// The optimizer's step over every parameter. The update also writes each
// parameter's stored copy (ParamSlot::encode): master weights refreshed
// into the layer's format, or low-precision weights re-encoded from their
// decoded update.
void Run::update_parameters(double lr, std::int64_t step) {
  Impl& s = *m_impl;
  Backend& be = m_backend;
  const std::size_t P = s.grads.size();
  std::int64_t scaled = 0;
  for (std::size_t i = 0; i < P; ++i) {
    Parameter& p = s.grads.param(i);
    if (p.has_master() && p.weight_history.active()) scaled = std::max(scaled, p.master.numel());
  }
  if (scaled > 0) s.fp8_scratch.resize({scaled}, Format::FP32);
  s.encodes.resize(P);
  s.weight_scratch.resize(P);
  s.slots.clear();
  for (std::size_t i = 0; i < P; ++i) {
    Parameter& p = s.grads.param(i);
    Tensor& u = p.updated();
    float* value;
    const UpdateEncode* encode = nullptr;
    bool in_codes = false;
    if (u.format() == Format::FP32 || u.format() == Format::TF32) {
      value = u.f32();
    } else {
      // The update decodes the weights from their codes as it goes
      // (ParamSlot::value_in_codes); the scratch takes the values.
      s.weight_scratch[i].resize(u.shape(), Format::FP32);
      value = s.weight_scratch[i].f32();
      in_codes = true;
      // Updates smaller than half an ulp of the stored weight vanish here
      // under round-to-nearest; stochastic rounding keeps them on average
      // (seeded per run, step and parameter: a run repeats bit for bit).
      UpdateEncode e;
      e.format = u.format();
      e.codes = u.data();
      if (m_config.weight_rounding == "stochastic") {
        e.opt.stochastic = true;
        e.opt.seed = m_config.seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(step) * 1000003ull + i;
      }
      s.encodes[i] = e;
      encode = &s.encodes[i];
    }
    if (p.has_master()) {
      s.encodes[i] = refresh_encode(p, scaled > 0 ? s.fp8_scratch.f32() : nullptr);
      encode = &s.encodes[i];
    }
    s.slots.push_back({value, s.grads.values(i), static_cast<std::size_t>(p.grad.numel()), p.decay, encode, in_codes});
  }
  s.optimizer->step(be, s.slots, lr);
  for (std::size_t i = 0; i < P; ++i) {
    Tensor& u = s.grads.param(i).updated();
    if (u.format() == Format::TF32) be.quantize(Format::TF32, u.f32(), u.numel(), false);
  }
}

// The step's StepMetrics and events, its inspection when asked for, and the
// divergence checks that end a run.
void Run::record(StepState& st, double wall_ms, std::vector<Record>& out) {
  Impl& s = *m_impl;
  const std::int64_t step_no = st.number;
  StepMetrics m;
  m.run_id = m_id;
  m.step = step_no;
  m.epoch = s.epoch;
  m.loss = st.loss;
  m.z_term = st.z_term;
  m.loss_scale = st.loss_scale;
  m.overflow = st.overflow;
  m.skipped = !st.taken;
  m.grad_norm = st.grad_norm;
  m.lr = st.lr;
  m.mem = memory();
  // /proc costs a few syscalls: sample the RSS every 50 steps.
  if (step_no == 1 || step_no % 50 == 0) {
    m_last_rss = process_rss_bytes();
    std::uint64_t free_bytes = 0, total_bytes = 0;
    if (m_backend.device_memory(free_bytes, total_bytes)) {
      m_device_used = static_cast<std::int64_t>(total_bytes - free_bytes);
      m_device_total = static_cast<std::int64_t>(total_bytes);
    }
  }
  m.rss = m_last_rss;
  m.device_used = m_device_used;
  m.device_total = m_device_total;
  m.device_allocated = std::max<std::int64_t>(0, m_backend.allocated_bytes());  // gpupeer: a host query, every step
  m.wall_ms = wall_ms;
  m.samples_per_second = wall_ms > 0 ? static_cast<double>(st.batch) / (wall_ms / 1000.0) : 0.0;
  // Per label: next-token accuracy for text.
  const double labels = static_cast<double>(st.batch) * static_cast<double>(m_data->train.labels_per_sample);
  m.train_accuracy = is_classification() ? static_cast<double>(st.correct) / labels : -1.0;

  if (!std::isfinite(st.loss)) emit(Event{m_id, step_no, EventKind::NanLoss, "", "loss", 1}, out);
  if (!st.taken) emit(Event{m_id, step_no, EventKind::Skipped, "", "optimizer", st.nonfinite}, out);
  if (s.scaler.scale() != st.loss_scale) {
    Event e{m_id, step_no, EventKind::ScaleChange, "", st.overflow ? "backoff" : "growth", 0};
    e.value = static_cast<double>(s.scaler.scale());
    emit(e, out);
  }
  m_history.add(m);
  out.emplace_back(m);
  if (st.fault && st.fault->target == FaultTarget::Activations) st.fault->layer->fault_output = false;
  if (st.inspect) {
    StepInspection& inspection = st.inspection;
    inspection.run_id = m_id;
    inspection.step = step_no;
    inspection.loss = st.loss;
    inspection.scale_before = st.loss_scale;
    inspection.scale_after = s.scaler.scale();
    inspection.overflow = st.overflow;
    inspection.skipped = !st.taken;
    out.emplace_back(std::move(inspection));
  }
  // Divergence ends the run, cleanly and with its reason: non-finite
  // gradients applied (no loss scaler skipped the step) leave the weights
  // NaN for good; a loss that stays non-finite for 10 steps has diverged.
  m_nan_loss_run = std::isfinite(st.loss) ? 0 : m_nan_loss_run + 1;
  if (st.taken && st.overflow)
    throw std::runtime_error("diverged at step " + std::to_string(step_no) + ": " + std::to_string(st.nonfinite) +
                             " gradient values were inf or NaN and no loss scaler skipped the step, so the weights "
                             "are no longer finite" + flushed_moments(m_impl->flushed, *m_impl->optimizer));
  if (m_nan_loss_run >= 10)
    throw std::runtime_error("diverged at step " + std::to_string(step_no) +
                             ": the loss has been inf or NaN for 10 steps" +
                             flushed_moments(m_impl->flushed, *m_impl->optimizer));
}

void Run::inject_fault(FaultTarget target, const std::string& layer, bool inf) {
  Fault f{target, nullptr, inf ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN()};
  if (target != FaultTarget::Loss) {
    f.layer = m_model->find_leaf(layer);
    if (!f.layer)
      throw std::invalid_argument("inject_fault: the model has no layer '" + layer + "' (layers: " +
                                  m_model->leaf_names() + ")");
    if (target != FaultTarget::Activations && f.layer->parameters().empty())
      throw std::invalid_argument("inject_fault: layer '" + layer + "' has no weights");
  }
  m_fault = f;
}

void Run::emit(const Event& e, std::vector<Record>& out) {
  m_history.add(e);
  out.emplace_back(e);
}

bool Run::eval_due() const {
  if (m_step >= m_total_steps) return true;
  if (m_config.eval_every > 0) return m_step % m_config.eval_every == 0;
  return m_steps_per_epoch > 0 && m_step % m_steps_per_epoch == 0;
}

EvalMetrics Run::evaluate(std::vector<Record>& out) {
  BackendScope scope(m_backend);
  Backend& be = m_backend;
  Impl& s = *m_impl;
  const Dataset& test = m_data->test;
  const bool cls = test.is_classification();
  const std::int64_t bs = m_config.batch;
  // The first eval_batches batches of the fixed validation split, when set:
  // the same windows at every evaluation, so the curve stays comparable.
  std::int64_t n = static_cast<std::int64_t>(test.count);
  if (m_config.eval_batches > 0) n = std::min(n, m_config.eval_batches * bs);
  const std::int64_t batches = (n + bs - 1) / bs;
  // Two slots per batch (its loss, its correct count), read once at the end.
  Buffer results;
  results.reserve(static_cast<std::size_t>(std::max<std::int64_t>(batches, 1)) * 2 * sizeof(std::int64_t));
  std::vector<std::uint32_t> idx;
  Tensor x, probs, logits_f32, targets;
  Buffer labels;
  std::vector<std::int64_t> sizes;
  for (std::int64_t start = 0, k = 0; start < n; start += bs, ++k) {
    const std::int64_t b = std::min(bs, n - start);
    idx.resize(static_cast<std::size_t>(b));
    for (std::int64_t i = 0; i < b; ++i) idx[static_cast<std::size_t>(i)] = static_cast<std::uint32_t>(start + i);
    Shape xs = {b};
    xs.insert(xs.end(), s.sample_shape.begin(), s.sample_shape.end());
    x.resize(xs, Format::FP32);
    if (cls) labels.reserve(static_cast<std::size_t>(b) * test.labels_per_sample * sizeof(std::int32_t));
    else targets.resize({b, s.outputs}, Format::FP32);
    upload_batch(be, test, idx, x.data(), labels.data(), targets.data());
    const Tensor& logits = m_model->forward(be, x);
    const std::int64_t rows = logits.numel() / s.outputs;  // b, or b * T tokens
    const float* lg = logits.format() == Format::FP32 ? logits.f32() : nullptr;
    if (!lg) {
      decode_to(be, logits, logits_f32);
      lg = logits_f32.f32();
    }
    std::int64_t* slot = results.as<std::int64_t>() + 2 * k;
    if (cls) {
      probs.resize({rows, s.outputs}, Format::FP32);
      be.cross_entropy_forward(lg, labels.as<std::int32_t>(), rows, s.outputs, probs.f32(),
                               reinterpret_cast<double*>(slot), slot + 1);
    } else {
      be.mse_forward(lg, targets.f32(), b * s.outputs, reinterpret_cast<double*>(slot));
    }
    sizes.push_back(b);
  }
  std::vector<std::int64_t> host(2 * sizes.size());
  results.download(host.data(), host.size() * sizeof(std::int64_t));
  double loss_sum = 0.0;
  std::int64_t correct_sum = 0;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    loss_sum += slot_double(host, 2 * k) * static_cast<double>(sizes[k]);
    if (cls) correct_sum += host[2 * k + 1];
  }
  EvalMetrics e;
  e.run_id = m_id;
  e.step = m_step;
  e.epoch = s.epoch;
  e.val_loss = n > 0 ? loss_sum / static_cast<double>(n) : 0.0;
  const double per = static_cast<double>(test.labels_per_sample);  // every window has as many labels
  e.val_accuracy = cls && n > 0 ? static_cast<double>(correct_sum) / (static_cast<double>(n) * per) : -1.0;
  // A text run's loss is per token: bits per token and perplexity follow.
  e.per_token = test.is_text();
  m_history.add(e);
  out.emplace_back(e);
  if (test.is_text() && m_eval_samples && m_config.model == "gpt") {
    // The same prompt, seed and temperature for every run: the runs differ
    // by their models alone.
    const std::vector<std::int32_t> prompt = evaluation_prompt(test, m_config.context);
    const SampleOptions o{kEvalSampleTokens, kEvalSampleTemperature, kEvalSampleSeed};
    TextSample t;
    t.run_id = m_id;
    t.step = m_step;
    t.prompt = decode_tokens(prompt, test.vocabulary);
    t.text = decode_tokens(generate_tokens(be, *m_model, m_config.context, prompt, o), test.vocabulary);
    m_history.add(t);
    out.emplace_back(std::move(t));
  }
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
  if (const Layer* l = m_model->find_leaf(layer)) {
    const std::string problem = precision_problem(*l, p);
    if (!problem.empty()) throw std::invalid_argument(problem);
  }
  BackendScope scope(m_backend);
  apply_layer_precision(m_backend, *m_model, layer, p, m_recipe.master_weights, m_recipe.fp8, m_recipe.stochastic_grads);
  m_recipe.overrides[layer] = p;
  // The graph baked the layer's old formats in: the next step recaptures.
  ++m_graph_epoch;
  drop_graph();
  // The optimizer's state layout is unchanged (same element counts); only
  // the stored formats of this layer's tensors changed.
  Event e{m_id, m_step, EventKind::PrecisionChange, layer, "", 0};
  e.precision = p;
  m_history.add(e);
}

void Run::set_loss_scaler(const LossScalerConfig& c) {
  m_impl->scaler.set_config(c);
  m_recipe.scaling = c;
  // The graph baked the rule in; the device's state follows the host's.
  ++m_graph_epoch;
  m_impl->scale_state_stale = true;
}

void Run::set_graph_capture(bool on) {
  m_graphs = on;
  if (!on) drop_graph();
}

void Run::drop_graph() {
  Impl& s = *m_impl;
  if (s.graph) s.step_control->graph_destroy(s.graph);
  s.graph = nullptr;
  s.graph_key = {};
}

// What a captured step cannot hold: anything the host decides or computes
// per step. Statistics steps, inspections and injected faults read more
// than the results slot; clipping scales by a norm the host reads; FP8's
// delayed scales, stochastic rounding's seeds and Adam's bias corrections
// change every step (a schedule's learning rate does too, but SGD reads it
// from the step state, written before each replay); the z-loss seeds its
// gradient with the scale by value; SGD's first step initialises its
// momentum (and the optimizer allocates its state then). Those steps run
// uncaptured (the graph stays for the next).
bool Run::capturable(const StepState& st) const {
  const Impl& s = *m_impl;
  if (!s.step_control || !m_graphs || st.statistics || st.inspect || st.fault || st.number < 2) return false;
  // FP8 layers leave amaxes pending for the host's delayed scaling.
  if (!s.pending.empty()) return false;
  // The optimizer's state exists (and SGD's first step, which initialises
  // its momentum, is past) only once it has stepped on the host.
  if (s.optimizer->step_count() < 1) return false;
  if (m_config.clip > 0.0 || m_config.z_loss > 0.0 || m_recipe.stochastic_grads ||
      m_config.weight_rounding == "stochastic")
    return false;
  if (dynamic_cast<const Adam*>(s.optimizer.get())) return false;
  for (Parameter* p : m_model->parameters())
    if (is_block_format(p->quantized)) return false;
  return true;
}

// The step on the device, captured once and replayed: the batch gathered
// into page-locked staging, one graph launch (forward, the loss gradient
// seeded with the device's scale, the fused unscale, the scale update and
// the found-inf decision, the guarded optimizer update, the results slot
// copied to page-locked memory), then the one read. The host's LossScaler
// mirrors the device's decision from the read (the same rule, bit for
// bit), and an overflow's attribution re-runs uncaptured afterwards: the
// skipped update left the weights as they were. The read is taken right
// after the launch (reading it a step later is not built yet).
bool Run::captured_step(StepState& st, std::vector<Record>& out) {
  Impl& s = *m_impl;
  if (!capturable(st)) return false;
  CudaStepControl& c = *s.step_control;
  auto key_now = [&] {
    return StepGraphKey{st.batch, s.x.data(), s.labels.data(), s.targets.data(), s.results.data(), m_graph_epoch};
  };
  const std::size_t P = s.param_count;
  const std::size_t state_slot = kCountsSlot + P + s.amax_slots;
  const std::size_t n_slots = state_slot + kScaleStateSlots;
  if (s.graph) {
    // Replay: the rows go to the staging the captured uploads read.
    c.set_gather_only(true);
    load_batch(st);
    c.set_gather_only(false);
    if (key_now() != s.graph_key) {
      drop_graph();
      s.warm_key = {};
      return false;  // the uncaptured step uploads the batch again
    }
  } else {
    // Capture after an uncaptured step of the same shapes and buffers
    // (nothing is allocated during a capture).
    if (s.warm_key.epoch != m_graph_epoch) return false;
    if (!s.results_pinned || s.results_pinned_slots < n_slots) {
      if (s.results_pinned) c.host_release(s.results_pinned);
      s.results_pinned = static_cast<std::int64_t*>(c.host_allocate(n_slots * sizeof(std::int64_t)));
      s.results_pinned_slots = n_slots;
    }
    c.capture_begin();
    c.set_step_state(s.scale_state);
    bool moved = false;
    try {
      load_batch(st);
      moved = key_now() != s.warm_key;
      if (!moved) forward_backward(st);
    } catch (...) {
      moved = true;
    }
    if (moved) {  // abandoned: the step runs uncaptured, as any other
      c.set_step_state(nullptr);
      try {
        if (PlCudaGraph* g = c.capture_end()) c.graph_destroy(g);
      } catch (const std::exception&) {
      }
      s.warm_key = {};
      return false;
    }
    try {
      auto* results = s.results.as<std::int64_t>();
      const std::vector<Parameter*> params = m_model->parameters();
      s.grads.bind(params, results + kCountsSlot, reinterpret_cast<double*>(results + kSumSquaresSlot));
      // LossScaler::unscale's pass; the step state supplies 1/scale.
      fused::unscale_grads_coded(m_backend, s.grads.views().data(), s.grads.codes().data(), s.grads.size(),
                                 s.scaler.inverse_scale(), s.grads.sum_squares());
      s.pending.clear();
      const LossScalerConfig& cfg = s.scaler.config();
      c.update_scale(results + kCountsSlot, static_cast<std::int64_t>(P),
                     static_cast<PlCudaScaleMode>(static_cast<int>(cfg.mode)), cfg.growth_factor, cfg.backoff_factor,
                     cfg.growth_interval, s.scale_state);
      update_parameters(learning_rate(s.schedule, m_step), st.number);  // guarded by the state
      m_backend.copy(results + state_slot, s.scale_state, sizeof(PlCudaScaleState));
      c.download_async(s.results_pinned, results, n_slots * sizeof(std::int64_t));
    } catch (...) {
      c.set_step_state(nullptr);
      drop_graph();
      if (PlCudaGraph* g = c.capture_end()) c.graph_destroy(g);
      s.warm_key = {};
      throw;
    }
    c.set_step_state(nullptr);
    s.graph = c.capture_end();
    s.graph_key = key_now();
  }
  if (s.scale_state_stale) {
    // The host decided the steps since the last replay: the device's copy
    // of the state takes the host's (the graph reads it at the launch).
    PlCudaScaleState host{};
    host.scale = s.scaler.scale();
    host.loss_scale = s.scaler.scale();
    host.inv_scale = s.scaler.inverse_scale();
    host.taken = 1;
    host.growth_tracker = s.scaler.growth_tracker();
    m_backend.upload(s.scale_state, &host, sizeof host);
    s.scale_state_stale = false;
  }
  // This step's learning rate, as Sgd::update rounds it to float.
  const float lr = static_cast<float>(learning_rate(s.schedule, m_step));
  m_backend.upload(reinterpret_cast<unsigned char*>(s.scale_state) + offsetof(PlCudaScaleState, lr), &lr, sizeof lr);
  c.graph_launch(s.graph);
  c.wait_mark(c.record_mark());
  ++m_captured_steps;

  take_results(st, s.results_pinned, P);
  s.scaler.record_device_unscale(st.nonfinite);
  if (st.overflow || !std::isfinite(st.loss)) attribute_overflow(st, out);
  // The host's mirror of the device's decision (step_or_skip without the update).
  st.grad_norm = std::sqrt(st.sum_squares);
  st.lr = learning_rate(s.schedule, m_step);
  st.taken = s.scaler.should_step();
  if (st.overflow || !std::isfinite(st.loss)) count_flushed_moments(*s.optimizer, s.slots.size(), m_step, s.flushed);
  s.scaler.update();
  PlCudaScaleState device;
  std::memcpy(&device, s.results_pinned + state_slot, sizeof device);
  if (device.loss_scale != s.scaler.scale() || (device.taken != 0) != st.taken ||
      device.growth_tracker != s.scaler.growth_tracker())
    throw std::logic_error("step " + std::to_string(st.number) +
                           ": the device's loss scale state no longer matches the LossScaler's");
  m_step = st.number;
  ++s.batch_in_epoch;
  return true;
}

}  // namespace engine
