// The gpt the benchmarks time: nanoGPT's CPU "baby" shape and the PyTorch peer's step.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include "data/dataset.h"
#include "data/text.h"
#include "train/run_config.h"

namespace bench {

// 4 layers, 4 heads, width 128, context 64 (nanoGPT's README: --block_size=64
// --n_layer=4 --n_head=4 --n_embd=128) at batch 32, with AdamW (lr 1e-3,
// weight decay 0.1, clip 1.0) as tests/bench/pytorch_peer.py's gpt.
constexpr std::int64_t kGptContext = 64, kGptBatch = 32;

inline void set_gpt_baby(engine::RunConfig& c) {
  c.model = "gpt";
  c.dataset = "jargon";
  c.depth = 4;
  c.heads = 4;
  c.width = 128;
  c.context = kGptContext;
  c.batch = kGptBatch;
  c.optimizer = "adamw";
  c.lr = 1e-3;
  c.weight_decay = 0.1;
  c.clip = 1.0;
}

// The gpt's text: the Jargon File when jargon-text is installed, else a
// seeded stream of printable ASCII (a step's cost does not depend on which
// tokens it reads; the vocabulary is about the Jargon File's).
// `context`: the window (bench_train --size gpu trains a longer one).
inline std::shared_ptr<const engine::DatasetPair> gpt_text(std::int64_t context = kGptContext) {
  if (std::filesystem::exists(engine::kJargonPath))
    return std::make_shared<const engine::DatasetPair>(engine::load_dataset("jargon", 0, context));
  std::string chars;
  std::uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < 400000; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    chars += static_cast<char>(' ' + x % 95);
  }
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "pl_bench_gpt_text.txt";
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    const bool ok = f && std::fwrite(chars.data(), 1, chars.size(), f) == chars.size();
    if (f) std::fclose(f);
    if (!ok) throw std::runtime_error(path.string() + ": cannot write the stand-in text");
  }
  auto p = std::make_shared<const engine::DatasetPair>(engine::load_dataset("text:" + path.string(), 0, context));
  std::filesystem::remove(path);
  return p;
}

}  // namespace bench
