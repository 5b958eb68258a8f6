// Model: a sequence of layers with its activations, and the builders of the three models.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "numeric/precision.h"
#include "nn/layer.h"
#include "tensor/tensor.h"

namespace engine {

class Backend;

// A feed-forward stack of layers. Owns the activations between layers, their
// gradients and the layers' contexts: allocated at the first step and reused
// (Tensor::resize keeps the storage), so steady-state training allocates no
// tensors. Used by one thread at a time (the trainer's); not copyable.
class Model {
 public:
  // sample_shape: one sample without the batch dimension ({1, 28, 28} for an
  // image, {2} for spirals); outputs: logits (classes) or regression targets.
  Model(std::string name, Shape sample_shape, std::int64_t outputs);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // Appends a layer (builders). Throws std::invalid_argument naming the
  // layer when it does not fit the previous layer's output.
  void add(std::unique_ptr<Layer> layer);

  const std::string& name() const { return m_name; }
  const Shape& sample_shape() const { return m_sample_shape; }
  std::int64_t outputs() const { return m_outputs; }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return m_layers; }

  // x: [B, sample...] in any format (usually FP32), or any [B, ...] with the
  // same number of values per sample (a flat [B, 784] batch for a
  // [1, 28, 28] model: staged into the model's own input tensor). Returns the
  // outputs [B, outputs] in the last layer's storage format (decode them
  // when not FP32). x must stay alive and unchanged until backward() (the
  // first layer's context refers to it). Throws std::invalid_argument on a
  // shape that does not fit. Trainer thread only.
  const Tensor& forward(Backend& be, const Tensor& x);
  // dlogits: [B, outputs], any format (carrying the loss scale). Fills every
  // parameter's grad (overwritten, not accumulated). Input gradients are
  // computed only as far back as the first layer with parameters (no work
  // for a leading Flatten or for the first layer's dx). Trainer thread only.
  void backward(Backend& be, const Tensor& dlogits);

  // Parameters in forward order (the optimizer's order).
  std::vector<Parameter*> parameters();
  // The leaf layers in forward order (composites expanded): the rows of the
  // precision table and of the non-finite attribution.
  std::vector<Layer*> leaves();
  // The leaf named `name`, or nullptr; leaf_names() lists them for the
  // message that refuses an unknown one ("fc1, relu1, fc2").
  Layer* find_leaf(std::string_view name);
  std::string leaf_names();
  // Sets every leaf's precision (a recipe uses amp/apply.h instead).
  void set_precision(const LayerPrecision& p);
  void set_track_nonfinite(bool on);
  // Leaves with parameters keep a copy of their outputs (Layer::capture_output).
  void set_capture_outputs(bool on);
  // The layers' scratch bytes (Layer::workspace_bytes) plus the staged input.
  std::size_t workspace_bytes() const;

  // Bytes of what the contexts hold for backward after the last forward
  // (0 before the first one).
  std::size_t saved_activation_bytes() const;
  // Bytes of saved copies only the CPU emulation needs (Context::emulation_bytes).
  std::size_t saved_emulation_bytes() const;
  std::int64_t parameter_count() const;

  // PyTorch's default initialisation from `seed`: Linear/Conv2d/PatchEmbed
  // weights and biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)), LayerNorm gamma 1
  // and beta 0, position embeddings N(0, 0.02). Own xoshiro256** generator and
  // own transforms (no std:: distributions, no libm in the draws), so a seed
  // gives the same weights bit for bit on every platform. Writes master (when
  // present) and weight; zeroes grads. Trainer thread only.
  //
  // zero_head: the output layer (the last leaf with parameters) starts at
  // zero, weights and bias, so the model's first outputs are exactly 0 — the
  // usual start of a regression head (its targets may be far smaller than a
  // default-initialised network's O(0.1) outputs). The other layers' draws
  // do not change.
  void init(std::uint64_t seed, bool zero_head = false);

  // One line per leaf: name, kind, output shape per sample, parameter count.
  std::string describe() const;

