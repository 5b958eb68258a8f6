// Layer boundaries: the one place layers convert between formats.
#include "nn/layer_io.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "backend/fused.h"
#include "nn/fp8_scaling.h"
#include "numeric/cast.h"

namespace engine {

const Tensor& round_to(Backend& be, const Tensor& x, Format f, Tensor& ws, bool saturate) {
  const Format xf = x.format();
  if (xf == f || (f == Format::FP32 && xf == Format::TF32)) return x;
  ws.resize(x.shape(), f);
  if (x.numel() == 0) return ws;
  CastOptions opt;
  opt.saturate = saturate;
  be.convert(xf, x.data(), f, ws.data(), x.numel(), opt);
  return ws;
}

const float* f32_values(Backend& be, const Tensor& x, Tensor& ws) {
  if (is_f32_container(x.format())) return x.f32();
  decode_to(be, x, ws);
  return ws.f32();
}

const float* f32_rounded(Backend& be, const Tensor& x, Format f, Tensor& ws, bool saturate) {
  const Format xf = x.format();
  // Already representable: same format, or FP32 asked of any format (every
  // format's values are FP32 values).
  if (xf == f || f == Format::FP32) return f32_values(be, x, ws);
  if (is_f32_container(xf)) {
    ws.resize(x.shape(), Format::FP32);
    if (x.numel()) be.copy(ws.f32(), x.f32(), x.bytes());
  } else {
    decode_to(be, x, ws);
  }
  be.quantize(f, ws.f32(), ws.numel(), saturate);
  return ws.f32();
}

float* output_begin(Tensor& y, const Shape& s, Format f, Tensor& ws) {
  if (is_f32_container(f)) {
    y.resize(s, f);
    return y.f32();
  }
  ws.resize(s, Format::FP32);
  y.resize(s, f);
  return ws.f32();
}

void output_end(Backend& be, Tensor& y, Format f, Tensor& ws, bool saturate, std::int64_t* nonfinite) {
  const std::int64_t n = y.numel();
  if (is_f32_container(f)) {
    if (f == Format::TF32) be.quantize(Format::TF32, y.f32(), n, false);
    if (nonfinite) be.count_nonfinite(y.f32(), n, nonfinite);
    return;
  }
  if (nonfinite) {
    // Round in f32 first so the count sees the overflow the encode makes;
    // the encode below is then exact.
    be.quantize(f, ws.f32(), n, saturate);
    be.count_nonfinite(ws.f32(), n, nonfinite);
  }
  CastOptions opt;
  opt.saturate = saturate;
  if (n) be.convert(Format::FP32, ws.f32(), f, y.data(), n, opt);
}

float* grad_begin(Parameter& p, Tensor& ws) {
  if (p.grad.empty() || p.grad.shape() != p.shape) p.grad.resize(p.shape, Format::FP32);
  if (is_f32_container(p.grad.format())) return p.grad.f32();
  ws.resize(p.shape, Format::FP32);
  return ws.f32();
}

void grad_end(Backend& be, Parameter& p, Format grad_format, Tensor& ws, std::int64_t* nonfinite) {
  const std::int64_t n = p.grad.numel();
  const bool stored_f32 = is_f32_container(p.grad.format());
  float* g = stored_f32 ? p.grad.f32() : ws.f32();
  // The encode below rounds to p.grad's format itself (RNE, no saturation,
  // as quantize does): a separate rounding pass is needed only when the
  // gradient format differs from the storage, or the count must see the
  // rounded values.
  if (grad_format != Format::FP32 && (stored_f32 || grad_format != p.grad.format() || nonfinite))
    be.quantize(grad_format, g, n, false);
  if (nonfinite) be.count_nonfinite(g, n, nonfinite);
  if (!stored_f32 && n) be.convert(Format::FP32, g, p.grad.format(), p.grad.data(), n, {});
}

const float* weight_f32(Backend& be, const Parameter& p, Format compute, Tensor& ws) {
  const Tensor& w = p.weight;
  const bool in_compute = w.format() == compute || compute == Format::FP32;
  if (in_compute && is_f32_container(w.format()) && p.weight_scale == 1.0f) return w.f32();
  ws.resize(w.shape(), Format::FP32);
  const std::int64_t n = w.numel();
  if (n) be.convert(w.format(), w.data(), Format::FP32, ws.f32(), n, {});
  if (!in_compute) be.quantize(compute, ws.f32(), n, saturates_forward(compute));
  if (p.weight_scale != 1.0f) be.scale(ws.f32(), 1.0f / p.weight_scale, n);
  return ws.f32();
}

void round_scaled(Backend& be, const Tensor& x, Format f, float scale, Tensor& q, Tensor& ws, bool rounded_floats,
                  float* amax, float* sums, std::int64_t cols, std::int64_t hw) {
  const std::int64_t n = x.numel();
  ws.resize(x.shape(), Format::FP32);
  q.resize(x.shape(), f);
  if (n == 0) {
    be.fill(amax, 0.0f, 1);
    if (sums && cols > 0) be.fill(sums, 0.0f, cols);
    return;
  }
  // amax, scale and a saturating encode (RNE, then finite overflow clamps
  // to the format's max), and a decode only when asked. FP16/BF16 codes
  // are decoded by the backend as it casts (their values in f32 the same).
  CastOptions opt;
  opt.saturate = true;
  const bool f32_values = is_f32_container(x.format()), half = is_half_format(x.format());
  if (sums && hw == 1 && (f32_values || half)) {
    fused::scale_amax_encode_sums(be, f32_values ? Format::FP32 : x.format(), x.data(), n / cols, cols, scale, f, q.data(),
                              opt, amax, sums, ws.f32());
  } else if (f32_values && (rounded_floats || sums)) {
    // Codes, their decode and the channel sums in one pass; without sums
    // the tensor is one plane.
    const std::int64_t c = sums ? cols : 1, plane = sums ? hw : n;
    fused::scale_amax_encode_planes(be, x.f32(), n / (c * plane), c, plane, scale, f, q.data(), opt, amax,
                                rounded_floats ? ws.f32() : nullptr, sums, ws.f32());
    return;
  } else if (half && !sums) {
    fused::scale_amax_encode16(be, x.format(), x.data(), scale, f, q.data(), n, opt, amax, ws.f32());
  } else {
    const float* src = x.f32();
    if (!f32_values) {
      be.convert(x.format(), x.data(), Format::FP32, ws.f32(), n, {});
      src = ws.f32();
    }
    // Other codes (and FP16/BF16 with channel sums): from their decode.
    if (sums && hw == 1) be.column_sums(src, n / cols, cols, sums);
    else if (sums) be.channel_sums(src, sums, n / (cols * hw), cols, hw);
    fused::scale_amax_encode(be, src, scale, f, q.data(), n, opt, amax, ws.f32());
  }
  if (rounded_floats) be.convert(f, q.data(), Format::FP32, ws.f32(), n, {});
}

GemmOperand gemm_operand(const Tensor& t, std::int64_t offset, std::int64_t ld, bool trans) {
  GemmOperand op;
  op.data = static_cast<const std::byte*>(t.data()) + static_cast<std::size_t>(offset) * storage_bytes(t.format());
  op.format = t.format();
  op.trans = trans;
  op.ld = ld;
  return op;
}

Format common_compute(Format a, Format b) {
  if (a == b) return a;
  // Every FP8 value is exactly a BF16 value and an FP16 value.
  if ((a == Format::BF16 || is_fp8(a)) && (b == Format::BF16 || is_fp8(b))) return Format::BF16;
  if ((a == Format::FP16 || is_fp8(a)) && (b == Format::FP16 || is_fp8(b))) return Format::FP16;
  return Format::FP32;
}

Parameter make_parameter(std::string name, Shape shape, bool decay) {
  Parameter p;
  p.name = std::move(name);
  p.shape = shape;
  p.decay = decay;
  p.weight = Tensor(shape, Format::FP32);
  p.grad = Tensor(shape, Format::FP32);
  return p;
}

void throw_shape(const std::string& layer, const std::string& what, const Shape& got) {
  throw std::invalid_argument(layer + ": " + what + " (got " + (got.empty() ? "a scalar" : shape_string(got)) + ")");
}

}  // namespace engine

