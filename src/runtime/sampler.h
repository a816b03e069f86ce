// Token sampling from one row of logits: penalties, temperature, top-k, top-p, min-p, seeded draw.
// The order follows Hugging Face's logits processors: repetition penalty (and the OpenAI
// presence/frequency penalties) -> temperature -> top-k -> top-p -> min-p -> draw.
// A Sampler owns every buffer it needs (sized once for the vocabulary): Sample() allocates nothing.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace tq {

struct GenerationConfig;

struct SamplingParams {
  float temperature = 1.0f;  // <= 0: greedy (argmax after penalties)
  int32_t top_k = 0;         // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off; keeps p >= min_p * p_max
  // HF semantics: for every token already in the context (prompt and generated), a positive
  // logit is divided by the penalty and a negative one multiplied. 1: off.
  float repetition_penalty = 1.0f;
  // OpenAI semantics, over generated tokens only (as vLLM):
  // logit -= presence_penalty * [count > 0] + frequency_penalty * count.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;
};

// Defaults from generation_config.json: temperature, top_p, top_k, min_p, repetition_penalty;
// do_sample=false (or absent with no temperature given) means greedy.
SamplingParams SamplingParamsFromConfig(const GenerationConfig& gen);

class Sampler {
 public:
  Sampler(const SamplingParams& params, int64_t vocab_size);

  const SamplingParams& params() const { return params_; }
  // Forgets the context and re-seeds the generator.
  void Reset();
  // Tokens of the prompt: they count for the repetition penalty only.
  void AddPrompt(std::span<const int32_t> tokens);
  // A generated token: it counts for all penalties.
  void Accept(int32_t token);

  // Picks the next token from `logits` [vocab] (modified in place by the penalties).
  int32_t Sample(float* logits);

  // Exposed for tests: marks, in `keep` [vocab], the tokens that survive top-k/top-p/min-p for
  // the already-penalized logits (temperature applied inside). Not for the hot path.
  void FilterMask(const float* logits, std::vector<bool>* keep);

 private:
  void ApplyPenalties(float* logits) const;
  // Fills candidates_ with the surviving (token, prob) pairs, not renormalized, sorted by
  // probability (descending) when top-k or top-p is on, in vocabulary order otherwise; returns
  // their count and sets *total to their probability sum. Only the tokens that can survive are
  // sorted (a bucket histogram of s_i - s_max bounds them), so the cost is about one pass.
  int64_t Filter(const float* logits, double* total);

  SamplingParams params_;
  int64_t vocab_;
  std::mt19937_64 rng_;
  std::vector<uint8_t> in_context_;                    // [vocab] token seen in prompt or output
  std::vector<int32_t> output_counts_;                 // [vocab] occurrences in the output
  std::vector<int32_t> touched_;                       // distinct tokens with in_context_ set
  std::vector<std::pair<float, int32_t>> candidates_;  // [vocab] scratch
  std::vector<float> probs_;                           // [vocab] scratch: exp(s_i - s_max)
};

// Index of the largest value (the first one on ties).
int32_t ArgMax(const float* values, int64_t n);

}  // namespace tq
