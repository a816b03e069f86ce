// From a grammar state to the set of vocabulary tokens that may come next. Tokens are walked byte
// by byte through the state in sorted order, so tokens sharing a prefix share its walk (a prefix
// the grammar rejects skips every token under it in O(1) each). Masks are cached per state (the
// state's stacks are the key): inside a JSON string, for example, the state repeats at every
// character, so the walk runs once per distinct state and later steps are a lookup.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/grammar/grammar.h"
#include "runtime/grammar/matcher.h"

namespace tq::grammar {

// The bytes each token id stands for, prepared for prefix-sharing walks.
class Vocabulary {
 public:
  // token_bytes[id]: what the token appends to the text; special[id]: a special token (masked
  // out unless a grammar names it). Empty tokens are never allowed.
  Vocabulary(std::vector<std::string> token_bytes, std::vector<bool> special);
  int64_t size() const { return int64_t(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[size_t(id)]; }
  bool special(int32_t id) const { return special_[size_t(id)]; }

 private:
  friend class TokenMasker;
  std::vector<std::string> bytes_;
  std::vector<bool> special_;
  std::vector<int32_t> sorted_;    // non-special, non-empty ids by their bytes
  std::vector<uint32_t> lcp_;      // lcp_[i]: common prefix of sorted_[i-1] and sorted_[i]
  std::vector<int32_t> specials_;  // special ids (non-empty)
};

// Bit i set: token i allowed. [ceil(vocab / 64)] words.
using TokenBits = std::vector<uint64_t>;
inline bool TokenAllowed(const TokenBits& b, int32_t id) {
  return (b[size_t(id) >> 6] >> (id & 63)) & 1;
}

// One grammar over one vocabulary; shared by every sequence that uses the grammar (thread-safe).
class TokenMasker {
 public:
  TokenMasker(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocab);

  const Grammar& grammar() const { return *grammar_; }
  GrammarState Start() const { return GrammarState::Start(*grammar_); }
  // The tokens allowed after `state` (end-of-sequence tokens excluded: they are allowed exactly
  // when state.complete()). Cached per state.
  std::shared_ptr<const TokenBits> Mask(const GrammarState& state);
  // The state after `token` (dead when the grammar rejects it).
  GrammarState Accept(const GrammarState& state, int32_t token) const;

  struct Stats {
    int64_t lookups = 0, misses = 0;
    double walk_seconds = 0;  // spent computing masks on misses
  };
  Stats stats() const;

  static constexpr size_t kMaxCachedMasks = 512;

 private:
  TokenBits Compute(const GrammarState& state) const;

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const Vocabulary> vocab_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const TokenBits>> cache_;
  Stats stats_;
};

}  // namespace tq::grammar
