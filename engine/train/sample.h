// Text generation: autoregressive sampling from a language model (the gpt) over a text set's vocabulary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace engine {

class Backend;
class Model;
struct Dataset;

struct SampleOptions {
  std::size_t tokens = 200;   // tokens generated after the prompt
  double temperature = 1.0;   // 0: always the most likely token (argmax); > 0: softmax(logits / T)
  std::uint64_t seed = 0;     // the generator's seed: the same seed, model and prompt give the same text
};

// The token ids of UTF-8 `text` in `vocabulary` (a text set's: the UTF-8 of
// each id). Throws std::runtime_error, one line, for invalid UTF-8 and for a
// character the vocabulary lacks: "prompt: 'Z' (U+005A) is not in the
// data set's vocabulary" (`what` names the text in the message).
std::vector<std::int32_t> encode_text(std::string_view text, const std::vector<std::string>& vocabulary,
                                      const std::string& what = "prompt");
// The UTF-8 of `ids` (each in [0, vocabulary.size())).
std::string decode_tokens(const std::vector<std::int32_t>& ids, const std::vector<std::string>& vocabulary);

// Generates o.tokens tokens after `prompt` (token ids) from `model`, a
// model over windows of `context` token ids whose outputs are the
// vocabulary's logits per position ([1, context, V]), and returns the new
// ids. Each token: the last `context` ids known so far sit at positions
// 0..n-1 of one window (the rest of the window holds id 0: the causal mask
// keeps those positions from every earlier one), one forward, and the
// logits at position n-1 give the next id. Temperature 0 takes the largest
// logit (the first on ties); otherwise the id is drawn from
// softmax(logits / T) (in double) by the run's own generator
// (splitmix64 of o.seed), so nothing else's random state moves. A logit
// that is NaN counts as -inf; a row without a finite or +inf logit gives id 0.
// An empty prompt starts from id 0. The model's forward runs as its
// recipe lays it out (an evaluation's forward: no gradient, no optimizer
// state, no training RNG). Needs `be` current (BackendScope) and reads
// once per token. Throws std::invalid_argument when the model's output is
// not [1, context, outputs].
std::vector<std::int32_t> generate_tokens(Backend& be, Model& model, std::int64_t context,
                                          const std::vector<std::int32_t>& prompt, const SampleOptions& o);

// encode_text + generate_tokens + decode_tokens: the continuation of UTF-8
// `prompt` (without the prompt). Throws encode_text's errors.
std::string sample_text(Backend& be, Model& model, std::int64_t context, const std::vector<std::string>& vocabulary,
                        std::string_view prompt, const SampleOptions& o);

// What a text run writes at every evaluation (Run::evaluate): this many
// tokens at this temperature from this seed, the same for every run, so
// runs of one comparison differ by their models alone.
inline constexpr std::size_t kEvalSampleTokens = 120;
inline constexpr double kEvalSampleTemperature = 0.8;
inline constexpr std::uint64_t kEvalSampleSeed = 44;
// At most this many tokens of prompt.
inline constexpr std::size_t kEvalPromptTokens = 40;

// The prompt every run on a text set continues at its evaluations: the
// validation split's first whole line (the text after its first newline,
// up to the next, blank lines skipped), at most kEvalPromptTokens tokens
// and never more than context - 1 (a longer line cut after its last space
// within them, so the model starts a word); the split's first tokens when it holds
// no such line. From the held-out text, so no run has trained on it and
// every character is in the vocabulary, whatever file the user chose.
std::vector<std::int32_t> evaluation_prompt(const Dataset& validation, std::int64_t context);

}  // namespace engine
