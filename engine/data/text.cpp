// Text data sets: UTF-8 decoding, the character vocabulary, the Jargon File's cleaning and the windows.
#include "data/text.h"

#include <algorithm>
#include <bit>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "data/idx.h"

namespace engine {
namespace {

constexpr std::string_view kTextPrefix = "text:";
constexpr std::string_view kJargonName = "jargon";
constexpr std::size_t kCodePoints = 0x110000;

[[noreturn]] void fail(const std::string& origin, const std::string& problem) {
  throw std::runtime_error(origin + ": " + problem);
}

// The code point at text[pos] and its length in bytes; len 0 for a byte
// that does not start a well-formed UTF-8 sequence (overlong forms,
// surrogates and values over U+10FFFF included), as the Unicode standard's
// table 3-7 has it.
struct Decoded {
  char32_t cp = 0;
  std::size_t len = 0;
};
Decoded decode_at(std::string_view text, std::size_t pos) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[pos + k]); };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80) return {b0, 1};
  std::size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  char32_t cp = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2, cp = b0 & 0x1Fu;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3, cp = b0 & 0x0Fu;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4, cp = b0 & 0x07u;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {};
  }
  if (pos + len > text.size()) return {};
  for (std::size_t k = 1; k < len; ++k) {
    const unsigned char b = byte(k);
    if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return {};
    cp = (cp << 6) | (b & 0x3Fu);
  }
  return {cp, len};
}

std::string encode_utf8(char32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

std::string_view trim_left(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}
bool blank(std::string_view s) { return trim_left(s).empty() || trim_left(s) == "\r"; }

// One split: its tokens as floats (the whole stream), labels[j] = token j + 1.
Dataset make_split(const TextCorpus& c, std::size_t begin, std::size_t end, std::size_t context, std::size_t pitch,
                   const char* split) {
  Dataset d;
  d.name = c.name;
  d.split = split;
  d.source = c.path;
  const std::size_t n = end - begin;
  d.shape.features = context;
  d.row_pitch = pitch;
  d.labels_per_sample = context;
  d.label_pitch = pitch;
  d.count = (n - 1 - context) / pitch + 1;
  d.classes = static_cast<int>(c.vocabulary.size());
  d.vocabulary = c.vocabulary;
  size_inputs(d, n);
  for (std::size_t j = 0; j < n; ++j) d.inputs[j] = static_cast<float>(c.ids[begin + j]);
  d.labels.resize(n - 1);
  for (std::size_t j = 0; j + 1 < n; ++j) d.labels[j] = static_cast<std::int32_t>(c.ids[begin + j + 1]);
  return d;
}

}  // namespace

bool is_text_spec(std::string_view spec) { return spec == kJargonName || spec.starts_with(kTextPrefix); }

TextCorpus tokenize_text(std::string_view text, const std::string& origin) {
  std::size_t start = text.starts_with("\xEF\xBB\xBF") ? 3 : 0;  // a byte-order mark
  if (start == text.size()) fail(origin, "empty file");
  // Pass 1: validate and mark the code points present (a bitmap, 136 KiB).
  std::vector<std::uint64_t> seen(kCodePoints / 64, 0);
  std::size_t count = 0;
  char32_t top = 0;
  for (std::size_t pos = start; pos < text.size(); ++count) {
    if (text[pos] == '\0') fail(origin, "not UTF-8 text: NUL byte at byte offset " + std::to_string(pos));
    const Decoded d = decode_at(text, pos);
    if (d.len == 0) fail(origin, "not UTF-8 text: invalid UTF-8 at byte offset " + std::to_string(pos));
    seen[d.cp / 64] |= std::uint64_t{1} << (d.cp % 64);
    top = std::max(top, d.cp);
    pos += d.len;
  }
  // A code point's id is the number of smaller ones present: a prefix count
  // per 64-bit word (up to the highest code point used) and a popcount
  // within it.
  seen.resize(top / 64 + 1);
  std::vector<std::uint32_t> below(seen.size() + 1, 0);
  for (std::size_t w = 0; w < seen.size(); ++w)
    below[w + 1] = below[w] + static_cast<std::uint32_t>(std::popcount(seen[w]));
  const std::size_t vocabulary = below.back();
  if (vocabulary > kMaxTextVocabulary) {
    fail(origin, std::to_string(vocabulary) + " distinct characters; a text may have at most " +
                     std::to_string(kMaxTextVocabulary));
  }
  TextCorpus c;
  c.vocabulary.reserve(vocabulary);
  for (std::size_t w = 0; w < seen.size(); ++w)
    for (std::uint64_t bits = seen[w]; bits; bits &= bits - 1)
      c.vocabulary.push_back(encode_utf8(static_cast<char32_t>(w * 64 + std::countr_zero(bits))));
  // Pass 2: the ids (the text is known to be well-formed now).
  c.ids.reserve(count);
  for (std::size_t pos = start; pos < text.size();) {
    const Decoded d = decode_at(text, pos);
    const std::uint64_t mask = (std::uint64_t{1} << (d.cp % 64)) - 1;
    c.ids.push_back(static_cast<std::uint16_t>(below[d.cp / 64] + std::popcount(seen[d.cp / 64] & mask)));
    pos += d.len;
  }
  return c;
}

