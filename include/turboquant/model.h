// A loaded model: tokenizer, chat template, generation with streaming and cancellation,
// scoring and perplexity. One Model serves one call at a time (calls from several threads
// must take turns); load several Models for parallel work.
//
//   auto m = turboquant::Model::Load("models/tq-llama-21m");
//   turboquant::GenerateOptions o;
//   o.max_tokens = 64;
//   m->Chat({{"user", "Hello"}}, o, [](std::string_view piece) {
//     std::fwrite(piece.data(), 1, piece.size(), stdout);
//     return true;  // false cancels
//   });
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "turboquant/error.h"
#include "turboquant/export.h"

namespace turboquant {

struct LoadOptions {
  std::string device = "cpu";  // "cpu" (the only device of a build without CUDA)
  int threads = 0;             // worker threads; 0 = all cores (process-wide)
  int64_t context = 0;         // tokens of prompt + generation; 0 = max_position_embeddings
  bool quiet = true;           // no start-up line on stderr (e.g. for turboquant-mlx imports)
};

struct Message {
  std::string role;  // "system", "user", "assistant", ...
  std::string content;
};

// Sampling defaults come from the model's generation_config.json; set a field to override.
struct GenerateOptions {
  int64_t max_tokens = 256;
  std::optional<float> temperature;  // 0 = greedy
  std::optional<int32_t> top_k;      // 0 = off
  std::optional<float> top_p;        // in (0, 1]
  std::optional<float> min_p;        // in [0, 1]
  std::optional<float> repetition_penalty;
  uint64_t seed = 0;  // the same seed and options give the same tokens as `turboquant generate`
  std::vector<std::string> stop;
};

struct GenerateResult {
  std::string text;             // everything streamed
  std::vector<int32_t> tokens;  // generated ids (an eos id that ended the generation not included)
  std::string finish_reason;    // "eos", "stop", "length", "cancelled"
  int64_t prompt_tokens = 0;
  double prefill_tokens_per_second = 0, decode_tokens_per_second = 0;
};

// Called with each piece of text as soon as it is final; return false to cancel.
using TextCallback = std::function<bool(std::string_view piece)>;

// Per-token log-probabilities of a text under the model.
struct Score {
  std::vector<int32_t> tokens;  // the text's ids (no special tokens added)
  std::vector<float> logprobs;  // [tokens.size() - 1]: log p(tokens[i + 1] | tokens[0..i])
  double total = 0;             // sum of logprobs
};

// How Embed turns the final hidden states of a text's tokens into a vector.
enum class Pooling {
  kMean,  // the mean over the tokens (sentence embeddings)
  kLast,  // the last token's (what a causal model has read the whole text into)
  kNone,  // every token's: [tokens, hidden_size] row-major
};

struct EmbedOptions {
  Pooling pooling = Pooling::kMean;
  bool normalize = true;           // each vector scaled to unit L2 norm (cosine = dot product)
  bool add_special_tokens = true;  // BOS etc. as `generate --prompt` adds them
};

class TQ_API Model {
 public:
  // A Hugging Face, TurboQuant or turboquant-mlx checkpoint directory. Throws Error.
  static std::unique_ptr<Model> Load(const std::string& path, const LoadOptions& options = {});
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  std::vector<int32_t> Tokenize(std::string_view text, bool add_special_tokens = true) const;
  std::string Detokenize(std::span<const int32_t> ids, bool skip_special_tokens = false) const;
  // The model's chat template (tokenizer_config.json) applied to a conversation.
  std::string ApplyChatTemplate(const std::vector<Message>& messages,
                                bool add_generation_prompt = true) const;

  // A raw prompt (special tokens added, as `generate --prompt`).
  GenerateResult Generate(std::string_view prompt, const GenerateOptions& options = {},
                          const TextCallback& on_text = {});
  // A conversation through the chat template (as `generate --chat` for one user message).
  GenerateResult Chat(const std::vector<Message>& messages, const GenerateOptions& options = {},
                      const TextCallback& on_text = {});
  // Prompt ids as they are.
  GenerateResult GenerateIds(std::span<const int32_t> prompt, const GenerateOptions& options = {},
                             const TextCallback& on_text = {});

  // Log-probabilities of every token of `text` after the first, in one window (the text must fit
  // the context).
  Score ScoreText(std::string_view text);
  // Perplexity with the protocol of `turboquant perplexity` (windows of `ctx` tokens, at most
  // `max_tokens` tokens): the number the CLI prints.
  double Perplexity(std::string_view text, int64_t ctx = 512, int64_t max_tokens = 65536);

  // Logits of every position of `ids` (one prefill from an empty cache): [ids.size() * vocab],
  // row-major, float32.
  std::vector<float> Logits(std::span<const int32_t> ids);

  // Embedding of a text from the final hidden state (after the final norm, before the LM head;
  // one prefill from an empty cache; the text must fit the context): [hidden_size], or
  // [tokens * hidden_size] with Pooling::kNone.
  std::vector<float> Embed(std::string_view text, const EmbedOptions& options = {});
  // The same from ids as they are (add_special_tokens is not used).
  std::vector<float> EmbedIds(std::span<const int32_t> ids, const EmbedOptions& options = {});

  int64_t vocab_size() const;
  int64_t hidden_size() const;  // the length of an embedding
  int64_t context() const;
  const std::string& architecture() const;  // config.json architectures[0]
  // "" (Hugging Face or TurboQuant) or "turboquant-mlx" (imported in memory).
  const std::string& source_format() const;

 private:
  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace turboquant
