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
#include "backend/backend.h"
#include "data/batch.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "nn/layer.h"
#include "nn/model.h"
#include "numeric/cast.h"
#include "numeric/convert.h"
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

  for (const auto& [name, p] : m_config.layers) m_recipe.overrides[name] = p;
  if (m_config.loss_scale_set) m_recipe.scaling = m_config.loss_scale;
  apply_recipe(*m_model, m_recipe);
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
  m_steps.reserve(static_cast<std::size_t>(std::min<std::int64_t>(m_total_steps, 1 << 20)));
}

Run::~Run() = default;

bool Run::is_classification() const { return m_data->train.is_classification(); }

std::string Run::backend_name() const { return m_backend.info().name; }

MemoryBytes Run::memory() const {
  MemoryBytes m;
  for (Layer* l : m_model->leaves()) {
    for (Parameter* p : l->parameters()) {
      m.weights += static_cast<std::int64_t>(p->weight.bytes());
      m.master += static_cast<std::int64_t>(p->master.bytes());
      m.grads += static_cast<std::int64_t>(p->grad.bytes());
    }
  }
  const Impl& s = *m_impl;
  m.optimizer = static_cast<std::int64_t>(s.optimizer->state_bytes());
  m.activations = static_cast<std::int64_t>(m_model->saved_activation_bytes());
  std::int64_t ws = static_cast<std::int64_t>(s.x.bytes() + s.targets.bytes() + s.logits_f32.bytes() +
                                              s.probs.bytes() + s.dlogits.bytes()) +
                    static_cast<std::int64_t>(s.labels.size() * sizeof(std::int32_t));
  for (const Tensor& t : s.grad_scratch) ws += static_cast<std::int64_t>(t.bytes());
  for (const Tensor& t : s.weight_scratch) ws += static_cast<std::int64_t>(t.bytes());
  m.workspace = ws;
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
    m_model->backward(m_backend, s.dlogits);
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
  const std::int64_t step_no = m_step + 1;
  if (overflow || !std::isfinite(loss)) {
    // Attribution: per-layer counting costs a pass over every activation
    // and gradient, so it runs only on steps that overflowed. The step is
    // recomputed with counting on — same batch, same weights, same scale,
    // so the same values — and the gradients unscaled again.
    m_model->set_track_nonfinite(true);
    (void)forward_backward();
    m_model->set_track_nonfinite(false);
    record_overflow_events(step_no, out);
    gradient_spans();
    LossScaler::multiply_by_inverse(s.scaler_spans, loss_scale);
  }
  if (m_config.stats_every > 0 && (step_no == 1 || step_no % m_config.stats_every == 0))
    gradient_statistics(step_no, loss_scale, out);

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
        // Updates smaller than half an ulp of the stored weight vanish here.
        cast_from_f32(u.format(), s.weight_scratch[i].f32(), u.data(), static_cast<std::size_t>(u.numel()));
      }
    }
    refresh_weights(*m_model);
  }
  s.scaler.update();

  // --- metrics ---
  m_step = step_no;
  ++s.batch_in_epoch;
  const double wall_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  m_wall_seconds += wall_ms / 1000.0;
  m_samples += B;
  if (overflow) ++m_overflow_steps;
  if (!take) ++m_skipped_steps;

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
  m_peak_memory = std::max(m_peak_memory, m.mem.total());

  if (!std::isfinite(loss)) {
    Event e{m_id, step_no, "nan_loss", "", "loss", 1};
    m_events.push_back(e);
    out.emplace_back(e);
  }
  if (!take) {
    Event e{m_id, step_no, "skipped", "", "optimizer", nonfinite};
    m_events.push_back(e);
    out.emplace_back(e);
  }
  if (s.scaler.scale() != loss_scale) {
    Event e{m_id, step_no, "scale_change", "", overflow ? "backoff" : "growth",
            static_cast<std::int64_t>(s.scaler.scale())};
    m_events.push_back(e);
    out.emplace_back(e);
  }
  m_steps.push_back(m);
  out.emplace_back(m);
}

void Run::record_overflow_events(std::int64_t step, std::vector<Record>& out) {
  // Backward order: the first row of a step is the first layer whose
  // gradients went non-finite as backward ran.
  std::vector<Layer*> leaves = m_model->leaves();
  for (auto it = leaves.rbegin(); it != leaves.rend(); ++it) {
    const Layer& l = **it;
    const NonfiniteCounts& c = l.nonfinite;
    auto emit = [&](const char* tensor, std::int64_t n) {
      if (n <= 0) return;
      Event e{m_id, step, "overflow", l.name(), tensor, n};
      m_events.push_back(e);
      out.emplace_back(e);
    };
    emit("activation_grad", c.activation_grad);
    emit("weight_grad", c.weight_grad);
  }
  // Forward activations that overflowed (in forward order).
  for (Layer* l : leaves) {
    if (l->nonfinite.activation > 0) {
      Event e{m_id, step, "overflow", l->name(), "activation", l->nonfinite.activation};
      m_events.push_back(e);
      out.emplace_back(e);
    }
  }
}

