// Weights file: a run's final parameters, written atomically and read back with every size checked.
#include "journal/weights.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "backend/backend.h"
#include "backend/fused.h"
#include "nn/model.h"
#include "nn/parameter.h"

namespace engine {

namespace fs = std::filesystem;

namespace {

// Limits that keep a hostile file from asking for absurd allocations
// before its sizes are checked against the bytes it has.
constexpr std::uint32_t kMaxName = 4096;
constexpr std::uint32_t kMaxRank = 8;

// CRC-32 (IEEE 802.3, reflected, as zlib's crc32 and Python's zlib.crc32).
std::uint32_t crc32(const char* data, std::size_t n, std::uint32_t crc = 0) {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (std::size_t i = 0; i < n; ++i) crc = table[(crc ^ static_cast<unsigned char>(data[i])) & 0xFFu] ^ (crc >> 8);
  return ~crc;
}

template <class T>
void put(std::string& out, T v) {
  static_assert(std::is_trivially_copyable_v<T>);
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  if constexpr (std::endian::native == std::endian::big) std::reverse(b, b + sizeof(T));
  out.append(b, sizeof(T));
}

void put_string(std::string& out, const std::string& s) {
  put<std::uint32_t>(out, static_cast<std::uint32_t>(s.size()));
  out += s;
}

// The storage formats a parameter's copy can have (block formats keep an
// FP32 weight and quantize it in the forward).
bool is_parameter_format(Format f) {
  return f == Format::FP32 || f == Format::TF32 || f == Format::BF16 || f == Format::FP16 || is_fp8(f);
}

// Reads the file's bytes in order; every read checks the bytes left.
class Reader {
 public:
  Reader(const std::string& bytes, const std::string& origin) : m_bytes(bytes), m_origin(origin) {}
  [[noreturn]] void fail(const std::string& what) const { throw std::runtime_error(m_origin + ": " + what); }
  std::size_t left() const { return m_bytes.size() - m_at; }
  std::size_t at() const { return m_at; }
  void need(std::size_t n, const std::string& what) const {
    if (n > left())
      fail("truncated: " + what + " needs " + std::to_string(n) + " bytes at offset " + std::to_string(m_at) +
           ", " + std::to_string(left()) + " left");
  }
  template <class T>
  T get(const std::string& what) {
    need(sizeof(T), what);
    char b[sizeof(T)];
    std::memcpy(b, m_bytes.data() + m_at, sizeof(T));
    if constexpr (std::endian::native == std::endian::big) std::reverse(b, b + sizeof(T));
    m_at += sizeof(T);
    T v;
    std::memcpy(&v, b, sizeof(T));
    return v;
  }
  std::string get_string(const std::string& what, std::uint32_t max) {
    const auto n = get<std::uint32_t>(what + "'s length");
    if (n > max) fail(what + " is " + std::to_string(n) + " bytes long (at most " + std::to_string(max) + ")");
    need(n, what);
    std::string s = m_bytes.substr(m_at, n);
    m_at += n;
    return s;
  }
  void get_floats(std::vector<float>& out, std::size_t n) {
    out.resize(n);
    if constexpr (std::endian::native == std::endian::little) {
      std::memcpy(out.data(), m_bytes.data() + m_at, n * sizeof(float));
      m_at += n * sizeof(float);
    } else {
      for (float& v : out) v = get<float>("a value");
    }
  }

