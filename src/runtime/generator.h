// The CLI's and the library's generation: one sequence run through the same stack as the
// server (runtime/scheduler.h on the caller's thread, runtime/model_engine.h over the caller's
// KV cache, runtime/text_sink.h for text and stop strings), so that eos, length, stop strings,
// sampling and finish reasons are one piece of code.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/engine.h"
#include "runtime/sampler.h"

namespace tq {

class Model;
class KvCache;
class Tokenizer;
struct ModelConfig;
struct GenerationConfig;

struct GenerateOptions {
  int64_t max_tokens = 256;
  SamplingParams sampling;
  std::vector<std::string> stop;
  bool skip_special_tokens = true;  // in the streamed text
};

struct GenerateStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;  // an eos id that ended the generation not counted
  int64_t decode_steps = 0;      // forward passes after the prefill
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
  // Runs `prompt` from an empty `cache` and generates until a stop condition: an eos id, a stop
  // string, max_tokens, or the cache full ("length": prompt + generated <= its capacity). The
  // prompt must leave room for one token: see FitToContext. `tokens_out`: the generated ids (an
  // eos id that ended it not included). An exception in the model or the callback is rethrown.
  GenerateStats Generate(std::span<const int32_t> prompt, const GenerateOptions& opts,
                         KvCache& cache, const TextCallback& on_text,
                         std::vector<int32_t>* tokens_out = nullptr);

  // Prompt tokens per Forward call in the prefill (bounds activation memory).
  void set_prefill_chunk(int64_t n) { prefill_chunk_ = n; }

 private:
  Model& model_;
  const Tokenizer& tokenizer_;
  std::vector<int32_t> eos_ids_;
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
