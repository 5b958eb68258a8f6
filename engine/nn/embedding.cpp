// Token and position embeddings on Backend::embedding, repeat_rows, add and column_sums.
#include "nn/embedding.h"

#include <stdexcept>

#include "backend/backend.h"
#include "nn/layer_io.h"

namespace engine {

// ---------------------------------------------------------------- tokens

TokenEmbedding::TokenEmbedding(std::string name, std::int64_t vocab, std::int64_t dim)
    : Layer(std::move(name)), m_vocab(vocab), m_dim(dim) {
  if (vocab <= 0 || dim <= 0)
    throw std::invalid_argument(this->name() + ": vocabulary (" + std::to_string(vocab) + ") and width (" +
                                std::to_string(dim) + ") must be positive");
  m_weight = make_parameter(this->name() + ".weight", {vocab, dim}, true);
}

Shape TokenEmbedding::output_shape(const Shape& in) const {
  if (in.size() != 2 || in[0] < 1 || in[1] < 1) throw_shape(name(), "expects token ids [batch, tokens]", in);
  return {in[0], in[1], m_dim};
}

std::unique_ptr<Context> TokenEmbedding::make_context() const { return std::make_unique<EmbeddingContext>(); }

void TokenEmbedding::forward(Backend& be, const Tensor& x, Tensor& y, Context& context) {
  auto& ctx = static_cast<EmbeddingContext&>(context);
  const Shape ys = output_shape(x.shape());
  const LayerPrecision& p = m_precision;
  // The ids as floats (exact: they are integers), never rounded.
  ctx.ids = f32_values(be, x, m_ids32);
  ctx.tokens = x.numel();
  const float* w = weight_f32(be, m_weight, p.compute, m_w32);
  float* yf = output_begin(y, ys, p.storage, m_y32);
  be.embedding(Pass::Forward, ctx.ids, w, yf, ctx.tokens, m_vocab, m_dim);
  output_end(be, y, p.storage, m_y32, saturates_forward(p.storage), tracked(*this, NonfiniteSlot::Activation));
}

void TokenEmbedding::backward(Backend& be, const Tensor& dy, Tensor* dx, Context& context) {
  auto& ctx = static_cast<EmbeddingContext&>(context);
  if (!ctx.ids) throw std::logic_error(name() + ": backward before forward");
  const Shape ys = {dy.rank() == 3 ? dy.dim(0) : 0, dy.rank() == 3 ? dy.dim(1) : 0, m_dim};
  if (dy.rank() != 3 || dy.dim(2) != m_dim || dy.dim(0) * dy.dim(1) != ctx.tokens)
    throw_shape(name(), "gradient does not match the output of " + std::to_string(ctx.tokens) + " tokens", dy.shape());
  const LayerPrecision& p = m_precision;
  const float* dyf = f32_rounded(be, dy, p.grad, m_dy32, false);
  float* g = grad_begin(m_weight, m_dw32);
  be.embedding(Pass::Backward, ctx.ids, dyf, g, ctx.tokens, m_vocab, m_dim);
  grad_end(be, m_weight, p.grad, m_dw32, tracked(*this, NonfiniteSlot::WeightGrad));
  if (dx) {
    // Token ids are not differentiable.
    float* dxf = output_begin(*dx, {ys[0], ys[1]}, p.grad, m_dx32);
    be.fill_zero(dxf, static_cast<std::size_t>(ctx.tokens) * sizeof(float));
    output_end(be, *dx, p.grad, m_dx32, false, nullptr);
  }
}

// ---------------------------------------------------------------- positions

PositionEmbedding::PositionEmbedding(std::string name, std::int64_t context, std::int64_t dim)
    : Layer(std::move(name)), m_context(context), m_dim(dim) {
  if (context <= 0 || dim <= 0)
    throw std::invalid_argument(this->name() + ": context (" + std::to_string(context) + ") and width (" +
                                std::to_string(dim) + ") must be positive");
  m_weight = make_parameter(this->name() + ".weight", {context, dim}, true);
}

Shape PositionEmbedding::output_shape(const Shape& in) const {
  if (in.size() != 3 || in[2] != m_dim || in[1] < 1 || in[1] > m_context)
    throw_shape(name(), "expects [batch, tokens <= " + std::to_string(m_context) + ", " + std::to_string(m_dim) + "]",
                in);
  return in;
}

std::unique_ptr<Context> PositionEmbedding::make_context() const {
  return std::make_unique<PositionEmbeddingContext>();
}

void PositionEmbedding::forward(Backend& be, const Tensor& x, Tensor& y, Context& context) {
  auto& ctx = static_cast<PositionEmbeddingContext&>(context);
  const Shape ys = output_shape(x.shape());
  const LayerPrecision& p = m_precision;
  ctx.batch = ys[0];
  ctx.tokens = ys[1];
  const std::int64_t plane = ctx.tokens * m_dim;
  const float* xf = f32_rounded(be, x, p.compute, m_x32, saturates_forward(p.compute));
  const float* w = weight_f32(be, m_weight, p.compute, m_w32);
  // pos[0..T') once per sample, then one add over the batch.
  m_rep.resize({ctx.batch, ctx.tokens, m_dim}, Format::FP32);
  be.repeat_rows(w, m_rep.f32(), 1, ctx.batch, plane);
  float* yf = output_begin(y, ys, p.storage, m_y32);
  be.add(xf, m_rep.f32(), yf, ctx.batch * plane);
  output_end(be, y, p.storage, m_y32, saturates_forward(p.storage), tracked(*this, NonfiniteSlot::Activation));
}

void PositionEmbedding::backward(Backend& be, const Tensor& dy, Tensor* dx, Context& context) {
  auto& ctx = static_cast<PositionEmbeddingContext&>(context);
  if (ctx.batch == 0) throw std::logic_error(name() + ": backward before forward");
  const Shape ys = {ctx.batch, ctx.tokens, m_dim};
  if (dy.shape() != ys) throw_shape(name(), "gradient does not match the output " + shape_string(ys), dy.shape());
  const LayerPrecision& p = m_precision;
  const std::int64_t plane = ctx.tokens * m_dim;
  const float* dyf = f32_rounded(be, dy, p.grad, m_dy32, false);
  float* g = grad_begin(m_weight, m_dw32);
  // Positions past the input's length get no gradient.
  if (ctx.tokens < m_context)
    be.fill_zero(g + plane, static_cast<std::size_t>((m_context - ctx.tokens) * m_dim) * sizeof(float));
  be.column_sums(dyf, ctx.batch, plane, g);
  grad_end(be, m_weight, p.grad, m_dw32, tracked(*this, NonfiniteSlot::WeightGrad));
  if (dx) {
    float* dxf = output_begin(*dx, ys, p.grad, m_dx32);
    be.copy(dxf, dyf, static_cast<std::size_t>(ctx.batch * plane) * sizeof(float));
    output_end(be, *dx, p.grad, m_dx32, false, tracked(*this, NonfiniteSlot::ActivationGrad));
  }
}

}  // namespace engine