void Run::gradient_statistics(std::int64_t step, float loss_scale, std::vector<Record>& out) {
  Impl& s = *m_impl;
  std::vector<Parameter*> all = m_model->parameters();
  std::size_t pi = 0;
  for (Layer* l : m_model->leaves()) {
    std::vector<Parameter*> ps = l->parameters();
    if (ps.empty()) continue;
    GradStats g;
    g.run_id = m_id;
    g.step = step;
    g.layer = l->name();
    const Format f = l->precision().grad;
    g.format = format_name(f);
    g.log2_lo = -40;
    g.histogram.assign(64, 0);
    // Exact rounding thresholds of format f, in double (RNE: a value at
    // exactly half the smallest subnormal rounds to zero, and a value at
    // min_normal - min_subnormal/2 rounds up to min_normal).
    const FormatInfo& fi = format_info(f);
    const double under = fi.min_subnormal / 2.0;
    const double sub_hi = fi.min_normal - fi.min_subnormal / 2.0;
    // First magnitude that overflows: max + half an ulp of max; for E4M3 the
    // tie at 464 still rounds to 448, so only values above it overflow.
    const double ulp_max = std::ldexp(1.0, std::ilogb(fi.max) - fi.man_bits);
    const double over = fi.max + ulp_max / 2.0;
    const bool tie_overflows = fi.has_inf;  // IEEE: max has an odd mantissa, the tie goes to inf
    std::int64_t uu = 0, su = 0, ou = 0, us = 0, ss = 0, os = 0;
    auto classify = [&](double a, std::int64_t& u, std::int64_t& sb, std::int64_t& o) {
      if (a <= under) ++u;
      else if (a < sub_hi) ++sb;
      else if (a > over || (tie_overflows && a == over)) ++o;
    };
    const double scale = static_cast<double>(loss_scale);
    for (Parameter* p : ps) {
      // The unscaled f32 gradient of p (same span order as parameters()).
      while (pi < all.size() && all[pi] != p) ++pi;
      if (pi >= all.size()) break;
      const float* gv = s.clip_spans[pi].data;
      const std::int64_t n = static_cast<std::int64_t>(s.clip_spans[pi].n);
      g.total += n;
      for (std::int64_t i = 0; i < n; ++i) {
        const float v = gv[i];
        if (v == 0.0f) {
          ++g.zeros;
          continue;
        }
        if (!std::isfinite(v)) {
          ++ou;
          ++os;
          continue;
        }
        const double a = std::fabs(static_cast<double>(v));
        int bin = std::ilogb(v) - g.log2_lo;  // floor(log2|v|), subnormals included
        bin = std::clamp(bin, 0, static_cast<int>(g.histogram.size()) - 1);
        ++g.histogram[static_cast<std::size_t>(bin)];
        classify(a, uu, su, ou);
        classify(a * scale, us, ss, os);
      }
    }
    const double t = g.total > 0 ? static_cast<double>(g.total) : 1.0;
    g.underflow_unscaled = uu / t;
    g.subnormal_unscaled = su / t;
    g.overflow_unscaled = ou / t;
    g.underflow_scaled = us / t;
    g.subnormal_scaled = ss / t;
    g.overflow_scaled = os / t;
    m_grad_stats.push_back(g);
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
  m_evals.push_back(e);
  out.emplace_back(e);
  return e;
}

RunSummary Run::summary() const {
  RunSummary r;
  r.run_id = m_id;
  r.recipe = m_config.recipe;
  r.model = m_config.model;
  r.dataset = m_config.dataset;
  r.backend = backend_name();
  r.steps = m_step;
  r.final_loss = m_steps.empty() ? std::numeric_limits<double>::quiet_NaN() : m_steps.back().loss;
  if (!m_evals.empty()) {
    r.val_accuracy = m_evals.back().val_accuracy;
    r.val_loss = m_evals.back().val_loss;
  }
  r.overflow_steps = m_overflow_steps;
  r.skipped_steps = m_skipped_steps;
  r.final_loss_scale = m_impl->scaler.scale();
  r.peak_memory_bytes = m_peak_memory;
  r.wall_seconds = m_wall_seconds;
  r.samples_per_second = m_wall_seconds > 0 ? static_cast<double>(m_samples) / m_wall_seconds : 0.0;
  return r;
}

void Run::set_layer_precision(const std::string& layer, const LayerPrecision& p) {
  apply_layer_precision(*m_model, layer, p, m_recipe.master_weights, m_recipe.fp8);
  m_recipe.overrides[layer] = p;
  // The optimizer's state layout is unchanged (same element counts); only
  // the stored formats of this layer's tensors changed.
  Event e{m_id, m_step, "precision_change", layer,
          std::string(format_key(p.compute)) + "/" + format_key(p.storage) + "/" +
              format_key(p.accumulate) + "/" + format_key(p.grad),
          0};
  m_events.push_back(e);
}

void Run::set_loss_scaler(const LossScalerConfig& c) {
  m_impl->scaler.set_config(c);
  m_recipe.scaling = c;
}

}  // namespace engine
