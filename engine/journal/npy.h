// NumPy .npy files (format version 1.0, little-endian, C order): written for the initial weights and read back.
//
// What numpy.load reads: the magic "\x93NUMPY", version 1.0, a u16 header
// length, a Python dict literal {'descr': '<f4', 'fortran_order': False,
// 'shape': (2, 3), } padded with spaces to a multiple of 64 bytes and ended
// by '\n', then the values in C order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace engine {

// The element types this project writes: '<f4', '|u1', '<u2', '<i8'.
enum class NpyType : std::uint8_t { F32, U8, U16, I64 };

struct NpyArray {
  NpyType type = NpyType::F32;
  std::vector<std::int64_t> shape;
  std::string data;  // the values' bytes, little-endian, C order
  std::int64_t numel() const;
};

// The bytes of an .npy file holding `a`. Throws std::invalid_argument when
// data's size does not match the shape and type.
std::string serialize_npy(const NpyArray& a);
NpyArray npy_f32(const std::vector<std::int64_t>& shape, const std::vector<float>& values);

// Parses .npy bytes of one of the types above (version 1.0 or 2.0, C
// order). Throws std::runtime_error "<origin>: <problem>" (one line) on a
// bad magic, header, type, Fortran order, or a size that does not match.
NpyArray parse_npy(const std::string& bytes, const std::string& origin);

// Writes `bytes` to `path` and fsyncs it (the caller renames a folder of
// such files into place). Throws std::runtime_error naming the file.
void write_file_synced(const std::string& path, const std::string& bytes);

}  // namespace engine
