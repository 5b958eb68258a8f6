// IDX reader: round trips (plain and gzip) and every error class, each naming the file.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <zlib.h>

#include <numeric>
#include <stdexcept>
#include <string>

#include "data/idx.h"
#include "engine/data/temp_dir.h"

namespace {

// gzip-compress with zlib directly (independent of the reader under test).
std::vector<std::uint8_t> gzip_bytes(const std::vector<std::uint8_t>& raw) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::vector<std::uint8_t> out(deflateBound(&z, raw.size()) + 64);
  z.next_in = const_cast<Bytef*>(raw.data());
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::vector<std::uint8_t> ramp(std::size_t n) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>((i * 7 + 3) % 256);
  return v;
}

// Runs read_idx and returns the error message; fails the test if it does not throw.
std::string error_of(const std::string& path, const char* what = "pixels") {
  try {
    engine::read_idx(path, what);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  ADD_FAILURE() << path << ": read_idx did not throw";
  return {};
}

// The contract for every error: one line, starting with the file's path.
void expect_one_line_naming(const std::string& msg, const std::string& path) {
  EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(Idx, PlainRoundTripFromHandWrittenBytes) {
  test::TempDir dir;
  const auto payload = ramp(5 * 4 * 3);
  const std::string path = dir.file("a-idx3-ubyte");
  test::write_bytes(path, test::idx_bytes({5, 4, 3}, payload));
  const engine::IdxArray a = engine::read_idx(path);
  EXPECT_EQ(a.dims, (std::vector<std::size_t>{5, 4, 3}));
  EXPECT_EQ(a.count(), 5u);
  EXPECT_EQ(a.data, payload);
}

TEST(Idx, GzipRoundTripDetectedByMagicNotName) {
  test::TempDir dir;
  const auto payload = ramp(1000);
  // No .gz suffix: detection must use the 1f 8b magic.
  const std::string path = dir.file("labels-idx1-ubyte");
  test::write_bytes(path, gzip_bytes(test::idx_bytes({1000}, payload)));
  const engine::IdxArray a = engine::read_idx(path, "labels");
  EXPECT_EQ(a.dims, (std::vector<std::size_t>{1000}));
  EXPECT_EQ(a.data, payload);
}

TEST(Idx, ConcatenatedGzipMembersReadAsOneStream) {
  test::TempDir dir;
  const auto bytes = test::idx_bytes({300}, ramp(300));
  const std::vector<std::uint8_t> first(bytes.begin(), bytes.begin() + 100), second(bytes.begin() + 100, bytes.end());
  auto gz = gzip_bytes(first);
  const auto gz2 = gzip_bytes(second);
  gz.insert(gz.end(), gz2.begin(), gz2.end());
  const std::string path = dir.file("two-members.gz");
  test::write_bytes(path, gz);
  EXPECT_EQ(engine::read_idx(path).data, ramp(300));
}

TEST(Idx, WriteIdxProducesTheStandardLayoutPlainAndGzip) {
  test::TempDir dir;
  const auto payload = ramp(2 * 3);
  engine::write_idx(dir.file("w"), {2, 3}, payload, false);
  EXPECT_EQ(test::read_bytes(dir.file("w")), test::idx_bytes({2, 3}, payload));
  engine::write_idx(dir.file("w.gz"), {2, 3}, payload, true);
  const auto gz = test::read_bytes(dir.file("w.gz"));
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(gz[0], 0x1f);
  EXPECT_EQ(gz[1], 0x8b);
  EXPECT_EQ(engine::read_idx(dir.file("w.gz")).data, payload);
}

TEST(IdxErrors, MissingFile) {
  test::TempDir dir;
  const std::string path = dir.file("nope-idx3-ubyte.gz");
  const std::string msg = error_of(path);
  expect_one_line_naming(msg, path);
  EXPECT_NE(msg.find("cannot open"), std::string::npos) << msg;
}

TEST(IdxErrors, BadMagic) {
  test::TempDir dir;
  const std::string path = dir.file("bad-magic");
  auto bytes = test::idx_bytes({4}, ramp(4));
  bytes[0] = 0x12;
  test::write_bytes(path, bytes);
  const std::string msg = error_of(path);
  expect_one_line_naming(msg, path);
  EXPECT_NE(msg.find("bad magic"), std::string::npos) << msg;
  EXPECT_NE(msg.find("12 00 08 01"), std::string::npos) << msg;
}

TEST(IdxErrors, WrongElementTypeIsNamed) {
  test::TempDir dir;
  const std::string path = dir.file("floats");
  test::write_bytes(path, test::idx_bytes({4}, std::vector<std::uint8_t>(16), 0x0D));
  const std::string msg = error_of(path);
  expect_one_line_naming(msg, path);
  EXPECT_NE(msg.find("0x0d"), std::string::npos) << msg;
  EXPECT_NE(msg.find("float32"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unsigned byte"), std::string::npos) << msg;

  test::write_bytes(path, test::idx_bytes({4}, ramp(4), 0x42));
  const std::string unknown = error_of(path);
  expect_one_line_naming(unknown, path);
  EXPECT_NE(unknown.find("unknown element type 0x42"), std::string::npos) << unknown;
}

TEST(IdxErrors, ZeroDimensionsAndZeroSizedDimension) {
  test::TempDir dir;
  const std::string path = dir.file("dims");
  test::write_bytes(path, {0, 0, 8, 0});
  std::string msg = error_of(path);
  expect_one_line_naming(msg, path);
  EXPECT_NE(msg.find("0 dimensions"), std::string::npos) << msg;
  test::write_bytes(path, test::idx_bytes({3, 0}, {}));
  msg = error_of(path);
  expect_one_line_naming(msg, path);
  EXPECT_NE(msg.find("dimension 1 is 0"), std::string::npos) << msg;
}

TEST(IdxErrors, TruncatedHeader) {
  test::TempDir dir;
  const std::string path = dir.file("short");
  test::write_bytes(path, {0, 0});
  std::string msg = error_of(path);
  expect_one_line_naming(msg, path);
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;

  auto bytes = test::idx_bytes({60000, 28, 28}, {});
  bytes.resize(9);  // magic + one and a bit dimensions
  test::write_bytes(path, bytes);
  msg = error_of(path);
  expect_one_line_naming(msg, path);
  EXPECT_NE(msg.find("truncated: header declares 3 dimensions"), std::string::npos) << msg;

  test::write_bytes(path, {});
  msg = error_of(path);
  expect_one_line_naming(msg, path);
  EXPECT_NE(msg.find("empty file"), std::string::npos) << msg;
}

TEST(IdxErrors, TruncatedPayloadPlainAndGzip) {
  test::TempDir dir;
  // The header promises 60000x28x28 but only 1234 bytes follow: no 47 MB allocation either.
  const auto bytes = test::idx_bytes({60000, 28, 28}, ramp(1234));
  const std::string plain = dir.file("train-images-idx3-ubyte");
  test::write_bytes(plain, bytes);
  std::string msg = error_of(plain);
  expect_one_line_naming(msg, plain);
  EXPECT_NE(msg.find("truncated: expected 47040000 bytes of pixels, got 1234"), std::string::npos) << msg;

  const std::string gz = dir.file("train-images-idx3-ubyte.gz");
  test::write_bytes(gz, gzip_bytes(bytes));
  msg = error_of(gz);
  expect_one_line_naming(msg, gz);
  EXPECT_NE(msg.find("truncated: expected 47040000 bytes of pixels, got 1234"), std::string::npos) << msg;
}

TEST(IdxErrors, GzipFileCutShort) {
  test::TempDir dir;
  const std::string path = dir.file("cut.gz");
  auto gz = gzip_bytes(test::idx_bytes({2000}, ramp(2000)));
  gz.resize(gz.size() / 2);
  test::write_bytes(path, gz);
  const std::string msg = error_of(path, "labels");
  expect_one_line_naming(msg, path);
  EXPECT_NE(msg.find("truncated: expected 2000 bytes of labels"), std::string::npos) << msg;
  EXPECT_NE(msg.find("gzip stream ends early"), std::string::npos) << msg;
}

TEST(IdxErrors, TrailingBytesAreCorruption) {
  test::TempDir dir;
  auto bytes = test::idx_bytes({10}, ramp(10));
  bytes.insert(bytes.end(), {1, 2, 3, 4, 5});
  const std::string plain = dir.file("trail");
  test::write_bytes(plain, bytes);
  std::string msg = error_of(plain, "labels");
  expect_one_line_naming(msg, plain);
  EXPECT_NE(msg.find("corrupt: 5 trailing bytes after the 10 bytes of labels"), std::string::npos) << msg;

  const std::string gz = dir.file("trail.gz");
  test::write_bytes(gz, gzip_bytes(bytes));
  msg = error_of(gz, "labels");
  expect_one_line_naming(msg, gz);
  EXPECT_NE(msg.find("corrupt: 5 trailing bytes"), std::string::npos) << msg;
}

TEST(IdxErrors, CorruptGzipStream) {
  test::TempDir dir;
  const auto good = gzip_bytes(test::idx_bytes({4000}, ramp(4000)));

  // Deflate data replaced by 0xff right after the 10-byte gzip header:
  // the first block has the reserved block type 11.
  auto bad_block = good;
  for (std::size_t i = 10; i < 20; ++i) bad_block[i] = 0xff;
  const std::string p1 = dir.file("bad-block.gz");
  test::write_bytes(p1, bad_block);
  std::string msg = error_of(p1);
  expect_one_line_naming(msg, p1);
  EXPECT_NE(msg.find("corrupt gzip stream"), std::string::npos) << msg;

  // Intact data but a wrong CRC-32 in the trailer: found because the reader
  // drains the stream to its end.
  auto bad_crc = good;
  bad_crc[bad_crc.size() - 8] ^= 0x5a;
  const std::string p2 = dir.file("bad-crc.gz");
  test::write_bytes(p2, bad_crc);
  msg = error_of(p2);
  expect_one_line_naming(msg, p2);
  EXPECT_NE(msg.find("corrupt gzip stream"), std::string::npos) << msg;

  // Garbage after a complete gzip member.
  auto garbage = good;
  garbage.insert(garbage.end(), {'j', 'u', 'n', 'k', '!', '!', '!', '!', '!', '!', '!', '!'});
  const std::string p3 = dir.file("garbage.gz");
  test::write_bytes(p3, garbage);
  msg = error_of(p3);
  expect_one_line_naming(msg, p3);
  EXPECT_NE(msg.find("corrupt gzip stream"), std::string::npos) << msg;
}

}  // namespace

namespace {
long peak_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}
}  // namespace

TEST(IdxErrors, AHeaderPromisingGigabytesAllocatesNothingLikeIt) {
  // 4 x 4096 x 4096 x 64 = 4 GiB promised (under the 16 GiB cap), 100 bytes
  // held: a plain file is refused from its size before anything is
  // allocated, a gzip stream after at most twice what it held (from 64 KiB).
  test::TempDir dir;
  const std::vector<std::size_t> dims{4, 4096, 4096, 64};
  auto header = test::idx_bytes({1}, {0});
  header.resize(4);
  header[3] = static_cast<std::uint8_t>(dims.size());
  for (std::size_t d : dims)
    for (int s = 24; s >= 0; s -= 8) header.push_back(static_cast<std::uint8_t>(d >> s));
  header.insert(header.end(), 100, 7);
  const std::string plain = dir.file("plain-idx"), gz = dir.file("gz-idx");
  test::write_bytes(plain, header);
  test::write_bytes(gz, gzip_bytes(header));
  const long before = peak_rss_kib();
  const std::string a = error_of(plain), b = error_of(gz);
  EXPECT_NE(a.find("truncated: expected 4294967296 bytes of pixels, got 100"), std::string::npos) << a;
  EXPECT_NE(b.find("truncated: expected 4294967296 bytes of pixels, got 100"), std::string::npos) << b;
  EXPECT_LT(peak_rss_kib() - before, 16 * 1024) << "KiB of peak memory for a 100-byte payload";
}
