// Text generation from a language model: one window forward per token, the next id by argmax or a seeded draw.
#include "train/sample.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "data/dataset.h"
#include "nn/model.h"
#include "tensor/tensor.h"

namespace engine {

namespace {

// Decodes one UTF-8 code point at s[i]; returns its length, 0 when invalid.
std::size_t utf8_length(std::string_view s, std::size_t i, std::uint32_t& cp) {
  const auto b = static_cast<unsigned char>(s[i]);
  std::size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  cp = len == 1 ? b : len == 2 ? (b & 0x1Fu) : len == 3 ? (b & 0x0Fu) : (b & 0x07u);
  for (std::size_t k = 1; k < len; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c >> 6) != 0x2) return 0;
    cp = (cp << 6) | (c & 0x3Fu);
  }
  return len;
}

// splitmix64: small, seedable and the same on every platform.
struct Generator {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) from 53 bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

std::int32_t pick(const float* logits, std::int64_t v, double temperature, Generator& gen) {
  // NaN counts as -inf: a diverged model still yields a deterministic id.
  auto value = [&](std::int64_t i) {
    const float l = logits[i];
    return std::isnan(l) ? -std::numeric_limits<double>::infinity() : static_cast<double>(l);
  };
  std::int64_t best = 0;
  for (std::int64_t i = 1; i < v; ++i)
    if (value(i) > value(best)) best = i;
  const double top = value(best);
  if (temperature <= 0.0 || !std::isfinite(top)) {
    // A +inf logit wins outright (the first); a row of -inf/NaN gives id 0.
    if (top == -std::numeric_limits<double>::infinity()) best = 0;
    if (temperature > 0.0) (void)gen.next();  // one draw per token whatever the row
    return static_cast<std::int32_t>(best);
  }
  double sum = 0.0;
  std::vector<double> w(static_cast<std::size_t>(v));
  for (std::int64_t i = 0; i < v; ++i) {
    const double x = value(i);
    w[static_cast<std::size_t>(i)] = x == -std::numeric_limits<double>::infinity() ? 0.0 : std::exp((x - top) / temperature);
    sum += w[static_cast<std::size_t>(i)];
  }
  const double u = gen.uniform() * sum;
  double acc = 0.0;
  for (std::int64_t i = 0; i < v; ++i) {
    acc += w[static_cast<std::size_t>(i)];
    if (u < acc) return static_cast<std::int32_t>(i);
  }
  return static_cast<std::int32_t>(best);  // u rounded up to the sum
}

}  // namespace

std::vector<std::int32_t> encode_text(std::string_view text, const std::vector<std::string>& vocabulary,
                                      const std::string& what) {
  std::vector<std::int32_t> ids;
  for (std::size_t i = 0; i < text.size();) {
    std::uint32_t cp = 0;
    const std::size_t len = utf8_length(text, i, cp);
    if (len == 0) throw std::runtime_error(what + ": invalid UTF-8 at byte " + std::to_string(i));
    const std::string_view ch = text.substr(i, len);
    // The vocabulary is sorted by code point, and UTF-8 sorts as its code points do.
    const auto it = std::lower_bound(vocabulary.begin(), vocabulary.end(), ch,
                                     [](const std::string& a, std::string_view b) { return std::string_view(a) < b; });
    if (it == vocabulary.end() || *it != ch) {
      char code[16];
      std::snprintf(code, sizeof code, "U+%04X", static_cast<unsigned>(cp));
      const std::string shown = cp < 0x20 || cp == 0x7F ? std::string() : "'" + std::string(ch) + "' ";
      throw std::runtime_error(what + ": " + shown + "(" + code + ") is not in the data set's vocabulary");
    }
    ids.push_back(static_cast<std::int32_t>(it - vocabulary.begin()));
    i += len;
  }
  return ids;
}

std::string decode_tokens(const std::vector<std::int32_t>& ids, const std::vector<std::string>& vocabulary) {
  std::string out;
  for (std::int32_t id : ids) out += vocabulary.at(static_cast<std::size_t>(id));
  return out;
}

