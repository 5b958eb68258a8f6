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
#include "backend/fused.h"
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
  // Step buffers (reused every step), all backend memory.
  Tensor x;
  Buffer labels;  // int32 per sample
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
  std::vector<GradBuffer> unscale_views;
  std::vector<GradCodes> grad_codes;  // the coded gradients unscale_grads_coded decodes
  // The step's results, read back in one transfer (see step()).
  Buffer results;
  std::vector<std::int64_t> results_host;
  std::vector<DelayedScale*> pending;
  std::vector<UpdateEncode> encodes;  // the slots' encodes (ParamSlot::encode)
  Tensor fp8_scratch;                 // FP8 weights' f32 scratch (UpdateEncode::scratch)
  std::size_t amax_slots = 0;  // the model's delayed scales: the most amaxes a step can have pending
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

// The results slots of a step (8 bytes each): the loss (double), the
// correct count, the sum of squared unscaled gradients (double), one
// non-finite count per parameter, then one pending FP8 amax (float) each.
enum : std::size_t { kLossSlot = 0, kCorrectSlot = 1, kSumSquaresSlot = 2, kCountsSlot = 3 };

double slot_double(const std::vector<std::int64_t>& r, std::size_t k) {
  double d;
  std::memcpy(&d, &r[k], sizeof d);
  return d;
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
  // Every buffer the run allocates is the backend's.
  BackendScope scope(m_backend);
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
  apply_recipe(m_backend, *m_model, m_recipe);
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
  for (Layer* l : m_model->leaves())
    s.amax_slots += l->delayed_scales().size() + l->parameters().size();

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
                (is_classification() && !s.x.empty() ? s.x.dim(0) * static_cast<std::int64_t>(sizeof(std::int32_t)) : 0);
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
  BackendScope scope(m_backend);
  Backend& be = m_backend;
  Impl& s = *m_impl;
  const Dataset& train = m_data->train;

  // --- batch (uploaded) ---
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
  if (cls) s.labels.reserve(static_cast<std::size_t>(B) * sizeof(std::int32_t));
  else s.targets.resize({B, s.outputs}, Format::FP32);
  upload_batch(be, train, idx, s.x.data(), s.labels.data(), s.targets.data());

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
    if (p.has_master()) write_first(be, p.master, fault->value);
    write_first(be, p.weight, fault->value);
  }
  if (fault && fault->target == FaultTarget::Activations) {
    fault->layer->fault_output = true;
    fault->layer->fault_value = fault->value;
  }
  // Statistics steps keep each parameterised leaf's output for the
  // comparison with the FP32 shadow pass.
  if (stats_step) m_model->set_capture_outputs(true);

  std::vector<Parameter*> params = m_model->parameters();
  const std::size_t P = params.size();
  s.results.reserve((kCountsSlot + P + s.amax_slots) * sizeof(std::int64_t));
  auto* results = s.results.as<std::int64_t>();
  auto* loss_slot = reinterpret_cast<double*>(results + kLossSlot);
  auto* correct_slot = results + kCorrectSlot;
  auto forward_backward = [&]() {
    const Tensor& logits = m_model->forward(be, s.x);
    const float* lg = logits.format() == Format::FP32 ? logits.f32() : nullptr;
    if (!lg) {
      decode_to(be, logits, s.logits_f32);
      lg = s.logits_f32.f32();
    }
    s.dlogits.resize({B, s.outputs}, Format::FP32);
    if (cls) {
      s.probs.resize({B, s.outputs}, Format::FP32);
      be.cross_entropy_forward(lg, s.labels.as<std::int32_t>(), B, s.outputs, s.probs.f32(), loss_slot, correct_slot);
      be.cross_entropy_backward(s.probs.f32(), s.labels.as<std::int32_t>(), B, s.outputs, loss_scale, s.dlogits.f32());
    } else {
      be.mse_forward(lg, s.targets.f32(), B * s.outputs, loss_slot);
      be.mse_backward(lg, s.targets.f32(), B * s.outputs, loss_scale, s.dlogits.f32());
    }
    if (fault && fault->target == FaultTarget::Loss) write_first(be, s.dlogits, fault->value);
    m_model->backward(be, s.dlogits);
    if (fault && fault->target == FaultTarget::Gradients) {
      inject_value(be, *fault->layer, fault->layer->parameters().front()->grad, fault->value,
                   NonfiniteSlot::WeightGrad);
    }
  };
  forward_backward();

  // --- gradients as f32 spans; unscale in FP32 and find inf/NaN (one fused pass) ---
  s.grad_scratch.resize(P);
  s.weight_scratch.resize(P);
  // decode false: coded gradients get their f32 scratch sized, and
  // s.grad_codes says where the unscale pass decodes them from.
  auto gradient_spans = [&](bool decode) {
    s.scaler_spans.clear();
    s.clip_spans.clear();
    s.grad_codes.assign(P, GradCodes{});
    for (std::size_t i = 0; i < P; ++i) {
      Parameter& p = *params[i];
      float* g;
      if (p.grad.format() == Format::FP32) {
        g = p.grad.f32();
      } else if (decode) {
        decode_to(be, p.grad, s.grad_scratch[i]);
        g = s.grad_scratch[i].f32();
      } else {
        s.grad_scratch[i].resize(p.grad.shape(), Format::FP32);
        g = s.grad_scratch[i].f32();
        s.grad_codes[i] = {p.grad.format(), p.grad.data()};
      }
      s.scaler_spans.push_back({g, p.grad.numel()});
      s.clip_spans.push_back({g, static_cast<std::size_t>(p.grad.numel())});
    }
  };
  gradient_spans(false);
  s.unscale_views.clear();
  for (std::size_t i = 0; i < P; ++i)
    s.unscale_views.push_back({s.clip_spans[i].data, s.scaler_spans[i].n, results + kCountsSlot + i});
  fused::unscale_grads_coded(be, s.unscale_views.data(), s.grad_codes.data(), P, s.scaler.inverse_scale(),
                         reinterpret_cast<double*>(results + kSumSquaresSlot));
  // This step's FP8 amaxes join the read.
  s.pending = pending_amaxes(*m_model);
  const std::size_t n_slots = kCountsSlot + P + s.pending.size();
  for (std::size_t k = 0; k < s.pending.size(); ++k)
    be.copy(results + kCountsSlot + P + k, s.pending[k]->pending_slot(), sizeof(float));

  // --- the step's one read: loss, correct, gradient norm, non-finite counts, amaxes ---
  s.results_host.resize(n_slots);
  be.download(s.results_host.data(), results, n_slots * sizeof(std::int64_t));
  const std::vector<std::int64_t>& r = s.results_host;
  for (std::size_t k = 0; k < s.pending.size(); ++k) {
    float a;
    std::memcpy(&a, &r[kCountsSlot + P + k], sizeof a);
    s.pending[k]->take_pending(a);
  }
  double loss = slot_double(r, kLossSlot);
  if (fault && fault->target == FaultTarget::Loss) loss = fault->value;
  const std::int64_t correct = r[kCorrectSlot];
  double sum_squares = slot_double(r, kSumSquaresSlot);
  std::int64_t nonfinite = 0;
  for (std::size_t i = 0; i < P; ++i) nonfinite += r[kCountsSlot + i];
  s.scaler.record_nonfinite(nonfinite);
  const bool overflow = nonfinite > 0;
  if (overflow || !std::isfinite(loss)) {
    // Attribution: per-layer counting costs a pass over every activation
    // and gradient, so it runs only on steps that overflowed. The step is
    // recomputed with counting on — same batch, same weights, same scale,
    // so the same values — and the gradients unscaled again.
    m_model->set_track_nonfinite(true);
    forward_backward();
    record_overflow_events(step_no, out);
    if (!inspect) m_model->set_track_nonfinite(false);
    gradient_spans(true);
    LossScaler::multiply_by_inverse(be, s.scaler_spans, loss_scale);
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
        const NonfiniteCounts c = l->nonfinite_counts();
        li.nonfinite_activation = c.activation;
        li.nonfinite_activation_grad = c.activation_grad;
        li.nonfinite_weight_grad = c.weight_grad;
        bool first = true;
        for (Parameter* p : l->parameters()) {
          li.has_weights = true;
          while (pi < P && params[pi] != p) ++pi;
          if (pi >= P) break;
          std::vector<float> g(s.clip_spans[pi].n);
          be.download(g.data(), s.clip_spans[pi].data, g.size() * sizeof(float));
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
      m_model->set_track_nonfinite(false);
    }
  }

  const double grad_norm = std::sqrt(sum_squares);
  if (m_config.clip > 0.0 && !overflow) clip_grad_norm(be, s.clip_spans, grad_norm, m_config.clip);

  // --- optimizer step, or skip ---
  const double lr = learning_rate(s.schedule, m_step);
  const bool take = s.scaler.should_step();
  if (take) {
    // The update also writes each parameter's stored copy (ParamSlot::
    // encode): master weights refreshed into the layer's format, or
    // low-precision weights re-encoded from their decoded update.
    std::int64_t scaled = 0;
    for (std::size_t i = 0; i < P; ++i)
      if (params[i]->has_master() && params[i]->weight_history.active())
        scaled = std::max(scaled, params[i]->master.numel());
    if (scaled > 0) s.fp8_scratch.resize({scaled}, Format::FP32);
    s.encodes.resize(P);
    s.slots.clear();
    for (std::size_t i = 0; i < P; ++i) {
      Parameter& p = *params[i];
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
          e.opt.seed = m_config.seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(step_no) * 1000003ull + i;
        }
        s.encodes[i] = e;
        encode = &s.encodes[i];
      }
      if (p.has_master()) {
        s.encodes[i] = refresh_encode(p, scaled > 0 ? s.fp8_scratch.f32() : nullptr);
        encode = &s.encodes[i];
      }
      s.slots.push_back(
          {value, s.clip_spans[i].data, static_cast<std::size_t>(p.grad.numel()), p.decay, encode, in_codes});
    }
    s.optimizer->step(be, s.slots, lr);
    for (std::size_t i = 0; i < P; ++i) {
      Tensor& u = params[i]->updated();
      if (u.format() == Format::TF32) be.quantize(Format::TF32, u.f32(), u.numel(), false);
    }
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
  const std::int64_t B = logits.dim(0);
  s.shadow_dlogits.resize({B, s.outputs}, Format::FP32);
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
      const float* own = s.clip_spans[pi].data;
      const std::int64_t n = static_cast<std::int64_t>(s.clip_spans[pi].n);
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
  const std::int64_t n = static_cast<std::int64_t>(test.count);
  const std::int64_t bs = m_config.batch;
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
    if (cls) labels.reserve(static_cast<std::size_t>(b) * sizeof(std::int32_t));
    else targets.resize({b, s.outputs}, Format::FP32);
    upload_batch(be, test, idx, x.data(), labels.data(), targets.data());
    const Tensor& logits = m_model->forward(be, x);
    const float* lg = logits.format() == Format::FP32 ? logits.f32() : nullptr;
    if (!lg) {
      decode_to(be, logits, logits_f32);
      lg = logits_f32.f32();
    }
    std::int64_t* slot = results.as<std::int64_t>() + 2 * k;
    if (cls) {
      probs.resize({b, s.outputs}, Format::FP32);
      be.cross_entropy_forward(lg, labels.as<std::int32_t>(), b, s.outputs, probs.f32(),
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
  BackendScope scope(m_backend);
  apply_layer_precision(m_backend, *m_model, layer, p, m_recipe.master_weights, m_recipe.fp8, m_recipe.stochastic_grads);
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
