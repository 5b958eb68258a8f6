// Model: forward/backward over a layer sequence, initialisation, and the three builders.
#include "nn/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "nn/attention.h"
#include "nn/composite.h"
#include "nn/conv2d.h"
#include "nn/embedding.h"
#include "nn/flatten.h"
#include "nn/layernorm.h"
#include "nn/linear.h"
#include "nn/maxpool2d.h"
#include "nn/mean_pool.h"
#include "nn/patch_embed.h"
#include "nn/relu.h"
#include "nn/transformer_block.h"

namespace engine {

namespace {

// xoshiro256** (Blackman & Vigna), seeded through SplitMix64. Integer
// arithmetic only, so the same seed gives the same bits everywhere.
class Xoshiro256 {
 public:
  Xoshiro256(std::uint64_t seed, std::uint64_t stream) {
    std::uint64_t sm = seed ^ (0xD1B54A32D192ED03ull * (stream + 1));
    for (auto& w : m_s) {
      std::uint64_t z = (sm += 0x9E3779B97F4A7C15ull);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      w = z ^ (z >> 31);
    }
  }
  std::uint64_t next() {
    const std::uint64_t result = rotl(m_s[1] * 5, 7) * 9;
    const std::uint64_t t = m_s[1] << 17;
    m_s[2] ^= m_s[0];
    m_s[3] ^= m_s[1];
    m_s[1] ^= m_s[2];
    m_s[0] ^= m_s[3];
    m_s[2] ^= t;
    m_s[3] = rotl(m_s[3], 45);
    return result;
  }
  // [0, 1) with 53 random bits: k * 2^-53, exact.
  double uniform01() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Approximately N(0, 1): the Irwin-Hall sum of 12 uniforms minus 6 (mean 0,
  // variance 1, tails cut at +-6). Chosen over Box-Muller because it needs
  // no log/cos, whose last bits differ between C libraries; double additions
  // are exactly rounded everywhere.
  double normal() {
    double s = 0.0;
    for (int i = 0; i < 12; ++i) s += uniform01();
    return s - 6.0;
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t m_s[4];
};

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Writes FP32 values into a parameter's master (when present) and weight.
void write_parameter(Parameter& p, const std::vector<float>& v) {
  if (p.has_master()) p.master.from_f32(v.data(), p.master.numel());
  // Unscaled values: any FP8 delayed scaling of the weight starts again at
  // the next layout (amp/apply.h).
  p.weight_scale = 1.0f;
  p.weight_history = DelayedScale();
  p.weight.from_f32(v.data(), p.weight.numel());
  p.grad.zero();
}

Shape with_batch(std::int64_t batch, const Shape& sample) {
  Shape s = {batch};
  s.insert(s.end(), sample.begin(), sample.end());
  return s;
}

Shape without_batch(const Shape& s) { return Shape(s.begin() + 1, s.end()); }

}  // namespace

Model::Model(std::string name, Shape sample_shape, std::int64_t outputs)
    : m_name(std::move(name)), m_sample_shape(std::move(sample_shape)), m_outputs(outputs) {
  if (m_sample_shape.empty() || shape_numel(m_sample_shape) <= 0)
    throw std::invalid_argument(m_name + ": the sample shape must have positive dimensions (got " +
                                shape_string(m_sample_shape) + ")");
  if (outputs <= 0) throw std::invalid_argument(m_name + ": the output count must be positive");
}

void Model::add(std::unique_ptr<Layer> layer) {
  if (m_forward_done) throw std::logic_error(m_name + ": layers are added before the first forward");
  // Shape check with batch 1; throws naming the layer.
  Shape s = with_batch(1, m_sample_shape);
  for (const auto& l : m_layers) s = l->output_shape(s);
  layer->output_shape(s);
  m_contexts.push_back(layer->make_context());
  m_layers.push_back(std::move(layer));
  m_activations.emplace_back();
  m_grads.emplace_back();
}

const Tensor& Model::forward(Backend& be, const Tensor& x) {
  if (m_layers.empty()) throw std::logic_error(m_name + ": forward on a model with no layers");
  const std::int64_t per_sample = shape_numel(m_sample_shape);
  if (x.rank() < 1 || x.dim(0) < 1 || x.numel() != x.dim(0) * per_sample)
    throw std::invalid_argument(m_name + ": input " + shape_string(x.shape()) + " is not a batch of " +
                                shape_string(m_sample_shape) + " samples");
  const Shape expected = with_batch(x.dim(0), m_sample_shape);
  const Tensor* in = &x;
  if (x.shape() != expected) {
    // Same values, other shape (a flat batch for an image model): stage them.
    m_input.resize(expected, x.format());
    be.copy(m_input.data(), x.data(), x.bytes());
    in = &m_input;
  }
  // Attribution steps count afresh on every pass (zeroed counters).
  for (Layer* l : leaves())
    if (l->track_nonfinite) l->set_track_nonfinite(true);
  for (std::size_t i = 0; i < m_layers.size(); ++i) {
    // A layer that can (a Flatten, a GELU) writes the cast the next layer
    // makes of its input first; a scaled (FP8) one that layer then takes
    // through forward_cast.
    Layer& layer = *m_layers[i];
    Layer::InputCast cast;
    if (i + 1 < m_layers.size() && !layer.fault_output &&
        m_layers[i + 1]->input_cast(layer.output_shape(in->shape()), cast) &&
        layer.forward_cast_for(be, *in, m_activations[i], *m_contexts[i], cast)) {
      record_output(be, *m_layers[i], m_activations[i]);
      in = &m_activations[i];
      if (!cast.amax) continue;
      ++i;
      m_layers[i]->forward_cast(be, *in, cast.scale, m_activations[i], *m_contexts[i]);
      record_output(be, *m_layers[i], m_activations[i]);
      in = &m_activations[i];
      continue;
    }
    m_layers[i]->forward(be, *in, m_activations[i], *m_contexts[i]);
    record_output(be, *m_layers[i], m_activations[i]);
    in = &m_activations[i];
  }
  m_forward_done = true;
  return m_activations.back();
}

void Model::backward(Backend& be, const Tensor& dlogits) {
  if (!m_forward_done) throw std::logic_error(m_name + ": backward before forward");
  const Tensor& out = m_activations.back();
  if (dlogits.shape() != out.shape())
    throw std::invalid_argument(m_name + ": output gradient " + shape_string(dlogits.shape()) +
                                " does not match the outputs " + shape_string(out.shape()));
  // Nothing before the first layer with parameters needs a gradient.
  std::size_t first = 0;
  while (first + 1 < m_layers.size() && m_layers[first]->parameters().empty()) ++first;
  const Tensor* dy = &dlogits;
  for (std::size_t i = m_layers.size(); i-- > first;) {
    Tensor* dx = i > first ? &m_grads[i] : nullptr;
    m_layers[i]->backward(be, *dy, dx, *m_contexts[i]);
    dy = dx;
  }
}

std::vector<Parameter*> Model::parameters() {
  std::vector<Parameter*> out;
  for (const auto& l : m_layers)
    for (Parameter* p : l->parameters()) out.push_back(p);
  return out;
}

std::vector<Layer*> Model::leaves() {
  std::vector<Layer*> out;
  for (const auto& l : m_layers)
    for (Layer* leaf : l->leaves()) out.push_back(leaf);
  return out;
}

Layer* Model::find_leaf(std::string_view name) {
  for (const auto& l : m_layers)
    for (Layer* leaf : l->leaves())
      if (leaf->name() == name) return leaf;
  return nullptr;
}

std::string Model::leaf_names() {
  std::string names;
  for (Layer* l : leaves()) names += (names.empty() ? "" : ", ") + l->name();
  return names;
}

void Model::set_precision(const LayerPrecision& p) {
  for (Layer* l : leaves()) l->set_precision(p);
}

void Model::set_track_nonfinite(bool on) {
  for (const auto& l : m_layers) l->set_track_nonfinite(on);
  for (Layer* l : leaves()) l->set_track_nonfinite(on);
}

void Model::set_capture_outputs(bool on) {
  for (Layer* l : leaves()) {
    l->capture_output = on && !l->parameters().empty();
    if (!l->capture_output) l->captured_output = Tensor();
  }
}

std::size_t Model::workspace_bytes() const {
  std::size_t n = m_input.bytes();
  for (const auto& l : m_layers) {
    n += l->workspace_bytes();
    for (Layer* leaf : l->leaves())
      if (leaf != l.get()) n += leaf->workspace_bytes();
  }
  return n;
}

std::size_t Model::saved_activation_bytes() const {
  std::size_t n = 0;
  for (const auto& c : m_contexts) n += c->bytes();
  return n;
}

std::size_t Model::saved_emulation_bytes() const {
  std::size_t n = 0;
  for (const auto& c : m_contexts) n += c->emulation_bytes();
  return n;
}

std::int64_t Model::parameter_count() const {
  std::int64_t n = 0;
  for (const auto& l : m_layers)
    for (Parameter* p : l->parameters()) n += p->numel();
  return n;
}

void Model::init(std::uint64_t seed, bool zero_head) {
  std::uint64_t stream = 0;
  const std::vector<Layer*> all = leaves();
  Layer* head = nullptr;
  for (Layer* leaf : all)
    if (!leaf->parameters().empty()) head = leaf;
  for (Layer* leaf : all) {
    const std::vector<Parameter*> params = leaf->parameters();
    // fan_in of the layer's weight: in_features, or C_in * k * k for a conv.
    double fan_in = 0.0;
    for (Parameter* p : params)
      if (ends_with(p->name, ".weight")) fan_in = static_cast<double>(p->numel() / p->shape[0]);
    for (Parameter* p : params) {
      // One stream per parameter: a parameter's values do not depend on the
      // sizes of the ones before it.
      Xoshiro256 rng(seed, stream++);
      std::vector<float> v(static_cast<std::size_t>(p->numel()));
      if (p->init == Parameter::Init::Normal) {
        for (auto& x : v) x = static_cast<float>(p->init_std * rng.normal());
      } else if (p->init == Parameter::Init::Zero) {
        std::fill(v.begin(), v.end(), 0.0f);
      } else if (ends_with(p->name, ".gamma")) {
        std::fill(v.begin(), v.end(), 1.0f);
      } else if (ends_with(p->name, ".beta")) {
        std::fill(v.begin(), v.end(), 0.0f);
      } else if (ends_with(p->name, ".pos")) {
        for (auto& x : v) x = static_cast<float>(0.02 * rng.normal());
      } else if (ends_with(p->name, ".weight") || ends_with(p->name, ".bias")) {
        // PyTorch: kaiming_uniform_(a=sqrt(5)) for the weight and the bias
        // bound both come to 1/sqrt(fan_in). sqrt is exactly rounded (IEEE).
        const double bound = 1.0 / std::sqrt(fan_in);
        for (auto& x : v) x = static_cast<float>(-bound + 2.0 * bound * rng.uniform01());
      } else {
        throw std::logic_error(m_name + ": no initialiser for parameter " + p->name);
      }
      // The streams above are still consumed, so zero_head leaves every
      // other parameter's values as they would be without it.
      if (zero_head && leaf == head) std::fill(v.begin(), v.end(), 0.0f);
      write_parameter(*p, v);
    }
  }
}

std::string Model::describe() const {
  struct Row {
    std::string name, kind, out;
    std::int64_t params;
  };
  std::vector<Row> rows;
  Shape s = with_batch(1, m_sample_shape);
  for (const auto& l : m_layers) {
    std::vector<std::pair<Layer*, Shape>> leaves;
    if (auto* c = dynamic_cast<CompositeLayer*>(l.get()))
      c->leaf_shapes(s, leaves);
    else
      leaves.emplace_back(l.get(), l->output_shape(s));
    for (auto& [leaf, shape] : leaves) {
      std::int64_t n = 0;
      for (Parameter* p : leaf->parameters()) n += p->numel();
      rows.push_back({leaf->name(), leaf->kind(), shape_string(without_batch(shape)), n});
    }
    s = l->output_shape(s);
  }
  std::size_t wn = 0, wk = 0, wo = 0;
  for (const Row& r : rows) {
    wn = std::max(wn, r.name.size());
    wk = std::max(wk, r.kind.size());
    wo = std::max(wo, r.out.size());
  }
  std::ostringstream os;
  for (const Row& r : rows) {
    os << r.name << std::string(wn - r.name.size() + 2, ' ') << r.kind << std::string(wk - r.kind.size() + 2, ' ')
       << r.out << std::string(wo - r.out.size() + 2, ' ') << r.params << " params\n";
  }
  return os.str();
}

// ---------------------------------------------------------------- builders

namespace {

void check_outputs(const Model& m) {
  Shape s = with_batch(1, m.sample_shape());
  for (const auto& l : m.layers()) s = l->output_shape(s);
  if (s != Shape{1, m.outputs()})
    throw std::logic_error(m.name() + ": builds outputs " + shape_string(s) + ", not 1x" + std::to_string(m.outputs()));
}

void check_image(const char* model, const Shape& sample, std::int64_t multiple) {
  if (sample.size() != 3 || sample[0] < 1)
    throw std::runtime_error(std::string(model) + ": needs image samples [channels, height, width], got " +
                             (sample.empty() ? std::string("none") : shape_string(sample)));
  if (sample[1] < multiple || sample[2] < multiple || sample[1] % multiple || sample[2] % multiple)
    throw std::runtime_error(std::string(model) + ": image sides " + std::to_string(sample[1]) + "x" +
                             std::to_string(sample[2]) + " must be multiples of " + std::to_string(multiple));
}

}  // namespace

std::unique_ptr<Model> build_mlp(const Shape& sample_shape, std::int64_t outputs,
                                 const std::vector<std::int64_t>& widths) {
  auto m = std::make_unique<Model>("mlp", sample_shape, outputs);
  std::int64_t in = shape_numel(sample_shape);
  if (sample_shape.size() > 1) m->add(std::make_unique<Flatten>("flatten"));
  for (std::size_t i = 0; i < widths.size(); ++i) {
    if (widths[i] <= 0)
      throw std::runtime_error("mlp: hidden width " + std::to_string(i + 1) + " must be positive (got " +
                               std::to_string(widths[i]) + ")");
    const std::string n = std::to_string(i + 1);
    m->add(std::make_unique<Linear>("fc" + n, in, widths[i]));
    m->add(std::make_unique<ReLU>("relu" + n));
    in = widths[i];
  }
  m->add(std::make_unique<Linear>("fc" + std::to_string(widths.size() + 1), in, outputs));
  check_outputs(*m);
  return m;
}

std::unique_ptr<Model> build_cnn(const Shape& sample_shape, std::int64_t outputs, std::int64_t c1, std::int64_t c2,
                                 std::int64_t hidden) {
  return build_cnn(sample_shape, outputs, std::vector<std::int64_t>{c1, c2}, hidden);
}

std::unique_ptr<Model> build_cnn(const Shape& sample_shape, std::int64_t outputs,
                                 const std::vector<std::int64_t>& channels, std::int64_t hidden) {
  if (channels.empty() || channels.size() > 8) throw std::runtime_error("cnn: needs 1 to 8 conv stages");
  // Each stage halves the sides (maxpool 2): they must stay whole.
  check_image("cnn", sample_shape, std::int64_t{1} << channels.size());
  for (std::int64_t ch : channels)
    if (ch <= 0) throw std::runtime_error("cnn: channel and hidden widths must be positive");
  if (hidden <= 0) throw std::runtime_error("cnn: channel and hidden widths must be positive");
  const std::int64_t H = sample_shape[1], W = sample_shape[2];
  const auto stages = static_cast<std::int64_t>(channels.size());
  auto m = std::make_unique<Model>("cnn", sample_shape, outputs);
  std::int64_t in = sample_shape[0];
  for (std::int64_t i = 0; i < stages; ++i) {
    const std::string n = std::to_string(i + 1);
    m->add(std::make_unique<Conv2d>("conv" + n, in, channels[static_cast<std::size_t>(i)], 5, 2));
    m->add(std::make_unique<ReLU>("relu" + n));
    m->add(std::make_unique<MaxPool2d>("pool" + n, 2));
    in = channels[static_cast<std::size_t>(i)];
  }
  m->add(std::make_unique<Flatten>("flatten"));
  m->add(std::make_unique<Linear>("fc1", in * (H >> stages) * (W >> stages), hidden));
  m->add(std::make_unique<ReLU>("relu" + std::to_string(stages + 1)));
  m->add(std::make_unique<Linear>("fc2", hidden, outputs));
  check_outputs(*m);
  return m;
}

std::unique_ptr<Model> build_transformer(const Shape& sample_shape, std::int64_t outputs, std::int64_t dim,
                                         std::int64_t heads, std::int64_t depth, std::int64_t mlp_ratio,
                                         std::int64_t patch) {
  if (patch <= 0) throw std::runtime_error("transformer: patch size must be positive");
  check_image("transformer", sample_shape, patch);
  if (dim <= 0 || heads <= 0 || dim % heads)
    throw std::runtime_error("transformer: width " + std::to_string(dim) + " must be a positive multiple of heads (" +
                             std::to_string(heads) + ")");
  if (depth < 1 || mlp_ratio < 1) throw std::runtime_error("transformer: depth and mlp ratio must be at least 1");
  auto m = std::make_unique<Model>("transformer", sample_shape, outputs);
  m->add(std::make_unique<PatchEmbed>("patch_embed", sample_shape[0], sample_shape[1], sample_shape[2], patch, dim));
  for (std::int64_t i = 0; i < depth; ++i)
    m->add(std::make_unique<TransformerBlock>("block" + std::to_string(i), dim, heads, mlp_ratio));
  m->add(std::make_unique<LayerNorm>("norm", dim));
  m->add(std::make_unique<MeanPool>("pool"));
  m->add(std::make_unique<Linear>("head", dim, outputs));
  check_outputs(*m);
  return m;
}

std::unique_ptr<Model> build_gpt(std::int64_t vocab, const GptShape& s) {
  if (vocab < 1) throw std::runtime_error("gpt: the vocabulary must have at least one token");
  if (s.context < 1) throw std::runtime_error("gpt: context must be at least 1");
  if (s.width <= 0 || s.heads <= 0 || s.width % s.heads)
    throw std::runtime_error("gpt: width " + std::to_string(s.width) + " must be a positive multiple of heads (" +
                             std::to_string(s.heads) + ")");
  if (s.layers < 1) throw std::runtime_error("gpt: layers must be at least 1");
  auto m = std::make_unique<Model>("gpt", Shape{s.context}, vocab);
  m->add(std::make_unique<TokenEmbedding>("embed.tok", vocab, s.width));
  m->add(std::make_unique<PositionEmbedding>("embed.pos", s.context, s.width));
  for (std::int64_t i = 0; i < s.layers; ++i)
    m->add(std::make_unique<TransformerBlock>("blocks." + std::to_string(i), s.width, s.heads, 4, true, s.qk_norm));
  m->add(std::make_unique<LayerNorm>("ln_f", s.width));
  m->add(std::make_unique<Linear>("head", s.width, vocab));
  // nanoGPT's _init_weights: every Linear and Embedding weight N(0, 0.02),
  // biases 0, and the projections into the residual stream (attention's
  // proj, the MLP's second Linear) N(0, 0.02 / sqrt(2 L)) (GPT-2).
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(s.layers));
  for (Layer* leaf : m->leaves()) {
    if (std::strcmp(leaf->kind(), "layernorm") == 0) continue;
    const bool residual = ends_with(leaf->name(), ".attn.proj") || ends_with(leaf->name(), ".fc2");
    for (Parameter* p : leaf->parameters()) {
      if (ends_with(p->name, ".bias")) {
        p->init = Parameter::Init::Zero;
      } else {
        p->init = Parameter::Init::Normal;
        p->init_std = residual ? residual_std : 0.02;
      }
    }
  }
  Shape out = m->layers().back()->output_shape({1, s.context, s.width});
  if (out != Shape{1, s.context, vocab}) throw std::logic_error("gpt: builds outputs " + shape_string(out));
  return m;
}

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = {"mlp", "cnn", "transformer", "gpt"};
  return names;
}

std::unique_ptr<Model> build_model(std::string_view name, const Shape& sample_shape, std::int64_t outputs) {
  if (outputs <= 0) throw std::runtime_error("model " + std::string(name) + ": output count must be positive");
  if (name == "mlp") return build_mlp(sample_shape, outputs);
  if (name == "cnn") return build_cnn(sample_shape, outputs);
  if (name == "transformer") return build_transformer(sample_shape, outputs);
  throw std::runtime_error("unknown model '" + std::string(name) + "' (expected mlp, cnn or transformer)");
}

}  // namespace engine