std::string clean_jargon(std::string_view raw, const std::string& origin) {
  // The lines from the first one of prose on.
  std::vector<std::string_view> lines;
  bool started = false;
  for (std::size_t pos = 0; pos <= raw.size();) {
    std::size_t end = raw.find('\n', pos);
    if (end == std::string_view::npos) end = raw.size();
    const std::string_view line = raw.substr(pos, end - pos);
    pos = end + 1;
    if (!started) started = trim_left(line).starts_with("This is the Jargon File,");
    if (started) lines.push_back(line);
  }
  if (!started) fail(origin, "not the Jargon File's text (no line starts \"This is the Jargon File,\")");
  // Paragraphs: runs of non-blank lines, without the tables' lines, each line
  // without the formatting's indent and with no-break spaces as spaces.
  std::vector<std::vector<std::string>> paragraphs(1);
  for (std::string_view line : lines) {
    if (line.find("\xE2\x94") != std::string_view::npos || line.find("\xE2\x95") != std::string_view::npos) continue;
    if (blank(line)) {
      if (!paragraphs.back().empty()) paragraphs.emplace_back();
      continue;
    }
    if (line.starts_with("   ")) line.remove_prefix(3);
    std::string clean;
    clean.reserve(line.size());
    for (std::size_t k = 0; k < line.size(); ++k) {
      if (line[k] == '\xC2' && k + 1 < line.size() && line[k + 1] == '\xA0') {
        clean += ' ';
        ++k;
      } else {
        clean += line[k];
      }
    }
    paragraphs.back().push_back(std::move(clean));
  }
  if (paragraphs.back().empty()) paragraphs.pop_back();
  // A list of headwords: short one-line paragraphs that are not sentences.
  const auto list_item = [](const std::vector<std::string>& p) {
    if (p.size() != 1 || p[0].size() > 48) return false;
    const std::string_view s = p[0];
    const std::size_t last = s.find_last_not_of(" \t\r");
    if (last != std::string_view::npos && s[last] == '.') return false;
    return !trim_left(s).starts_with("\xE2\x80\xA2");  // a bullet: prose in a list
  };
  std::string out;
  out.reserve(raw.size());
  const auto emit = [&out](const std::vector<std::string>& p) {
    if (!out.empty()) out += '\n';
    for (const std::string& line : p) out += line + '\n';
  };
  for (std::size_t i = 0; i < paragraphs.size();) {
    std::size_t j = i;
    while (j < paragraphs.size() && list_item(paragraphs[j])) ++j;
    if (j == i) {
      emit(paragraphs[i++]);
      continue;
    }
    if (j - i < 6)
      for (std::size_t k = i; k < j; ++k) emit(paragraphs[k]);
    i = j;
  }
  return out;
}

TextCorpus read_text_corpus(std::string_view spec) {
  std::string path;
  const bool jargon = spec == kJargonName;
  if (jargon) {
    path = kJargonPath;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      fail(path, "no such file; install the Debian package jargon-text: sudo apt-get install jargon-text");
    }
  } else if (spec.starts_with(kTextPrefix)) {
    path = std::string(spec.substr(kTextPrefix.size()));
    if (path.empty()) throw std::runtime_error("dataset text: no file named; expected text:PATH");
  } else {
    throw std::runtime_error("dataset " + std::string(spec) + ": not a text data set; expected jargon or text:PATH");
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(path, "is a folder, not a text file");
  std::string bytes = read_file_bytes(path, kMaxTextBytes);
  if (bytes.empty()) fail(path, "empty file");
  if (jargon) {
    // Validated as read (an offset in the file as it is), then cleaned.
    (void)tokenize_text(bytes, path);
    bytes = clean_jargon(bytes, path);
  }
  TextCorpus c = tokenize_text(bytes, path);
  c.path = path;
  c.name = jargon ? std::string(kJargonName) : std::filesystem::path(path).filename().string();
  return c;
}

DatasetPair make_text_dataset(const TextCorpus& c, std::size_t context) {
  const std::string& origin = c.path.empty() ? c.name : c.path;
  if (context == 0) fail(origin, "context 0: a window holds at least 1 token");
  const std::size_t n = c.ids.size();
  const std::size_t n_train = n / 10 * 9 + n % 10 * 9 / 10;  // floor(0.9 n) without overflow
  const std::size_t n_val = n - n_train;
  // A split holds a window when it has the window and the token after it.
  // The validation split is never the larger one (n_train >= n_val for
  // n >= 2; n = 1 leaves train empty and validation 1 token, too few for
  // any window), so its check is the train split's too.
  if (n_val <= context) {
    fail(origin, "context " + std::to_string(context) + " is longer than the validation split allows: it has " +
                     std::to_string(n_val) + " tokens (10% of " + std::to_string(n) +
                     ") and a window needs context + 1");
  }
  DatasetPair p;
  p.train = make_split(c, 0, n_train, context, 1, "train");
  p.test = make_split(c, n_train, n, context, context, "test");
  return p;
}

DatasetPair load_text_dataset(std::string_view spec, std::size_t context) {
  return make_text_dataset(read_text_corpus(spec), context);
}

TextPlan plan_text_dataset(std::string_view spec) {
  const TextCorpus c = read_text_corpus(spec);
  return {c.vocabulary.size(), c.ids.size()};
}

}  // namespace engine
