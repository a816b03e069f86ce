#include "runtime/grammar/token_mask.h"

#include <algorithm>
#include <chrono>
#include <optional>

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
                         std::shared_ptr<const Vocabulary> vocab, size_t max_interned_states)
    : grammar_(std::move(grammar)),
      vocab_(std::move(vocab)),
      max_states_(std::max<size_t>(max_interned_states, 1)) {}

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

int32_t TokenMasker::InternLocked(GrammarState s) {
  std::string key = StateKey(s);
  if (auto it = ids_.find(key); it != ids_.end()) return it->second;
  const auto id = int32_t(states_.size());
  states_.push_back(std::move(s));
  next_.emplace_back();
  next_.back().fill(kUnknown);
  ids_.emplace(std::move(key), id);
  return id;
}

void TokenMasker::ResetGraphLocked() {
  states_.clear();
  next_.clear();
  ids_.clear();
}

// The special tokens the grammar names and allows after `state` (a few: walked directly).
void TokenMasker::AllowSpecials(const GrammarState& state, TokenBits& bits) const {
  for (int32_t id : vocab_->specials_) {
    const std::string& b = vocab_->bytes_[size_t(id)];
    if (std::find(grammar_->special_tokens.begin(), grammar_->special_tokens.end(), b) !=
            grammar_->special_tokens.end() &&
        !state.Advance(*grammar_, b).dead()) {
      bits[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
    }
  }
}

namespace {

// The sorted-vocabulary walk, generic over the state representation: `step(s, byte)` returns the
// successor and `dead(s)` says whether it rejects; false when `step` gave up (graph full).
template <typename S, typename Step, typename Dead>
bool WalkVocabulary(const std::vector<int32_t>& sorted, const std::vector<uint32_t>& lcp_of,
                    const std::vector<std::string>& bytes, S start, Step step, Dead dead,
                    TokenBits& bits) {
  std::vector<S> states{std::move(start)};  // states[d]: after the first d bytes of the token
  size_t dead_at = SIZE_MAX;                // depth whose state is dead (prefix rejected), if any
  for (size_t i = 0; i < sorted.size(); ++i) {
    const std::string& tok = bytes[size_t(sorted[i])];
    const size_t lcp = i == 0 ? 0 : lcp_of[i];
    if (dead_at != SIZE_MAX && lcp >= dead_at) continue;  // shares a rejected prefix
    dead_at = SIZE_MAX;
    states.resize(std::min(states.size(), lcp + 1));
    bool ok = true;
    for (size_t d = states.size() - 1; d < tok.size(); ++d) {
      std::optional<S> next = step(states[d], uint8_t(tok[d]));
      if (!next) return false;
      if (dead(*next)) {
        dead_at = d + 1;
        ok = false;
        break;
      }
      states.push_back(std::move(*next));
    }
    if (ok) bits[size_t(sorted[i]) >> 6] |= uint64_t(1) << (sorted[i] & 63);
  }
  return true;
}

}  // namespace

TokenBits TokenMasker::Compute(const GrammarState& state) {
  const Vocabulary& v = *vocab_;
  TokenBits bits(size_t((v.size() + 63) / 64), 0);
  bool done = false;
  {
    std::lock_guard lk(graph_mu_);
    if (states_.size() >= max_states_) ResetGraphLocked();
    done = WalkVocabulary(
        v.sorted_, v.lcp_, v.bytes_, InternLocked(state),
        [&](int32_t id, uint8_t byte) -> std::optional<int32_t> {
          const int32_t n = next_[size_t(id)][byte];
          if (n != kUnknown) return n;
          if (states_.size() >= max_states_) return std::nullopt;  // graph full
          GrammarState after = states_[size_t(id)].Advance(*grammar_, byte);
          const int32_t m = after.dead() ? kDead : InternLocked(std::move(after));
          next_[size_t(id)][byte] = m;
          return m;
        },
        [](int32_t id) { return id == kDead; }, bits);
    if (!done) ResetGraphLocked();
  }
  if (!done) {
    // More distinct states than the graph may hold: walk this one with state copies (slower,
    // bounded memory).
    std::fill(bits.begin(), bits.end(), 0);
    WalkVocabulary(
        v.sorted_, v.lcp_, v.bytes_, state,
        [&](const GrammarState& s, uint8_t byte) -> std::optional<GrammarState> {
          return s.Advance(*grammar_, byte);
        },
        [](const GrammarState& s) { return s.dead(); }, bits);
  }
  AllowSpecials(state, bits);
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
