// GradSet: per-parameter FP32 views of a step's gradients.
#include "amp/grad_set.h"

#include "nn/parameter.h"

namespace engine {

void GradSet::bind(std::span<Parameter* const> params, std::int64_t* counts, double* sum_squares) {
  const std::size_t n = params.size();
  m_params.assign(params.begin(), params.end());
  m_views.resize(n);
  m_codes.assign(n, GradCodes{});
  if (m_scratch.size() < n) m_scratch.resize(n);
  m_sum_squares = sum_squares;
  for (std::size_t i = 0; i < n; ++i) {
    Tensor& g = params[i]->grad;
    float* values;
    if (g.format() == Format::FP32) {
      values = g.f32();
    } else {
      m_scratch[i].resize(g.shape(), Format::FP32);
      values = m_scratch[i].f32();
      m_codes[i] = {g.format(), g.data()};
    }
    m_views[i] = {values, g.numel(), counts ? counts + i : nullptr};
  }
}

void GradSet::decode(Backend& be) {
  for (std::size_t i = 0; i < m_views.size(); ++i) {
    if (!coded(i)) continue;
    decode_to(be, m_params[i]->grad, m_scratch[i]);
    m_views[i].data = m_scratch[i].f32();
  }
}

std::int64_t GradSet::scratch_bytes() const {
  std::int64_t b = 0;
  for (const Tensor& t : m_scratch) b += static_cast<std::int64_t>(t.bytes());
  return b;
}

}  // namespace engine
