#include "server/constrained_sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <list>
#include <map>
#include <mutex>

#include "core/error.h"
#include "server/token_text.h"

namespace tq::server {

ConstrainedSampler::ConstrainedSampler(std::shared_ptr<grammar::TokenMasker> masker,
                                       const SamplingParams& params, int64_t vocab,
                                       std::span<const int32_t> prompt, std::vector<int32_t> eos)
    : masker_(std::move(masker)),
      sampler_(params, vocab),
      state_(masker_->Start()),
      eos_(std::move(eos)),
      scratch_(size_t(vocab)) {
  sampler_.AddPrompt(prompt);
}

int32_t ConstrainedSampler::Sample(std::span<float> logits) {
  auto is_eos = [&](int32_t t) { return std::find(eos_.begin(), eos_.end(), t) != eos_.end(); };
  if (state_.dead()) Fail("constrained decoding", "the grammar state is dead");
  if (!state_.can_continue()) {
    if (eos_.empty())
      Fail("constrained decoding", "the output is complete but the model has no end token");
    return eos_[0];  // complete: nothing else may follow
  }
  std::copy(logits.begin(), logits.end(), scratch_.begin());
  int32_t t = sampler_.Sample(logits.data());
  grammar::GrammarState next;
  bool ok = is_eos(t) ? state_.complete() : !(next = masker_->Accept(state_, t)).dead();
  if (!ok) {
    ++masked_steps_;
    const auto bits = masker_->Mask(state_);
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    bool any = false;
    for (size_t i = 0; i < scratch_.size(); ++i) {
      const bool allowed =
          is_eos(int32_t(i)) ? state_.complete() : grammar::TokenAllowed(*bits, int32_t(i));
      if (!allowed) {
        scratch_[i] = kNegInf;
      } else {
        any = true;
      }
    }
    if (!any) Fail("constrained decoding", "no token of the vocabulary can continue the output");
    t = sampler_.Sample(scratch_.data());
    if (is_eos(t) ? !state_.complete() : (next = masker_->Accept(state_, t)).dead()) {
      // The sampler's filters kept no allowed token finite: take the best allowed one.
      t = ArgMax(scratch_.data(), int64_t(scratch_.size()));
      if (!is_eos(t)) next = masker_->Accept(state_, t);
    }
  }
  sampler_.Accept(t);
  if (!is_eos(t)) state_ = std::move(next);
  return t;
}

std::shared_ptr<const grammar::Vocabulary> GrammarVocabulary(const TextModel& text) {
  static std::mutex mu;
  // Keyed by the model and its size (a model freed and another allocated at the same address
  // would otherwise see the old vocabulary).
  static std::map<std::pair<const TextModel*, int64_t>, std::shared_ptr<const grammar::Vocabulary>>
      built;
  std::lock_guard lk(mu);
  auto& v = built[{&text, text.vocab_size()}];
  if (!v) {
    const int64_t n = text.vocab_size();
    const TokenText piece(text);
    std::vector<std::string> bytes(static_cast<size_t>(n));
    std::vector<bool> special(static_cast<size_t>(n));
    for (int32_t id = 0; id < n; ++id) {
      bytes[size_t(id)] = piece(id);
      special[size_t(id)] = text.IsSpecialToken(id);
    }
    v = std::make_shared<grammar::Vocabulary>(std::move(bytes), std::move(special));
  }
  return v;
}

std::shared_ptr<grammar::TokenMasker> SharedMasker(const TextModel& text, const std::string& key,
                                                   grammar::Grammar g) {
  static std::mutex mu;
  static std::list<std::pair<std::string, std::shared_ptr<grammar::TokenMasker>>> lru;
  constexpr size_t kKeep = 32;
  auto vocab = GrammarVocabulary(text);
  const std::string full = std::to_string(reinterpret_cast<uintptr_t>(&text)) + "|" + key;
  std::lock_guard lk(mu);
  for (auto it = lru.begin(); it != lru.end(); ++it) {
    if (it->first == full) {
      lru.splice(lru.begin(), lru, it);
      return it->second;
    }
  }
  auto m = std::make_shared<grammar::TokenMasker>(
      std::make_shared<const grammar::Grammar>(std::move(g)), vocab);
  lru.emplace_front(full, m);
  if (lru.size() > kKeep) lru.pop_back();
  return m;
}

}  // namespace tq::server
