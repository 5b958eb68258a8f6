// Text data sets: a UTF-8 file as a stream of character tokens, cut into context windows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/dataset.h"

namespace engine {

// Where the built-in corpus `jargon` is read from (Debian's jargon-text:
// the Jargon File 4.4.7 as plain text, gzipped).
inline constexpr const char* kJargonPath = "/usr/share/doc/jargon-text/jargon.txt.gz";
// The most distinct characters a text may hold: the model's embedding and
// output layer have one row per character, and a file with more is rarely
// prose (a binary file decoded by luck, or CJK text, which wants another
// tokenizer).
inline constexpr std::size_t kMaxTextVocabulary = 1024;
// The largest text read (after gunzip): every token costs 8 bytes as a
// training sample (its id as a float and its label), and the windows are
// indexed by 32-bit numbers.
inline constexpr std::size_t kMaxTextBytes = std::size_t{256} << 20;

// True for the specs load_text_dataset() takes: "jargon" and "text:PATH".
bool is_text_spec(std::string_view spec);

// A text as tokens: the vocabulary is the sorted set of the distinct Unicode
// code points of the text, a token's id its rank there.
struct TextCorpus {
  std::string name;                     // "jargon", or the file's name
  std::string path;                     // the file read ("" for a text given in memory)
  std::vector<std::string> vocabulary;  // UTF-8 of each id, ascending code points
  std::vector<std::uint16_t> ids;       // the text, one id per code point
};

// Tokenises UTF-8 `text`; `origin` starts every error message (the file).
// A leading byte-order mark is not part of the text and is skipped. Throws
// std::runtime_error, one line "<origin>: <problem>", for an empty text, a
// NUL byte or invalid UTF-8 (with its byte offset) and a vocabulary over
// kMaxTextVocabulary. Any thread.
TextCorpus tokenize_text(std::string_view text, const std::string& origin);

// Reads and tokenises the text a spec names: "text:PATH" (the file as it is,
// plain or gzipped) or "jargon" (kJargonPath, cleaned by clean_jargon).
// Throws the one-line errors of tokenize_text, and for a spec without a
// path, a missing or unreadable file and one over kMaxTextBytes.
TextCorpus read_text_corpus(std::string_view spec);

// What a class is shown of the Jargon File: its prose. Drops the title page
// and table of contents (everything before "This is the Jargon File,"), the
// box-drawn tables (lines holding U+2500..U+257F), and the lists of
// headwords before each letter of the lexicon (six or more one-line
// paragraphs in a row of at most 48 bytes, not ending in '.' nor bullets);
// removes the three spaces the Debian formatting puts before every line,
// turns no-break spaces into spaces, and joins the paragraphs with one blank
// line. Throws "<origin>: ..." when the text is not laid out as the Jargon
// File 4.4.7 is. Any thread.
std::string clean_jargon(std::string_view raw, const std::string& origin);

// Train and validation split of a corpus: the first 90% of the tokens
// (rounded down) train, the rest validation (DatasetPair::test). A sample
// is a window of `context` tokens, its labels the next token at each
// position (Dataset's row_pitch / labels_per_sample / label_pitch): every
// offset in train (pitch 1), non-overlapping windows in validation (pitch
// `context`). Throws "<path>: ..." when `context` is 0 or longer than the
// validation split allows (a split of n tokens holds a window when
// n >= context + 1; the train split is never the smaller).
DatasetPair make_text_dataset(const TextCorpus& corpus, std::size_t context);

// read_text_corpus + make_text_dataset. Any thread; a fresh pair.
DatasetPair load_text_dataset(std::string_view spec, std::size_t context);

// The vocabulary and token count of a text without building the windows
// (for the setup panel and the model's shape). Throws the same errors as
// read_text_corpus.
struct TextPlan {
  std::size_t vocabulary = 0;
  std::size_t tokens = 0;
};
TextPlan plan_text_dataset(std::string_view spec);

}  // namespace engine
