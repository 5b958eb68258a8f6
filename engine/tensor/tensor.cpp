// Tensor storage: aligned allocation in the format's own width.
#include "tensor/tensor.h"

#include <cassert>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include "numeric/cast.h"

namespace engine {

std::int64_t shape_numel(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

std::string shape_string(const Shape& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) out += 'x';
    out += std::to_string(s[i]);
  }
  return out;
}

void Tensor::AlignedFree::operator()(std::byte* p) const noexcept { std::free(p); }

Tensor::Tensor(Shape shape, Format format) {
  resize(shape, format);
  zero();
}

Tensor::Tensor(Tensor&& o) noexcept
    : m_shape(std::move(o.m_shape)), m_format(o.m_format), m_numel(o.m_numel), m_capacity(o.m_capacity),
      m_data(std::move(o.m_data)) {
  o.m_shape.clear();
  o.m_numel = 0;
  o.m_capacity = 0;
}

Tensor& Tensor::operator=(Tensor&& o) noexcept {
  if (this != &o) {
    m_shape = std::move(o.m_shape);
    m_format = o.m_format;
    m_numel = o.m_numel;
    m_capacity = o.m_capacity;
    m_data = std::move(o.m_data);
    o.m_shape.clear();
    o.m_numel = 0;
    o.m_capacity = 0;
  }
  return *this;
}

void Tensor::resize(const Shape& shape, Format format) {
  for (auto d : shape)
    if (d < 0) throw std::invalid_argument("tensor: negative dimension in shape " + shape_string(shape));
  m_shape = shape;
  m_format = format;
  m_numel = shape_numel(shape);
  const std::size_t need = bytes();
  if (need > m_capacity) {
    // 64-byte alignment: full AVX-512 vectors and no false sharing between threads.
    const std::size_t rounded = (need + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) throw std::bad_alloc();
    m_data.reset(static_cast<std::byte*>(p));
    m_capacity = rounded;
  }
}

void Tensor::zero() {
  if (m_numel) std::memset(m_data.get(), 0, bytes());
}

Tensor Tensor::clone() const {
  Tensor t;
  t.resize(m_shape, m_format);
  if (m_numel) std::memcpy(t.data(), data(), bytes());
  return t;
}

float* Tensor::f32() {
  assert(m_format == Format::FP32 || m_format == Format::TF32);
  return reinterpret_cast<float*>(m_data.get());
}
const float* Tensor::f32() const {
  assert(m_format == Format::FP32 || m_format == Format::TF32);
  return reinterpret_cast<const float*>(m_data.get());
}
std::uint16_t* Tensor::u16() {
  assert(storage_bytes(m_format) == 2);
  return reinterpret_cast<std::uint16_t*>(m_data.get());
}
const std::uint16_t* Tensor::u16() const {
  assert(storage_bytes(m_format) == 2);
  return reinterpret_cast<const std::uint16_t*>(m_data.get());
}
std::uint8_t* Tensor::u8() {
  assert(storage_bytes(m_format) == 1);
  return reinterpret_cast<std::uint8_t*>(m_data.get());
}
const std::uint8_t* Tensor::u8() const {
  assert(storage_bytes(m_format) == 1);
  return reinterpret_cast<const std::uint8_t*>(m_data.get());
}

std::vector<float> Tensor::to_f32() const {
  std::vector<float> out(static_cast<std::size_t>(m_numel));
  if (m_numel) cast_to_f32(m_format, data(), out.data(), static_cast<std::size_t>(m_numel));
  return out;
}

void Tensor::from_f32(const float* src, std::int64_t n) {
  if (n != m_numel)
    throw std::invalid_argument("tensor: from_f32 with " + std::to_string(n) + " values into " +
                                shape_string(m_shape));
  if (n) cast_from_f32(m_format, src, data(), static_cast<std::size_t>(n));
}

Tensor Tensor::from_values(Shape shape, Format format, const std::vector<float>& values) {
  Tensor t;
  t.resize(shape, format);
  t.from_f32(values.data(), static_cast<std::int64_t>(values.size()));
  return t;
}

void decode_to(const Tensor& src, Tensor& out) {
  out.resize(src.shape(), Format::FP32);
  if (src.numel()) cast_to_f32(src.format(), src.data(), out.f32(), static_cast<std::size_t>(src.numel()));
}

void encode_to(const Tensor& src_f32, Format f, Tensor& dst, bool saturate) {
  dst.resize(src_f32.shape(), f);
  CastOptions opt;
  opt.saturate = saturate;
  if (src_f32.numel())
    cast_from_f32(f, src_f32.f32(), dst.data(), static_cast<std::size_t>(src_f32.numel()), opt);
}

}  // namespace engine