 private:
  const std::string& m_bytes;
  const std::string& m_origin;
  std::size_t m_at = 0;
};

// "fc1.weight" for messages: printable, and cut when long.
std::string shown(const std::string& s) {
  std::string out = "'";
  for (char c : s.substr(0, 64)) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  return out + (s.size() > 64 ? "...'" : "'");
}

}  // namespace

std::string weights_file_name(int run_id) { return "weights-" + std::to_string(run_id) + ".bin"; }

WeightsFile capture_weights(Model& model, std::int64_t steps) {
  WeightsFile w;
  w.steps = steps;
  w.model = model.name();
  for (Parameter* p : model.parameters()) {
    StoredParameter s;
    s.name = p->name;
    s.shape = p->shape;
    if (p->has_master()) {
      s.format = Format::FP32;
      s.values = p->master.to_f32();
      s.scale = p->weight_scale;
    } else {
      // The only copy: its stored values, exactly (FP8 without a master is
      // stored unscaled; a scale, were there one, is divided out as a
      // precision change does).
      s.format = p->weight.format();
      s.values = p->weight.to_f32();
      if (p->weight_scale != 1.0f)
        for (float& v : s.values) v /= p->weight_scale;
    }
    w.parameters.push_back(std::move(s));
  }
  return w;
}

std::string serialize_weights(const WeightsFile& w) {
  std::size_t size = 64 + w.model.size();
  for (const StoredParameter& p : w.parameters) size += 64 + p.name.size() + 8 * p.shape.size() + 4 * p.values.size();
  std::string out;
  out.reserve(size);
  out.append(kWeightsMagic, sizeof kWeightsMagic);
  put<std::uint32_t>(out, kWeightsVersion);
  put<std::uint32_t>(out, static_cast<std::uint32_t>(w.parameters.size()));
  put<std::int64_t>(out, w.steps);
  put_string(out, w.model);
  for (const StoredParameter& p : w.parameters) {
    put_string(out, p.name);
    put<std::uint32_t>(out, static_cast<std::uint32_t>(p.shape.size()));
    for (std::int64_t d : p.shape) put<std::int64_t>(out, d);
    put_string(out, format_key(p.format));
    put<float>(out, p.scale);
    if constexpr (std::endian::native == std::endian::little)
      out.append(reinterpret_cast<const char*>(p.values.data()), p.values.size() * sizeof(float));
    else
      for (float v : p.values) put<float>(out, v);
  }
  put<std::uint32_t>(out, crc32(out.data(), out.size()));
  return out;
}

void write_weights(const std::string& dir, const std::string& name, const WeightsFile& w) {
  const std::string bytes = serialize_weights(w);
  const fs::path final_path = fs::path(dir) / name;
  const fs::path tmp = fs::path(dir) / ("." + name + ".tmp");
  const auto fail = [&](const std::string& what, int err) {
    ::unlink(tmp.c_str());
    throw std::runtime_error(final_path.string() + ": " + what + (err ? std::string(" (") + std::strerror(err) + ")" : ""));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create " + tmp.filename().string(), errno);
  for (std::size_t at = 0; at < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + at, bytes.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : 0;
      ::close(fd);
      fail("write failed (disk full?)", err);
    }
    at += static_cast<std::size_t>(n);
  }
  // On disk before the name points at it: a crash leaves the old file or
  // the whole new one, never a torn one.
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    fail("fsync failed", err);
  }
  if (::close(fd) != 0) fail("write failed", errno);
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) fail("cannot rename into place", errno);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // the rename itself; a folder that refuses fsync still has the file
    ::close(dfd);
  }
}

WeightsFile parse_weights(const std::string& bytes, const std::string& origin) {
  Reader r(bytes, origin);
  if (bytes.size() < sizeof kWeightsMagic || std::memcmp(bytes.data(), kWeightsMagic, sizeof kWeightsMagic) != 0)
    r.fail("not a Precision Lab weights file (no PLWEIGHT magic)");
  for (std::size_t i = 0; i < sizeof kWeightsMagic; ++i) (void)r.get<char>("the magic");
  WeightsFile w;
  w.version = r.get<std::uint32_t>("the version");
  if (w.version != kWeightsVersion)
    r.fail("version " + std::to_string(w.version) + " is not supported (this build reads version " +
           std::to_string(kWeightsVersion) + ")");
  const auto count = r.get<std::uint32_t>("the parameter count");
  w.steps = r.get<std::int64_t>("the step count");
  if (w.steps < 0) r.fail("the step count is negative (" + std::to_string(w.steps) + ")");
  w.model = r.get_string("the model name", kMaxName);
  // Every parameter takes at least 21 bytes (name, rank, format, scale).
  if (count > r.left() / 21) r.fail("truncated: " + std::to_string(count) + " parameters cannot fit in the file");
  w.parameters.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::string which = "parameter " + std::to_string(i);
    StoredParameter p;
    p.name = r.get_string(which + "'s name", kMaxName);
    if (p.name.empty()) r.fail(which + " has an empty name");
    const std::string who = which + " " + shown(p.name);
    const auto rank = r.get<std::uint32_t>(who + "'s rank");
    if (rank == 0 || rank > kMaxRank)
      r.fail(who + " has rank " + std::to_string(rank) + " (expected 1.." + std::to_string(kMaxRank) + ")");
    std::uint64_t numel = 1;
    for (std::uint32_t d = 0; d < rank; ++d) {
      const auto dim = r.get<std::int64_t>(who + "'s shape");
      if (dim < 1) r.fail(who + " has dimension " + std::to_string(dim) + " (must be >= 1)");
      // numel stays within the bytes left, so the product cannot overflow.
      if (static_cast<std::uint64_t>(dim) > (r.left() / 4) / numel)
        r.fail("truncated: " + who + "'s values cannot fit in the " + std::to_string(r.left()) + " bytes left");
      numel *= static_cast<std::uint64_t>(dim);
      p.shape.push_back(dim);
    }
    const std::string fmt = r.get_string(who + "'s format", 32);
    const auto f = parse_format(fmt);
    if (!f || fmt != format_key(*f) || !is_parameter_format(*f))
      r.fail(who + " has format " + shown(fmt) + " (expected fp32, tf32, bf16, fp16, e4m3 or e5m2)");
    p.format = *f;
    p.scale = r.get<float>(who + "'s scale");
    if (!(p.scale > 0.0f) || !std::isfinite(p.scale)) r.fail(who + " has scale " + std::to_string(p.scale) + " (must be > 0)");
    r.need(numel * 4, who + "'s " + std::to_string(numel) + " values");
    r.get_floats(p.values, static_cast<std::size_t>(numel));
    w.parameters.push_back(std::move(p));
  }
  const std::size_t body = r.at();
  const auto stored = r.get<std::uint32_t>("the checksum");
  if (r.left() != 0) r.fail(std::to_string(r.left()) + " bytes after the checksum");
  const std::uint32_t computed = crc32(bytes.data(), body);
  if (stored != computed) {
    char line[96];
    std::snprintf(line, sizeof line, "checksum mismatch (file says %08x, contents give %08x): the file is corrupt",
                  stored, computed);
    r.fail(line);
  }
  return w;
}

