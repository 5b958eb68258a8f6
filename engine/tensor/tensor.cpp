// Tensor storage: aligned allocation in the format's own width.
#include "tensor/tensor.h"


#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <vector>

#include "backend/backend.h"
#include "backend/host_memory.h"
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

namespace {
thread_local Backend* t_current = nullptr;
thread_local bool t_shape_only = false;
}  // namespace

ShapeOnlyScope::ShapeOnlyScope() : m_previous(t_shape_only) { t_shape_only = true; }
ShapeOnlyScope::~ShapeOnlyScope() { t_shape_only = m_previous; }

Backend* current_backend() { return t_current; }
BackendScope::BackendScope(Backend& be) : m_previous(t_current) { t_current = &be; }
BackendScope::~BackendScope() { t_current = m_previous; }

Buffer::~Buffer() { reset(); }

Buffer::Buffer(Buffer&& o) noexcept : m_data(o.m_data), m_capacity(o.m_capacity), m_backend(o.m_backend) {
  o.m_data = nullptr;
  o.m_capacity = 0;
  o.m_backend = nullptr;
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    reset();
    m_data = o.m_data;
    m_capacity = o.m_capacity;
    m_backend = o.m_backend;
    o.m_data = nullptr;
    o.m_capacity = 0;
    o.m_backend = nullptr;
  }
  return *this;
}

void Buffer::reset() noexcept {
  if (m_data) {
    if (m_backend) m_backend->release(m_data);
    else std::free(m_data);
  }
  m_data = nullptr;
  m_capacity = 0;
  m_backend = nullptr;
}

void Buffer::reserve(std::size_t bytes) {
  Backend* be = current_backend();
  if (!be && m_data) be = m_backend;
  if (bytes <= m_capacity && be == m_backend) return;
  if (bytes == 0 && !m_data) return;
  const std::size_t rounded = (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = be ? be->allocate(rounded) : host_aligned_allocate(rounded);
  reset();
  m_data = p;
  m_capacity = rounded;
  m_backend = be;
}

void Buffer::upload(const void* src, std::size_t bytes, std::size_t offset) {
  if (!bytes) return;
  void* dst = static_cast<std::byte*>(m_data) + offset;
  if (m_backend) m_backend->upload(dst, src, bytes);
  else std::memcpy(dst, src, bytes);
}

void Buffer::download(void* dst, std::size_t bytes, std::size_t offset) const {
  if (!bytes) return;
  const void* src = static_cast<const std::byte*>(m_data) + offset;
  if (m_backend) m_backend->download(dst, src, bytes);
  else std::memcpy(dst, src, bytes);
}

void Buffer::zero(std::size_t bytes) {
  if (!bytes) return;
  if (m_backend) m_backend->fill_zero(m_data, bytes);
  else std::memset(m_data, 0, bytes);
}

Tensor::Tensor(Shape shape, Format format) {
  resize(shape, format);
  zero();
}

Tensor::Tensor(Tensor&& o) noexcept
    : m_shape(std::move(o.m_shape)), m_format(o.m_format), m_numel(o.m_numel), m_buffer(std::move(o.m_buffer)) {
  o.m_shape.clear();
  o.m_numel = 0;
}

Tensor& Tensor::operator=(Tensor&& o) noexcept {
  if (this != &o) {
    m_shape = std::move(o.m_shape);
    m_format = o.m_format;
    m_numel = o.m_numel;
    m_buffer = std::move(o.m_buffer);
    o.m_shape.clear();
    o.m_numel = 0;
  }
  return *this;
}

void Tensor::resize(const Shape& shape, Format format) {
  for (auto d : shape)
    if (d < 0) throw std::invalid_argument("tensor: negative dimension in shape " + shape_string(shape));
  const std::int64_t numel = shape_numel(shape);
  const std::size_t need = static_cast<std::size_t>(numel) * storage_bytes(format);
  if (!t_shape_only) m_buffer.reserve(need);
  m_shape = shape;
  m_format = format;
  m_numel = numel;
}

void Tensor::zero() {
  if (!t_shape_only) m_buffer.zero(bytes());
}

Tensor Tensor::clone() const {
  Tensor t;
  t.resize(m_shape, m_format);
  if (m_numel) {
    if (Backend* be = t.backend(); be == backend()) {
      if (be) be->copy(t.data(), data(), bytes());
      else std::memcpy(t.data(), data(), bytes());
    } else {
      std::vector<std::byte> host(bytes());
      m_buffer.download(host.data(), host.size());
      t.m_buffer.upload(host.data(), host.size());
    }
  }
  return t;
}

float* Tensor::f32() {
  assert(m_format == Format::FP32 || m_format == Format::TF32);
  return reinterpret_cast<float*>(m_buffer.data());
}
const float* Tensor::f32() const {
  assert(m_format == Format::FP32 || m_format == Format::TF32);
  return reinterpret_cast<const float*>(m_buffer.data());
}
std::uint16_t* Tensor::u16() {
  assert(storage_bytes(m_format) == 2);
  return reinterpret_cast<std::uint16_t*>(m_buffer.data());
}
const std::uint16_t* Tensor::u16() const {
  assert(storage_bytes(m_format) == 2);
  return reinterpret_cast<const std::uint16_t*>(m_buffer.data());
}
std::uint8_t* Tensor::u8() {
  assert(storage_bytes(m_format) == 1);
  return reinterpret_cast<std::uint8_t*>(m_buffer.data());
}
const std::uint8_t* Tensor::u8() const {
  assert(storage_bytes(m_format) == 1);
  return reinterpret_cast<const std::uint8_t*>(m_buffer.data());
}

std::vector<float> Tensor::to_f32() const {
  std::vector<float> out(static_cast<std::size_t>(m_numel));
  if (!m_numel) return out;
  if (is_f32_storage()) {
    m_buffer.download(out.data(), bytes());
  } else {
    std::vector<std::byte> host(bytes());
    m_buffer.download(host.data(), host.size());
    cast_to_f32(m_format, host.data(), out.data(), static_cast<std::size_t>(m_numel));
  }
  return out;
}

void Tensor::from_f32(const float* src, std::int64_t n) {
  if (n != m_numel)
    throw std::invalid_argument("tensor: from_f32 with " + std::to_string(n) + " values into " +
                                shape_string(m_shape));
  if (!n || t_shape_only) return;  // a shape-only tensor has nowhere to put them
  if (is_f32_storage()) {
    m_buffer.upload(src, bytes());
  } else {
    std::vector<std::byte> host(bytes());
    cast_from_f32(m_format, src, host.data(), static_cast<std::size_t>(n));
    m_buffer.upload(host.data(), host.size());
  }
}

Tensor Tensor::from_values(Shape shape, Format format, const std::vector<float>& values) {
  Tensor t;
  t.resize(shape, format);
  t.from_f32(values.data(), static_cast<std::int64_t>(values.size()));
  return t;
}

void decode_to(Backend& be, const Tensor& src, Tensor& out) {
  out.resize(src.shape(), Format::FP32);
  if (src.numel()) be.convert(src.format(), src.data(), Format::FP32, out.data(), src.numel(), {});
}

void encode_to(Backend& be, const Tensor& src_f32, Format f, Tensor& dst, bool saturate) {
  dst.resize(src_f32.shape(), f);
  CastOptions opt;
  opt.saturate = saturate;
  if (src_f32.numel()) be.convert(Format::FP32, src_f32.data(), f, dst.data(), src_f32.numel(), opt);
}

}  // namespace engine
