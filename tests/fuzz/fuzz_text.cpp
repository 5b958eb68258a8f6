// Fuzz target: the text data set's reader (UTF-8 decoding, the vocabulary, the windows) and the Jargon File's cleaning.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "data/batch.h"
#include "data/text.h"
#include "fuzz/fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  int fd = -1;
  const std::string path = fuzz::as_file(data, size, fd);
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const engine::TextCorpus c = engine::read_text_corpus("text:" + path);
    // The vocabulary is ascending and distinct, and spells the text back
    // (a gzip input spells its inflated text; compare only plain ones).
    for (std::size_t i = 1; i < c.vocabulary.size(); ++i) {
      const auto& a = c.vocabulary[i - 1];
      const auto& b = c.vocabulary[i];
      if (!(a.size() < b.size() || (a.size() == b.size() && a < b))) std::abort();
    }
    if (c.vocabulary.size() > engine::kMaxTextVocabulary) std::abort();
    std::string back;
    for (std::uint16_t id : c.ids) {
      if (id >= c.vocabulary.size()) std::abort();
      back += c.vocabulary[id];
    }
    const bool gzip = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
    const std::string_view text = bytes.starts_with("\xEF\xBB\xBF") ? bytes.substr(3) : bytes;
    if (!gzip && back != text) std::abort();
    // Windows: the first and last sample of each split hold their tokens.
    const std::size_t context = size % 16 + 1;
    const engine::DatasetPair p = engine::make_text_dataset(c, context);
    for (const engine::Dataset* d : {&p.train, &p.test}) {
      if (d->count == 0) std::abort();
      const std::uint32_t idx[2] = {0, static_cast<std::uint32_t>(d->count - 1)};
      std::vector<float> x(2 * context);
      std::vector<std::int32_t> y(2 * context);
      engine::gather_batch(*d, idx, x.data(), y.data(), nullptr);
      for (std::size_t k = 0; k < 2; ++k)
        for (std::size_t t = 0; t < context; ++t) {
          const std::size_t at = idx[k] * d->row_pitch + t;  // the window's token t; its label the next
          if (x[k * context + t] != d->inputs[at]) std::abort();
          if (y[k * context + t] != static_cast<std::int32_t>(d->inputs.at(at + 1))) std::abort();
        }
    }
  } catch (const std::runtime_error&) {
    // Refused with a message: fine.
  }
  try {
    (void)engine::clean_jargon(bytes, "fuzz");
  } catch (const std::runtime_error&) {
  }
  close(fd);
  return 0;
}
