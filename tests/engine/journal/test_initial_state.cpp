// journal/npy.h and journal/initial_state.h: the .npy files and the initial-<run>/ folder, written and read back.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <unistd.h>

#include "journal/initial_state.h"
#include "journal/npy.h"

namespace {

namespace fs = std::filesystem;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(Npy, WritesWhatNumpyReadsAndReadsItBack) {
  const engine::NpyArray a = engine::npy_f32({2, 3}, {0, 1, 2, 3, 4, 5.5f});
  const std::string bytes = engine::serialize_npy(a);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const std::size_t header = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
  EXPECT_EQ((10 + header) % 64, 0u);  // the values start 64-byte aligned, as numpy writes them
  EXPECT_NE(bytes.find("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"), std::string::npos);
  EXPECT_EQ(bytes[10 + header - 1], '\n');
  const engine::NpyArray b = engine::parse_npy(bytes, "a.npy");
  EXPECT_EQ(b.shape, a.shape);
  EXPECT_EQ(b.data, a.data);
  // One dimension is written "(n,)", a Python tuple.
  EXPECT_NE(engine::serialize_npy(engine::npy_f32({4}, {1, 2, 3, 4})).find("'shape': (4,)"), std::string::npos);
}

TEST(Npy, RefusesBadFilesInOneLineNamingThem) {
  const std::string good = engine::serialize_npy(engine::npy_f32({2, 3}, {0, 1, 2, 3, 4, 5}));
  for (const std::string& bad : {std::string("not numpy"), good.substr(0, good.size() - 4), good + "xx",
                                 [&] {
                                   std::string s = good;
                                   s.replace(s.find("<f4"), 3, "<f8");
                                   return s;
                                 }(),
                                 [&] {
                                   std::string s = good;
                                   s.replace(s.find("(2, 3)"), 6, "(9999999999999, 99999999999)");
                                   return s;
                                 }()}) {
    const std::string e = error_of([&] { (void)engine::parse_npy(bad, "w.npy"); });
    EXPECT_EQ(e.rfind("w.npy: ", 0), 0u) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

TEST(InitialState, WrittenWholeAndReadBack) {
  const fs::path dir = fs::temp_directory_path() / ("pl_initial_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  engine::WeightsFile w;
  w.parameters.push_back({"fc1.weight", {3, 2}, engine::Format::FP32, 1.0f, {1, 2, 3, 4, 5, 6}});
  w.parameters.push_back({"fc1.bias", {3}, engine::Format::FP32, 1.0f, {-1, 0, 1}});
  // 10 samples, batch 4: 3 batches an epoch (the last of 2); 5 steps.
  engine::write_initial_state(dir.string(), 2, w, 10, 4, 7, 5, "");
  EXPECT_FALSE(fs::exists(dir / ".initial-2.tmp"));
  const engine::InitialState s = engine::read_initial_state(dir.string(), 2, 10);
  ASSERT_EQ(s.names, (std::vector<std::string>{"fc1.weight", "fc1.bias"}));
  EXPECT_EQ(s.shapes[0], (std::vector<std::int64_t>{3, 2}));
  EXPECT_EQ(s.values[1], (std::vector<float>{-1, 0, 1}));
  ASSERT_EQ(s.batches.size(), 5u);
  EXPECT_EQ(s.batches[0].size(), 4u);
  EXPECT_EQ(s.batches[2].size(), 2u);  // the epoch's kept last batch
  std::set<std::uint32_t> epoch;
  for (int b = 0; b < 3; ++b) epoch.insert(s.batches[static_cast<std::size_t>(b)].begin(), s.batches[static_cast<std::size_t>(b)].end());
  EXPECT_EQ(epoch.size(), 10u);
  // Read against a smaller split, an index is out of range: refused by line.
  const std::string e = error_of([&] { (void)engine::read_initial_state(dir.string(), 2, 3); });
  EXPECT_NE(e.find("batches.txt:"), std::string::npos) << e;
  EXPECT_NE(e.find("not a sample index below 3"), std::string::npos) << e;
  // A run without one: the message says how to get one.
  const std::string missing = error_of([&] { (void)engine::read_initial_state(dir.string(), 0, 10); });
  EXPECT_NE(missing.find("initial-0: missing"), std::string::npos) << missing;
  EXPECT_NE(missing.find("--keep-initial on"), std::string::npos) << missing;
  fs::remove_all(dir);
}

}  // namespace
