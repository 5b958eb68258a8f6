// upload_batch on every backend built here: text windows at both pitches and the old sets, byte for byte.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/registry.h"
#include "data/batch.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "engine/data/temp_dir.h"

namespace {

// FNV-1a over bytes: a batch's fingerprint.
std::uint64_t fnv1a(const void* p, std::size_t n, std::uint64_t h = 0xcbf29ce484222325ull) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

std::vector<std::string> backends() {
  std::vector<std::string> names{"cpu", "guarded"};
  try {
    (void)engine::make_backend("cuda", 1);
    names.push_back("cuda");
  } catch (const std::exception&) {
    // No CUDA here: the host-side gather is what the CUDA backend runs too.
  }
  return names;
}

struct Uploaded {
  std::vector<float> x;
  std::vector<std::int32_t> labels;
  std::vector<float> targets;
};

// indices through upload_batch on `name`, downloaded again.
Uploaded upload(const std::string& name, const engine::Dataset& d, const std::vector<std::uint32_t>& idx) {
  auto be = engine::make_backend(name, 1).backend;
  const std::size_t k = idx.size();
  Uploaded u;
  u.x.resize(k * d.shape.features);
  u.labels.resize(d.is_classification() ? k * d.labels_per_sample : 0);
  u.targets.resize(k * d.target_width);
  void* x = be->allocate(u.x.size() * sizeof(float));
  void* y = be->allocate(std::max<std::size_t>(u.labels.size(), 1) * sizeof(std::int32_t));
  void* t = be->allocate(std::max<std::size_t>(u.targets.size(), 1) * sizeof(float));
  engine::upload_batch(*be, d, idx, x, y, t);
  be->download(u.x.data(), x, u.x.size() * sizeof(float));
  if (!u.labels.empty()) be->download(u.labels.data(), y, u.labels.size() * sizeof(std::int32_t));
  if (!u.targets.empty()) be->download(u.targets.data(), t, u.targets.size() * sizeof(float));
  be->release(x);
  be->release(y);
  be->release(t);
  return u;
}

Uploaded gathered(const engine::Dataset& d, const std::vector<std::uint32_t>& idx) {
  Uploaded g;
  g.x.resize(idx.size() * d.shape.features);
  g.labels.resize(d.is_classification() ? idx.size() * d.labels_per_sample : 0);
  g.targets.resize(idx.size() * d.target_width);
  engine::gather_batch(d, idx, g.x.data(), g.labels.empty() ? nullptr : g.labels.data(),
                       g.targets.empty() ? nullptr : g.targets.data());
  return g;
}

TEST(UploadBatch, TextWindowsAtBothPitchesOnEveryBackend) {
  test::TempDir dir;
  std::string text;
  for (int i = 0; i < 300; ++i) text += "line " + std::to_string(i * 31 % 97) + " of the text\n";
  std::ofstream(dir.file("t.txt"), std::ios::binary) << text;
  // Context 12: a window is 12 one-float rows at pitch 1 (train) and one
  // 12-float row at pitch 12 (validation); 18 tokens of labels likewise.
  const engine::DatasetPair p = engine::load_dataset("text:" + dir.file("t.txt"), 1, 12);
  engine::BatchSampler sampler(p.train.count, 32, 9);
  const auto first = sampler.batch(0);
  const std::vector<std::uint32_t> train_idx(first.begin(), first.end());
  const std::vector<std::uint32_t> val_idx{0, static_cast<std::uint32_t>(p.test.count - 1), 3};
  for (const std::string& name : backends()) {
    for (const auto& [d, idx] : {std::pair{&p.train, train_idx}, std::pair{&p.test, val_idx}}) {
      const Uploaded u = upload(name, *d, idx);
      const Uploaded g = gathered(*d, idx);
      EXPECT_EQ(u.x, g.x) << name << " " << d->split;
      EXPECT_EQ(u.labels, g.labels) << name << " " << d->split;
      // Against the stream itself: window i starts at token i * pitch.
      for (std::size_t k = 0; k < idx.size(); ++k)
        for (std::size_t t = 0; t < 12; ++t) {
          ASSERT_EQ(u.x[k * 12 + t], d->inputs[idx[k] * d->row_pitch + t]) << name;
          ASSERT_EQ(u.labels[k * 12 + t], static_cast<std::int32_t>(d->inputs[idx[k] * d->row_pitch + t + 1])) << name;
        }
    }
  }
}

// The old sets' path is one upload_rows of whole rows, as before the text
// sets: the bytes of a spirals batch are pinned (the fingerprints the
// gather and upload gave before the pitches existed), tiny-gradients'
// targets match the gather.
TEST(UploadBatch, OldSetsUnchangedByteForByte) {
  constexpr std::uint64_t kSpiralsX = 0x87e91e651f8ff96full;
  constexpr std::uint64_t kSpiralsY = 0xfe5b5013fcd45a24ull;
  const engine::Dataset spirals = engine::load_dataset("spirals", 1).train;
  engine::BatchSampler sampler(spirals.count, 64, 3);
  const auto b = sampler.batch(5);
  const std::vector<std::uint32_t> idx(b.begin(), b.end());
  const engine::Dataset tiny = engine::load_dataset("tiny-gradients", 1).test;
  const std::vector<std::uint32_t> tidx{1023, 7, 500};
  for (const std::string& name : backends()) {
    const Uploaded u = upload(name, spirals, idx);
    EXPECT_EQ(fnv1a(u.x.data(), u.x.size() * sizeof(float)), kSpiralsX) << name;
    EXPECT_EQ(fnv1a(u.labels.data(), u.labels.size() * sizeof(std::int32_t)), kSpiralsY) << name;
    const Uploaded t = upload(name, tiny, tidx);
    const Uploaded tg = gathered(tiny, tidx);
    EXPECT_EQ(t.x, tg.x) << name;
    EXPECT_EQ(t.targets, tg.targets) << name;
  }
  const Uploaded g = gathered(spirals, idx);
  EXPECT_EQ(fnv1a(g.x.data(), g.x.size() * sizeof(float)), kSpiralsX);
  EXPECT_EQ(fnv1a(g.labels.data(), g.labels.size() * sizeof(std::int32_t)), kSpiralsY);
}

TEST(UploadBatch, IndexOutsideTheSetThrows) {
  test::TempDir dir;
  std::ofstream(dir.file("t.txt"), std::ios::binary) << std::string(200, 'a') + "b";
  const engine::DatasetPair p = engine::load_dataset("text:" + dir.file("t.txt"), 1, 4);
  auto be = engine::make_backend("cpu", 1).backend;
  void* x = be->allocate(64);
  void* y = be->allocate(64);
  const std::vector<std::uint32_t> bad{static_cast<std::uint32_t>(p.train.count)};
  EXPECT_THROW(engine::upload_batch(*be, p.train, bad, x, y, nullptr), std::invalid_argument);
  be->release(x);
  be->release(y);
}

}  // namespace
