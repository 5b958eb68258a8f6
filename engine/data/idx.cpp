// IDX reader/writer: gzip detected by magic and inflated with zlib while reading.
#include "data/idx.h"

#include <zlib.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

namespace engine {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw std::runtime_error(path + ": " + problem);
}

std::string hex_byte(unsigned v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%02x", v & 0xffu);
  return buf;
}

const char* idx_type_name(std::uint8_t t) {
  switch (t) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return nullptr;
  }
}

// A byte source over a plain or gzip file. gzip members are inflated
// incrementally straight into the caller's buffer (no second copy of the
// payload); concatenated members are read as one stream, like gunzip.
class ByteStream {
 public:
  explicit ByteStream(const std::string& path) : m_path(path) {
    m_file = std::fopen(path.c_str(), "rb");
    if (!m_file) fail(path, std::string("cannot open: ") + std::strerror(errno));
    unsigned char magic[2] = {0, 0};
    const std::size_t got = std::fread(magic, 1, 2, m_file);
    m_gzip = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    std::rewind(m_file);
    if (m_gzip) {
      std::memset(&m_z, 0, sizeof m_z);
      // 15 + 16: a gzip wrapper (header + CRC-32/size trailer), 32 KiB window.
      if (inflateInit2(&m_z, 15 + 16) != Z_OK) {
        std::fclose(m_file);
        fail(path, "cannot initialise zlib");
      }
      m_in.resize(1 << 18);
    }
  }
  ~ByteStream() {
    if (m_gzip) inflateEnd(&m_z);
    std::fclose(m_file);
  }
  ByteStream(const ByteStream&) = delete;
  ByteStream& operator=(const ByteStream&) = delete;

  bool gzip() const { return m_gzip; }
  // Bytes left in a plain file (the header's promise is checked against it
  // before anything is allocated); unknown for gzip.
  std::optional<std::size_t> plain_bytes_left() const {
    if (m_gzip) return std::nullopt;
    struct stat st {};
    if (fstat(fileno(m_file), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
    const long pos = std::ftell(m_file);
    if (pos < 0 || st.st_size < pos) return std::nullopt;
    return static_cast<std::size_t>(st.st_size - pos);
  }
  // True when the file ended inside a gzip member (the compressed data is cut).
  bool gzip_cut() const { return m_gzip_cut; }

  // Reads up to n bytes; fewer only at the end of the data.
  std::size_t read(void* dst, std::size_t n) {
    if (!m_gzip) {
      const std::size_t got = std::fread(dst, 1, n, m_file);
      if (got < n && std::ferror(m_file)) fail(m_path, std::string("read error: ") + std::strerror(errno));
      return got;
    }
    std::size_t done = 0;
    auto* out = static_cast<unsigned char*>(dst);
    while (done < n) {
      if (m_z.avail_in == 0 && !refill()) {
        if (!m_member_done) m_gzip_cut = true;
        break;
      }
      if (m_member_done) {
        // More input after a complete member: it must be another member
        // (inflate rejects anything else as "incorrect header check").
        inflateReset(&m_z);
        m_member_done = false;
      }
      // avail_out is a uInt: feed at most 1 GiB per call.
      const std::size_t chunk = std::min<std::size_t>(n - done, std::size_t{1} << 30);
      m_z.next_out = out + done;
      m_z.avail_out = static_cast<uInt>(chunk);
      const int rc = inflate(&m_z, Z_NO_FLUSH);
      done += chunk - m_z.avail_out;
      if (rc == Z_STREAM_END) {
        m_member_done = true;
      } else if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT || rc == Z_STREAM_ERROR) {
        fail(m_path, std::string("corrupt gzip stream: ") + (m_z.msg ? m_z.msg : "invalid data"));
      } else if (rc == Z_MEM_ERROR) {
        fail(m_path, "out of memory while inflating");
      }
      // Z_OK / Z_BUF_ERROR: more input or output needed; the loop provides it.
    }
    return done;
  }

 private:
  bool refill() {
    const std::size_t got = std::fread(m_in.data(), 1, m_in.size(), m_file);
    if (got == 0) {
      if (std::ferror(m_file)) fail(m_path, std::string("read error: ") + std::strerror(errno));
      return false;
    }
    m_z.next_in = m_in.data();
    m_z.avail_in = static_cast<uInt>(got);
    return true;
  }

  std::string m_path;
  std::FILE* m_file = nullptr;
  bool m_gzip = false;
  bool m_member_done = false;
  bool m_gzip_cut = false;
  z_stream m_z{};
  std::vector<unsigned char> m_in;
};

std::uint32_t read_be32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

std::string cut_note(const ByteStream& s) {
  return s.gzip_cut() ? " (the gzip stream ends early)" : "";
}

}  // namespace

