// Token and learned position embeddings: the first layers of a language model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "nn/layer.h"

namespace engine {

// What TokenEmbedding saves: the ids (the caller's input, as floats).
struct EmbeddingContext : Context {
  const float* ids = nullptr;
  std::int64_t tokens = 0;
  std::size_t bytes() const override { return 0; }  // the model's input, kept by its owner
};

// ids [B, T] (floats holding exact integers in [0, vocab)) -> [B, T, dim],
// row i the table's row ids[i] (Backend::embedding). Parameter
// "<name>.weight" [vocab, dim], stored like any weight in the layer's
// compute format. Backward writes the table's gradient as a scatter-add in
// a fixed order (the same bits at any thread count); the ids get no
// gradient (dx, when asked for, is zeros). Kind "embedding". The caller
// keeps x alive until backward. Trainer thread only.
class TokenEmbedding : public Layer {
 public:
  TokenEmbedding(std::string name, std::int64_t vocab, std::int64_t dim);

  const char* kind() const override { return "embedding"; }
  Shape output_shape(const Shape& in) const override;
  std::unique_ptr<Context> make_context() const override;
  void forward(Backend& be, const Tensor& x, Tensor& y, Context& ctx) override;
  void backward(Backend& be, const Tensor& dy, Tensor* dx, Context& ctx) override;
  std::vector<Parameter*> parameters() override { return {&m_weight}; }
  Parameter& weight() { return m_weight; }

 private:
  std::int64_t m_vocab, m_dim;
  Parameter m_weight;
  Tensor m_ids32, m_w32, m_y32, m_dy32, m_dw32, m_dx32;
  std::size_t workspace_bytes() const override {
    return tensors_bytes({&m_ids32, &m_w32, &m_y32, &m_dy32, &m_dw32, &m_dx32});
  }
};

struct PositionEmbeddingContext : Context {
  std::int64_t batch = 0, tokens = 0;
  std::size_t bytes() const override { return 0; }  // nothing saved: the backward needs only dy
};

// x [B, T', dim] -> x + pos[0..T'), T' <= context: the learned positions
// (parameter "<name>.weight" [context, dim]) added to every sample. The
// sum runs in FP32 on x and pos rounded to the compute format; backward
// passes dy on as dx and sums it over the batch into pos's gradient
// (column sums: a fixed order). Kind "pos_embedding". Trainer thread only.
class PositionEmbedding : public Layer {
 public:
  PositionEmbedding(std::string name, std::int64_t context, std::int64_t dim);

  const char* kind() const override { return "pos_embedding"; }
  Shape output_shape(const Shape& in) const override;
  std::unique_ptr<Context> make_context() const override;
  void forward(Backend& be, const Tensor& x, Tensor& y, Context& ctx) override;
  void backward(Backend& be, const Tensor& dy, Tensor* dx, Context& ctx) override;
  std::vector<Parameter*> parameters() override { return {&m_weight}; }
  Parameter& weight() { return m_weight; }

 private:
  std::int64_t m_context, m_dim;
  Parameter m_weight;
  Tensor m_x32, m_w32, m_rep, m_y32, m_dy32, m_dw32, m_dx32;
  std::size_t workspace_bytes() const override {
    return tensors_bytes({&m_x32, &m_w32, &m_rep, &m_y32, &m_dy32, &m_dw32, &m_dx32});
  }
};

}  // namespace engine