std::vector<std::int32_t> generate_tokens(Backend& be, Model& model, std::int64_t context,
                                          const std::vector<std::int32_t>& prompt, const SampleOptions& o) {
  if (context < 1) throw std::invalid_argument("generate_tokens: context must be >= 1");
  const std::int64_t v = model.outputs();
  std::vector<std::int32_t> known = prompt;
  if (known.empty()) known.push_back(0);
  Generator gen{o.seed};
  std::vector<std::int32_t> out;
  out.reserve(o.tokens);
  std::vector<float> window(static_cast<std::size_t>(context));
  Tensor x({1, context}, Format::FP32);
  for (std::size_t t = 0; t < o.tokens; ++t) {
    const std::size_t n = std::min(known.size(), static_cast<std::size_t>(context));
    std::fill(window.begin(), window.end(), 0.0f);
    for (std::size_t k = 0; k < n; ++k) window[k] = static_cast<float>(known[known.size() - n + k]);
    x.from_f32(window.data(), context);
    const Tensor& logits = model.forward(be, x);
    if (logits.numel() != context * v)
      throw std::invalid_argument("generate_tokens: the model's outputs are not [1, context, vocabulary]");
    const std::vector<float> all = logits.to_f32();  // the token's one read
    const std::int32_t id = pick(all.data() + static_cast<std::ptrdiff_t>(n - 1) * v, v, o.temperature, gen);
    known.push_back(id);
    out.push_back(id);
  }
  return out;
}

std::string sample_text(Backend& be, Model& model, std::int64_t context, const std::vector<std::string>& vocabulary,
                        std::string_view prompt, const SampleOptions& o) {
  if (model.outputs() != static_cast<std::int64_t>(vocabulary.size()))
    throw std::runtime_error("sample: the model has " + std::to_string(model.outputs()) +
                             " outputs but the vocabulary " + std::to_string(vocabulary.size()) + " tokens");
  const std::vector<std::int32_t> ids = encode_text(prompt, vocabulary);
  return decode_tokens(generate_tokens(be, model, context, ids, o), vocabulary);
}

std::vector<std::int32_t> evaluation_prompt(const Dataset& validation, std::int64_t context) {
  const std::vector<float>& ids = validation.inputs;
  const std::size_t cap = std::min<std::size_t>(kEvalPromptTokens, static_cast<std::size_t>(std::max<std::int64_t>(context - 1, 1)));
  const auto it = std::lower_bound(validation.vocabulary.begin(), validation.vocabulary.end(), std::string("\n"));
  const bool has_newline = it != validation.vocabulary.end() && *it == "\n";
  const float newline = static_cast<float>(it - validation.vocabulary.begin());
  std::size_t start = ids.size();
  if (has_newline) {
    // After the first newline, past any blank lines.
    std::size_t i = 0;
    while (i < ids.size() && ids[i] != newline) ++i;
    while (i < ids.size() && ids[i] == newline) ++i;
    start = i;
  }
  std::vector<std::int32_t> out;
  std::size_t i = start;
  for (; i < ids.size() && out.size() < cap && ids[i] != newline; ++i) out.push_back(static_cast<std::int32_t>(ids[i]));
  // A line longer than the cap ends after its last whole word, so the model
  // starts a word rather than finishing one the prompt cut.
  const bool cut = out.size() == cap && i < ids.size() && ids[i] != newline;
  const auto sp = std::lower_bound(validation.vocabulary.begin(), validation.vocabulary.end(), std::string(" "));
  if (cut && sp != validation.vocabulary.end() && *sp == " ") {
    const auto space = static_cast<std::int32_t>(sp - validation.vocabulary.begin());
    std::size_t keep = out.size();
    while (keep > 0 && out[keep - 1] != space) --keep;
    if (keep > 0) out.resize(keep);
  }
  if (out.empty())
    for (std::size_t i = 0; i < ids.size() && out.size() < cap; ++i) out.push_back(static_cast<std::int32_t>(ids[i]));
  return out;
}

}  // namespace engine