namespace engine {

void write_first(Backend& be, Tensor& t, float v) {
  if (t.numel() == 0) return;
  std::byte code[4];
  if (t.is_f32_storage()) std::memcpy(code, &v, 4);
  else cast_from_f32(t.format(), &v, code, 1);
  be.upload(t.data(), code, storage_bytes(t.format()));
}

void inject_value(Backend& be, Layer& l, Tensor& t, float v, NonfiniteSlot slot) {
  write_first(be, t, v);
  // Counted through the backend like any other non-finite value (the
  // counter lives in backend memory).
  if (std::int64_t* c = tracked(l, slot); c && t.numel() > 0) {
    Tensor one;
    one.resize({1}, Format::FP32);
    be.fill(one.f32(), v, 1);
    be.count_nonfinite(one.f32(), 1, c);
  }
}

void record_output(Backend& be, Layer& l, Tensor& y) {
  if (l.fault_output) inject_value(be, l, y, l.fault_value, NonfiniteSlot::Activation);
  if (!l.capture_output) return;
  l.captured_output.resize(y.shape(), Format::FP32);
  if (y.numel()) be.convert(y.format(), y.data(), Format::FP32, l.captured_output.data(), y.numel(), {});
}

void Layer::set_track_nonfinite(bool on) {
  track_nonfinite = on;
  if (!on) return;
  m_nonfinite.reserve(3 * sizeof(std::int64_t));
  m_nonfinite.zero(3 * sizeof(std::int64_t));
}

NonfiniteCounts Layer::nonfinite_counts() const {
  NonfiniteCounts c;
  if (!track_nonfinite || !m_nonfinite.data()) return c;
  std::int64_t v[3];
  m_nonfinite.download(v, sizeof v);
  c.activation = v[0];
  c.activation_grad = v[1];
  c.weight_grad = v[2];
  return c;
}

std::size_t tensors_bytes(std::initializer_list<const Tensor*> tensors) {
  std::size_t n = 0;
  for (const Tensor* t : tensors) n += t->bytes();
  return n;
}

}  // namespace engine