IdxArray read_idx(const std::string& path, std::string_view what) {
  ByteStream in(path);
  const std::string kind(what);

  unsigned char head[4];
  const std::size_t got_head = in.read(head, 4);
  if (got_head < 4) {
    fail(path, got_head == 0 ? "truncated: empty file, expected an IDX header" + cut_note(in)
                             : "truncated: " + std::to_string(got_head) +
                                   " bytes, too short for the 4-byte IDX magic" + cut_note(in));
  }
  if (head[0] != 0 || head[1] != 0) {
    fail(path, "bad magic: expected 00 00 <type> <ndims>, got " + hex_byte(head[0]) + " " +
                   hex_byte(head[1]) + " " + hex_byte(head[2]) + " " + hex_byte(head[3]) +
                   " (not an IDX file)");
  }
  const std::uint8_t type = head[2];
  if (type != kIdxUnsignedByte) {
    const char* name = idx_type_name(type);
    fail(path, std::string(name ? "unsupported" : "unknown") + " element type 0x" + hex_byte(type) +
                   (name ? std::string(" (") + name + ")" : std::string()) +
                   ": only 0x08 (unsigned byte) is supported");
  }
  const unsigned ndims = head[3];
  if (ndims == 0) fail(path, "bad header: 0 dimensions");

  std::vector<unsigned char> dim_bytes(4 * std::size_t{ndims});
  const std::size_t got_dims = in.read(dim_bytes.data(), dim_bytes.size());
  if (got_dims < dim_bytes.size()) {
    fail(path, "truncated: header declares " + std::to_string(ndims) + " dimensions (" +
                   std::to_string(dim_bytes.size()) + " bytes), got " + std::to_string(got_dims) +
                   " bytes" + cut_note(in));
  }

  IdxArray out;
  out.dims.resize(ndims);
  // Cap: a corrupt header must not make us allocate terabytes. 16 GiB is far
  // beyond any IDX data set (MNIST: 47 MB).
  constexpr std::size_t kMaxBytes = std::size_t{1} << 34;
  std::size_t expected = 1;
  for (unsigned d = 0; d < ndims; ++d) {
    const std::size_t v = read_be32(dim_bytes.data() + 4 * d);
    if (v == 0) fail(path, "bad header: dimension " + std::to_string(d) + " is 0");
    out.dims[d] = v;
    if (expected > kMaxBytes / v) fail(path, "bad header: dimensions describe more than 16 GiB");
    expected *= v;
  }

  // A plain file's size tells at once whether the header's promise is kept.
  if (const auto left = in.plain_bytes_left(); left && *left < expected) {
    fail(path, "truncated: expected " + std::to_string(expected) + " bytes of " + kind + ", got " +
                   std::to_string(*left));
  }
  // Read in growing chunks (from 64 KiB, doubling) so that a gzip stream
  // promising much more than it holds reports "truncated" having allocated
  // at most twice what it really held.
  std::size_t have = 0;
  std::size_t cap = std::min(expected, std::size_t{64} << 10);
  for (;;) {
    out.data.resize(cap);
    const std::size_t got = in.read(out.data.data() + have, cap - have);
    have += got;
    if (have < cap || cap == expected) break;
    cap = std::min(expected, cap * 2);
  }
  if (have < expected) {
    fail(path, "truncated: expected " + std::to_string(expected) + " bytes of " + kind + ", got " +
                   std::to_string(have) + cut_note(in));
  }

  // Anything after the payload means the header and the data disagree.
  // Draining the stream also makes zlib verify the gzip CRC-32 and length.
  std::size_t trailing = 0;
  unsigned char scratch[4096];
  for (std::size_t got; (got = in.read(scratch, sizeof scratch)) > 0;) trailing += got;
  if (trailing > 0) {
    fail(path, "corrupt: " + std::to_string(trailing) + " trailing bytes after the " +
                   std::to_string(expected) + " bytes of " + kind + " the header declares");
  }
  if (in.gzip_cut()) fail(path, "corrupt gzip stream: the file ends before the gzip trailer");
  return out;
}

