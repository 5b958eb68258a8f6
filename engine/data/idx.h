// IDX files (the MNIST container): reading, plain or gzipped, with strict validation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace engine {

// IDX layout (big-endian): 0x00 0x00 <type> <ndims>, then ndims uint32
// dimensions, then prod(dims) elements. MNIST and Fashion-MNIST use type 0x08
// (unsigned byte), the only one supported here.
inline constexpr std::uint8_t kIdxUnsignedByte = 0x08;

struct IdxArray {
  std::vector<std::size_t> dims;    // e.g. {60000, 28, 28}
  std::vector<std::uint8_t> data;   // prod(dims) bytes, row-major
  std::size_t count() const { return dims.empty() ? 0 : dims[0]; }  // first dimension
};

// Reads an IDX file; gzip is detected by its magic (1f 8b), anything else is
// read as a plain IDX file. `what` names the payload in messages ("pixels",
// "labels"). Throws std::runtime_error with one line "<path>: <problem>" for:
// a missing/unreadable file, a bad magic, an element type other than 0x08,
// a zero or implausibly large dimension, a short header or payload
// ("truncated: expected N bytes of pixels, got M"), bytes after the payload
// ("corrupt: ... trailing bytes"), and a corrupt gzip stream.
// Any thread; no shared state.
IdxArray read_idx(const std::string& path, std::string_view what = "data");

// Writes an unsigned-byte IDX file (gzip-compressed when `gzip`), for tools
// and tests. data.size() must equal prod(dims). Throws std::runtime_error
// naming the path on I/O failure. Any thread.
void write_idx(const std::string& path, const std::vector<std::size_t>& dims,
               const std::vector<std::uint8_t>& data, bool gzip);

// A whole file's bytes, inflated when it is gzip (by its magic, as read_idx
// does). Throws std::runtime_error with one line "<path>: <problem>" for a
// missing/unreadable file, a corrupt or cut gzip stream, and more than
// `max_bytes` of content ("larger than N bytes"). Any thread.
std::string read_file_bytes(const std::string& path, std::size_t max_bytes);

}  // namespace engine
