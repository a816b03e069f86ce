// The interfaces between the scheduler (runtime/scheduler.h) and the rest: what it needs from a
// model (Engine: a pool of KV caches and two compute calls), how it samples (TokenSampler), and
// where a sequence's tokens go (SequenceSink). One generation stack: the server's continuous
// batching and the CLI's / library's Generator both run sequences through them
// (runtime/model_engine.h over a Model; tests implement them with fakes).
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace tq {

class Engine {
 public:
  virtual ~Engine() = default;
  virtual int64_t vocab_size() const = 0;
  // Most tokens one cache holds (the served context length).
  virtual int64_t context_length() const = 0;
  // Caches are numbered [0, num_caches()); each holds one sequence's KV.
  virtual int num_caches() const = 0;
  virtual int64_t kv_bytes_per_token() const = 0;
  // Bytes of KV the caches hold now (sliding-window layers count only their window); < 0: not
  // known (then /metrics shows tokens x kv_bytes_per_token).
  virtual int64_t kv_bytes_held() const { return -1; }
  // The accelerator the model runs on and its memory (cudaMemGetInfo: the whole card, every
  // process); nullopt on a host backend. Thread-safe (/metrics calls it from HTTP threads).
  struct DeviceMemory {
    std::string device;  // "cuda:0"
    int64_t free_bytes = 0, total_bytes = 0;
  };
  virtual std::optional<DeviceMemory> device_memory() const { return std::nullopt; }
  // Drops all but the first n tokens of cache `cache`.
  virtual void Truncate(int cache, int64_t n) = 0;
  // How much of the first n tokens of cache `cache` (n <= what it holds) a new sequence can reuse:
  // n, a shorter prefix, or 0 (KvCache::ReusablePrefix: sliding-window layers that dropped the
  // positions before n; recurrent layers, whose state is held only at snapshot positions).
  virtual int64_t ReusablePrefix(int /*cache*/, int64_t n) { return n; }
  // Appends `tokens` to cache `cache` (positions continue from its size) and writes the logits
  // of the last token to `logits` [vocab].
  virtual void Prefill(int cache, std::span<const int32_t> tokens, float* logits) = 0;
  // One token for each of several caches in one pass over the weights:
  // tokens[b] goes to caches[b]; logits [batch, vocab].
  virtual void Decode(std::span<const int32_t> tokens, std::span<const int> caches,
                      float* logits) = 0;

  // One scheduler step: decode tokens and prompt chunks of several sequences (distinct caches)
  // together. Part i appends the next `count` of `tokens` (the parts back to back) to its cache;
  // when `logits`, its last token's logits go to the next row of `logits` [parts with logits,
  // vocab]. The default runs Prefill per prompt part and one Decode for the generated-token
  // parts; ModelEngine runs everything in one pass over the weights.
  struct Part {
    int cache = -1;
    int64_t count = 0;
    bool logits = false;
    bool prompt = false;  // a prompt chunk; else one generated token (count 1)
  };
  virtual void Step(std::span<const int32_t> tokens, std::span<const Part> parts, float* logits);

 private:
  // The default Step's scratch.
  std::vector<int32_t> step_tokens_;
  std::vector<int> step_caches_;
  std::vector<float> step_logits_;
};

// Picks the next token of one sequence. Keeps whatever history it needs (penalties).
class TokenSampler {
 public:
  virtual ~TokenSampler() = default;
  // logits [vocab] may be modified in place.
  virtual int32_t Sample(std::span<float> logits) = 0;
};

struct TokenLogprobs {
  float logprob = 0;                           // of the chosen token
  std::vector<std::pair<int32_t, float>> top;  // most likely tokens, best first
};

// Why a sequence ended: an eos id was sampled, a stop string completed (or the sink said stop),
// max_tokens or the context was reached, nobody waits any more, or a failure.
enum class FinishReason { kNone, kEos, kStop, kLength, kCancelled, kError };
// "none" (still running), "eos", "stop", "length", "cancelled", "error".
const char* FinishReasonName(FinishReason r);

struct SequenceStats {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;      // prompt tokens whose KV was reused from an earlier sequence
  int64_t completion_tokens = 0;  // generated tokens (an eos id that ended it not counted)
  int64_t decode_steps = 0;       // engine steps that fed this sequence a generated token
  double queue_seconds = 0;       // submit -> prefill start
  double ttft_seconds = 0;        // submit -> first token
  double total_seconds = 0;
};

// Receives one sequence's output. Called on the scheduler thread: must be quick, never block.
class SequenceSink {
 public:
  virtual ~SequenceSink() = default;
  // A generated token (EOS tokens are not passed). Returning false finishes the sequence now
  // with reason kStop (a stop string matched), or kCancelled when Cancelled() is then true.
  virtual bool OnToken(int32_t token, const TokenLogprobs* logprobs) = 0;
  // Called exactly once per submitted sequence. `error` is set for kError.
  virtual void OnFinish(FinishReason reason, const SequenceStats& stats,
                        const std::string& error) = 0;
  // Before OnFinish(kError, ...) when an exception caused it (an engine call, the sampler):
  // the Generator rethrows it so that a CLI error keeps its type and message.
  virtual void OnException(std::exception_ptr) {}
  // True once nobody waits for the output any more (client gone): the scheduler then drops the
  // sequence at its next step. Called from the scheduler thread; make it thread-safe.
  virtual bool Cancelled() const = 0;
};

}  // namespace tq
