// NumPy .npy files: the writer of the initial weights and a strict reader for the exporter.
#include "journal/npy.h"

#include <fcntl.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace engine {

namespace {

static_assert(std::endian::native == std::endian::little, "the .npy writer stores the host's bytes as little-endian");

const char* descr(NpyType t) {
  switch (t) {
    case NpyType::F32: return "<f4";
    case NpyType::U8: return "|u1";
    case NpyType::U16: return "<u2";
    case NpyType::I64: return "<i8";
  }
  return "<f4";
}

std::size_t item_size(NpyType t) {
  switch (t) {
    case NpyType::F32: return 4;
    case NpyType::U8: return 1;
    case NpyType::U16: return 2;
    case NpyType::I64: return 8;
  }
  return 4;
}

}  // namespace

std::int64_t NpyArray::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string serialize_npy(const NpyArray& a) {
  for (auto d : a.shape)
    if (d < 0) throw std::invalid_argument("npy: negative dimension");
  if (a.data.size() != static_cast<std::size_t>(a.numel()) * item_size(a.type))
    throw std::invalid_argument("npy: " + std::to_string(a.data.size()) + " bytes do not fit the shape");
  std::string shape = "(";
  for (std::size_t i = 0; i < a.shape.size(); ++i) shape += std::to_string(a.shape[i]) + (a.shape.size() == 1 ? "," : i + 1 < a.shape.size() ? ", " : "");
  shape += ")";
  std::string header = std::string("{'descr': '") + descr(a.type) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // magic (6) + version (2) + length (2) + header + '\n', padded to 64.
  const std::size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  const auto len = static_cast<std::uint16_t>(header.size());
  out += static_cast<char>(len & 0xFF);
  out += static_cast<char>(len >> 8);
  out += header;
  out += a.data;
  return out;
}

NpyArray npy_f32(const std::vector<std::int64_t>& shape, const std::vector<float>& values) {
  NpyArray a;
  a.type = NpyType::F32;
  a.shape = shape;
  a.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return a;
}

NpyArray parse_npy(const std::string& bytes, const std::string& origin) {
  auto fail = [&](const std::string& what) -> NpyArray { throw std::runtime_error(origin + ": " + what); };
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) return fail("not a .npy file (no \\x93NUMPY magic)");
  const auto major = static_cast<unsigned char>(bytes[6]);
  std::size_t hlen = 0, start = 0;
  if (major == 1) {
    hlen = static_cast<unsigned char>(bytes[8]) | (static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return fail("truncated header");
    for (int i = 0; i < 4; ++i) hlen |= static_cast<std::size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    start = 12;
  } else {
    return fail("unsupported .npy version " + std::to_string(major));
  }
  if (hlen > bytes.size() - start) return fail("truncated header");
  const std::string h = bytes.substr(start, hlen);
  NpyArray a;
  auto field = [&](const std::string& key) -> std::string {
    const auto k = h.find("'" + key + "'");
    if (k == std::string::npos) fail("header has no '" + key + "'");
    auto v = h.find(':', k);
    if (v == std::string::npos) fail("header's '" + key + "' has no value");
    ++v;
    while (v < h.size() && h[v] == ' ') ++v;
    return h.substr(v);
  };
  const std::string d = field("descr");
  if (d.rfind("'<f4'", 0) == 0) a.type = NpyType::F32;
  else if (d.rfind("'|u1'", 0) == 0) a.type = NpyType::U8;
  else if (d.rfind("'<u2'", 0) == 0) a.type = NpyType::U16;
  else if (d.rfind("'<i8'", 0) == 0) a.type = NpyType::I64;
  else return fail("element type " + d.substr(0, d.find(',')) + " (expected '<f4', '|u1', '<u2' or '<i8')");
  if (field("fortran_order").rfind("False", 0) != 0) return fail("Fortran order is not supported");
  const std::string s = field("shape");
  if (s.empty() || s[0] != '(') return fail("malformed shape");
  const auto close = s.find(')');
  if (close == std::string::npos) return fail("malformed shape");
  std::int64_t total = 1;
  for (std::size_t i = 1; i < close;) {
    while (i < close && (s[i] == ' ' || s[i] == ',')) ++i;
    if (i >= close) break;
    std::int64_t v = 0;
    bool any = false;
    while (i < close && s[i] >= '0' && s[i] <= '9') {
      if (v > std::numeric_limits<std::int64_t>::max() / 10 - 10) fail("dimension too large");
      v = v * 10 + (s[i] - '0');
      ++i;
      any = true;
    }
    if (!any) return fail("malformed shape");
    if (v > 0 && total > std::numeric_limits<std::int64_t>::max() / v) fail("shape too large");
    total *= v;
    a.shape.push_back(v);
    if (a.shape.size() > 16) return fail("more than 16 dimensions");
  }
  const std::size_t body = start + hlen;
  // The shape is checked against the bytes there are before anything is multiplied or allocated.
  if (static_cast<unsigned long long>(total) > bytes.size() - body)
    return fail("holds " + std::to_string(bytes.size() - body) + " bytes of values, its shape needs more");
  const auto want = static_cast<unsigned long long>(total) * item_size(a.type);
  if (bytes.size() - body != want)
    return fail("holds " + std::to_string(bytes.size() - body) + " bytes of values, its shape needs " +
                std::to_string(want));
  a.data = bytes.substr(body);
  return a;
}

void write_file_synced(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(path + ": cannot create (" + std::strerror(errno) + ")");
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      throw std::runtime_error(path + ": cannot write (" + std::strerror(e) + ")");
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) throw std::runtime_error(path + ": cannot write (" + std::strerror(errno) + ")");
}

}  // namespace engine
