// Constrained decoding as a TokenSampler: the request's sampler runs first on the model's logits
// and its token is kept when the grammar allows it (the common case costs one byte walk of that
// token); otherwise the sampler runs again on logits with every token the grammar rejects set to
// -inf (the per-state token mask, token_mask.h). For greedy decoding and for plain temperature
// sampling this equals sampling from the masked distribution exactly (a draw that lands in the
// allowed set is a draw from the renormalized distribution); with top-k / top-p the truncation is
// computed over the unmasked logits first. End-of-sequence tokens are allowed exactly when the
// output so far is complete, and forced once nothing can follow.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/grammar/token_mask.h"
#include "runtime/sampler.h"
#include "server/text_model.h"

namespace tq::server {

class ConstrainedSampler : public TokenSampler {
 public:
  ConstrainedSampler(std::shared_ptr<grammar::TokenMasker> masker, const SamplingParams& params,
                     int64_t vocab, std::span<const int32_t> prompt, std::vector<int32_t> eos);
  int32_t Sample(std::span<float> logits) override;

  int64_t masked_steps() const { return masked_steps_; }  // steps that needed the mask

 private:
  std::shared_ptr<grammar::TokenMasker> masker_;
  Sampler sampler_;
  grammar::GrammarState state_;
  std::vector<int32_t> eos_;
  std::vector<float> scratch_;  // [vocab] the logits before the first draw
  int64_t masked_steps_ = 0;
};

// The vocabulary of `text` as the grammar engine sees it (each token's bytes; specials flagged);
// built once per TextModel and kept.
std::shared_ptr<const grammar::Vocabulary> GrammarVocabulary(const TextModel& text);

// A masker for `g` over `text`'s vocabulary, shared by requests with the same `key` (the schema
// or tools text) so that masks computed for one request serve the next. Keeps the last 32.
std::shared_ptr<grammar::TokenMasker> SharedMasker(const TextModel& text, const std::string& key,
                                                   grammar::Grammar g);

}  // namespace tq::server
