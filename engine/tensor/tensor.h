// Tensor: a shape, a Format and backend storage in that format's own width.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "numeric/format.h"

namespace engine {

class Backend;

// The backend this thread allocates buffers from: the innermost live
// BackendScope's, or null (the host heap: tests and setup without a
// backend). The trainer opens one around building and stepping its runs,
// so every buffer a step touches is the backend's (docs/ARCHITECTURE.md "The backend contract").
Backend* current_backend();
class BackendScope {
 public:
  explicit BackendScope(Backend& be);
  ~BackendScope();
  BackendScope(const BackendScope&) = delete;
  BackendScope& operator=(const BackendScope&) = delete;

 private:
  Backend* m_previous;
};

// While one is alive on a thread, tensors sized there take their shape and
// format but no memory (data() is null, zero() does nothing): for
// describing a model's layers and bytes without building it (the layer
// catalog of a GPU-sized model would otherwise touch a gigabyte).
class ShapeOnlyScope {
 public:
  ShapeOnlyScope();
  ~ShapeOnlyScope();
  ShapeOnlyScope(const ShapeOnlyScope&) = delete;
  ShapeOnlyScope& operator=(const ShapeOnlyScope&) = delete;

 private:
  bool m_previous;
};

// Raw backend bytes (labels, counters, a step's results, and every
// tensor's storage). Allocated by current_backend() (host heap when none)
// and released through the backend that allocated it. Move-only.
class Buffer {
 public:
  Buffer() = default;
  ~Buffer();
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // At least `bytes` of storage: keeps the allocation when it is large
  // enough (contents kept), else a new one (contents unspecified).
  void reserve(std::size_t bytes);
  void reset() noexcept;
  void* data() { return m_data; }
  const void* data() const { return m_data; }
  template <class T>
  T* as() {
    return static_cast<T*>(m_data);
  }
  template <class T>
  const T* as() const {
    return static_cast<const T*>(m_data);
  }
  std::size_t capacity() const { return m_capacity; }
  // The backend that owns the storage (null: host heap).
  Backend* backend() const { return m_backend; }

  // Host transfers (through the owning backend when there is one).
  void upload(const void* src, std::size_t bytes, std::size_t offset = 0);
  void download(void* dst, std::size_t bytes, std::size_t offset = 0) const;
  void zero(std::size_t bytes);

 private:
  void* m_data = nullptr;
  std::size_t m_capacity = 0;
  Backend* m_backend = nullptr;
};

using Shape = std::vector<std::int64_t>;
std::int64_t shape_numel(const Shape& s);
std::string shape_string(const Shape& s);  // "128x784"

// A tensor in backend memory (a Buffer), 64-byte aligned, sized
// numel * storage_bytes(format):
// an FP16 tensor really occupies 2 bytes per element, an FP8 one 1 byte, and
// bytes() is what memory accounting reports. TF32 is a compute format and
// lives in an FP32 container.
//
// Move-only (copies of activations must be explicit: clone()). resize()
// reuses the allocation when it is large enough, so steady-state training
// allocates nothing. The data pointers are backend memory, to pass to
// Backend calls; the host reads values only through to_f32() (a download).
// Not thread-safe: one owner at a time.
class Tensor {
 public:
  Tensor() = default;
  Tensor(Shape shape, Format format);  // zero-filled
  // A moved-from tensor is empty (no shape, no capacity) and reusable.
  Tensor(Tensor&& o) noexcept;
  Tensor& operator=(Tensor&& o) noexcept;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  // Changes shape/format; keeps the allocation if capacity suffices.
  // Contents are unspecified afterwards (not zeroed) unless zero() is called.
  void resize(const Shape& shape, Format format);
  void zero();
  Tensor clone() const;

  const Shape& shape() const { return m_shape; }
  std::int64_t dim(int i) const { return m_shape[static_cast<std::size_t>(i < 0 ? i + static_cast<int>(m_shape.size()) : i)]; }
  int rank() const { return static_cast<int>(m_shape.size()); }
  Format format() const { return m_format; }
  std::int64_t numel() const { return m_numel; }
  std::size_t bytes() const { return static_cast<std::size_t>(m_numel) * storage_bytes(m_format); }
  std::size_t capacity_bytes() const { return m_buffer.capacity(); }
  bool empty() const { return m_numel == 0; }
  bool is_f32_storage() const { return m_format == Format::FP32 || m_format == Format::TF32; }
  Backend* backend() const { return m_buffer.backend(); }

  void* data() { return m_buffer.data(); }
  const void* data() const { return m_buffer.data(); }
  // FP32/TF32 tensors only (checked in debug builds).
  float* f32();
  const float* f32() const;
  std::uint16_t* u16();  // FP16/BF16
  const std::uint16_t* u16() const;
  std::uint8_t* u8();  // FP8
  const std::uint8_t* u8() const;

  // Host transfers for setup, tests and statistics (not hot paths): values
  // downloaded and decoded to FP32, and values encoded from FP32 with
  // round-to-nearest-even and uploaded.
  std::vector<float> to_f32() const;
  void from_f32(const float* src, std::int64_t n);
  static Tensor from_values(Shape shape, Format format, const std::vector<float>& values);

 private:
  Shape m_shape;
  Format m_format = Format::FP32;
  std::int64_t m_numel = 0;
  Buffer m_buffer;
};

// Decodes any tensor to FP32 values into `out` (resized), through the
// backend. For FP32 tensors this is a copy; callers on hot paths should
// branch on format() == FP32 and use the storage directly.
void decode_to(Backend& be, const Tensor& src, Tensor& out);
// Encodes FP32 values into `dst` of format f (resized to src's shape), RNE
// (saturating for FP8 when `saturate`), through the backend.
void encode_to(Backend& be, const Tensor& src_f32, Format f, Tensor& dst, bool saturate = false);

}  // namespace engine
