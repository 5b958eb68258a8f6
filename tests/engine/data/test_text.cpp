// Text data sets: vocabulary, split, windows and labels, seeded batches, every error, the Jargon File corpus.
#include <gtest/gtest.h>
#include <zlib.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/dataset.h"
#include "data/idx.h"
#include "data/sampler.h"
#include "data/text.h"
#include "engine/data/temp_dir.h"

namespace {

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// The message load_dataset throws for `spec` ("" if it loads).
std::string load_error(const std::string& spec, std::size_t context = 64) {
  try {
    (void)engine::load_dataset(spec, 1, context);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// n <= 94 characters of ascending code points from '!', so a token's id is its position.
std::string ascending(std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += static_cast<char>(0x21 + i);
  return s;
}

std::vector<float> floats(std::initializer_list<int> v) { return {v.begin(), v.end()}; }

TEST(TextData, VocabularyIsTheSortedCodePointsAndIdsTheirRanks) {
  test::TempDir dir;
  const std::string path = dir.file("multi.txt");
  // a, é (2 bytes), € (3 bytes), 😀 (4 bytes), a, newline; after a byte-order mark.
  write_text(path, "\xEF\xBB\xBF" "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80" "a\n");
  const engine::TextCorpus c = engine::read_text_corpus("text:" + path);
  EXPECT_EQ(c.name, "multi.txt");
  EXPECT_EQ(c.path, path);
  EXPECT_EQ(c.vocabulary, (std::vector<std::string>{"\n", "a", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80"}));
  EXPECT_EQ(c.ids, (std::vector<std::uint16_t>{1, 2, 3, 4, 1, 0}));
  const engine::TextPlan plan = engine::plan_text_dataset("text:" + path);
  EXPECT_EQ(plan.vocabulary, 5u);
  EXPECT_EQ(plan.tokens, 6u);
}

TEST(TextData, GzippedTextReadsAsThePlainOne) {
  test::TempDir dir;
  const std::string text = "Gr\xC3\xBC\xC3\x9F" "e aus der Datei\n";
  write_text(dir.file("plain.txt"), text);
  gzFile f = gzopen(dir.file("packed.txt.gz").c_str(), "wb");
  ASSERT_TRUE(f);
  ASSERT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
  const engine::TextCorpus a = engine::read_text_corpus("text:" + dir.file("plain.txt"));
  const engine::TextCorpus b = engine::read_text_corpus("text:" + dir.file("packed.txt.gz"));
  EXPECT_EQ(a.vocabulary, b.vocabulary);
  EXPECT_EQ(a.ids, b.ids);
}

TEST(TextData, SplitIsNinetyTenRoundedDown) {
  for (const auto& [n, train] : std::vector<std::pair<std::size_t, std::size_t>>{{70, 63}, {25, 22}, {94, 84}}) {
    test::TempDir dir;
    write_text(dir.file("t.txt"), ascending(n));
    const engine::DatasetPair p = engine::load_dataset("text:" + dir.file("t.txt"), 1, 2);
    EXPECT_EQ(p.train.inputs.size(), train) << n;
    EXPECT_EQ(p.test.inputs.size(), n - train) << n;
    EXPECT_EQ(p.train.labels.size(), train - 1) << n;
    EXPECT_EQ(p.test.labels.size(), n - train - 1) << n;
    EXPECT_EQ(p.train.count, train - 2) << n;                   // pitch 1: (train - 1 - 2) / 1 + 1
    EXPECT_EQ(p.test.count, (n - train - 1 - 2) / 2 + 1) << n;  // pitch 2
  }
}

// 70 tokens with ids 0..69, context 3: train is ids 0..62 (63 tokens), 60
// windows at pitch 1; validation ids 63..69 (7 tokens), 2 windows at pitch 3.
TEST(TextData, WindowsAndLabelsOfBothSplits) {
  test::TempDir dir;
  write_text(dir.file("t.txt"), ascending(70));
  const engine::DatasetPair p = engine::load_dataset("text:" + dir.file("t.txt"), 1, 3);
  const engine::Dataset& tr = p.train;
  const engine::Dataset& va = p.test;
  EXPECT_TRUE(tr.is_text());
  EXPECT_TRUE(tr.is_classification());
  EXPECT_EQ(tr.classes, 70);
  EXPECT_EQ(tr.vocabulary.size(), 70u);
  EXPECT_EQ(tr.vocabulary[5], "&");
  EXPECT_EQ(tr.shape.features, 3u);
  EXPECT_FALSE(tr.shape.is_image());
  EXPECT_EQ(tr.output_width(), 70u);
  EXPECT_EQ(tr.labels_per_sample, 3u);
  EXPECT_EQ(tr.row_pitch, 1u);
  EXPECT_EQ(tr.label_pitch, 1u);
  EXPECT_EQ(va.row_pitch, 3u);
  EXPECT_EQ(va.label_pitch, 3u);
  EXPECT_EQ(tr.count, 60u);
  EXPECT_EQ(va.count, 2u);
  EXPECT_EQ(tr.split, "train");
  EXPECT_EQ(va.split, "test");

  std::vector<float> x(9);
  std::vector<std::int32_t> y(9);
  const std::vector<std::uint32_t> train_idx{0, 59, 7};
  engine::gather_batch(tr, train_idx, x.data(), y.data(), nullptr);
  EXPECT_EQ(x, floats({0, 1, 2, 59, 60, 61, 7, 8, 9}));
  // The last train window's labels end at the split's last token (62), never
  // the validation split's first.
  EXPECT_EQ(y, (std::vector<std::int32_t>{1, 2, 3, 60, 61, 62, 8, 9, 10}));

  std::vector<float> vx(6);
  std::vector<std::int32_t> vy(6);
  const std::vector<std::uint32_t> val_idx{1, 0};
  engine::gather_batch(va, val_idx, vx.data(), vy.data(), nullptr);
  EXPECT_EQ(vx, floats({66, 67, 68, 63, 64, 65}));
  EXPECT_EQ(vy, (std::vector<std::int32_t>{67, 68, 69, 64, 65, 66}));

  const std::vector<std::uint32_t> past_train{60}, past_val{2};
  EXPECT_THROW(engine::gather_batch(tr, past_train, x.data(), y.data(), nullptr), std::invalid_argument);
  EXPECT_THROW(engine::gather_batch(va, past_val, vx.data(), vy.data(), nullptr), std::invalid_argument);
}

// Context 1: one token and its successor per sample, one label each; both
// pitches are 1 in train and in validation.
TEST(TextData, ContextOneIsABigramSet) {
  test::TempDir dir;
  write_text(dir.file("t.txt"), ascending(20));
  const engine::DatasetPair p = engine::load_dataset("text:" + dir.file("t.txt"), 1, 1);
  EXPECT_EQ(p.train.count, 17u);  // 18 tokens
  EXPECT_EQ(p.test.count, 1u);    // 2 tokens
  std::vector<float> x(2);
  std::vector<std::int32_t> y(2);
  const std::vector<std::uint32_t> idx{16, 3};
  engine::gather_batch(p.train, idx, x.data(), y.data(), nullptr);
  EXPECT_EQ(x, floats({16, 3}));
  EXPECT_EQ(y, (std::vector<std::int32_t>{17, 4}));
}

TEST(TextData, SameSeedSameBatches) {
  test::TempDir dir;
  std::string text;
  for (int i = 0; i < 400; ++i) text += "the quick brown fox " + std::to_string(i * 7 % 13) + "\n";
  write_text(dir.file("t.txt"), text);
  const std::string spec = "text:" + dir.file("t.txt");
  const auto batches = [&](std::uint64_t seed) {
    const engine::DatasetPair p = engine::load_dataset(spec, seed, 16);
    engine::BatchSampler sampler(p.train.count, 8, seed);
    sampler.set_epoch(2);
    std::vector<float> x(8 * 16);
    std::vector<std::int32_t> y(8 * 16);
    std::vector<float> all;
    for (std::size_t b = 0; b < 5; ++b) {
      engine::fill_batch(p.train, sampler, b, x.data(), y.data(), nullptr);
      all.insert(all.end(), x.begin(), x.end());
      for (std::int32_t v : y) all.push_back(static_cast<float>(v));
    }
    return all;
  };
  const std::vector<float> a = batches(11);
  EXPECT_EQ(a, batches(11));
  EXPECT_NE(a, batches(12));
}

// The sampler over a text's windows (every offset a sample: about as many as
// the file has characters) is an ordinary permutation.
TEST(TextData, SamplerCoversHundredsOfThousandsOfWindows) {
  const std::size_t count = 700000;
  engine::BatchSampler s(count, 64, 5);
  s.set_epoch(1);
  std::vector<bool> hit(count, false);
  for (std::uint32_t i : s.order()) {
    ASSERT_LT(i, count);
    ASSERT_FALSE(hit[i]);
    hit[i] = true;
  }
  EXPECT_EQ(s.batches_per_epoch(), (count + 63) / 64);
}

// --- bad input: one line naming the file and the problem

TEST(TextData, ErrorsNameTheFileAndTheProblem) {
  test::TempDir dir;
  const std::string missing = dir.file("missing.txt");
  EXPECT_EQ(load_error("text:" + missing), missing + ": cannot open: No such file or directory");
  EXPECT_EQ(load_error("text:"), "dataset text: no file named; expected text:PATH");
  EXPECT_EQ(load_error("text:" + dir.path()), dir.path() + ": is a folder, not a text file");

  const std::string empty = dir.file("empty.txt");
  write_text(empty, "");
  EXPECT_EQ(load_error("text:" + empty), empty + ": empty file");
  write_text(empty, "\xEF\xBB\xBF");  // a byte-order mark and nothing else
  EXPECT_EQ(load_error("text:" + empty), empty + ": empty file");

  const std::string bin = dir.file("binary.bin");
  write_text(bin, std::string("ab\0cd", 5));
  EXPECT_EQ(load_error("text:" + bin), bin + ": not UTF-8 text: NUL byte at byte offset 2");
  // Invalid UTF-8, each at its first bad byte: a cut sequence, a stray
  // continuation byte, an overlong '/', a surrogate, a code point past
  // U+10FFFF, Latin-1 text.
  for (const auto& [bytes, offset] : std::vector<std::pair<std::string, int>>{{"abc\xC3", 3},
                                                                              {"a\x80", 1},
                                                                              {"ok \xC0\xAF", 3},
                                                                              {"\xC3\xA9\xED\xA0\x80", 2},
                                                                              {"x\xF4\x90\x80\x80", 1},
                                                                              {"caf\xE9 au lait", 3},
                                                                              {"\xE2\x82", 0}}) {
    write_text(bin, bytes);
    EXPECT_EQ(load_error("text:" + bin),
              bin + ": not UTF-8 text: invalid UTF-8 at byte offset " + std::to_string(offset))
        << bytes;
  }

  // 1025 distinct characters (U+0100 ..), then 1024, which loads.
  std::string many;
  for (char32_t cp = 0x100; cp < 0x100 + 1025; ++cp) {
    many += static_cast<char>(0xC0 | (cp >> 6));
    many += static_cast<char>(0x80 | (cp & 0x3F));
  }
  const std::string wide = dir.file("wide.txt");
  write_text(wide, many);
  EXPECT_EQ(load_error("text:" + wide, 8), wide + ": 1025 distinct characters; a text may have at most 1024");
  write_text(wide, many.substr(0, 2 * 1024));
  EXPECT_EQ(load_error("text:" + wide, 8), "");

  // 70 tokens: validation has 7, so context 6 is the longest.
  const std::string small = dir.file("small.txt");
  write_text(small, ascending(70));
  EXPECT_EQ(load_error("text:" + small, 7),
            small + ": context 7 is longer than the validation split allows: it has 7 tokens (10% of 70) and a "
                    "window needs context + 1");
  EXPECT_EQ(load_error("text:" + small, 6), "");
  EXPECT_EQ(load_error("text:" + small, 0), small + ": context 0: a window holds at least 1 token");
  write_text(small, "x");  // one token: train empty, validation too short for any window
  EXPECT_EQ(load_error("text:" + small, 1),
            small + ": context 1 is longer than the validation split allows: it has 1 tokens (10% of 1) and a "
                    "window needs context + 1");

  // A corrupt gzip stream: the existing reader's message.
  const std::string gz = dir.file("bad.txt.gz");
  write_text(gz, std::string("\x1f\x8b\x08\x00garbage", 11));
  const std::string msg = load_error("text:" + gz);
  EXPECT_EQ(msg.rfind(gz + ": corrupt gzip stream", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;

  // Too large: the cap of read_file_bytes, here 10 bytes.
  write_text(small, "eleven byte");
  try {
    (void)engine::read_file_bytes(small, 10);
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), small + ": larger than 10 bytes");
  }
  EXPECT_EQ(engine::read_file_bytes(small, 11), "eleven byte");

  // plan_text_dataset refuses the same files with the same lines.
  try {
    (void)engine::plan_text_dataset("text:" + bin);
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), bin + ": not UTF-8 text: invalid UTF-8 at byte offset 0");
  }
}

TEST(TextData, UnreadableFile) {
  if (geteuid() == 0) GTEST_SKIP() << "root reads a file whatever its mode";
  test::TempDir dir;
  const std::string path = dir.file("locked.txt");
  write_text(path, "secret");
  ::chmod(path.c_str(), 0);
  EXPECT_EQ(load_error("text:" + path), path + ": cannot open: Permission denied");
}

// --- the Jargon File

TEST(TextData, JargonCleaningKeepsTheProse) {
  const std::string raw =
      "                                The Jargon File\n"
      "\n"
      "   Table of Contents\n"
      "\n"
      "   This is the Jargon File, a compendium\n"
      "   of hacker slang.\n"
      "\n"
      "   ┌───┬───┐\n"
      "   │ a │ b │\n"
      "   └───┴───┘\n"
      "\n"
      "   Glossary\n\n   abbrev\n\n   ABEND\n\n   accumulator\n\n   ACK\n\n   Acme\n"
      "\n"
      "   :abbrev: /*-breev'/, /*-brev'/, n.\n"
      "\n"
      "   Common abbreviation\xC2\xA0" "for ‘abbreviation’.\n"
      "\n"
      "\n"
      "     • Microsoft → Microsloth\n\n     • Lotus Notes → Lotus Bloats\n\n"
      "   one\n\n   two\n\n   three\n\n   four\n\n   five\n";
  EXPECT_EQ(engine::clean_jargon(raw, "jargon.txt"),
            "This is the Jargon File, a compendium\n"
            "of hacker slang.\n"
            "\n"
            ":abbrev: /*-breev'/, /*-brev'/, n.\n"
            "\n"
            "Common abbreviation for ‘abbreviation’.\n"
            "\n"
            "  • Microsoft → Microsloth\n\n  • Lotus Notes → Lotus Bloats\n\n"
            "one\n\ntwo\n\nthree\n\nfour\n\nfive\n");
  try {
    (void)engine::clean_jargon("just some text\n", "x.txt");
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "x.txt: not the Jargon File's text (no line starts \"This is the Jargon File,\")");
  }
}

TEST(TextData, JargonCorpusLoads) {
  if (!std::filesystem::exists(engine::kJargonPath)) {
    GTEST_SKIP() << engine::kJargonPath << " not installed (Debian package jargon-text)";
  }
  const std::string raw = engine::read_file_bytes(engine::kJargonPath, engine::kMaxTextBytes);
  const std::string text = engine::clean_jargon(raw, engine::kJargonPath);
  const engine::TextPlan plan = engine::plan_text_dataset("jargon");
  std::printf("[ info     ] jargon: %zu bytes of text after cleaning (%zu in the file), %zu tokens, vocabulary %zu\n",
              text.size(), raw.size(), plan.tokens, plan.vocabulary);
  EXPECT_GE(text.size(), 500u * 1000u);
  EXPECT_EQ(text.rfind("This is the Jargon File,", 0), 0u);
  EXPECT_EQ(text.find("\xE2\x94"), std::string::npos);  // no table rules
  EXPECT_EQ(text.find("\xC2\xA0"), std::string::npos);  // no no-break spaces
  EXPECT_EQ(text.find("\n\n\n"), std::string::npos);    // one blank line between paragraphs
  EXPECT_NE(text.find("The Story of Mel"), std::string::npos);

  const engine::DatasetPair p = engine::load_dataset("jargon", 0, 64);
  EXPECT_EQ(p.train.name, "jargon");
  EXPECT_EQ(p.train.source, engine::kJargonPath);
  EXPECT_EQ(p.train.vocabulary.size(), plan.vocabulary);
  EXPECT_LE(plan.vocabulary, engine::kMaxTextVocabulary);
  EXPECT_EQ(p.train.inputs.size() + p.test.inputs.size(), plan.tokens);
  EXPECT_EQ(p.train.count, p.train.inputs.size() - 64);
  EXPECT_EQ(p.test.count, (p.test.inputs.size() - 1 - 64) / 64 + 1);
  // The vocabulary's UTF-8 spells the text back.
  std::string back;
  for (float id : p.train.inputs) back += p.train.vocabulary[static_cast<std::size_t>(id)];
  for (float id : p.test.inputs) back += p.test.vocabulary[static_cast<std::size_t>(id)];
  EXPECT_EQ(back, text);
  const auto names = engine::builtin_dataset_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "jargon"), names.end());
}

}  // namespace
