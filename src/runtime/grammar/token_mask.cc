#include "runtime/grammar/token_mask.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace tq::grammar {
namespace {

std::string StateKey(const GrammarState& s) {
  std::string key;
  for (const Stack& st : s.stacks()) {
    key.append(reinterpret_cast<const char*>(st.data()), st.size() * sizeof(uint32_t));
    key.push_back('\xff');  // stack separator (element indices never reach 0xffffffff)
    key.append(3, '\xff');
  }
  return key;
}

}  // namespace

Vocabulary::Vocabulary(std::vector<std::string> token_bytes, std::vector<bool> special)
    : bytes_(std::move(token_bytes)), special_(std::move(special)) {
  TQ_CHECK(special_.size() == bytes_.size(), "grammar vocabulary",
           "{} token strings but {} special flags", bytes_.size(), special_.size());
  for (size_t i = 0; i < bytes_.size(); ++i) {
    if (bytes_[i].empty()) continue;
    (special_[i] ? specials_ : sorted_).push_back(int32_t(i));
  }
  std::sort(sorted_.begin(), sorted_.end(),
            [&](int32_t a, int32_t b) { return bytes_[size_t(a)] < bytes_[size_t(b)]; });
  lcp_.assign(sorted_.size(), 0);
  for (size_t i = 1; i < sorted_.size(); ++i) {
    const std::string& a = bytes_[size_t(sorted_[i - 1])];
    const std::string& b = bytes_[size_t(sorted_[i])];
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    lcp_[i] = uint32_t(n);
  }
}

TokenMasker::TokenMasker(std::shared_ptr<const Grammar> grammar,
                         std::shared_ptr<const Vocabulary> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {}

GrammarState TokenMasker::Accept(const GrammarState& state, int32_t token) const {
  if (token < 0 || token >= vocab_->size()) return {};
  const std::string& b = vocab_->bytes(token);
  if (b.empty()) return {};
  if (vocab_->special(token) &&
      std::find(grammar_->special_tokens.begin(), grammar_->special_tokens.end(), b) ==
          grammar_->special_tokens.end()) {
    return {};
  }
  return state.Advance(*grammar_, b);
}

TokenBits TokenMasker::Compute(const GrammarState& state) const {
  const Vocabulary& v = *vocab_;
  TokenBits bits(size_t((v.size() + 63) / 64), 0);
  auto allow = [&](int32_t id) { bits[size_t(id) >> 6] |= uint64_t(1) << (id & 63); };
  // states[d]: the state after the first d bytes of the current token; valid up to `valid`.
  std::vector<GrammarState> states{state};
  size_t dead_at = SIZE_MAX;  // depth whose state is dead (prefix rejected), if any
  for (size_t i = 0; i < v.sorted_.size(); ++i) {
    const std::string& tok = v.bytes_[size_t(v.sorted_[i])];
    const size_t lcp = i == 0 ? 0 : v.lcp_[i];
    if (dead_at != SIZE_MAX && lcp >= dead_at) continue;  // shares a rejected prefix
    dead_at = SIZE_MAX;
    states.resize(std::min(states.size(), lcp + 1));
    bool ok = true;
    for (size_t d = states.size() - 1; d < tok.size(); ++d) {
      GrammarState next = states[d].Advance(*grammar_, uint8_t(tok[d]));
      if (next.dead()) {
        dead_at = d + 1;
        ok = false;
        break;
      }
      states.push_back(std::move(next));
    }
    if (ok) allow(v.sorted_[i]);
  }
  for (int32_t id : v.specials_) {
    const std::string& b = v.bytes_[size_t(id)];
    if (std::find(grammar_->special_tokens.begin(), grammar_->special_tokens.end(), b) !=
            grammar_->special_tokens.end() &&
        !state.Advance(*grammar_, b).dead()) {
      allow(id);
    }
  }
  return bits;
}

std::shared_ptr<const TokenBits> TokenMasker::Mask(const GrammarState& state) {
  const std::string key = StateKey(state);
  {
    std::lock_guard lk(mu_);
    ++stats_.lookups;
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto bits = std::make_shared<const TokenBits>(Compute(state));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard lk(mu_);
  ++stats_.misses;
  stats_.walk_seconds += secs;
  if (cache_.size() >= kMaxCachedMasks) cache_.clear();  // simple bound; states repeat quickly
  cache_.emplace(key, bits);
  return bits;
}

TokenMasker::Stats TokenMasker::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

}  // namespace tq::grammar
