// Layer boundaries: the one place layers convert between formats.
#include "nn/layer_io.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "amp/fp8_scaling.h"
#include "numeric/cast.h"

namespace engine {

namespace {

// Converts n values between two non-f32 storage formats through a small
// stack buffer, so no f32 workspace is needed (decodes are exact; the
// encode rounds once).
void transcode(Format from, const void* src, Format to, void* dst, std::int64_t n, bool saturate) {
  constexpr std::int64_t kChunk = 1024;
  float buf[kChunk];
  const auto* s = static_cast<const std::byte*>(src);
  auto* d = static_cast<std::byte*>(dst);
  const std::size_t sb = storage_bytes(from), db = storage_bytes(to);
  CastOptions opt;
  opt.saturate = saturate;
  for (std::int64_t i = 0; i < n; i += kChunk) {
    const std::int64_t m = std::min(kChunk, n - i);
    cast_to_f32(from, s + static_cast<std::size_t>(i) * sb, buf, static_cast<std::size_t>(m));
    cast_from_f32(to, buf, d + static_cast<std::size_t>(i) * db, static_cast<std::size_t>(m), opt);
  }
}

}  // namespace

const Tensor& round_to(const Tensor& x, Format f, Tensor& ws, bool saturate) {
  const Format xf = x.format();
  if (xf == f || (f == Format::FP32 && xf == Format::TF32)) return x;
  ws.resize(x.shape(), f);
  const auto n = static_cast<std::size_t>(x.numel());
  if (n == 0) return ws;
  CastOptions opt;
  opt.saturate = saturate;
  if (is_f32_container(f)) {
    // Decode (exact), then round to TF32 in place when asked.
    cast_to_f32(xf, x.data(), ws.f32(), n);
    if (f == Format::TF32) quantize_inplace(Format::TF32, ws.f32(), n);
  } else if (is_f32_container(xf)) {
    cast_from_f32(f, x.f32(), ws.data(), n, opt);
  } else {
    transcode(xf, x.data(), f, ws.data(), x.numel(), saturate);
  }
  return ws;
}

const float* f32_values(const Tensor& x, Tensor& ws) {
  if (is_f32_container(x.format())) return x.f32();
  decode_to(x, ws);
  return ws.f32();
}

const float* f32_rounded(Backend& be, const Tensor& x, Format f, Tensor& ws, bool saturate) {
  const Format xf = x.format();
  // Already representable: same format, or FP32 asked of any format (every
  // format's values are FP32 values).
  if (xf == f || f == Format::FP32) return f32_values(x, ws);
  if (is_f32_container(xf)) {
    ws.resize(x.shape(), Format::FP32);
    if (x.numel()) std::memcpy(ws.f32(), x.f32(), x.bytes());
  } else {
    decode_to(x, ws);
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
    if (nonfinite) *nonfinite += be.count_nonfinite(y.f32(), n);
    return;
  }
  if (nonfinite) {
    // Round in f32 first so the count sees the overflow the encode makes;
    // the encode below is then exact.
    be.quantize(f, ws.f32(), n, saturate);
    *nonfinite += be.count_nonfinite(ws.f32(), n);
  }
  CastOptions opt;
  opt.saturate = saturate;
  if (n) cast_from_f32(f, ws.f32(), y.data(), static_cast<std::size_t>(n), opt);
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
  if (nonfinite) *nonfinite += be.count_nonfinite(g, n);
  if (!stored_f32 && n) cast_from_f32(p.grad.format(), g, p.grad.data(), static_cast<std::size_t>(n));
}

const float* weight_f32(Backend& be, const Parameter& p, Format compute, Tensor& ws) {
  const Tensor& w = p.weight;
  const bool in_compute = w.format() == compute || compute == Format::FP32;
  if (in_compute && is_f32_container(w.format()) && p.weight_scale == 1.0f) return w.f32();
  ws.resize(w.shape(), Format::FP32);
  const std::int64_t n = w.numel();
  if (n) cast_to_f32(w.format(), w.data(), ws.f32(), static_cast<std::size_t>(n));
  if (!in_compute) be.quantize(compute, ws.f32(), n, saturates_forward(compute));
  if (p.weight_scale != 1.0f) be.scale(ws.f32(), 1.0f / p.weight_scale, n);
  return ws.f32();
}

float round_scaled(const Tensor& x, Format f, float scale, Tensor& q, Tensor& ws, bool rounded_floats) {
  const auto n = static_cast<std::size_t>(x.numel());
  ws.resize(x.shape(), Format::FP32);
  q.resize(x.shape(), f);
  if (n == 0) return 0.0f;
  const float* src = x.f32();
  if (!is_f32_container(x.format())) {
    cast_to_f32(x.format(), x.data(), ws.f32(), n);
    src = ws.f32();
  }
  // One pass for amax and scale, one saturating encode (RNE, then finite
  // overflow clamps to the format's max), and a decode only when asked.
  const float amax = scale_and_amax(src, scale, ws.f32(), x.numel());
  CastOptions opt;
  opt.saturate = true;
  cast_from_f32(f, ws.f32(), q.data(), n, opt);
  if (rounded_floats) cast_to_f32(f, q.data(), ws.f32(), n);
  return amax;
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
  auto fp8 = [](Format f) { return f == Format::E4M3 || f == Format::E5M2; };
  // Every FP8 value is exactly a BF16 value and an FP16 value.
  if ((a == Format::BF16 || fp8(a)) && (b == Format::BF16 || fp8(b))) return Format::BF16;
  if ((a == Format::FP16 || fp8(a)) && (b == Format::FP16 || fp8(b))) return Format::FP16;
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

void record_output(Layer& l, Tensor& y) {
  if (l.fault_output && y.numel() > 0) {
    if (y.format() == Format::FP32 || y.format() == Format::TF32) y.f32()[0] = l.fault_value;
    else cast_from_f32(y.format(), &l.fault_value, y.data(), 1);
    if (l.track_nonfinite) ++l.nonfinite.activation;
  }
  if (!l.capture_output) return;
  if (y.format() == Format::FP32 || y.format() == Format::TF32) {
    l.captured_output.assign(y.f32(), y.f32() + y.numel());
  } else {
    l.captured_output.resize(static_cast<std::size_t>(y.numel()));
    cast_to_f32(y.format(), y.data(), l.captured_output.data(), static_cast<std::size_t>(y.numel()));
  }
}

std::size_t tensors_bytes(std::initializer_list<const Tensor*> tensors) {
  std::size_t n = 0;
  for (const Tensor* t : tensors) n += t->bytes();
  return n;
}

}  // namespace engine