 private:
  std::string m_name;
  Shape m_sample_shape;
  std::int64_t m_outputs;
  std::vector<std::unique_ptr<Layer>> m_layers;
  std::vector<std::unique_ptr<Context>> m_contexts;
  // deque: contexts refer to these tensors, so they must never move.
  std::deque<Tensor> m_activations;  // output of layer i
  std::deque<Tensor> m_grads;        // gradient w.r.t. the input of layer i (unused for i = 0)
  Tensor m_input;                    // staged input when the batch came in another shape
  bool m_forward_done = false;
};

// 784-256-128-10 style MLP: Flatten (when the sample has more than one
// dimension), then Linear + ReLU per hidden width, then a Linear to
// `outputs`. Leaves "flatten", "fc1", "relu1", "fc2", "relu2", "fc3".
// Works for images, 2-D spirals and the 4-output tiny-gradients regression.
std::unique_ptr<Model> build_mlp(const Shape& sample_shape, std::int64_t outputs,
                                 const std::vector<std::int64_t>& widths = {256, 128});

// CNN: conv5x5(C -> c1, pad 2) + ReLU + maxpool2, conv5x5(c1 -> c2, pad 2) +
// ReLU + maxpool2, flatten, Linear(c2*H/4*W/4 -> hidden) + ReLU, Linear(->
// outputs). Needs an image sample [C, H, W] with H, W >= 4.
std::unique_ptr<Model> build_cnn(const Shape& sample_shape, std::int64_t outputs, std::int64_t c1 = 32,
                                 std::int64_t c2 = 64, std::int64_t hidden = 128);
// The same with one conv stage (conv5x5 + ReLU + maxpool2, leaves convN,
// reluN, poolN) per entry of `channels`; the sides must be multiples of
// 2^stages. {32, 64} is the model above, layer for layer.
std::unique_ptr<Model> build_cnn(const Shape& sample_shape, std::int64_t outputs,
                                 const std::vector<std::int64_t>& channels, std::int64_t hidden = 128);

// Vision transformer: patch x patch patches (16 tokens of 49 values for 28x28
// with patch 7) -> PatchEmbed(dim) with position embedding, `depth` pre-LN
// blocks (heads, GELU MLP of mlp_ratio*dim), final LayerNorm "norm", mean
// pool over tokens "pool", Linear head "head". Needs an image sample whose
// sides are multiples of `patch`, and dim a multiple of heads.
std::unique_ptr<Model> build_transformer(const Shape& sample_shape, std::int64_t outputs, std::int64_t dim = 64,
                                         std::int64_t heads = 4, std::int64_t depth = 2,
                                         std::int64_t mlp_ratio = 2, std::int64_t patch = 7);

// The gpt's settings (RunConfig's layers, width, heads, context, qk_norm).
struct GptShape {
  std::int64_t layers = 4, width = 128, heads = 4, context = 64;
  bool qk_norm = false;
};
// Decoder-only language model over token ids [B, context] (floats holding
// integers in [0, vocab)): token embedding "embed.tok" and learned
// positions "embed.pos", `layers` pre-LayerNorm blocks "blocks.N" (causal
// multi-head attention, GELU MLP of 4 x width; with qk_norm, LayerNorm on
// each head's queries and keys: leaves blocks.N.attn.q_norm and k_norm
// after attn.qkv), final LayerNorm "ln_f", Linear head
// "head" to the vocabulary: logits [B, context, vocab] (outputs() = vocab).
// Leaves: embed.tok, embed.pos, blocks.N.ln1, blocks.N.attn.{qkv, scores,
// softmax, values, proj}, blocks.N.ln2, blocks.N.{fc1, gelu, fc2}, ln_f, head.
// nanoGPT's initialisation (Parameter::Init).
std::unique_ptr<Model> build_gpt(std::int64_t vocab, const GptShape& shape);

// "mlp" | "cnn" | "transformer" with their defaults. Throws
// std::runtime_error with one line naming the model on an unknown name or a
// sample shape the model cannot take (a cnn on 2-D spirals).
std::unique_ptr<Model> build_model(std::string_view name, const Shape& sample_shape, std::int64_t outputs);

// The names build_model() knows, for menus and --help.
const std::vector<std::string>& model_names();

}  // namespace engine
