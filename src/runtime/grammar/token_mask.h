// From a grammar state to the set of vocabulary tokens that may come next. Tokens are walked byte
// by byte through the state in sorted order, so tokens sharing a prefix share its walk (a prefix
// the grammar rejects skips every token under it in O(1) each). The walk runs on interned states:
// each distinct GrammarState gets a small id and a 256-entry table of its successors, filled on
// first use, so a byte step is one table lookup and the stacks are copied only the first time a
// (state, byte) pair is seen (inside a JSON string nearly every byte leads back to the same
// state: the whole vocabulary walks through a handful of states). Masks are cached per state
// too: the state repeats at every character of a string, so later steps are a lookup.
#pragma once

#include <array>
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
  TokenMasker(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocab,
              size_t max_interned_states = kMaxInternedStates);

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
  // Interned states kept at most (each holds its stacks and a 1 KiB successor table: ~16 MiB);
  // a walk that would exceed it starts the graph over and walks with state copies instead.
  static constexpr size_t kMaxInternedStates = 16384;

 private:
  // The interned state graph (guarded by graph_mu_).
  static constexpr int32_t kUnknown = -1, kDead = -2;
  int32_t InternLocked(GrammarState s);
  void ResetGraphLocked();
  TokenBits Compute(const GrammarState& state);
  void AllowSpecials(const GrammarState& state, TokenBits& bits) const;

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const Vocabulary> vocab_;
  size_t max_states_;
  std::mutex graph_mu_;
  std::vector<GrammarState> states_;
  std::vector<std::array<int32_t, 256>> next_;
  std::unordered_map<std::string, int32_t> ids_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const TokenBits>> cache_;
  Stats stats_;
};

}  // namespace tq::grammar
