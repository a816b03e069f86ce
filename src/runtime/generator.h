// The generation loop. A Sequence is one generation's state apart from the model and its cache:
// sampler, streaming detokenizer, stop strings, limits. Generator drives one Sequence with
// Model::Forward; the server can drive many with Model::DecodeBatch.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/sampler.h"
#include "runtime/text_stream.h"

namespace tq {

class Model;
class KvCache;
class Tokenizer;
struct ModelConfig;
struct GenerationConfig;

enum class FinishReason { kNone, kEos, kStop, kLength, kCancelled };
// "eos", "stop", "length", "cancelled" ("none" while running).
const char* FinishReasonName(FinishReason r);

struct GenerateOptions {
  int64_t max_tokens = 256;
  SamplingParams sampling;
  std::vector<std::string> stop;
  bool skip_special_tokens = true;  // in the streamed text
};

class Sequence {
 public:
  Sequence(const Tokenizer& tokenizer, std::span<const int32_t> prompt, const GenerateOptions& opts,
           std::span<const int32_t> eos_ids, int64_t vocab_size);

  // Picks the next token from the last position's logits [vocab] (modified in place).
  int32_t Sample(float* logits);
  // Records a generated token; returns the text that may be shown now (valid until the next
  // call). Sets finished() on an eos id, a completed stop string or max_tokens.
  std::string_view Append(int32_t token);
  // Ends the sequence from outside (cache full, client gone); returns the held-back text.
  std::string_view Finish(FinishReason reason);

  bool finished() const { return reason_ != FinishReason::kNone; }
  FinishReason finish_reason() const { return reason_; }
  const std::vector<int32_t>& generated() const { return generated_; }
  int64_t prompt_tokens() const { return prompt_tokens_; }

 private:
  void FlushInto(std::string* out);

  int64_t prompt_tokens_;
  int64_t max_tokens_;
  std::vector<int32_t> eos_ids_;
  Sampler sampler_;
  TextStream text_;  // detokenizer + stop strings
  std::vector<int32_t> generated_;
  std::string out_;
  FinishReason reason_ = FinishReason::kNone;
};

struct GenerateStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t decode_steps = 0;  // forward passes after the prefill
  double prefill_seconds = 0, decode_seconds = 0;
  FinishReason finish = FinishReason::kNone;
  double prefill_tok_s() const { return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0; }
  double decode_tok_s() const { return decode_seconds > 0 ? decode_steps / decode_seconds : 0; }
};

class Generator {
 public:
  Generator(Model& model, const Tokenizer& tokenizer, std::vector<int32_t> eos_ids);

  // Called with each piece of text as it becomes final; returning false cancels.
  using TextCallback = std::function<bool(std::string_view text)>;
  // Runs `prompt` from an empty `cache` and generates until a stop condition. The generation
  // also ends ("length") when the cache is full. The prompt must fit: see FitToContext.
  GenerateStats Generate(std::span<const int32_t> prompt, const GenerateOptions& opts,
                         KvCache& cache, const TextCallback& on_text,
                         std::vector<int32_t>* tokens_out = nullptr);

  // Prompt tokens per Forward call in the prefill (bounds activation memory).
  void set_prefill_chunk(int64_t n) { prefill_chunk_ = n; }

 private:
  Model& model_;
  const Tokenizer& tokenizer_;
  std::vector<int32_t> eos_ids_;
  std::vector<float> logits_;  // [vocab]
  int64_t prefill_chunk_ = 512;
};

// The ids that end a generation: generation_config.json's eos list, config.json's eos ids and
// tokenizer_config.json's eos_token (when given), deduplicated, only ids inside the vocabulary.
std::vector<int32_t> CollectEosIds(const ModelConfig& config, const GenerationConfig& gen,
                                   const Tokenizer& tokenizer,
                                   const std::optional<std::string>& eos_token);

// Fits a prompt and a generation budget into a context of `ctx` tokens. A prompt of ctx tokens
// or more is an error naming both numbers, unless `truncate`, which keeps the prompt's last
// tokens (leaving room for the generation where possible). Returns the generation budget,
// clamped so prompt + budget <= ctx.
int64_t FitToContext(std::vector<int32_t>* prompt, int64_t max_tokens, int64_t ctx, bool truncate,
                     int64_t* dropped = nullptr);

}  // namespace tq
