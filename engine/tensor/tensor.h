// Tensor: a shape, a Format and host storage in that format's own width.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "numeric/format.h"

namespace engine {

using Shape = std::vector<std::int64_t>;
std::int64_t shape_numel(const Shape& s);
std::string shape_string(const Shape& s);  // "128x784"

// Host tensor, 64-byte aligned, storage sized numel * storage_bytes(format):
// an FP16 tensor really occupies 2 bytes per element, an FP8 one 1 byte, and
// bytes() is what memory accounting reports. TF32 is a compute format and
// lives in an FP32 container.
//
// Move-only (copies of activations must be explicit: clone()). resize()
// reuses the allocation when it is large enough, so steady-state training
// allocates nothing. Not thread-safe: one owner at a time.
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
  std::size_t capacity_bytes() const { return m_capacity; }
  bool empty() const { return m_numel == 0; }

  void* data() { return m_data.get(); }
  const void* data() const { return m_data.get(); }
  // FP32/TF32 tensors only (checked in debug builds).
  float* f32();
  const float* f32() const;
  std::uint16_t* u16();  // FP16/BF16
  const std::uint16_t* u16() const;
  std::uint8_t* u8();  // FP8
  const std::uint8_t* u8() const;

  // Convenience for tests and setup (not hot paths): values decoded to FP32,
  // and values encoded from FP32 with round-to-nearest-even.
  std::vector<float> to_f32() const;
  void from_f32(const float* src, std::int64_t n);
  static Tensor from_values(Shape shape, Format format, const std::vector<float>& values);

 private:
  struct AlignedFree {
    void operator()(std::byte* p) const noexcept;
  };
  Shape m_shape;
  Format m_format = Format::FP32;
  std::int64_t m_numel = 0;
  std::size_t m_capacity = 0;
  std::unique_ptr<std::byte[], AlignedFree> m_data;
};

// Decodes any tensor to FP32 values into `out` (resized). For FP32 tensors
// this is a copy; callers on hot paths should branch on format() == FP32 and
// use the storage directly.
void decode_to(const Tensor& src, Tensor& out);
// Encodes FP32 values into `dst` of format f (resized to src's shape), RNE
// (saturating for FP8 when `saturate`).
void encode_to(const Tensor& src_f32, Format f, Tensor& dst, bool saturate = false);

}  // namespace engine