WeightsFile read_weights(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw std::runtime_error(path + ": cannot read");
  return parse_weights(ss.str(), path);
}

void load_weights(Backend& be, Model& model, const WeightsFile& w, const std::string& origin) {
  const auto fail = [&](const std::string& what) { throw std::runtime_error(origin + ": " + what); };
  if (w.model != model.name()) fail("holds the weights of model " + shown(w.model) + ", the run's model is " + shown(model.name()));
  std::vector<Parameter*> params = model.parameters();
  if (w.parameters.size() != params.size())
    fail("holds " + std::to_string(w.parameters.size()) + " parameters, the " + model.name() + " has " +
         std::to_string(params.size()));
  // Every check first: a refused file leaves the model as it was.
  for (std::size_t i = 0; i < params.size(); ++i) {
    const StoredParameter& s = w.parameters[i];
    const Parameter& p = *params[i];
    if (s.name != p.name)
      fail("parameter " + std::to_string(i) + " is " + shown(s.name) + ", the " + model.name() + "'s is " +
           shown(p.name));
    if (s.shape != p.shape)
      fail(shown(s.name) + " has shape " + shape_string(s.shape) + ", the " + model.name() + "'s is " +
           shape_string(p.shape));
    if (s.values.size() != static_cast<std::size_t>(shape_numel(s.shape)))
      fail(shown(s.name) + " holds " + std::to_string(s.values.size()) + " values for shape " + shape_string(s.shape));
  }
  BackendScope scope(be);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const StoredParameter& s = w.parameters[i];
    Parameter& p = *params[i];
    const std::int64_t n = p.numel();
    if (p.has_master()) {
      p.master.from_f32(s.values.data(), n);
      // The compute copy as refresh_weights makes it: round to nearest
      // even, FP8 as value * scale saturated (the scale the run ended with).
      if (is_fp8(p.weight.format())) {
        p.weight_scale = s.scale;
        Tensor amax({1}, Format::FP32), scratch(p.shape, Format::FP32);
        CastOptions opt;
        opt.saturate = true;
        fused::scale_amax_encode(be, p.master.f32(), s.scale, p.weight.format(), p.weight.data(), n, opt, amax.f32(),
                                 scratch.f32());
      } else {
        p.weight_scale = 1.0f;
        encode_to(be, p.master, p.weight.format(), p.weight);
      }
    } else {
      p.weight_scale = 1.0f;
      p.weight.from_f32(s.values.data(), n);
    }
  }
}

void restore_weights(Backend& be, Model& model, const std::string& path) {
  load_weights(be, model, read_weights(path), path);
}

}  // namespace engine