std::string read_file_bytes(const std::string& path, std::size_t max_bytes) {
  ByteStream in(path);
  std::string out;
  // A plain file is read in one piece of its size (and one byte more, to see
  // its end); a gzip stream, which does not say how much it holds, in pieces
  // doubling from 64 KiB, so a bomb costs about twice max_bytes before it is
  // refused.
  const auto left = in.plain_bytes_left();
  std::size_t chunk = left ? std::min(*left, max_bytes) + 1 : std::size_t{64} << 10;
  for (;;) {
    const std::size_t have = out.size();
    out.resize(have + chunk);
    const std::size_t got = in.read(out.data() + have, chunk);
    out.resize(have + got);
    if (out.size() > max_bytes) fail(path, "larger than " + std::to_string(max_bytes) + " bytes");
    if (got < chunk) break;
    chunk = std::min(out.size(), max_bytes + 1 - out.size());
  }
  if (in.gzip_cut()) fail(path, "corrupt gzip stream: the file ends before the gzip trailer");
  return out;
}

void write_idx(const std::string& path, const std::vector<std::size_t>& dims,
               const std::vector<std::uint8_t>& data, bool gzip) {
  if (dims.empty() || dims.size() > 255) fail(path, "cannot write IDX with " + std::to_string(dims.size()) + " dimensions");
  std::size_t n = 1;
  for (std::size_t d : dims) {
    if (d > 0xFFFFFFFFu) fail(path, "cannot write IDX: dimension exceeds 32 bits");
    n *= d;
  }
  if (n != data.size()) {
    fail(path, "cannot write IDX: " + std::to_string(data.size()) + " bytes for dimensions holding " +
                   std::to_string(n));
  }
  std::vector<unsigned char> head{0, 0, kIdxUnsignedByte, static_cast<unsigned char>(dims.size())};
  for (std::size_t d : dims) {
    head.push_back(static_cast<unsigned char>(d >> 24));
    head.push_back(static_cast<unsigned char>(d >> 16));
    head.push_back(static_cast<unsigned char>(d >> 8));
    head.push_back(static_cast<unsigned char>(d));
  }
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    if (!f) fail(path, std::string("cannot create: ") + std::strerror(errno));
    bool ok = gzwrite(f, head.data(), static_cast<unsigned>(head.size())) == static_cast<int>(head.size());
    for (std::size_t off = 0; ok && off < data.size();) {
      const auto chunk = static_cast<unsigned>(std::min<std::size_t>(data.size() - off, 1u << 30));
      ok = gzwrite(f, data.data() + off, chunk) == static_cast<int>(chunk);
      off += chunk;
    }
    if (gzclose(f) != Z_OK || !ok) fail(path, "write error");
    return;
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) fail(path, std::string("cannot create: ") + std::strerror(errno));
  bool ok = std::fwrite(head.data(), 1, head.size(), f) == head.size() &&
            std::fwrite(data.data(), 1, data.size(), f) == data.size();
  if (std::fclose(f) != 0 || !ok) fail(path, "write error");
}

}  // namespace engine
